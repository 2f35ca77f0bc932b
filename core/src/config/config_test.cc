#include "reel/core/config.h"

#include <gtest/gtest.h>

#include "reel/core/host.h"

namespace reel::core {
namespace {

constexpr char kConfig[] = R"(# a run
model {
  name: "sync_probe"
}
optimizer {
  name: "sync"
  options { key: "rule" value: "adam" }
  options { key: "beta1" value: "0.8" }
}
trainer { steps: 10 learning_rate { base: 0.01 } }
)";

std::unique_ptr<Host> MakeHost() {
  HostOptions options;
  options.load_plugins = false;
  return std::move(Host::Create(options).value());
}

TEST(ConfigTest, ParsesTextFormatAndRecordsLines) {
  auto cfg = ParseConfig(kConfig, "run.pbtxt");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->config.trainer().steps(), 10);
  EXPECT_EQ(cfg->config.optimizer().options().at("beta1"), "0.8");
  EXPECT_EQ(cfg->Where("optimizer.options.beta1"), "run.pbtxt:8");
  EXPECT_EQ(cfg->Where("model.name"), "run.pbtxt:3");
}

TEST(ConfigTest, SyntaxErrorsAndUnknownFieldsNameFileAndLine) {
  auto bad = ParseConfig("trainer {\n  stepz: 3\n}\n", "run.pbtxt");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("run.pbtxt:2:"), std::string::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("stepz"), std::string::npos) << bad.status();
  auto wrong_type = ParseConfig("trainer { steps: \"many\" }", "x.pbtxt");
  EXPECT_EQ(wrong_type.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong_type.status().message().find("x.pbtxt:1:"), std::string::npos)
      << wrong_type.status();
}

TEST(ConfigTest, OverridesSetScalarsOptionsAndNestedFields) {
  auto cfg = ParseConfig(kConfig, "run.pbtxt");
  ASSERT_TRUE(cfg.ok());
  ASSERT_TRUE(ApplyOverride(*cfg, "trainer.steps=500").ok());
  ASSERT_TRUE(ApplyOverride(*cfg, "optimizer.name=async_sgd").ok());
  ASSERT_TRUE(ApplyOverride(*cfg, "model.options.hidden=128").ok());
  ASSERT_TRUE(ApplyOverride(*cfg, "trainer.learning_rate.base=0.5").ok());
  ASSERT_TRUE(ApplyOverride(*cfg, "trainer.seed=7").ok());
  EXPECT_EQ(cfg->config.trainer().steps(), 500);
  EXPECT_EQ(cfg->config.optimizer().name(), "async_sgd");
  EXPECT_EQ(cfg->config.model().options().at("hidden"), "128");
  EXPECT_DOUBLE_EQ(cfg->config.trainer().learning_rate().base(), 0.5);
  EXPECT_EQ(cfg->config.trainer().seed(), 7u);
  EXPECT_EQ(cfg->Where("model.options.hidden"), "--set model.options.hidden=128");
}

// The transport section's options are a map too (config::Transport, not a Component): a new key
// and a changed one, as for the other sections.
TEST(ConfigTest, OverridesSetTransportOptions) {
  auto cfg = ParseConfig(kConfig, "run.pbtxt");
  ASSERT_TRUE(cfg.ok());
  Status added = ApplyOverride(*cfg, "transport.options.allreduce_spin_us=0");
  ASSERT_TRUE(added.ok()) << added;
  ASSERT_TRUE(ApplyOverride(*cfg, "transport.options.allreduce_spin_us=500").ok());
  ASSERT_TRUE(ApplyOverride(*cfg, "transport.options.listen=10.0.0.1").ok());
  EXPECT_EQ(cfg->config.transport().options().at("allreduce_spin_us"), "500");
  EXPECT_EQ(cfg->config.transport().options().at("listen"), "10.0.0.1");
  EXPECT_EQ(cfg->config.transport().options().size(), 2u);
  EXPECT_EQ(cfg->Where("transport.options.listen"), "--set transport.options.listen=10.0.0.1");
}

TEST(ConfigTest, BadOverridesNameTheFlag) {
  auto cfg = ParseConfig(kConfig, "run.pbtxt");
  ASSERT_TRUE(cfg.ok());
  struct Case {
    const char* flag;
    const char* says;
  };
  for (const Case& c :
       {Case{"trainer.stepz=1", "has no field 'stepz'"},
        Case{"trainer.steps=many", "'many' is not an integer"},
        Case{"trainer.seed=-1", "not a non-negative integer"}, Case{"trainer=3", "is a section"},
        Case{"model.options=3", "name the option"},
        Case{"no_equals_sign", "expected section.field=value"}}) {
    Status s = ApplyOverride(*cfg, c.flag);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.flag;
    EXPECT_NE(s.message().find(c.says), std::string::npos) << s;
    EXPECT_NE(s.message().find(std::string("--set ") + c.flag), std::string::npos) << s;
  }
  EXPECT_EQ(cfg->config.trainer().steps(), 10);  // nothing changed by the failed flags
}

