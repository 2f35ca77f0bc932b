// The s3 storage against a real S3 server (s3rver on loopback), cross-checked with the AWS CLI.
#include "s3_storage.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "s3_test_env.h"

namespace reel::s3 {
namespace {

using testing::kBucket;

using testing::RandomBytes;
using testing::Uri;

std::string ReadLocal(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class S3Test : public ::testing::Test {
 protected:
  void SetUp() override {
    Status error;
    server_ = testing::SharedS3rver(&error);
    ASSERT_NE(server_, nullptr) << "cannot start the S3 test server: " << error;
  }

  std::unique_ptr<Storage> MakeStorage(const std::function<void(S3Config&)>& tweak = {}) {
    S3Config c = server_->Config();
    if (tweak) tweak(c);
    auto s = MakeS3Storage(c);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }

  // `aws` pointed at the test server with s3rver's credentials.
  std::string Aws(const std::string& args) const {
    return "AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_DEFAULT_REGION=us-east-1 "
           "AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null aws --endpoint-url " +
           server_->endpoint() + " " + args;
  }

  std::filesystem::path TempFile(const std::string& name) const {
    return std::filesystem::path(::testing::TempDir()) / ("reel-s3-" + name);
  }

  testing::S3rverProcess* server_ = nullptr;
};

// Reads the object with small sequential reads, the way a TFRecord scan does (12-byte headers,
// then payloads of varying size), so the read-ahead blocks and their prefetch are exercised.
std::string ScanInPieces(RandomAccessFile& f, uint64_t size) {
  std::string out(size, '\0');
  uint64_t pos = 0;
  size_t step = 12;
  while (pos < size) {
    auto n = f.Read(pos, std::as_writable_bytes(std::span<char>(out.data() + pos, step)));
    EXPECT_TRUE(n.ok()) << n.status();
    if (!n.ok() || *n == 0) break;
    pos += *n;
    step = step == 12 ? 5000 + pos % 7000 : 12;
  }
  out.resize(pos);
  return out;
}

TEST_F(S3Test, RealShardsRoundTripByteForByte) {
  auto storage = MakeStorage([](S3Config& c) { c.read_ahead = 256 << 10; });
  std::filesystem::path dir = std::filesystem::path(REEL_DATA_DIR) / "yt8m";
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".tfrecord") names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  ASSERT_EQ(names.size(), 3u) << "expected the three YouTube-8M shards in " << dir;
  for (const auto& name : names)
    ASSERT_TRUE(WriteAll(*storage, Uri("yt8m/" + name), ReadLocal(dir / name)).ok());

  auto listed = storage->Glob(Uri("yt8m/validate*.tfrecord"));
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 3u);
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string local = ReadLocal(dir / names[i]);
    EXPECT_EQ((*listed)[i].uri, Uri("yt8m/" + names[i]));
    EXPECT_EQ((*listed)[i].size, local.size());
    auto whole = ReadAll(*storage, (*listed)[i].uri);
    ASSERT_TRUE(whole.ok()) << whole.status();
    EXPECT_TRUE(*whole == local) << names[i] << ": whole-object read differs";
    auto file = storage->OpenRead((*listed)[i].uri);
    ASSERT_TRUE(file.ok()) << file.status();
    EXPECT_TRUE(ScanInPieces(**file, local.size()) == local) << names[i] << ": scan differs";
  }
}

TEST_F(S3Test, ObjectsFromAwsCliReadByteForByte) {
  auto storage = MakeStorage([](S3Config& c) { c.read_ahead = 1 << 20; });
  const std::string data = RandomBytes(3 << 20 | 12345, 7);
  std::filesystem::path local = TempFile("cli-upload.bin");
  std::ofstream(local, std::ios::binary) << data;
  std::string out;
  ASSERT_EQ(testing::RunCommand(Aws("s3 cp " + local.string() + " " + Uri("cli/up.bin")), &out), 0)
      << out;
  auto read = ReadAll(*storage, Uri("cli/up.bin"));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(*read == data);
  std::filesystem::remove(local);
}

TEST_F(S3Test, ObjectsReelWritesReadByAwsCli) {
  auto storage = MakeStorage([](S3Config& c) { c.part_size = 5 << 20; });
  // One PutObject and one multipart upload (3 parts, the last one short).
  for (size_t size : {size_t{70000}, size_t{(5 << 20) * 2 + 777}}) {
    const std::string data = RandomBytes(size, static_cast<uint32_t>(size));
    std::string key = "reel-written/" + std::to_string(size) + ".bin";
    auto file = storage->OpenWrite(Uri(key));
    ASSERT_TRUE(file.ok()) << file.status();
    for (size_t pos = 0; pos < data.size(); pos += 1 << 20) {  // several appends
      size_t len = std::min<size_t>(1 << 20, data.size() - pos);
      ASSERT_TRUE(
          (*file)->Append(std::as_bytes(std::span<const char>(data.data() + pos, len))).ok());
    }
    ASSERT_TRUE((*file)->Close().ok());
    std::filesystem::path local = TempFile("cli-download.bin");
    std::string out;
    ASSERT_EQ(testing::RunCommand(Aws("s3 cp " + Uri(key) + " " + local.string()), &out), 0) << out;
    EXPECT_TRUE(ReadLocal(local) == data) << key;
    std::filesystem::remove(local);
  }
}

