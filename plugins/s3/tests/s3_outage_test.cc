// The S3 server going away (killed) and coming back (restarted on the same data and port), as an
// outage looks to a training run: reads and multipart uploads in flight retry, then fail with
// Unavailable naming bucket and key; no object is ever visible that was not completely written
// (checkpoints are written this way); and once the server is back the same open file reads
// again.
#include <gtest/gtest.h>

#include "s3_storage.h"
#include "s3_test_env.h"

namespace reel::s3 {
namespace {

using testing::kBucket;

using testing::RandomBytes;
using testing::Uri;

std::span<const std::byte> Bytes(const std::string& s) {
  return std::as_bytes(std::span<const char>(s));
}

class S3OutageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Status started = server_.Start();
    ASSERT_TRUE(started.ok()) << started;
    S3Config c = server_.Config();
    c.part_size = 5 << 20;
    c.read_ahead = 64 << 10;
    c.parallel_ranges = 1;
    auto storage = MakeS3Storage(c);
    ASSERT_TRUE(storage.ok()) << storage.status();
    storage_ = std::move(*storage);
  }
  // Restarts the server and checks that nothing is listed under `prefix`.
  void ExpectNothingVisibleAfterRestart(const std::string& prefix, const std::string& key) {
    Status restarted = server_.Restart();
    ASSERT_TRUE(restarted.ok()) << restarted;
    auto listed = storage_->Glob(Uri(prefix + "*"));
    ASSERT_TRUE(listed.ok()) << listed.status();
    EXPECT_TRUE(listed->empty()) << listed->front().uri;
    EXPECT_EQ(storage_->OpenRead(Uri(key)).status().code(), StatusCode::kNotFound);
  }
  testing::S3rverProcess server_;
  std::unique_ptr<Storage> storage_;
};

void ExpectUnavailableNaming(const Status& s, const std::string& key) {
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
  for (const std::string& part : {key, std::string(kBucket), std::string("attempts")})
    EXPECT_NE(s.message().find(part), std::string::npos) << s;
}

// One part is uploaded, then the server dies: the next part fails after retries, Close() reports
// the failure, and after the restart no object exists under the checkpoint's name.
TEST_F(S3OutageTest, ServerGoneMidMultipartUploadLeavesNoObject) {
  const std::string key = "ckpt/ckpt-0000000100.reelckpt";
  auto file = storage_->OpenWrite(Uri(key));
  ASSERT_TRUE(file.ok()) << file.status();
  const std::string data = RandomBytes((5 << 20) + 100, 3);
  ASSERT_TRUE((*file)->Append(Bytes(data)).ok());  // part 1 is on the server
  server_.Kill();
  Status appended = (*file)->Append(Bytes(data));  // part 2 cannot be sent
  ExpectUnavailableNaming(appended, key);
  Status closed = (*file)->Close();
  EXPECT_FALSE(closed.ok());
  ExpectNothingVisibleAfterRestart("ckpt/", key);
}

// A small object goes up in one PUT at Close(): the server is gone by then.
TEST_F(S3OutageTest, ServerGoneBeforeASinglePutLeavesNoObject) {
  const std::string key = "ckpt/ckpt-0000000200.reelckpt";
  auto file = storage_->OpenWrite(Uri(key));
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_TRUE((*file)->Append(Bytes(RandomBytes(1000, 4))).ok());
  server_.Kill();
  ExpectUnavailableNaming((*file)->Close(), key);
  ExpectNothingVisibleAfterRestart("ckpt/", key);
}

// A read during the outage fails after retries; the same open file reads correctly once the
// server is back (nothing in the reader stays broken).
TEST_F(S3OutageTest, ReadsFailDuringTheOutageAndWorkAfterIt) {
  const std::string key = "data/shard0000.tfrecord";
  const std::string data = RandomBytes(1 << 20, 5);
  ASSERT_TRUE(WriteAll(*storage_, Uri(key), data).ok());
  auto file = storage_->OpenRead(Uri(key));
  ASSERT_TRUE(file.ok()) << file.status();
  std::string buf(4096, '\0');
  ASSERT_TRUE((*file)->Read(0, std::as_writable_bytes(std::span<char>(buf))).ok());
  server_.Kill();
  auto failed = (*file)->Read(700 << 10, std::as_writable_bytes(std::span<char>(buf)));
  ASSERT_FALSE(failed.ok());
  ExpectUnavailableNaming(failed.status(), key);
  Status restarted = server_.Restart();
  ASSERT_TRUE(restarted.ok()) << restarted;
  auto n = (*file)->Read(700 << 10, std::as_writable_bytes(std::span<char>(buf)));
  ASSERT_TRUE(n.ok()) << n.status();
  ASSERT_EQ(*n, buf.size());
  EXPECT_EQ(buf, data.substr(700 << 10, buf.size()));
}

}  // namespace
}  // namespace reel::s3
