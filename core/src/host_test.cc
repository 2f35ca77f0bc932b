#include "reel/core/host.h"

#include <gtest/gtest.h>

namespace reel::core {
namespace {

TEST(StorageOptionsTest, FlagsAreSchemeDotOptionEqualsValue) {
  StorageOptions o;
  ASSERT_TRUE(AddStorageFlag("s3.endpoint=http://h:1/?a=b", o).ok());
  ASSERT_TRUE(AddStorageFlag("s3.region=", o).ok());
  ASSERT_TRUE(AddStorageFlag("s3.region=eu", o).ok());  // a later flag replaces an earlier one
  EXPECT_EQ(o, (StorageOptions{{"s3", {{"endpoint", "http://h:1/?a=b"}, {"region", "eu"}}}}));
  for (const char* bad : {"endpoint=x", ".endpoint=x", "s3.=x", "s3.endpoint", "s3=x.y"}) {
    Status s = AddStorageFlag(bad, o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find(std::string("--storage ") + bad), std::string::npos) << s;
  }
}

TEST(StorageOptionsTest, VariablesAreLowerCasedAndOthersIgnored) {
  std::string a = "REEL_STORAGE_S3_ENDPOINT=http://h:1", b = "REEL_STORAGE_S3_PART_SIZE=5",
              c = "PATH=/bin", d = "REEL_PLUGIN_PATH=/x";
  char* env[] = {a.data(), b.data(), c.data(), d.data(), nullptr};
  StorageOptions o;
  ASSERT_TRUE(AddStorageEnvironment(env, o).ok());
  EXPECT_EQ(o, (StorageOptions{{"s3", {{"endpoint", "http://h:1"}, {"part_size", "5"}}}}));
  for (std::string bad : {"REEL_STORAGE_S3=1", "REEL_STORAGE__X=1", "REEL_STORAGE_S3_=1"}) {
    char* one[] = {bad.data(), nullptr};
    Status s = AddStorageEnvironment(one, o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find(bad.substr(0, bad.find('='))), std::string::npos) << s;
  }
}

// Options the host was created with win over a config's; the config adds what they leave unset,
// and a storage already in use is rebuilt with the new options.
TEST(StorageOptionsTest, HostOptionsWinAndNewOptionsRebuildTheStorage) {
  HostOptions options;
  options.load_plugins = false;
  auto host = Host::Create(options);
  ASSERT_TRUE(host.ok()) << host.status();
  Result<Storage*> first = (*host)->ForUri("/tmp/x");
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE((*host)->AddStorageDefaults("file", {}).ok());
  EXPECT_EQ(*(*host)->ForUri("/tmp/x"), *first);  // nothing new: the same storage
  Status bad = (*host)->AddStorageDefaults("file", {{"bogus", "1"}});
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument) << bad;
  EXPECT_NE(bad.message().find("bogus"), std::string::npos) << bad;
  EXPECT_EQ(*(*host)->ForUri("/tmp/x"), *first);  // a refused option changes nothing
  Status unknown = (*host)->AddStorageDefaults("nowhere", {});
  EXPECT_EQ(unknown.code(), StatusCode::kNotFound);
  EXPECT_NE(unknown.message().find("no storage named 'nowhere'"), std::string::npos) << unknown;

  options.storage_options = {{"file", {{"bogus", "1"}}}};
  auto refused = Host::Create(options);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("storage options for 'file'"), std::string::npos)
      << refused.status();
}

}  // namespace
}  // namespace reel::core
