// Unit tests of the header-only SDK pieces the core relies on: Status/Result, Options, ParamArena,
// Batch validation, the host's cores.
#include <gtest/gtest.h>
#include <sched.h>

#include <thread>

#include "reel/batch.h"
#include "reel/host_cores.h"
#include "reel/options.h"
#include "reel/param_arena.h"
#include "reel/status.h"

namespace reel {
namespace {

Result<int> Half(int x) {
  if (x % 2) return InvalidArgumentError("odd: " + std::to_string(x));
  return x / 2;
}

Status Quarter(int x, int* out) {
  REEL_ASSIGN_OR_RETURN(int h, Half(x));
  REEL_ASSIGN_OR_RETURN(*out, Half(h));
  return Status::Ok();
}

TEST(StatusTest, CodesMessagesAndPropagation) {
  EXPECT_TRUE(Status().ok());
  EXPECT_EQ(Status().ToString(), "OK");
  Status s = DataLossError("f.tfrecord: offset 12: data CRC mismatch");
  EXPECT_EQ(s.ToString(), "DATA_LOSS: f.tfrecord: offset 12: data CRC mismatch");
  EXPECT_EQ(s.WithContext("epoch 2").message(),
            "epoch 2: f.tfrecord: offset 12: data CRC mismatch");
  int q = 0;
  EXPECT_TRUE(Quarter(8, &q).ok());
  EXPECT_EQ(q, 2);
  Status odd = Quarter(6, &q);
  EXPECT_EQ(odd.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(odd.message(), "odd: 3");
}

TEST(OptionsTest, DefaultsTypesAndErrors) {
  OptionSchema schema{IntOption("hidden", 256, "units"), FloatOption("lr", 1e-3, "rate"),
                      BoolOption("fast", false, "go fast"),
                      StringListOption("files", "", "patterns"),
                      Required(StringOption("name", "", "who"))};
  auto o = ParseOptions(schema, {{"name", "x"}, {"files", "a/*.tfrecord,b/*"}, {"fast", "true"}});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->GetInt("hidden"), 256);
  EXPECT_DOUBLE_EQ(o->GetFloat("lr"), 1e-3);
  EXPECT_TRUE(o->GetBool("fast"));
  EXPECT_EQ(o->GetStringList("files"), (std::vector<std::string>{"a/*.tfrecord", "b/*"}));
  EXPECT_EQ(o->texts().at("lr"), "0.001");

  auto missing = ParseOptions(schema, {}, "model 'm'");
  EXPECT_EQ(missing.status().message(), "model 'm': missing required option 'name' (who)");
  auto bad_int = ParseOptions(schema, {{"name", "x"}, {"hidden", "12x"}});
  EXPECT_EQ(bad_int.status().message(), "option 'hidden': '12x' is not an int");
  auto bad_bool = ParseOptions(schema, {{"name", "x"}, {"fast", "maybe"}});
  EXPECT_EQ(bad_bool.status().code(), StatusCode::kInvalidArgument);
  auto unknown = ParseOptions(schema, {{"name", "x"}, {"hiden", "1"}});
  EXPECT_NE(unknown.status().message().find(
                "unknown option 'hiden' (known: hidden, lr, fast, files, name)"),
            std::string::npos)
      << unknown.status();
}

TEST(ParamArenaTest, BlocksAreContiguousAlignedAndNamed) {
  ParamArena arena;
  auto w = arena.Declare("w", {3, 5});
  auto b = arena.Declare("b", {5});
  ASSERT_TRUE(w.ok() && b.ok());
  EXPECT_EQ(arena.Declare("w", {1}).status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(arena.Declare("z", {0}).status().code(), StatusCode::kInvalidArgument);
  arena.Finalize();
  EXPECT_EQ(arena.block(*b).offset % 16, 0);
  EXPECT_EQ(arena.block(*b).offset, 16);
  EXPECT_EQ(arena.total_size(), 32);
  arena.values(*b)[4] = 7.0f;
  EXPECT_EQ(arena.values()[16 + 4], 7.0f);
  arena.grads(*w)[0] = 1.0f;
  arena.ZeroGrads();
  EXPECT_EQ(arena.grads()[0], 0.0f);
  EXPECT_EQ(*arena.Find("b"), *b);
  EXPECT_EQ(arena.Find("q").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(arena.Declare("late", {1}).status().code(), StatusCode::kFailedPrecondition);
}

TEST(BatchTest, ValidationNamesTheVideoOrFeature) {
  Batch batch;
  batch.ids = {"v0", "v1"};
  batch.label_offsets = {0, 1, 3};
  batch.label_ids = {2, 0, 1};
  batch.features["rgb"] = Feature{Tensor({2, 3, 4}), {3, 1}};
  EXPECT_TRUE(ValidateBatch(batch, 3).ok());
  EXPECT_EQ(batch.labels(1).size(), 2u);
  Status label = ValidateBatch(batch, 2);
  EXPECT_NE(label.message().find("video 'v0' has label 2"), std::string::npos) << label;
  batch.features["rgb"].lengths[1] = 0;
  Status len = ValidateBatch(batch, 3);
  EXPECT_NE(len.message().find("feature 'rgb' of video 'v1' has length 0"), std::string::npos)
      << len;
  EXPECT_EQ(batch.Find("audio").status().message(), "batch has no feature 'audio' (it has: rgb)");
}

// The cores are those of the affinity mask (taskset, cpusets), within those online.
TEST(HostCoresTest, CoresAreThoseOfTheAffinityMask) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  EXPECT_EQ(CoresAvailable(), CPU_COUNT(&set));
  EXPECT_GE(OnlineCores(), CoresAvailable());
  EXPECT_LE(CoresAvailable(), static_cast<int>(std::thread::hardware_concurrency()));
  // Narrowed to one CPU on a thread of its own (the mask is per thread): 1.
  std::thread([] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
    EXPECT_EQ(CoresAvailable(), 1);
  }).join();
}

}  // namespace
}  // namespace reel
