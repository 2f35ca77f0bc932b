#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/filesystem.hpp>
#include <fstream>

#include "host_name.h"
#include "reel/core/host.h"
#include "reel/glob.h"

namespace reel::core {
namespace {

namespace fs = boost::filesystem;

class FileStorageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HostOptions options;
    options.load_plugins = false;
    host_ = std::move(Host::Create(options).value());
    dir_ = fs::temp_directory_path() / fs::unique_path("reel-fs-%%%%%%");
    fs::create_directories(dir_ / "a");
    fs::create_directories(dir_ / "b");
    for (const char* f : {"a/x1.tfrecord", "a/x2.tfrecord", "a/y.txt", "b/x3.tfrecord"})
      std::ofstream((dir_ / f).string()) << f;
    storage_ = host_->ForUri(dir_.string()).value();
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::vector<std::string> Names(const std::string& pattern) {
    auto found = storage_->Glob(pattern);
    EXPECT_TRUE(found.ok()) << found.status();
    std::vector<std::string> out;
    for (const auto& o : *found) out.push_back(o.uri.substr(o.uri.find(dir_.filename().string())));
    return out;
  }

  std::unique_ptr<Host> host_;
  fs::path dir_;
  Storage* storage_ = nullptr;
};

TEST_F(FileStorageTest, GlobsWithinAndAcrossDirectories) {
  const std::string d = dir_.string(), n = dir_.filename().string();
  EXPECT_EQ(Names(d + "/a/*.tfrecord"),
            (std::vector<std::string>{n + "/a/x1.tfrecord", n + "/a/x2.tfrecord"}));
  EXPECT_EQ(
      Names(d + "/*/x*.tfrecord"),
      (std::vector<std::string>{n + "/a/x1.tfrecord", n + "/a/x2.tfrecord", n + "/b/x3.tfrecord"}));
  EXPECT_EQ(Names(d + "/a/x[2-9].tfrecord"), (std::vector<std::string>{n + "/a/x2.tfrecord"}));
  EXPECT_EQ(Names(d + "/a/y.txt"), (std::vector<std::string>{n + "/a/y.txt"}));
  EXPECT_TRUE(Names(d + "/a/*.none").empty());
  EXPECT_TRUE(Names(d + "/missing/*.tfrecord").empty());
  auto uris = storage_->Glob("file://" + d + "/b/*");
  ASSERT_TRUE(uris.ok());
  ASSERT_EQ(uris->size(), 1u);
  EXPECT_EQ((*uris)[0].uri, "file://" + d + "/b/x3.tfrecord");
  EXPECT_EQ((*uris)[0].size, std::string("b/x3.tfrecord").size());
}

TEST_F(FileStorageTest, ReadsRangesAndReportsShortReadsAtTheEnd) {
  std::string path = (dir_ / "a/x1.tfrecord").string();
  auto file = storage_->OpenRead(path);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(*(*file)->Size(), 13u);
  std::string buf(8, '\0');
  auto n = (*file)->Read(2, std::as_writable_bytes(std::span<char>(buf)));
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 8u);
  EXPECT_EQ(buf, "x1.tfrec");
  n = (*file)->Read(10, std::as_writable_bytes(std::span<char>(buf)));
  EXPECT_EQ(*n, 3u);
  n = (*file)->Read(100, std::as_writable_bytes(std::span<char>(buf)));
  EXPECT_EQ(*n, 0u);
}

TEST_F(FileStorageTest, MissingFilesAreNotFoundNamingThePath) {
  auto file = storage_->OpenRead((dir_ / "nope").string());
  EXPECT_EQ(file.status().code(), StatusCode::kNotFound);
  EXPECT_NE(file.status().message().find("nope"), std::string::npos);
  EXPECT_EQ(storage_->Delete((dir_ / "nope").string()).code(), StatusCode::kNotFound);
}

