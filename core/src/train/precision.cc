// trainer.precision for this CPU (see precision.h).
#include "train/precision.h"

#include <algorithm>
#include <cctype>

#include "reel/cpu_bf16.h"

namespace reel::core {
namespace {

std::string Upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return s;
}

}  // namespace

CpuBf16 DetectCpuBf16(const GetEnv& env) {
  const CpuBf16Features f = ReadCpuBf16Features();
  CpuBf16 cpu;
  cpu.amd = f.amd;
  cpu.avx512_bf16 = f.avx512_bf16;
  cpu.amx_bf16 = f.amx_bf16;
  cpu.name = std::string(f.amd ? "AMD" : "Intel") + " family " + std::to_string(f.family) +
             " model " + std::to_string(f.model);
  // oneDNN's own cap (its documentation: "CPU Dispatcher Control"); unset or ALL caps nothing.
  const char* cap = env("DNNL_MAX_CPU_ISA");
  const std::string isa = cap == nullptr ? "" : Upper(cap);
  if (!isa.empty() && isa != "ALL") {
    const bool amx = isa.find("AMX") != std::string::npos;
    cpu.amx_bf16 = cpu.amx_bf16 && amx;
    cpu.avx512_bf16 = cpu.avx512_bf16 && (amx || isa == "AVX512_CORE_BF16");
    cpu.name += " (DNNL_MAX_CPU_ISA=" + std::string(cap) + ")";
  }
  return cpu;
}

const char* PrecisionName(Precision p) { return p == Precision::kBf16 ? "bf16" : "fp32"; }

Result<PrecisionChoice> ResolvePrecision(const std::string& requested, const CpuBf16& cpu) {
  const bool kernels = cpu.avx512_bf16 || cpu.amx_bf16;
  if (requested.empty() || requested == "fp32") return PrecisionChoice{};
  if (requested == "bf16") {
    if (!kernels)
      return InvalidArgumentError(
          "trainer.precision: \"bf16\" needs a CPU with AVX-512 BF16 or AMX, and this " + cpu.name +
          " has neither, so oneDNN could only emulate bf16, slower than fp32; use \"fp32\", or "
          "\"auto\" to take bf16 wherever it is faster");
    return PrecisionChoice{Precision::kBf16, ""};
  }
  if (requested == "auto") {
    if (cpu.amx_bf16)
      return PrecisionChoice{Precision::kBf16, "precision bf16 (auto: " + cpu.name + " has AMX)"};
    if (cpu.avx512_bf16 && cpu.amd)
      return PrecisionChoice{Precision::kBf16,
                             "precision bf16 (auto: " + cpu.name + " has AVX-512 BF16)"};
    if (cpu.avx512_bf16)
      return PrecisionChoice{Precision::kFp32,
                             "precision fp32 (auto: " + cpu.name +
                                 " has AVX-512 BF16 but no AMX, where bf16 products run at about "
                                 "half of fp32's rate; trainer.precision: \"bf16\" forces it)"};
    return PrecisionChoice{Precision::kFp32,
                           "precision fp32 (auto: " + cpu.name + " has no AVX-512 BF16 or AMX)"};
  }
  return InvalidArgumentError("trainer.precision: expected \"fp32\", \"bf16\" or \"auto\", got \"" +
                              requested + "\"");
}

}  // namespace reel::core