TEST_F(S3Test, ListsPastOneThousandKeys) {
  auto storage = MakeStorage();
  constexpr int kKeys = 1005;
  auto name = [](int i) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "many/k%04d", i);
    return std::string(buf);
  };
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < kKeys; i += 8)
        if (!WriteAll(*storage, Uri(name(i)), std::to_string(i)).ok()) ++failures;
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(failures.load(), 0);

  auto all = storage->Glob(Uri("many/k*"));
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), static_cast<size_t>(kKeys));
  for (int i = 0; i < kKeys; ++i) {
    EXPECT_EQ((*all)[i].uri, Uri(name(i)));
    EXPECT_EQ((*all)[i].size, std::to_string(i).size());
  }
  // A class and a '?' select keys 1000..1004 only.
  auto tail = storage->Glob(Uri("many/k100[0-4]"));
  ASSERT_TRUE(tail.ok()) << tail.status();
  ASSERT_EQ(tail->size(), 5u);
  EXPECT_EQ(tail->front().uri, Uri("many/k1000"));
  // A literal key lists just itself; a wildcard never crosses '/'.
  auto one = storage->Glob(Uri("many/k0007"));
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  auto none = storage->Glob(Uri("*k0007"));
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->size(), 0u) << "'*' must not match across '/'";
}

TEST_F(S3Test, RangedReadsAtStartMiddleEndAndConcurrently) {
  auto storage = MakeStorage([](S3Config& c) {
    c.read_ahead = 4096;
    c.parallel_ranges = 3;
  });
  const std::string data = RandomBytes(100000, 3);
  ASSERT_TRUE(WriteAll(*storage, Uri("ranges/obj"), data).ok());
  auto file = storage->OpenRead(Uri("ranges/obj"));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(*(*file)->Size(), data.size());
  auto read = [&](uint64_t off, size_t len) {
    std::string buf(len, '\0');
    auto n = (*file)->Read(off, std::as_writable_bytes(std::span<char>(buf)));
    EXPECT_TRUE(n.ok()) << n.status();
    buf.resize(n.ok() ? *n : 0);
    return buf;
  };
  EXPECT_EQ(read(0, 100), data.substr(0, 100));
  EXPECT_EQ(read(50000, 3000), data.substr(50000, 3000));    // inside one block
  EXPECT_EQ(read(4090, 20), data.substr(4090, 20));          // across a block edge
  EXPECT_EQ(read(10000, 30000), data.substr(10000, 30000));  // direct, parallel ranges
  EXPECT_EQ(read(99990, 10), data.substr(99990, 10));        // the last bytes
  EXPECT_EQ(read(99990, 100), data.substr(99990, 10));       // short at the end
  EXPECT_EQ(read(100000, 10), "");                           // at the end
  EXPECT_EQ(read(200000, 10), "");                           // past the end

  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < 50; ++i) {
        uint64_t off = rng() % data.size();
        size_t len = 1 + rng() % 9000;
        std::string got = read(off, len);
        if (got != data.substr(off, len)) ++mismatches;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST_F(S3Test, ZeroByteObjects) {
  auto storage = MakeStorage();
  ASSERT_TRUE(WriteAll(*storage, Uri("empty/zero"), "").ok());
  auto listed = storage->Glob(Uri("empty/*"));
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ(listed->front().size, 0u);
  auto file = storage->OpenRead(Uri("empty/zero"));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(*(*file)->Size(), 0u);
  char buf[8];
  auto n = (*file)->Read(0, std::as_writable_bytes(std::span<char>(buf)));
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 0u);
  auto all = ReadAll(*storage, Uri("empty/zero"));
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(*all, "");
}

// An object replaced while a reader has it open (a shard rewritten mid-epoch): the next read is
// DataLoss naming it, never bytes of the new version at the old version's offsets. s3rver ignores
// If-Match, so what catches it here is the new size in the 206's Content-Range.
TEST_F(S3Test, ObjectReplacedWhileOpenIsDataLossNamingIt) {
  auto storage = MakeStorage([](S3Config& c) {
    c.read_ahead = 64 << 10;
    c.parallel_ranges = 1;  // no read-ahead past the first block
  });
  ASSERT_TRUE(WriteAll(*storage, Uri("changing/shard"), RandomBytes(256 << 10, 1)).ok());
  auto file = storage->OpenRead(Uri("changing/shard"));
  ASSERT_TRUE(file.ok()) << file.status();
  std::string buf(100, '\0');
  auto out = std::as_writable_bytes(std::span<char>(buf));
  ASSERT_TRUE((*file)->Read(0, out).ok());
  ASSERT_TRUE(WriteAll(*storage, Uri("changing/shard"), RandomBytes(300 << 10, 2)).ok());
  auto n = (*file)->Read(200 << 10, out);  // a block not fetched yet
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), StatusCode::kDataLoss) << n.status();
  for (const char* part :
       {"changed since it was opened", "262144 bytes then, 307200 now", "changing/shard"})
    EXPECT_NE(n.status().message().find(part), std::string::npos) << n.status();
  // Opened again, the new version reads whole.
  auto again = ReadAll(*storage, Uri("changing/shard"));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, RandomBytes(300 << 10, 2));
}

