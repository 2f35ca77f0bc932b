// RecordReader: TFRecord framing over a RandomAccessFile, through one of two byte streams:
// PlainStream (read-ahead buffer; large payloads are read straight into the caller's string) and
// InflateStream (zlib/gzip). Wire format: see reel/recordio.h.
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "reel/recordio.h"

namespace reel::recordio {
namespace {

std::string Hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08x", v);
  return buf;
}

uint32_t DecodeFixed32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);  // little-endian hosts only (x86, arm64)
  return v;
}
uint64_t DecodeFixed64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace

// A byte stream over the file. Read() returns fewer bytes than asked only at the end of the stream.
class RecordReader::Stream {
 public:
  explicit Stream(RandomAccessFile* file) : file_(file) {}
  virtual ~Stream() = default;
  virtual Result<size_t> Read(char* dst, size_t n) = 0;
  virtual Result<uint64_t> Skip(uint64_t n) = 0;
  // An upper bound on the bytes left in the stream (exact for plain files).
  virtual uint64_t RemainingBound() const = 0;
  virtual bool compressed() const = 0;
  uint64_t file_bytes() const { return file_bytes_; }
  const std::string& uri() const { return file_->uri(); }

 protected:
  // Reads file bytes at `offset` until `n` are read or the file ends.
  Result<size_t> ReadFile(uint64_t offset, char* dst, size_t n) {
    size_t got = 0;
    while (got < n) {
      REEL_ASSIGN_OR_RETURN(
          size_t r,
          file_->Read(offset + got, std::as_writable_bytes(std::span<char>(dst + got, n - got))));
      if (r == 0) break;
      got += r;
    }
    file_bytes_ += got;
    return got;
  }
  RandomAccessFile* file_;
  uint64_t file_bytes_ = 0;
};

namespace {

class PlainStream : public RecordReader::Stream {
 public:
  PlainStream(RandomAccessFile* file, uint64_t size, size_t buffer_size)
      : Stream(file), size_(size), buffer_(std::max<size_t>(buffer_size, 64)) {}

  Result<size_t> Read(char* dst, size_t n) override {
    size_t done = 0;
    while (done < n) {
      if (begin_ < end_) {
        size_t k = std::min(n - done, end_ - begin_);
        std::memcpy(dst + done, buffer_.data() + begin_, k);
        begin_ += k;
        pos_ += k;
        done += k;
        continue;
      }
      size_t want = n - done;
      if (want >= buffer_.size() / 2) {
        // Large reads skip the buffer: one copy from storage into the caller's memory.
        REEL_ASSIGN_OR_RETURN(size_t r, ReadFile(pos_, dst + done, want));
        pos_ += r;
        done += r;
        break;
      }
      REEL_ASSIGN_OR_RETURN(size_t r, ReadFile(pos_, buffer_.data(), buffer_.size()));
      if (r == 0) break;
      begin_ = 0;
      end_ = r;
    }
    return done;
  }

  Result<uint64_t> Skip(uint64_t n) override {
    uint64_t k = std::min<uint64_t>(n, RemainingBound());
    uint64_t in_buffer = std::min<uint64_t>(k, end_ - begin_);
    begin_ += in_buffer;
    if (k > in_buffer) begin_ = end_ = 0;  // jumped past the buffer
    pos_ += k;
    return k;
  }

  uint64_t RemainingBound() const override { return pos_ >= size_ ? 0 : size_ - pos_; }
  bool compressed() const override { return false; }

 private:
  uint64_t size_;
  uint64_t pos_ = 0;  // file offset of the next byte to hand out
  std::vector<char> buffer_;
  size_t begin_ = 0, end_ = 0;  // valid bytes of buffer_, which start at file offset pos_ - begin_
};

class InflateStream : public RecordReader::Stream {
 public:
  InflateStream(RandomAccessFile* file, Compression c, size_t chunk)
      : Stream(file),
        kind_(c),
        in_(std::max<size_t>(chunk, 64)),
        out_(std::max<size_t>(chunk, 64)) {
    std::memset(&z_, 0, sizeof(z_));
    int bits = c == Compression::kGzip ? 15 + 16 : 15;
    init_ = inflateInit2(&z_, bits) == Z_OK;
  }
  ~InflateStream() override {
    if (init_) inflateEnd(&z_);
  }

  Result<size_t> Read(char* dst, size_t n) override {
    size_t done = 0;
    while (done < n) {
      if (begin_ < end_) {
        size_t k = std::min(n - done, end_ - begin_);
        std::memcpy(dst + done, out_.data() + begin_, k);
        begin_ += k;
        done += k;
        continue;
      }
      REEL_ASSIGN_OR_RETURN(bool more, Fill());
      if (!more) break;
    }
    return done;
  }

