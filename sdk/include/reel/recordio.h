// Record I/O: TFRecord framing with CRC32C, over any Storage, optionally inside a zlib or gzip
// stream. Used by the tfrecord data source and by the core (TensorBoard event files, checkpoints).
// Library target: reel_recordio (sdk/recordio/, links zlib; no protobuf).
//
// Wire format of one record, all integers little-endian:
//   uint64 length
//   uint32 masked_crc32c(the 8 bytes of length)
//   byte   data[length]
//   uint32 masked_crc32c(data)
// where mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8. Compressed files wrap the whole record
// stream (not each record) in one zlib (window bits 15) or gzip (window bits 31) stream.
//
// Reading: a clean end exactly at a record boundary is OutOfRange; a short header, a short payload,
// a CRC mismatch or a broken compressed stream is DataLoss "<uri>: offset N: <check that failed>".
// Offsets are positions in the record stream: byte offsets in the file for uncompressed files and
// offsets in the decompressed stream (said so in the message) for compressed ones. A declared
// length is never allocated before its bytes are actually there, so a corrupt length cannot exhaust
// memory.
//
// Ownership: a RecordReader borrows its RandomAccessFile (it must outlive the reader); a
// RecordWriter owns its WritableFile. Thread-safety: neither is thread-safe; use one per thread.
// The CRC functions are pure and thread-safe.
#ifndef REEL_RECORDIO_H_
#define REEL_RECORDIO_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "reel/status.h"
#include "reel/storage.h"

namespace reel::recordio {

// ---- CRC32C (Castagnoli) ----

// Extends `crc` (the CRC32C of some bytes; 0 for none) with `n` more bytes, so
// Crc32cExtend(Crc32c(a), b) == Crc32c(a + b). Uses the SSE4.2 instruction when the CPU has it.
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n);
inline uint32_t Crc32c(const void* data, size_t n) { return Crc32cExtend(0, data, n); }
inline uint32_t Crc32c(std::string_view s) { return Crc32c(s.data(), s.size()); }
// The table-driven implementation, whatever the CPU (exposed so tests compare both paths).
uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t n);
// True when Crc32cExtend() runs on the hardware instruction.
bool Crc32cHardwareAvailable();

// TFRecord's CRC masking (see the wire format above): stored CRCs are masked so a CRC over
// bytes that themselves contain CRCs stays well distributed.
inline constexpr uint32_t kCrcMaskDelta = 0xa282ead8u;
inline uint32_t MaskCrc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kCrcMaskDelta; }
inline uint32_t UnmaskCrc(uint32_t masked) {
  uint32_t rot = masked - kCrcMaskDelta;
  return (rot >> 17) | (rot << 15);
}

// ---- Compression ----

// How the whole record stream of a file is wrapped.
enum class Compression { kNone, kZlib, kGzip };

// "none", "zlib", "gzip".
std::string_view CompressionName(Compression c);
// By suffix: ".gz" is gzip, ".zlib" or ".zz" zlib, anything else none.
Compression CompressionForUri(std::string_view uri);
// Parses "none" | "zlib" | "gzip" | "auto" (auto: CompressionForUri(uri)); InvalidArgument
// otherwise.
Result<Compression> ParseCompression(std::string_view name, std::string_view uri);

// Size of the framing around a payload of n bytes: 8 + 4 + n + 4.
inline constexpr uint64_t kRecordOverhead = 16;

// ---- Reading ----

// How a RecordReader reads; the defaults suit files of any size.
struct RecordReaderOptions {
  Compression compression = Compression::kNone;
  // Read-ahead for uncompressed files. Small on purpose: a payload that is not in the buffer is
  // read straight into the caller's string, so large records are copied once, not twice.
  size_t buffer_size = 32 << 10;
  size_t inflate_chunk = 256 << 10;  // compressed files: file bytes per read and inflate output
};

// Reads records one after another from a RandomAccessFile it borrows.
class RecordReader {
 public:
  // `file` must remain live while the reader is used.
  RecordReader(RandomAccessFile* file, RecordReaderOptions options = {});
  ~RecordReader();
  RecordReader(const RecordReader&) = delete;
  RecordReader& operator=(const RecordReader&) = delete;