TEST_F(S3Test, MissingBucketNamesBucketStatusAndS3Code) {
  auto storage = MakeStorage();
  auto listed = storage->Glob("s3://no-such-bucket/data/*.tfrecord");
  ASSERT_FALSE(listed.ok());
  EXPECT_EQ(listed.status().code(), StatusCode::kNotFound);
  for (const char* part : {"no-such-bucket", "404", "NoSuchBucket"})
    EXPECT_NE(listed.status().message().find(part), std::string::npos) << listed.status();
  auto opened = storage->OpenRead("s3://no-such-bucket/x");
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kNotFound);
  EXPECT_NE(opened.status().message().find("NoSuchBucket"), std::string::npos) << opened.status();
  auto writer = storage->OpenWrite("s3://no-such-bucket/x");
  ASSERT_TRUE(writer.ok());
  Status closed = (*writer)->Close();
  EXPECT_EQ(closed.code(), StatusCode::kNotFound) << closed;
}

TEST_F(S3Test, MissingKeyNamesBucketKeyStatusAndS3Code) {
  auto storage = MakeStorage();
  auto opened = storage->OpenRead(Uri("no/such/key"));
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kNotFound);
  for (const char* part : {kBucket, "no/such/key", "404", "NoSuchKey"})
    EXPECT_NE(opened.status().message().find(part), std::string::npos) << opened.status();
  auto none = storage->Glob(Uri("no/such/*"));
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
}

TEST_F(S3Test, DeleteRemovesAndReportsMissing) {
  auto storage = MakeStorage();
  ASSERT_TRUE(WriteAll(*storage, Uri("del/x"), "bye").ok());
  ASSERT_TRUE(storage->Delete(Uri("del/x")).ok());
  EXPECT_EQ(storage->OpenRead(Uri("del/x")).status().code(), StatusCode::kNotFound);
  Status again = storage->Delete(Uri("del/x"));
  EXPECT_EQ(again.code(), StatusCode::kNotFound) << again;
  EXPECT_NE(again.message().find("del/x"), std::string::npos) << again;
}

// s3rver checks that the access key exists (it does not verify V4 signature bytes).
TEST_F(S3Test, WrongCredentialsArePermissionDenied) {
  auto storage = MakeStorage([](S3Config& c) {
    c.access_key_id = "NOT-A-KEY";
    c.secret_access_key = "nope";
  });
  auto listed = storage->Glob(Uri("*"));
  ASSERT_FALSE(listed.ok());
  EXPECT_EQ(listed.status().code(), StatusCode::kPermissionDenied);
  for (const char* part : {"403", "InvalidAccessKeyId", kBucket})
    EXPECT_NE(listed.status().message().find(part), std::string::npos) << listed.status();
  Status put = WriteAll(*storage, Uri("creds/x"), "data");
  EXPECT_EQ(put.code(), StatusCode::kPermissionDenied) << put;
}

TEST_F(S3Test, AbandonedMultipartUploadLeavesNothing) {
  auto storage = MakeStorage([](S3Config& c) { c.part_size = 5 << 20; });
  const std::string data = RandomBytes((5 << 20) + 100, 11);
  {
    auto file = storage->OpenWrite(Uri("partial/obj"));
    ASSERT_TRUE(file.ok());
    ASSERT_TRUE((*file)->Append(std::as_bytes(std::span<const char>(data))).ok());  // 1 part sent
  }  // destroyed without Close
  auto listed = storage->Glob(Uri("partial/*"));
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_TRUE(listed->empty());
  EXPECT_EQ(storage->OpenRead(Uri("partial/obj")).status().code(), StatusCode::kNotFound);
}

TEST_F(S3Test, ServerStoppedMidReadIsUnavailableAfterRetries) {
  testing::S3rverProcess own;
  Status started = own.Start();
  ASSERT_TRUE(started.ok()) << started;
  S3Config c = own.Config();
  c.read_ahead = 64 << 10;
  c.parallel_ranges = 1;
  auto storage = MakeS3Storage(c);
  ASSERT_TRUE(storage.ok());
  const std::string data = RandomBytes(1 << 20, 5);
  ASSERT_TRUE(WriteAll(**storage, Uri("gone/obj"), data).ok());
  auto file = (*storage)->OpenRead(Uri("gone/obj"));
  ASSERT_TRUE(file.ok()) << file.status();
  std::string buf(100, '\0');
  ASSERT_TRUE((*file)->Read(0, std::as_writable_bytes(std::span<char>(buf))).ok());
  own.Stop();
  auto n = (*file)->Read(512 << 10, std::as_writable_bytes(std::span<char>(buf)));
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), StatusCode::kUnavailable);
  for (const char* part : {"gave up after 3 attempts", "gone/obj", kBucket})
    EXPECT_NE(n.status().message().find(part), std::string::npos) << n.status();
}

}  // namespace
}  // namespace reel::s3
