// trainer.precision for this CPU (see precision.h).
#include "train/precision.h"

#include <cpuid.h>

#include <algorithm>
#include <cctype>

namespace reel::core {
namespace {

std::string Upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return s;
}

std::string CpuName(bool amd) {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return amd ? "AMD" : "Intel";
  unsigned family = (eax >> 8) & 0xf, model = (eax >> 4) & 0xf;
  if (family == 0xf) family += (eax >> 20) & 0xff;
  if (family >= 6) model |= ((eax >> 16) & 0xf) << 4;
  return std::string(amd ? "AMD" : "Intel") + " family " + std::to_string(family) + " model " +
         std::to_string(model);
}

}  // namespace

CpuBf16 DetectCpuBf16(const GetEnv& env) {
  CpuBf16 cpu;
  __builtin_cpu_init();
  cpu.amd = __builtin_cpu_is("amd");
  cpu.avx512_bf16 = __builtin_cpu_supports("avx512bf16");
  cpu.amx_bf16 = __builtin_cpu_supports("amx-bf16");
  cpu.name = CpuName(cpu.amd);
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
