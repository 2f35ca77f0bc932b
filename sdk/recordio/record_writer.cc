// RecordWriter: frames records (see reel/recordio.h) and hands them to a WritableFile in large
// appends, through a plain buffer or a zlib/gzip deflate stream.
#include <zlib.h>

#include <cstring>
#include <vector>

#include "reel/recordio.h"

namespace reel::recordio {
namespace {

void EncodeFixed32(char* p, uint32_t v) { std::memcpy(p, &v, 4); }  // little-endian hosts
void EncodeFixed64(char* p, uint64_t v) { std::memcpy(p, &v, 8); }

void EncodeHeader(uint64_t length, char out[12]) {
  EncodeFixed64(out, length);
  EncodeFixed32(out + 8, MaskCrc(Crc32c(out, 8)));
}

std::span<const std::byte> Bytes(const char* p, size_t n) {
  return std::as_bytes(std::span<const char>(p, n));
}

}  // namespace

class RecordWriter::Sink {
 public:
  Sink(std::unique_ptr<WritableFile> file, size_t buffer_size)
      : file_(std::move(file)), limit_(std::max<size_t>(buffer_size, 64)) {
    buffer_.reserve(limit_);
  }
  virtual ~Sink() = default;
  virtual Status Append(const char* p, size_t n) = 0;
  virtual Status Flush() = 0;
  virtual Status Finish() = 0;

 protected:
  Status Spill() {
    if (buffer_.empty()) return Status::Ok();
    Status s = file_->Append(Bytes(buffer_.data(), buffer_.size()));
    buffer_.clear();
    return s;
  }
  std::unique_ptr<WritableFile> file_;
  size_t limit_;
  std::vector<char> buffer_;
};

namespace {

class PlainSink : public RecordWriter::Sink {
 public:
  using Sink::Sink;
  Status Append(const char* p, size_t n) override {
    if (buffer_.size() + n > limit_) REEL_RETURN_IF_ERROR(Spill());
    if (n >= limit_) return file_->Append(Bytes(p, n));  // large payloads bypass the buffer
    buffer_.insert(buffer_.end(), p, p + n);
    return Status::Ok();
  }
  Status Flush() override { return Spill(); }
  Status Finish() override {
    REEL_RETURN_IF_ERROR(Spill());
    return file_->Close();
  }
};

class DeflateSink : public RecordWriter::Sink {
 public:
  DeflateSink(std::unique_ptr<WritableFile> file, size_t buffer_size)
      : Sink(std::move(file), buffer_size) {
    std::memset(&z_, 0, sizeof(z_));
  }
  ~DeflateSink() override {
    if (init_) deflateEnd(&z_);
  }
  Status Init(Compression c, int level) {
    int bits = c == Compression::kGzip ? 15 + 16 : 15;
    if (deflateInit2(&z_, level, Z_DEFLATED, bits, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      return InternalError("cannot initialise zlib deflate");
    init_ = true;
    buffer_.resize(limit_);
    return Status::Ok();
  }
  Status Append(const char* p, size_t n) override { return Deflate(p, n, Z_NO_FLUSH); }
  Status Flush() override { return Deflate(nullptr, 0, Z_SYNC_FLUSH); }
  Status Finish() override {
    REEL_RETURN_IF_ERROR(Deflate(nullptr, 0, Z_FINISH));
    return file_->Close();
  }

 private:
  Status Deflate(const char* p, size_t n, int flush) {
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(p));
    z_.avail_in = static_cast<uInt>(n);
    while (true) {
      z_.next_out = reinterpret_cast<Bytef*>(buffer_.data());
      z_.avail_out = static_cast<uInt>(buffer_.size());
      int rc = deflate(&z_, flush);
      if (rc == Z_STREAM_ERROR) return InternalError("zlib deflate failed");
      size_t have = buffer_.size() - z_.avail_out;
      if (have > 0) REEL_RETURN_IF_ERROR(file_->Append(Bytes(buffer_.data(), have)));
      if (flush == Z_FINISH ? rc == Z_STREAM_END : (z_.avail_in == 0 && z_.avail_out != 0)) break;
    }
    return Status::Ok();
  }
  z_stream z_;
  bool init_ = false;
};

}  // namespace

Result<std::unique_ptr<RecordWriter>> RecordWriter::Create(std::unique_ptr<WritableFile> file,
                                                           RecordWriterOptions options) {
  if (file == nullptr) return InvalidArgumentError("RecordWriter needs a file");
  if (options.level < -1 || options.level > 9)
    return InvalidArgumentError("compression level " + std::to_string(options.level) +
                                " is not in -1..9");
  std::unique_ptr<Sink> sink;
  if (options.compression == Compression::kNone) {
    sink = std::make_unique<PlainSink>(std::move(file), options.buffer_size);
  } else {
    auto deflate = std::make_unique<DeflateSink>(std::move(file), options.buffer_size);
    REEL_RETURN_IF_ERROR(deflate->Init(options.compression, options.level));
    sink = std::move(deflate);
  }
  return std::unique_ptr<RecordWriter>(new RecordWriter(std::move(sink)));
}

RecordWriter::RecordWriter(std::unique_ptr<Sink> sink) : sink_(std::move(sink)) {}
RecordWriter::~RecordWriter() = default;

Status RecordWriter::Write(std::string_view record) {
  if (closed_) return FailedPreconditionError("RecordWriter::Write after Close");
  char header[12];
  EncodeHeader(record.size(), header);
  char footer[4];
  EncodeFixed32(footer, MaskCrc(Crc32c(record.data(), record.size())));
  REEL_RETURN_IF_ERROR(sink_->Append(header, sizeof(header)));
  REEL_RETURN_IF_ERROR(sink_->Append(record.data(), record.size()));
  REEL_RETURN_IF_ERROR(sink_->Append(footer, sizeof(footer)));
  ++records_;
  offset_ += kRecordOverhead + record.size();
  return Status::Ok();
}

Status RecordWriter::Flush() {
  if (closed_) return FailedPreconditionError("RecordWriter::Flush after Close");
  return sink_->Flush();
}

Status RecordWriter::Close() {
  if (closed_) return FailedPreconditionError("RecordWriter closed twice");
  closed_ = true;
  return sink_->Finish();
}

void AppendFramedRecord(std::string_view payload, std::string* out) {
  char header[12];
  EncodeHeader(payload.size(), header);
  char footer[4];
  EncodeFixed32(footer, MaskCrc(Crc32c(payload.data(), payload.size())));
  out->append(header, sizeof(header));
  out->append(payload);
  out->append(footer, sizeof(footer));
}

}  // namespace reel::recordio
