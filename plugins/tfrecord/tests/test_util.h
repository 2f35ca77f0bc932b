// Helpers shared by the tfrecord tests: in-memory files, temporary directories, hex decoding.
#ifndef REEL_PLUGINS_TFRECORD_TESTS_TEST_UTIL_H_
#define REEL_PLUGINS_TFRECORD_TESTS_TEST_UTIL_H_

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include "reel/storage.h"

namespace reel::testing {

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

// Collects appended bytes into *target when closed.
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

inline std::string FromHex(std::string_view hex) {
  std::string out;
  int hi = -1;
  for (char c : hex) {
    if (c == ' ') continue;
    int v = c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
    if (hi < 0) {
      hi = v;
    } else {
      out += static_cast<char>(hi * 16 + v);
      hi = -1;
    }
  }
  return out;
}

// A fresh directory under the build tree's temp area, removed by the destructor.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("reel_tfrecord_" + std::to_string(::getpid()) + "_" + info->test_suite_name() + "_" +
             info->name() + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string path() const { return path_.string(); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace reel::testing

#endif  // REEL_PLUGINS_TFRECORD_TESTS_TEST_UTIL_H_