// Found by tests/fuzz/config_fuzz: strtod took "nan" and "inf", so `--set trainer.clip_norm=nan`
// set a NaN clip norm (which also no longer equals itself after a round trip through text).
TEST(ConfigTest, NonFiniteNumbersAreRefused) {
  auto cfg = ParseConfig(kConfig, "run.pbtxt");
  ASSERT_TRUE(cfg.ok());
  for (const char* flag : {"trainer.clip_norm=nan", "trainer.clip_norm=-inf",
                           "trainer.learning_rate.base=infinity", "trainer.clip_norm=1e999"}) {
    Status s = ApplyOverride(*cfg, flag);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << flag;
    EXPECT_NE(s.message().find("is not a finite number"), std::string::npos) << s;
  }
  EXPECT_FALSE(cfg->config.trainer().has_clip_norm());
  EXPECT_TRUE(ApplyOverride(*cfg, "trainer.clip_norm=2.5").ok());
  EXPECT_EQ(cfg->config.trainer().clip_norm(), 2.5);
}

TEST(ConfigTest, ComponentOptionsAreCheckedAgainstTheSchemaWithLines) {
  auto host = MakeHost();
  auto cfg = ParseConfig(R"(optimizer {
  name: "sync"
  options { key: "rule" value: "adam" }
  options { key: "betaa1" value: "0.8" }
})",
                         "run.pbtxt");
  ASSERT_TRUE(cfg.ok());
  Status s = ValidateComponents(*cfg, host->registry());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("run.pbtxt:4"), std::string::npos) << s;
  EXPECT_NE(s.message().find("unknown option 'betaa1'"), std::string::npos) << s;

  auto typed = ParseConfig(
      "optimizer { name: \"sync\" options { key: \"beta1\" value: \"high\" } }", "t.pbtxt");
  ASSERT_TRUE(typed.ok());
  Status t = ValidateComponents(*typed, host->registry());
  EXPECT_EQ(t.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.message().find("'high' is not a float"), std::string::npos) << t;
}

TEST(ConfigTest, MissingSectionsNamesAndUnknownComponents) {
  auto host = MakeHost();
  auto cfg = ParseConfig("optimizer { }\n", "run.pbtxt");
  ASSERT_TRUE(cfg.ok());
  Status no_name = ValidateComponents(*cfg, host->registry());
  EXPECT_EQ(no_name.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(no_name.message().find("missing required field 'name'"), std::string::npos) << no_name;
  EXPECT_NE(no_name.message().find("registered: sync"), std::string::npos) << no_name;

  Status missing = ValidateComponents(*cfg, host->registry(), {"model"});
  EXPECT_NE(missing.message().find("missing required section 'model'"), std::string::npos)
      << missing;

  auto unknown = ParseConfig("transport {\n name: \"carrier_pigeon\"\n}\n", "run.pbtxt");
  ASSERT_TRUE(unknown.ok());
  Status u = ValidateComponents(*unknown, host->registry());
  EXPECT_EQ(u.code(), StatusCode::kNotFound);
  EXPECT_NE(u.message().find("run.pbtxt:2"), std::string::npos) << u;
  EXPECT_NE(u.message().find("no transport named 'carrier_pigeon'"), std::string::npos) << u;
}

// A transport section may set only the timeouts of the transport the host chooses
// (`--set transport.timeout_seconds=60` under reel launch); options need a name to belong to.
TEST(ConfigTest, ATransportSectionWithoutANameSetsOnlyTimeouts) {
  auto host = MakeHost();
  auto timeouts = ParseConfig("transport { connect_timeout_seconds: 10 }\n", "run.pbtxt");
  ASSERT_TRUE(timeouts.ok());
  EXPECT_TRUE(ValidateComponents(*timeouts, host->registry()).ok());
  auto options =
      ParseConfig("transport {\n options { key: \"secret\" value: \"x\" }\n}\n", "run.pbtxt");
  ASSERT_TRUE(options.ok());
  Status s = ValidateComponents(*options, host->registry());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("run.pbtxt:1"), std::string::npos) << s;
  EXPECT_NE(s.message().find("has options but no 'name'"), std::string::npos) << s;
}

TEST(ConfigTest, RoundTripsThroughText) {
  auto cfg = ParseConfig(kConfig, "run.pbtxt");
  ASSERT_TRUE(cfg.ok());
  auto again = ParseConfig(ConfigToText(cfg->config), "copy");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(ConfigToText(again->config), ConfigToText(cfg->config));
}

TEST(ConfigTest, AMissingFileIsNotFound) {
  auto host = MakeHost();
  auto cfg = LoadConfigFile(host->storage(), "/no/such/run.pbtxt");
  EXPECT_EQ(cfg.status().code(), StatusCode::kNotFound);
  EXPECT_NE(cfg.status().message().find("/no/such/run.pbtxt"), std::string::npos);
}

}  // namespace
}  // namespace reel::core
