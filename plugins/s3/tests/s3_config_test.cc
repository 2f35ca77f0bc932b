// Configuration resolution: options over environment over the shared AWS files.
#include "s3_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

namespace reel::s3 {
namespace {

Options Parse(const std::map<std::string, std::string>& given) {
  auto o = ParseOptions(S3OptionSchema(), given, "storage 's3'");
  EXPECT_TRUE(o.ok()) << o.status();
  return o.ok() ? *o : Options{};
}

EnvLookup FakeEnv(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

class AwsHome : public ::testing::Test {
 protected:
  void SetUp() override {
    home_ =
        std::filesystem::path(::testing::TempDir()) /
        ("s3cfg-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::create_directories(home_ / ".aws");
    std::ofstream(home_ / ".aws/credentials")
        << "[default]\naws_access_key_id = DEFKEY\naws_secret_access_key = defsecret\n\n"
        << "[ci]\naws_access_key_id=CIKEY\naws_secret_access_key=cisecret\n"
           "aws_session_token=citoken\n";
    std::ofstream(home_ / ".aws/config") << "[default]\nregion = eu-west-1\n[profile ci]\n"
                                            "region = ap-south-1\n";
  }
  void TearDown() override { std::filesystem::remove_all(home_); }
  std::filesystem::path home_;
};

TEST_F(AwsHome, DefaultProfileFromSharedFiles) {
  auto c = ResolveS3Config(Parse({}), FakeEnv({{"HOME", home_.string()}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->access_key_id, "DEFKEY");
  EXPECT_EQ(c->secret_access_key, "defsecret");
  EXPECT_EQ(c->region, "eu-west-1");
  EXPECT_EQ(c->endpoint, "https://s3.eu-west-1.amazonaws.com");
  EXPECT_TRUE(c->virtual_addressing);  // auto on AWS
}

TEST_F(AwsHome, ProfileFromEnvironmentAndOption) {
  auto c = ResolveS3Config(Parse({}), FakeEnv({{"HOME", home_.string()}, {"AWS_PROFILE", "ci"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->access_key_id, "CIKEY");
  EXPECT_EQ(c->session_token, "citoken");
  EXPECT_EQ(c->region, "ap-south-1");
  auto d = ResolveS3Config(Parse({{"profile", "ci"}}), FakeEnv({{"HOME", home_.string()}}));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->access_key_id, "CIKEY");
}

TEST_F(AwsHome, EnvironmentBeatsFilesAndOptionsBeatEnvironment) {
  auto env = FakeEnv({{"HOME", home_.string()},
                      {"AWS_ACCESS_KEY_ID", "ENVKEY"},
                      {"AWS_SECRET_ACCESS_KEY", "envsecret"},
                      {"AWS_SESSION_TOKEN", "envtoken"},
                      {"AWS_DEFAULT_REGION", "us-west-1"},
                      {"AWS_REGION", "us-west-2"},
                      {"AWS_ENDPOINT_URL", "http://generic:1"},
                      {"AWS_ENDPOINT_URL_S3", "http://s3only:2/"}});
  auto c = ResolveS3Config(Parse({}), env);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->access_key_id, "ENVKEY");
  EXPECT_EQ(c->secret_access_key, "envsecret");
  EXPECT_EQ(c->session_token, "envtoken");
  EXPECT_EQ(c->region, "us-west-2");
  EXPECT_EQ(c->endpoint, "http://s3only:2");
  EXPECT_FALSE(c->virtual_addressing);  // auto with a custom endpoint

  auto o = ResolveS3Config(Parse({{"access_key_id", "OPTKEY"},
                                  {"secret_access_key", "optsecret"},
                                  {"region", "sa-east-1"},
                                  {"endpoint", "http://127.0.0.1:9"},
                                  {"addressing", "virtual"}}),
                           env);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->access_key_id, "OPTKEY");
  EXPECT_EQ(o->secret_access_key, "optsecret");
  EXPECT_EQ(o->session_token, "");  // not mixed with the environment's token
  EXPECT_EQ(o->region, "sa-east-1");
  EXPECT_EQ(o->endpoint, "http://127.0.0.1:9");
  EXPECT_TRUE(o->virtual_addressing);
}

TEST(S3Config, NoCredentialsMeansAnonymous) {
  auto c = ResolveS3Config(Parse({}), FakeEnv({{"HOME", "/nonexistent-home"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->access_key_id, "");
  EXPECT_EQ(c->region, "us-east-1");
}

TEST(S3Config, BadValuesNameTheOption) {
  auto env = FakeEnv({});
  auto a = ResolveS3Config(Parse({{"addressing", "sideways"}}), env);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(a.status().message().find("addressing"), std::string::npos) << a.status();

  auto k = ResolveS3Config(Parse({{"access_key_id", "X"}}), env);
  ASSERT_FALSE(k.ok());
  EXPECT_NE(k.status().message().find("secret_access_key"), std::string::npos) << k.status();

  auto e = ResolveS3Config(Parse({{"endpoint", "localhost:9000"}}), env);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("localhost:9000"), std::string::npos) << e.status();

  auto p = ResolveS3Config(Parse({{"part_size", "1024"}}), env);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("part_size"), std::string::npos) << p.status();

  auto s = ResolveS3Config(Parse({}), FakeEnv({{"AWS_ACCESS_KEY_ID", "X"}}));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("AWS_SECRET_ACCESS_KEY"), std::string::npos) << s.status();
}

}  // namespace
}  // namespace reel::s3
