// ShortGemm, ShortGemmAtB and ShortGemmABt (reel/layers/gemm.h): the AVX-512 kernels of
// short_gemm_avx512.cc on CPUs that run them, split by columns over the OpenMP threads; dnnl_sgemm
// elsewhere.
#include "short_gemm.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <vector>

#include "reel/layers/gemm.h"
#include "reel/layers/vector_isa.h"

namespace reel::layers {
namespace {

std::atomic<bool> force_fallback{false};

bool UseAvx512() {
  static const bool runs = DetectVectorIsa() == VectorIsa::kAvx512 && short_gemm_avx512::Compiled();
  return runs && !force_fallback.load(std::memory_order_relaxed);
}

// Products under ~1 MFLOP stay on the calling thread (waking the team costs more than the second
// half saves).
int ThreadsFor(int64_t m, int64_t n, int64_t k) {
  return 2 * m * n * k < (int64_t{1} << 20) ? 1 : omp_get_max_threads();
}

// The columns of an n-column product cut into about kPartsPerThread parts per thread, each a
// whole number of `unit` columns, which the threads take in turn as they finish (dynamic): on a
// shared machine a thread that lost its core for a while no longer holds the other one waiting
// at the end with half the columns (static halves: 20-30% of the head's time spent waiting in
// the profile of the audio step).
constexpr int64_t kPartsPerThread = 8;

int64_t PartColumns(int64_t n, int64_t unit, int threads) {
  const int64_t parts = kPartsPerThread * threads;
  return std::max(unit, ((n + parts - 1) / parts + unit - 1) / unit * unit);
}

// Runs kernel(args, n0, n1) over the columns in parts of whole 48-column panels.
void ByColumns(const ShortGemmArgs& args, void (*kernel)(const ShortGemmArgs&, int64_t, int64_t)) {
  const int threads = ThreadsFor(args.rows, args.n, args.depth);
  if (threads <= 1) return kernel(args, 0, args.n);
  const int64_t per = PartColumns(args.n, 48, threads);
  const int64_t parts = (args.n + per - 1) / per;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (int64_t part = 0; part < parts; ++part)
    kernel(args, part * per, std::min(args.n, (part + 1) * per));
}

// An empty sum (k = 0): C = 0, or unchanged when accumulating (dnnl_sgemm leaves C alone then,
// whatever beta).
bool EmptyProduct(int64_t m, int64_t n, int64_t k, bool accumulate, float* c, int64_t ldc) {
  if (k > 0) return false;
  if (!accumulate)
    for (int64_t i = 0; i < m; ++i) std::fill_n(c + i * ldc, n, 0.0f);
  return true;
}

void ColumnSums(int64_t rows, int64_t n, const float* b, int64_t ldb, float* sums) {
  std::fill_n(sums, n, 0.0f);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < n; ++j) sums[j] += b[i * ldb + j];
}

// C[m, n] (+)= A B^T through CT = B A^T [n, mp], which both routes compute as B is stored:
// dnnl_sgemm reads B^T slowly at a short m (1.9 against 1.3 ms for a 256 x 19310 B at m = 32),
// and the AVX-512 kernel needs A^T. Scratch per calling thread, kept between calls.
void ABtThroughTranspose(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                         const float* b, int64_t ldb, bool accumulate, float* c, int64_t ldc) {
  const bool own = UseAvx512() && m <= 64;
  const int64_t mp = own ? (m + 15) / 16 * 16 : m;
  thread_local std::vector<float> at_buf, ct_buf;
  if (own) at_buf.resize(static_cast<size_t>(k * mp));
  ct_buf.resize(static_cast<size_t>(n * mp));
  float* at = at_buf.data();
  float* ct = ct_buf.data();
  if (!own) Gemm(false, true, n, m, k, 1.0f, b, ldb, a, lda, 0.0f, ct, mp);
  const int threads = ThreadsFor(m, n, k);
#pragma omp parallel num_threads(threads)
  {
    if (own) {
      // A^T, zero-padded to mp columns, each thread a range of its rows; then the product.
#pragma omp for schedule(static)
      for (int64_t p0 = 0; p0 < k; p0 += 64)
        short_gemm_avx512::TransposeShort(a, lda, m, mp, p0, std::min(k, p0 + 64), at);
    }
    const int64_t per = PartColumns(n, 12, omp_get_num_threads());
#pragma omp for schedule(dynamic, 1)
    for (int64_t n0 = 0; n0 < n; n0 += per) {
      const int64_t n1 = std::min(n, n0 + per);
      if (own) short_gemm_avx512::ProductBAt(b, ldb, k, at, mp, ct, n0, n1);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = n0; j < n1; ++j) {
          const float v = ct[j * mp + i];
          c[i * ldc + j] = accumulate ? c[i * ldc + j] + v : v;
        }
    }
  }
}

// C's rows (+)= bias.
void AddBiasRows(int64_t m, int64_t n, const float* bias, bool accumulate, float* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = (accumulate ? c[i * ldc + j] : 0.0f) + bias[j];
}

}  // namespace

void ForceShortGemmFallbackForTesting(bool force) { force_fallback = force; }

void ShortGemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
               int64_t ldb, bool accumulate, float* c, int64_t ldc, const float* bias) {
  if (m == 0 || n == 0) return;
  if (bias != nullptr && (k == 0 || !UseAvx512())) {
    AddBiasRows(m, n, bias, accumulate, c, ldc);
    accumulate = true;
  }
  if (EmptyProduct(m, n, k, accumulate, c, ldc)) return;
  if (!UseAvx512())
    return Gemm(false, false, m, n, k, 1.0f, a, lda, b, ldb, accumulate ? 1.0f : 0.0f, c, ldc);
  ShortGemmArgs args{m, n, k, a, lda, b, ldb, c, ldc, accumulate};
  args.bias = bias;
  ByColumns(args, short_gemm_avx512::Product);
}

void ShortGemmAtB(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                  int64_t ldb, bool accumulate, float* c, int64_t ldc, float* b_col_sums) {
  if (n == 0) return;
  if (m == 0 || k == 0 || !UseAvx512()) {
    if (!EmptyProduct(m, n, k, accumulate, c, ldc) && m > 0)
      Gemm(true, false, m, n, k, 1.0f, a, lda, b, ldb, accumulate ? 1.0f : 0.0f, c, ldc);
    if (b_col_sums != nullptr) ColumnSums(k, n, b, ldb, b_col_sums);
    return;
  }
  ByColumns({m, n, k, a, lda, b, ldb, c, ldc, accumulate, b_col_sums},
            short_gemm_avx512::ProductAtB);
}

void ShortGemmABt(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                  int64_t ldb, bool accumulate, float* c, int64_t ldc) {
  if (m == 0 || n == 0 || EmptyProduct(m, n, k, accumulate, c, ldc)) return;
  if (m > 64)
    return Gemm(false, true, m, n, k, 1.0f, a, lda, b, ldb, accumulate ? 1.0f : 0.0f, c, ldc);
  ABtThroughTranspose(m, n, k, a, lda, b, ldb, accumulate, c, ldc);
}

}  // namespace reel::layers
