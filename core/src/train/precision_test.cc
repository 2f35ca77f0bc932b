// trainer.precision resolved for a CPU (train/precision.h): every CPU class, every word, and
// oneDNN's DNNL_MAX_CPU_ISA cap simulating a CPU without bf16.
#include "train/precision.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

namespace reel::core {
namespace {

using ::testing::HasSubstr;

CpuBf16 Cpu(bool avx512_bf16, bool amx, bool amd) {
  return CpuBf16{avx512_bf16, amx, amd,
                 amd ? "AMD family 25 model 17" : "Intel family 6 model 207"};
}

TEST(PrecisionTest, Fp32AndUnsetAreFp32Everywhere) {
  for (const CpuBf16& cpu :
       {Cpu(false, false, false), Cpu(true, false, true), Cpu(true, true, false)})
    for (const std::string word : {"", "fp32"}) {
      Result<PrecisionChoice> got = ResolvePrecision(word, cpu);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(got->precision, Precision::kFp32);
      EXPECT_EQ(got->why, "");
    }
}

TEST(PrecisionTest, Bf16RunsWhereTheCpuHasKernelsAndIsRefusedElsewhere) {
  for (const CpuBf16& cpu :
       {Cpu(true, false, false), Cpu(true, false, true), Cpu(true, true, false)}) {
    Result<PrecisionChoice> got = ResolvePrecision("bf16", cpu);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->precision, Precision::kBf16);
  }
  Result<PrecisionChoice> none = ResolvePrecision("bf16", Cpu(false, false, true));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(none.status().message(), HasSubstr("trainer.precision"));
  EXPECT_THAT(none.status().message(), HasSubstr("AMD family 25 model 17"));
  EXPECT_THAT(none.status().message(), HasSubstr("\"auto\""));
}

// auto takes bf16 only where it beats fp32: AMX, or AMD's AVX-512 BF16; Intel's AVX-512 BF16
// without AMX stays fp32, and the reason is said.
TEST(PrecisionTest, AutoChoosesBf16OnlyWhereItIsFaster) {
  struct Case {
    CpuBf16 cpu;
    Precision want;
    std::string why;
  };
  for (const Case& c : {Case{Cpu(true, true, false), Precision::kBf16, "has AMX"},
                        Case{Cpu(true, false, true), Precision::kBf16, "has AVX-512 BF16"},
                        Case{Cpu(true, false, false), Precision::kFp32, "no AMX"},
                        Case{Cpu(false, false, false), Precision::kFp32, "no AVX-512 BF16"},
                        Case{Cpu(false, false, true), Precision::kFp32, "no AVX-512 BF16"}}) {
    Result<PrecisionChoice> got = ResolvePrecision("auto", c.cpu);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->precision, c.want) << c.cpu.name << " " << c.why;
    EXPECT_THAT(got->why, HasSubstr(c.why));
    EXPECT_THAT(got->why, HasSubstr(PrecisionName(c.want)));
  }
}

TEST(PrecisionTest, AnotherWordIsRefusedNamingTheChoices) {
  for (const std::string word : {"fp16", "BF16", "float32", " auto"}) {
    Result<PrecisionChoice> got = ResolvePrecision(word, Cpu(true, true, true));
    ASSERT_FALSE(got.ok()) << word;
    EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(got.status().message(), HasSubstr("\"fp32\", \"bf16\" or \"auto\""));
    EXPECT_THAT(got.status().message(), HasSubstr("\"" + word + "\""));
  }
}

// oneDNN's DNNL_MAX_CPU_ISA caps what the instructions say (any case); unset or ALL caps nothing.
TEST(PrecisionTest, OneDnnsIsaCapHidesBf16) {
  auto with = [](const char* value) {
    return DetectCpuBf16([value](const char* name) -> const char* {
      return std::string(name) == "DNNL_MAX_CPU_ISA" ? value : nullptr;
    });
  };
  const CpuBf16 real = with(nullptr), all = with("ALL");
  EXPECT_EQ(all.avx512_bf16, real.avx512_bf16);
  EXPECT_EQ(all.amx_bf16, real.amx_bf16);
  for (const char* cap : {"AVX512_CORE", "avx2", "AVX512_CORE_VNNI"}) {
    const CpuBf16 capped = with(cap);
    EXPECT_FALSE(capped.avx512_bf16) << cap;
    EXPECT_FALSE(capped.amx_bf16) << cap;
    EXPECT_THAT(capped.name, HasSubstr(cap));
    EXPECT_FALSE(ResolvePrecision("bf16", capped).ok()) << cap;
  }
  const CpuBf16 bf16_only = with("avx512_core_bf16");
  EXPECT_EQ(bf16_only.avx512_bf16, real.avx512_bf16);
  EXPECT_FALSE(bf16_only.amx_bf16);
  EXPECT_EQ(with("AVX512_CORE_AMX").amx_bf16, real.amx_bf16);
}

}  // namespace
}  // namespace reel::core
