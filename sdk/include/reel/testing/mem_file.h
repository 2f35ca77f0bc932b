// In-memory files, the storage contract's test doubles (reel/storage.h): a RandomAccessFile over a
// string and a WritableFile that hands its bytes over at Close(), for tests of anything that reads
// or writes through the contract (record I/O, a data source) without touching the disk. Installed
// with the SDK for plugin authors' tests; no GoogleTest here, so fuzz targets use it too.
// Thread-safety: a MemFile may be read concurrently; a MemWritable is single-threaded.
#ifndef REEL_TESTING_MEM_FILE_H_
#define REEL_TESTING_MEM_FILE_H_

#include <algorithm>
#include <cstring>
#include <span>
#include <string>

#include "reel/storage.h"

namespace reel::testing {

// Serves `data` under `uri`; data() lets a test corrupt or cut the bytes between reads.
class MemFile : public RandomAccessFile {
 public:
  MemFile(std::string uri, std::string data) : uri_(std::move(uri)), data_(std::move(data)) {}
  const std::string& uri() const override { return uri_; }
  Result<uint64_t> Size() override { return static_cast<uint64_t>(data_.size()); }
  Result<size_t> Read(uint64_t offset, std::span<std::byte> out) override {
    if (offset >= data_.size()) return size_t{0};
    size_t n = std::min<size_t>(out.size(), data_.size() - offset);
    std::memcpy(out.data(), data_.data() + offset, n);
    return n;
  }
  std::string& data() { return data_; }

 private:
  std::string uri_, data_;
};

// Collects appended bytes into *target when closed (not before: a test sees what a reader would
// see after a successful Close()). `target` must outlive the MemWritable.
class MemWritable : public WritableFile {
 public:
  explicit MemWritable(std::string* target) : target_(target) {}
  Status Append(std::span<const std::byte> data) override {
    buf_.append(reinterpret_cast<const char*>(data.data()), data.size());
    return Status::Ok();
  }
  Status Close() override {
    *target_ = buf_;
    return Status::Ok();
  }

 private:
  std::string* target_;
  std::string buf_;
};

}  // namespace reel::testing

#endif  // REEL_TESTING_MEM_FILE_H_
