// Machine profiles: what is written is read back, and a profile that is not this format is
// refused saying why.
#include "plan/machine_profile.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace reel::core::plan {
namespace {

using ::testing::HasSubstr;

MachineProfile Sample() {
  MachineProfile p;
  p.host = "node-a";
  p.measured = "2026-12-03T20:00:00Z";
  p.reel_version = "0.9.0";
  p.node.cores = 2;
  p.node.decode_bytes_per_core = 1.25e9;
  p.node.decode_video_bytes_per_core = 0.5e9;
  p.node.disk_read_bytes = 3e9;
  p.node.disk_write_bytes = 1e9;
  p.node.reduce_bytes = 2.5e9;
  p.node.transfer_bytes = 4e9;
  p.node.message_latency_s = 31e-6;
  p.node.apply_params_per_core = 4e8;
  p.node.memory_bytes = 9.5e9;
  p.Put({.name = "bilstm_video",
         .options = "hidden=256",
         .batch = 32,
         .classes = 3862,
         .frames = 300,
         .params = 6480390,
         .step_examples_per_core = 12.5,
         .forward_examples_per_core = 40.25,
         .startup_s = 0.75,
         .fill_s_per_record = 0.00025,
         .backward_fraction = 0.625,
         .update_fraction = 0.125});
  p.Put({.name = "moe",
         .options = "",
         .batch = 64,
         .classes = 3862,
         .frames = 1,
         .params = 15800000,
         .step_examples_per_core = 4000,
         .forward_examples_per_core = 9000});
  return p;
}

TEST(MachineProfileTest, WhatIsWrittenIsReadBack) {
  const MachineProfile p = Sample();
  const std::string text = FormatProfile(p);
  Result<MachineProfile> back = ParseProfile(text, "p.txt");
  ASSERT_TRUE(back.ok()) << back.status() << "\n" << text;
  EXPECT_EQ(back->host, "node-a");
  EXPECT_EQ(back->measured, p.measured);
  EXPECT_EQ(back->reel_version, "0.9.0");
  EXPECT_DOUBLE_EQ(back->node.decode_bytes_per_core, 1.25e9);
  EXPECT_DOUBLE_EQ(back->node.message_latency_s, 31e-6);
  EXPECT_DOUBLE_EQ(back->node.apply_params_per_core, 4e8);
  EXPECT_DOUBLE_EQ(back->node.memory_bytes, 9.5e9);
  ASSERT_EQ(back->models.size(), 2u);
  const ModelRates* m = back->Find("bilstm_video", "hidden=256", 32, 3862);
  ASSERT_NE(m, nullptr);
  EXPECT_DOUBLE_EQ(m->params, 6480390);
  EXPECT_DOUBLE_EQ(m->forward_examples_per_core, 40.25);
  EXPECT_EQ(back->Find("bilstm_video", "hidden=256", 64, 3862), nullptr);
  EXPECT_EQ(FormatProfile(*back), text);
  const Rates r = RatesFor(*back, *m);
  EXPECT_DOUBLE_EQ(r.step_examples_per_core, 12.5);
  EXPECT_DOUBLE_EQ(r.frames, 300);
  EXPECT_DOUBLE_EQ(r.startup_seconds, 0.75);
  EXPECT_DOUBLE_EQ(r.fill_seconds_per_record, 0.00025);
  EXPECT_DOUBLE_EQ(r.backward_fraction, 0.625);
  EXPECT_DOUBLE_EQ(r.update_fraction, 0.125);
  // moe's line was put without a split: none is written, and none is read back.
  EXPECT_DOUBLE_EQ(RatesFor(*back, *back->Find("moe", "", 64, 3862)).backward_fraction, -1);
  EXPECT_DOUBLE_EQ(r.reduce_bytes, 2.5e9);
  EXPECT_DOUBLE_EQ(r.decode_bytes_per_core, 1.25e9);  // frame level
  EXPECT_DOUBLE_EQ(RatesFor(*back, *back->Find("moe", "", 64, 3862)).decode_bytes_per_core, 0.5e9);
}

TEST(MachineProfileTest, PutReplacesTheSameShape) {
  MachineProfile p = Sample();
  p.Put({.name = "moe",
         .options = "",
         .batch = 64,
         .classes = 3862,
         .frames = 1,
         .params = 15800000,
         .step_examples_per_core = 5000,
         .forward_examples_per_core = 1});
  ASSERT_EQ(p.models.size(), 2u);
  EXPECT_DOUBLE_EQ(p.Find("moe", "", 64, 3862)->step_examples_per_core, 5000);
}

TEST(MachineProfileTest, AModelLineWithoutStartupPlansWithNone) {
  // Profiles written before startup_s was measured: the key is optional, and 0.
  Result<MachineProfile> p = ParseProfile(
      "reel_machine_profile 1\nmodel moe batch=64 classes=2 step_examples_per_core=10\n", "p.txt");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(RatesFor(*p, p->models[0]).startup_seconds, 0);
  EXPECT_DOUBLE_EQ(RatesFor(*p, p->models[0]).fill_seconds_per_record, 0);
  // Nor the step's split or the copy rate: unmeasured (-1, 0), which the plan names where it
  // needs them (capacity_model_test.cc).
  EXPECT_DOUBLE_EQ(RatesFor(*p, p->models[0]).backward_fraction, -1);
  EXPECT_DOUBLE_EQ(RatesFor(*p, p->models[0]).update_fraction, -1);
  EXPECT_DOUBLE_EQ(p->node.memory_bytes, 0);
}

TEST(MachineProfileTest, AnotherFormatVersionIsRefusedSayingWhatToDo) {
  std::string text = FormatProfile(Sample());
  text.replace(text.find("reel_machine_profile 1"), 22, "reel_machine_profile 2");
  text += "gpu_flops 1e15\n";  // a newer format's key: the version is what is reported
  Result<MachineProfile> p = ParseProfile(text, "old.txt");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr("old.txt"));
  EXPECT_THAT(p.status().message(), HasSubstr("format version 2"));
  EXPECT_THAT(p.status().message(), HasSubstr("reel plan --measure"));
}

TEST(MachineProfileTest, MalformedProfilesAreRefusedNamingTheLine) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"cores 2\n", "not a reel machine profile"},
      {"reel_machine_profile 1\ncores two\n", "p.txt:2"},
      {"reel_machine_profile 1\nwarp_factor 9\n", "unknown key 'warp_factor'"},
      {"reel_machine_profile 1\ncores 2 3\n", "expected 'cores VALUE'"},
      {"reel_machine_profile 1\nmodel moe batch=64\n", "needs batch, classes"},
      {"reel_machine_profile 1\nmodel moe batch=64 classes=2 step_examples_per_core=1 color=red\n",
       "unknown model key 'color'"},
      {"reel_machine_profile 1\nmodel moe batch=64 classes=2 step_examples_per_core=1 "
       "backward_fraction=0.5\n",
       "backward_fraction and update_fraction together"},
      {"reel_machine_profile 1\nmodel moe batch=64 classes=2 step_examples_per_core=1 "
       "backward_fraction=0.7 update_fraction=0.4\n",
       "at most 1"},
  };
  for (const auto& [text, says] : bad) {
    Result<MachineProfile> p = ParseProfile(text, "p.txt");
    ASSERT_FALSE(p.ok()) << text;
    EXPECT_THAT(p.status().message(), HasSubstr(says)) << text;
  }
}

}  // namespace
}  // namespace reel::core::plan