  Result<uint64_t> Skip(uint64_t n) override {
    uint64_t done = 0;
    while (done < n) {
      if (begin_ < end_) {
        uint64_t k = std::min<uint64_t>(n - done, end_ - begin_);
        begin_ += k;
        done += k;
        continue;
      }
      REEL_ASSIGN_OR_RETURN(bool more, Fill());
      if (!more) break;
    }
    return done;
  }

  uint64_t RemainingBound() const override { return std::numeric_limits<uint64_t>::max(); }
  bool compressed() const override { return true; }

 private:
  Status Error(const std::string& what) {
    return DataLossError(uri() + ": compressed offset " + std::to_string(file_pos_ - z_.avail_in) +
                         ": " + std::string(CompressionName(kind_)) + " stream " + what);
  }

  // Decompresses the next chunk into out_. False at the clean end of the stream.
  Result<bool> Fill() {
    if (!init_) return InternalError(uri() + ": cannot initialise zlib");
    if (done_) return false;
    begin_ = end_ = 0;
    while (end_ == 0) {
      if (z_.avail_in == 0 && !file_eof_) {
        REEL_ASSIGN_OR_RETURN(size_t r, ReadFile(file_pos_, in_.data(), in_.size()));
        file_pos_ += r;
        file_eof_ = r == 0;
        z_.next_in = reinterpret_cast<Bytef*>(in_.data());
        z_.avail_in = static_cast<uInt>(r);
      }
      if (z_.avail_in == 0 && file_eof_) {
        if (started_member_) return Error("is truncated (ends inside the compressed data)");
        done_ = true;  // clean end: the file ended between (or before any) gzip members
        return false;
      }
      started_member_ = true;
      z_.next_out = reinterpret_cast<Bytef*>(out_.data());
      z_.avail_out = static_cast<uInt>(out_.size());
      int rc = inflate(&z_, Z_NO_FLUSH);
      end_ = out_.size() - z_.avail_out;
      if (rc == Z_STREAM_END) {
        started_member_ = false;
        // gzip files may hold several members back to back; zlib streams end here.
        if (kind_ == Compression::kGzip) {
          inflateReset(&z_);
        } else {
          done_ = true;  // trailing bytes after a zlib stream are ignored
          return end_ > 0;
        }
      } else if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT || rc == Z_STREAM_ERROR) {
        return Error(std::string("is corrupt (zlib: ") + (z_.msg ? z_.msg : "data error") + ")");
      } else if (rc == Z_MEM_ERROR) {
        return InternalError(uri() + ": zlib out of memory");
      }
      // Z_OK / Z_BUF_ERROR: loop for more input or output.
    }
    return true;
  }

  Compression kind_;
  z_stream z_;
  bool init_ = false;
  std::vector<char> in_, out_;
  size_t begin_ = 0, end_ = 0;
  uint64_t file_pos_ = 0;
  bool file_eof_ = false;
  bool started_member_ = false;
  bool done_ = false;
};

}  // namespace

RecordReader::RecordReader(RandomAccessFile* file, RecordReaderOptions options) {
  if (options.compression == Compression::kNone) {
    Result<uint64_t> size = file->Size();
    if (!size.ok()) {
      sticky_ = size.status();
      stream_ = std::make_unique<PlainStream>(file, 0, 64);
    } else {
      stream_ = std::make_unique<PlainStream>(file, *size, options.buffer_size);
    }
  } else {
    stream_ = std::make_unique<InflateStream>(file, options.compression, options.inflate_chunk);
  }
}

RecordReader::~RecordReader() = default;

const std::string& RecordReader::uri() const { return stream_->uri(); }
bool RecordReader::compressed() const { return stream_->compressed(); }
uint64_t RecordReader::file_bytes_read() const { return stream_->file_bytes(); }

Status RecordReader::Fail(Status s) {
  sticky_ = s;
  return s;
}

Status RecordReader::ReadHeader(uint64_t* length) {
  char header[12];
  // A failing stream (a broken compressed stream, an I/O error) leaves the reader out of sync:
  // sticky, or a caller that continues while can_continue() would loop on the same error.
  Result<size_t> read = stream_->Read(header, sizeof(header));
  if (!read.ok()) return Fail(read.status());
  const size_t got = *read;
  const std::string where = uri() +
                            (stream_->compressed() ? ": uncompressed offset " : ": offset ") +
                            std::to_string(offset_) + ": ";
  if (got == 0) return OutOfRangeError(uri() + ": end of records");
  if (got < sizeof(header))
    return Fail(
        DataLossError(where + "truncated record header (" + std::to_string(got) + " of 12 bytes)"));
  uint32_t stored = UnmaskCrc(DecodeFixed32(header + 8));
  uint32_t actual = Crc32c(header, 8);
  if (stored != actual)
    return Fail(DataLossError(where + "length CRC mismatch (stored " + Hex32(stored) +
                              ", computed " + Hex32(actual) + ")"));
  *length = DecodeFixed64(header);
  uint64_t bound = stream_->RemainingBound();
  if (*length > bound || bound - *length < 4)
    return Fail(DataLossError(where + "truncated record: declares " + std::to_string(*length) +
                              " payload bytes but only " + std::to_string(bound) +
                              " bytes follow the header"));
  return Status::Ok();
}

