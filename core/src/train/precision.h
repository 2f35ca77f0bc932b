// trainer.precision resolved for this CPU (docs/training.md, "Precision"): which arithmetic the
// model's large products use, and a sentence saying why when the config left the choice open.
//
// bf16 needs oneDNN's bf16 kernels, which it runs on CPUs with AVX-512 BF16 (or AMX); elsewhere
// it only emulates them, slower than fp32, so `bf16` is refused there. `auto` picks bf16 only
// where it beats fp32: with AMX, or on AMD's AVX-512 BF16 (Zen 4 and later). Intel's AVX-512
// BF16 without AMX executes a bf16 dot product at half the rate of its two fp32 FMA units, and
// there oneDNN's bf16 matmul runs at about half its fp32 rate at the BiLSTM's shapes
// (bench/RESULTS.md, "bf16 against fp32"), so `auto` stays fp32. docs/training.md, "Precision".
#ifndef REEL_CORE_SRC_TRAIN_PRECISION_H_
#define REEL_CORE_SRC_TRAIN_PRECISION_H_

#include <string>

#include "reel/core/rank_environment.h"
#include "reel/model.h"
#include "reel/status.h"

namespace reel::core {

// What the CPU offers oneDNN for bf16, as oneDNN sees it: its DNNL_MAX_CPU_ISA variable (e.g.
// AVX512_CORE) caps what the instructions say, so that variable also simulates an older CPU.
struct CpuBf16 {
  bool avx512_bf16 = false;  // vdpbf16ps: oneDNN's bf16 kernels run natively
  bool amx_bf16 = false;     // AMX tiles with bf16
  bool amd = false;          // the vendor, which decides whether AVX-512 BF16 beats fp32
  std::string name;          // e.g. "AMD family 25 model 17" for the messages
};
CpuBf16 DetectCpuBf16(const GetEnv& env);

struct PrecisionChoice {
  Precision precision = Precision::kFp32;
  std::string why;  // for `auto` (and empty for an explicit value)
};

// `requested` is the config's value ("" means fp32). InvalidArgument for any other word, and for
// "bf16" where the CPU has no bf16 kernels, naming the field, the CPU and the way out.
Result<PrecisionChoice> ResolvePrecision(const std::string& requested, const CpuBf16& cpu);

const char* PrecisionName(Precision p);

}  // namespace reel::core

#endif  // REEL_CORE_SRC_TRAIN_PRECISION_H_