TEST_F(FileStorageTest, WritesAppearOnlyOnCloseAndAbandonedWritesLeaveNothing) {
  std::string path = (dir_ / "new/ckpt.bin").string();
  {
    auto w = storage_->OpenWrite(path);
    ASSERT_TRUE(w.ok()) << w.status();
    ASSERT_TRUE((*w)->Append(std::as_bytes(std::span<const char>("half", 4))).ok());
    EXPECT_FALSE(fs::exists(path));
  }  // destroyed without Close(): discarded
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(fs::is_empty(dir_ / "new"));  // no temporary left behind

  ASSERT_TRUE(WriteAll(*storage_, path, "first").ok());
  {
    auto w = storage_->OpenWrite(path);
    ASSERT_TRUE((*w)->Append(std::as_bytes(std::span<const char>("second", 6))).ok());
    EXPECT_EQ(*ReadAll(*storage_, path), "first");  // the old object until Close()
    ASSERT_TRUE((*w)->Close().ok());
  }
  EXPECT_EQ(*ReadAll(*storage_, path), "second");
  ASSERT_TRUE(storage_->Delete(path).ok());
  EXPECT_FALSE(fs::exists(path));
}

// A writer killed mid-write leaves `<target>.tmp-<host>-<pid>-<n>`. Writing the target again
// removes such files of dead processes of this host, and only those: a live process's, another
// host's (a shared file system) and unrelated names stay.
TEST_F(FileStorageTest, WritingATargetAgainRemovesTheTempFilesOfDeadWritersOnly) {
  const std::string& host = HostName();
  pid_t dead = ::fork();
  ASSERT_GE(dead, 0);
  if (dead == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(dead, nullptr, 0), dead);  // reaped: the pid names no process now
  const fs::path target = dir_ / "a" / "ckpt.bin";
  const std::string mine = "ckpt.bin.tmp-" + host + "-";
  const std::vector<std::string> kept = {
      mine + std::to_string(::getppid()) + "-0",  // a live process's write
      std::string("ckpt.bin.tmp-elsewhere-") + std::to_string(dead) + "-0",  // another host's
      mine + "x-0",                                                          // not a pid
      "other.bin.tmp-" + host + "-" + std::to_string(dead) + "-0",           // another target
  };
  const std::string stale = mine + std::to_string(dead) + "-7";
  for (const std::string& name : kept) std::ofstream((dir_ / "a" / name).string()) << "half";
  std::ofstream((dir_ / "a" / stale).string()) << "half";
  ASSERT_TRUE(WriteAll(*storage_, target.string(), "whole").ok());
  EXPECT_EQ(*ReadAll(*storage_, target.string()), "whole");
  EXPECT_FALSE(fs::exists(dir_ / "a" / stale));
  for (const std::string& name : kept) EXPECT_TRUE(fs::exists(dir_ / "a" / name)) << name;
}

TEST(GlobMatchTest, Wildcards) {
  EXPECT_TRUE(GlobMatch("*.tfrecord", "train-001.tfrecord"));
  EXPECT_FALSE(GlobMatch("*.tfrecord", "train-001.tfrecord.gz"));
  EXPECT_TRUE(GlobMatch("train-00?.tfrecord", "train-001.tfrecord"));
  EXPECT_TRUE(GlobMatch("train-[0-4]*", "train-3x"));
  EXPECT_FALSE(GlobMatch("train-[!0-4]*", "train-3x"));
  EXPECT_TRUE(GlobMatch("a/*/c", "a/b/c"));
  EXPECT_FALSE(GlobMatch("a/*", "a/b/c"));  // '*' never crosses '/'
  EXPECT_FALSE(GlobMatch("a*c", "a/c"));
  EXPECT_TRUE(GlobMatch("*", ""));
  EXPECT_TRUE(GlobMatch("a**b", "axxb"));
  EXPECT_EQ(GlobPrefix("bucket/train*.tfrecord"), "bucket/train");
}

}  // namespace
}  // namespace reel::core