Status RecordReader::ReadRecordDeferringCrc(std::string* record, uint32_t* stored_crc) {
  if (!sticky_.ok()) return sticky_;
  const uint64_t start = offset_;
  uint64_t length = 0;
  REEL_RETURN_IF_ERROR(ReadHeader(&length));
  auto where = [&] {
    return uri() + (stream_->compressed() ? ": uncompressed offset " : ": offset ") +
           std::to_string(start) + ": ";
  };
  // Grow the string only as bytes arrive, so a corrupt length in a compressed stream (which
  // RemainingBound cannot bound) never allocates more than about twice the real data.
  size_t got = 0;
  while (got < length) {
    size_t chunk = static_cast<size_t>(std::min<uint64_t>(
        length - got, stream_->compressed() ? std::max<size_t>(got, 1 << 20) : length - got));
    record->resize(got + chunk);
    Result<size_t> r = stream_->Read(record->data() + got, chunk);
    if (!r.ok()) return Fail(r.status());
    got += *r;
    if (*r < chunk)
      return Fail(DataLossError(where() + "truncated record payload (" + std::to_string(got) +
                                " of " + std::to_string(length) + " bytes)"));
  }
  record->resize(length);
  char crc_bytes[4];
  Result<size_t> r = stream_->Read(crc_bytes, 4);
  if (!r.ok()) return Fail(r.status());
  if (*r < 4) return Fail(DataLossError(where() + "truncated data CRC"));
  offset_ = start + kRecordOverhead + length;
  *stored_crc = UnmaskCrc(DecodeFixed32(crc_bytes));
  return Status::Ok();
}

Status RecordReader::ReadRecord(std::string* record) {
  const uint64_t start = offset_;
  uint32_t stored = 0;
  REEL_RETURN_IF_ERROR(ReadRecordDeferringCrc(record, &stored));
  const uint32_t actual = Crc32c(record->data(), record->size());
  if (stored != actual)
    return DataCrcMismatchError(uri(), stream_->compressed(), start, record->size(), stored,
                                actual);
  return Status::Ok();
}

Status DataCrcMismatchError(std::string_view uri, bool compressed, uint64_t offset, uint64_t length,
                            uint32_t stored, uint32_t computed) {
  return DataLossError(std::string(uri) + (compressed ? ": uncompressed offset " : ": offset ") +
                       std::to_string(offset) + ": data CRC mismatch over " +
                       std::to_string(length) + " payload bytes (stored " + Hex32(stored) +
                       ", computed " + Hex32(computed) + ")");
}

Status RecordReader::SkipRecord() {
  if (!sticky_.ok()) return sticky_;
  const uint64_t start = offset_;
  uint64_t length = 0;
  REEL_RETURN_IF_ERROR(ReadHeader(&length));
  Result<uint64_t> skipped = stream_->Skip(length + 4);
  if (!skipped.ok()) return Fail(skipped.status());
  if (*skipped < length + 4)
    return Fail(DataLossError(uri() +
                              (stream_->compressed() ? ": uncompressed offset " : ": offset ") +
                              std::to_string(start) + ": truncated record payload"));
  offset_ = start + kRecordOverhead + length;
  return Status::Ok();
}

std::string_view CompressionName(Compression c) {
  switch (c) {
    case Compression::kNone:
      return "none";
    case Compression::kZlib:
      return "zlib";
    case Compression::kGzip:
      return "gzip";
  }
  return "?";
}

Compression CompressionForUri(std::string_view uri) {
  auto ends = [&](std::string_view s) {
    return uri.size() >= s.size() && uri.substr(uri.size() - s.size()) == s;
  };
  if (ends(".gz")) return Compression::kGzip;
  if (ends(".zlib") || ends(".zz")) return Compression::kZlib;
  return Compression::kNone;
}

Result<Compression> ParseCompression(std::string_view name, std::string_view uri) {
  if (name == "auto") return CompressionForUri(uri);
  if (name == "none") return Compression::kNone;
  if (name == "zlib") return Compression::kZlib;
  if (name == "gzip") return Compression::kGzip;
  return InvalidArgumentError("compression '" + std::string(name) +
                              "' is not one of auto, none, zlib, gzip");
}

}  // namespace reel::recordio
