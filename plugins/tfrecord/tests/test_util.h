// Helpers shared by the tfrecord tests: in-memory files (reel/testing/mem_file.h) and temporary
// directories.
#ifndef REEL_PLUGINS_TFRECORD_TESTS_TEST_UTIL_H_
#define REEL_PLUGINS_TFRECORD_TESTS_TEST_UTIL_H_

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include "reel/storage.h"
#include "reel/testing/mem_file.h"

namespace reel::testing {

// A fresh directory under the build tree's temp area, removed by the destructor.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    static int counter = 0;
    std::string name = std::string(info->test_suite_name()) + "_" + info->name();
    // One directory, not a nest: a parameterized test's names hold '/' ("Prefetch/SourceFault").
    std::replace(name.begin(), name.end(), '/', '_');
    path_ =
        std::filesystem::temp_directory_path() / ("reel_tfrecord_" + std::to_string(::getpid()) +
                                                  "_" + name + "_" + std::to_string(counter++));
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
