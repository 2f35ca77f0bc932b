// What this CPU offers for bfloat16 arithmetic, read with CPUID and checked against what the
// operating system saves (XCR0), for the host's precision choice and the models' bf16 kernels
// (trainer.precision, docs/training.md). GCC's and Clang's __builtin_cpu_supports do not agree on
// these names (Clang 14 has no "amx-bf16"), so both read the bits themselves here.
//
// Thread-safety: any thread.
#ifndef REEL_CPU_BF16_H_
#define REEL_CPU_BF16_H_

#include <cpuid.h>

#include <cstdint>

namespace reel {

// The answers, each true only where both the CPU has the instructions and the OS saves their state.
struct CpuBf16Features {
  bool avx512_bf16 = false;  // vdpbf16ps and vcvtne2ps2bf16 (AVX-512 state enabled by the OS)
  bool amx_bf16 = false;     // AMX tiles with bf16 (tile state enabled by the OS)
  bool amd = false;          // the vendor is AuthenticAMD
  unsigned family = 0, model = 0;
};

// Reads them on the calling thread's CPU (all CPUs of a host are assumed alike).
inline CpuBf16Features ReadCpuBf16Features() {
  CpuBf16Features f;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return f;
  const unsigned max_leaf = eax;
  f.amd = ebx == 0x68747541u && edx == 0x69746e65u && ecx == 0x444d4163u;  // "AuthenticAMD"
  __get_cpuid(1, &eax, &ebx, &ecx, &edx);
  f.family = (eax >> 8) & 0xfu;
  f.model = (eax >> 4) & 0xfu;
  if (f.family == 0xfu) f.family += (eax >> 20) & 0xffu;
  if (f.family >= 6) f.model |= ((eax >> 16) & 0xfu) << 4;
  const bool osxsave = (ecx >> 27) & 1u;
  if (!osxsave || max_leaf < 7) return f;
  uint32_t xcr0_lo = 0, xcr0_hi = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  const uint64_t xcr0 = (uint64_t{xcr0_hi} << 32) | xcr0_lo;
  const bool avx512_state = (xcr0 & 0xe6u) == 0xe6u;      // SSE, AVX, opmask, ZMM upper halves
  const bool tile_state = (xcr0 & 0x60000u) == 0x60000u;  // XTILECFG, XTILEDATA
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  const bool amx_bf16 = (edx >> 22) & 1u;
  const unsigned leaf7_subleaves = eax;
  bool avx512_bf16 = false;
  if (leaf7_subleaves >= 1) {
    __cpuid_count(7, 1, eax, ebx, ecx, edx);
    avx512_bf16 = (eax >> 5) & 1u;
  }
  f.avx512_bf16 = avx512_bf16 && avx512_state;
  f.amx_bf16 = amx_bf16 && tile_state;
  return f;
}

}  // namespace reel

#endif  // REEL_CPU_BF16_H_