  // Reads the next record's payload into *record (resized; its capacity is reused, so pass the
  // same string again to avoid allocations) and checks both CRCs. OutOfRange at a clean end.
  Status ReadRecord(std::string* record);

  // As ReadRecord, but leaves the data CRC to the caller, who can then compute it in a pass it
  // makes over the payload anyway (the tfrecord source fuses it with dequantization):
  // *stored_crc receives the record's data CRC (unmasked), to be compared with
  // Crc32c(*record) before the payload is trusted, and a mismatch reported with
  // DataCrcMismatchError(uri(), compressed(), offset of the record, ...). The length CRC is
  // checked here; the reader stays in sync whatever the payload holds.
  Status ReadRecordDeferringCrc(std::string* record, uint32_t* stored_crc);

  // Steps over the next record, checking its length CRC but neither reading nor checking its
  // payload (uncompressed files do not even read it). For readers that own only some records.
  Status SkipRecord();

  // Stream offset of the next record (after the last one read or skipped).
  uint64_t offset() const { return offset_; }
  // File bytes fetched from storage so far (compressed size for compressed files).
  uint64_t file_bytes_read() const;

  // After a DataLoss from ReadRecord: true if the stream is still in sync, i.e. only the payload
  // was bad (its data CRC) and the next call reads the following record. After a bad length or a
  // truncation it is false and every later call repeats the error.
  bool can_continue() const { return sticky_.ok(); }

  const std::string& uri() const;
  // True for zlib and gzip files (whose offsets are positions in the decompressed stream).
  bool compressed() const;

  class Stream;  // implementation detail (plain or inflating byte stream)

 private:
  Status ReadHeader(uint64_t* length);
  Status Fail(Status s);  // makes `s` sticky and returns it

  std::unique_ptr<Stream> stream_;
  uint64_t offset_ = 0;
  Status sticky_;  // a non-recoverable error, repeated by every later call
};

// The DataLoss a reader returns for a payload whose CRC does not match: "<uri>: offset N: data
// CRC mismatch over L payload bytes (stored 0x…, computed 0x…)" ("uncompressed offset" for
// compressed files). For callers of ReadRecordDeferringCrc, so both paths say the same.
Status DataCrcMismatchError(std::string_view uri, bool compressed, uint64_t offset, uint64_t length,
                            uint32_t stored, uint32_t computed);

// ---- Writing ----

// How a RecordWriter frames and compresses.
struct RecordWriterOptions {
  Compression compression = Compression::kNone;
  int level = -1;                  // zlib level 0..9; -1 is zlib's default (6)
  size_t buffer_size = 256 << 10;  // bytes collected before one Append() to the file
};

// Appends records to a WritableFile it owns; nothing is visible before Close() succeeds.
class RecordWriter {
 public:
  // Takes ownership of `file`. InvalidArgument for a bad level; Internal if zlib cannot start.
  static Result<std::unique_ptr<RecordWriter>> Create(std::unique_ptr<WritableFile> file,
                                                      RecordWriterOptions options = {});
  ~RecordWriter();
  RecordWriter(const RecordWriter&) = delete;
  RecordWriter& operator=(const RecordWriter&) = delete;

  Status Write(std::string_view record);
  // Hands everything written so far to the file (a sync flush of the compressor). Bytes still
  // become visible only at Close(), as WritableFile promises.
  Status Flush();
  // Finishes the compressed stream and closes the file. Destroying the writer without Close()
  // discards the file (WritableFile's contract).
  Status Close();

  uint64_t records_written() const { return records_; }
  // Uncompressed bytes written (framing included): the stream offset of the next record.
  uint64_t offset() const { return offset_; }

  class Sink;  // implementation detail (plain or deflating output)

 private:
  explicit RecordWriter(std::unique_ptr<Sink> sink);
  std::unique_ptr<Sink> sink_;
  uint64_t records_ = 0;
  uint64_t offset_ = 0;
  bool closed_ = false;
};

// Encodes one framed record (header + payload + data CRC) onto *out; for tests and tools that
// build files in memory.
void AppendFramedRecord(std::string_view payload, std::string* out);

}  // namespace reel::recordio

#endif  // REEL_RECORDIO_H_
