// libFuzzer target: TFRecord framing (sdk/recordio) over bytes read from a file, in each of the
// three compressions. The same input is read as an uncompressed file, as a zlib file and as a gzip
// file (seeds hold files of each kind), and once more deflated by us at level 0 and read as zlib,
// so the framing checks inside the inflating stream see every mutation, not only the ones that
// survive as valid deflate data.
//
// Beyond "no crash, no leak, no unbounded allocation" it checks what the reader promises: records
// of an uncompressed file are exactly its bytes at the offsets it reports; after an error the
// reader either continues (payload CRC only) or repeats the same error; both CRC32C paths agree.
#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "reel/recordio.h"
#include "reel/testing/mem_file.h"

namespace reel::recordio {
namespace {

void Require(bool ok) {
  if (!ok) std::abort();
}

// Reads every record, alternating the three ways of reading by the record's index.
void ReadAll(const std::string& file_bytes, Compression compression, size_t buffer_size) {
  testing::MemFile file("fuzz.tfrecord", file_bytes);
  RecordReaderOptions options;
  options.compression = compression;
  options.buffer_size = buffer_size;
  options.inflate_chunk = buffer_size;
  RecordReader reader(&file, options);
  std::string record;
  for (int i = 0; i < 1 << 16; ++i) {
    const uint64_t before = reader.offset();
    Status s;
    if (i % 3 == 2) {
      s = reader.SkipRecord();
    } else if (i % 3 == 1) {
      uint32_t stored = 0;
      s = reader.ReadRecordDeferringCrc(&record, &stored);
      if (s.ok() && Crc32c(record) != stored) continue;  // the caller's CRC check would fail
    } else {
      s = reader.ReadRecord(&record);
    }
    if (s.code() == StatusCode::kOutOfRange) return;
    if (s.ok()) {
      Require(reader.offset() > before);
      if (compression == Compression::kNone && i % 3 != 2) {
        Require(reader.offset() == before + record.size() + kRecordOverhead);
        Require(std::string_view(file_bytes).substr(before + 12, record.size()) == record);
      }
      continue;
    }
    Require(s.code() == StatusCode::kDataLoss);
    if (!reader.can_continue()) {
      Status again = reader.ReadRecord(&record);
      Require(again.code() == s.code() && again.message() == s.message());
      return;
    }
  }
}

std::string DeflateStored(std::string_view data) {
  uLongf size = compressBound(data.size());
  std::string out(size, '\0');
  if (compress2(reinterpret_cast<Bytef*>(out.data()), &size,
                reinterpret_cast<const Bytef*>(data.data()), data.size(), 0) != Z_OK)
    std::abort();
  out.resize(size);
  return out;
}

}  // namespace
}  // namespace reel::recordio

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace reel::recordio;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  // Small, odd buffers put record boundaries at every place relative to a refill.
  const size_t buffer = 1 + (size ? data[size - 1] % 64 : 0);
  ReadAll(bytes, Compression::kNone, buffer);
  ReadAll(bytes, Compression::kNone, 32 << 10);
  ReadAll(bytes, Compression::kZlib, buffer);
  ReadAll(bytes, Compression::kGzip, 4096);
  ReadAll(DeflateStored(bytes), Compression::kZlib, buffer);
  if (Crc32c(data, size) != Crc32cExtendPortable(0, data, size)) std::abort();
  return 0;
}
