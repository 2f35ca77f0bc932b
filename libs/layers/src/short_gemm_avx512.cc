// ShortGemm's AVX-512 kernels (see short_gemm.h), compiled with the AVX-512 flags of
// cmake/ReelVectorIsa.cmake. A tile of C is up to kTileRows rows by kTileCols columns (three
// 16-float vectors): 24 accumulators, three vector loads of B and one broadcast of A per row per
// step, so the loads stay well below the two FMAs a cycle. Column tails use masked loads and
// stores, which never touch memory past the masked lanes.
#include "short_gemm.h"

#if defined(__AVX512F__)
#include <immintrin.h>

#include <algorithm>

namespace reel::layers::short_gemm_avx512 {
namespace {

// Under AddressSanitizer (the ASan + UBSan phase of scripts/test.sh) every load and pointer step
// in a tile was checked, which made the kernels ~10x slower (30 against 2.8 ms for the MoE
// head's 32 x 256 x 11586 product, one thread) and every test through a wide head with them. The
// tiles run unchecked there; each entry point instead reads, instrumented, the first and last
// element of every row of every matrix it reads or writes, so a row outside its buffer is still
// reported, once per call (a row's elements in between lie in the same buffer).
#if defined(__SANITIZE_ADDRESS__)
#define REEL_UNCHECKED_TILE __attribute__((no_sanitize("address", "undefined")))
void CheckRows(const float* p, int64_t rows, int64_t cols, int64_t ld) {
  if (rows <= 0 || cols <= 0) return;
  volatile float sink = 0.0f;
  for (int64_t r = 0; r < rows; ++r) sink = sink + p[r * ld] + p[r * ld + cols - 1];
}
#else
#define REEL_UNCHECKED_TILE
inline void CheckRows(const float*, int64_t, int64_t, int64_t) {}
#endif

constexpr int kTileRows = 8;
constexpr int64_t kTileCols = 48;

struct ColumnMasks {
  __mmask16 v[3];
};

// Masks for the first `cols` columns of a tile (1..kTileCols).
ColumnMasks MasksFor(int64_t cols) {
  ColumnMasks m;
  for (int v = 0; v < 3; ++v) {
    const int64_t left = cols - 16 * v;
    m.v[v] =
        left >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>(left <= 0 ? 0u : (1u << left) - 1u);
  }
  return m;
}

// A vector of B or C at p: masked (the lanes past a tail tile's columns are neither read nor
// written) unless kFull, where every lane is in. Every tile but the last of a column range is a
// whole 48 columns wide and takes plain loads and stores: on an AMD EPYC (Zen 5) VM the masked
// ones made the MoE head's weight gradient (32 x 256 x 19310) 1.05-1.44x dnnl_sgemm's time,
// plain ones 1.08-1.12x (the forward 1.03-1.10x -> 0.93-1.06x; alternated in one process).
template <bool kFull>
inline __m512 LoadVector(const float* p, __mmask16 m) {
  if constexpr (kFull) return _mm512_loadu_ps(p);
  return _mm512_maskz_loadu_ps(m, p);
}

// Writes (or adds) one accumulator to C under its column mask.
template <bool kFull>
inline void StoreVector(__m512 x, float* p, __mmask16 m, bool accumulate) {
  if (accumulate) x = _mm512_add_ps(x, LoadVector<kFull>(p, m));
  if constexpr (kFull)
    _mm512_storeu_ps(p, x);
  else
    _mm512_mask_storeu_ps(p, m, x);
}

// One tile's operands: C [kRows, <= 48] (+)= op(A) [kRows, depth] B [depth, <= 48], where A is
// read as a[i * lda + p], or with kTransA (A^T B) as a[p * lda + i].
struct TileArgs {
  int64_t depth;
  const float* a;
  int64_t lda;
  const float* b;
  int64_t ldb;
  float* c;
  int64_t ldc;
  ColumnMasks m;
  bool accumulate;
  const float* bias = nullptr;  // a row added to each of the tile's rows as it is stored
  // With kPrefetch: the same depth rows of the next panel, whose cache lines first_line,
  // first_line + line_step, ... (of the four that 48 floats can span) this tile asks for, so the
  // row groups of a panel share the prefetching of the next one.
  const float* next = nullptr;
  int first_line = 0, line_step = 1;
  float* sums = nullptr;  // with kSums: the panel's column sums of B (a layer's bias gradient)
};

template <int kRows, bool kTransA, bool kPrefetch, bool kSums, bool kFull>
REEL_UNCHECKED_TILE void Tile(const TileArgs& t) {
  __m512 acc[kRows][3];
  __m512 sum0 = _mm512_setzero_ps(), sum1 = sum0, sum2 = sum0;
#pragma GCC unroll 8
  for (int i = 0; i < kRows; ++i)
#pragma GCC unroll 3
    for (int v = 0; v < 3; ++v) acc[i][v] = _mm512_setzero_ps();
  for (int64_t p = 0; p < t.depth; ++p) {
    const float* row = t.b + p * t.ldb;
    const __m512 b0 = LoadVector<kFull>(row, t.m.v[0]);
    const __m512 b1 = LoadVector<kFull>(row + 16, t.m.v[1]);
    const __m512 b2 = LoadVector<kFull>(row + 32, t.m.v[2]);
    if constexpr (kPrefetch) {
      // Into the second-level cache (the first holds this panel); prefetches never fault.
      const char* q = reinterpret_cast<const char*>(t.next + p * t.ldb);
      for (int l = t.first_line; l < 4; l += t.line_step) _mm_prefetch(q + 64 * l, _MM_HINT_T1);
    }
    if constexpr (kSums) {
      sum0 = _mm512_add_ps(sum0, b0);
      sum1 = _mm512_add_ps(sum1, b1);
      sum2 = _mm512_add_ps(sum2, b2);
    }
#pragma GCC unroll 8
    for (int i = 0; i < kRows; ++i) {
      const __m512 ai = _mm512_set1_ps(kTransA ? t.a[p * t.lda + i] : t.a[i * t.lda + p]);
      acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
      acc[i][2] = _mm512_fmadd_ps(ai, b2, acc[i][2]);
    }
  }
  // Every loop over acc fully unrolled (and stored here, not by a helper taking the array):
  // otherwise GCC keeps acc in memory and stores all 24 vectors at every step.
  if (t.bias != nullptr) {
    const __m512 bias[3] = {LoadVector<kFull>(t.bias, t.m.v[0]),
                            LoadVector<kFull>(t.bias + 16, t.m.v[1]),
                            LoadVector<kFull>(t.bias + 32, t.m.v[2])};
#pragma GCC unroll 8
    for (int i = 0; i < kRows; ++i)
#pragma GCC unroll 3
      for (int v = 0; v < 3; ++v) acc[i][v] = _mm512_add_ps(acc[i][v], bias[v]);
  }
#pragma GCC unroll 8
  for (int i = 0; i < kRows; ++i)
#pragma GCC unroll 3
    for (int v = 0; v < 3; ++v)
      StoreVector<kFull>(acc[i][v], t.c + i * t.ldc + 16 * v, t.m.v[v], t.accumulate);
  if constexpr (kSums) {
    StoreVector<kFull>(sum0, t.sums, t.m.v[0], false);
    StoreVector<kFull>(sum1, t.sums + 16, t.m.v[1], false);
    StoreVector<kFull>(sum2, t.sums + 32, t.m.v[2], false);
  }
}

// Tile with plain loads and stores when the tile is a whole 48 columns wide.
template <int kRows, bool kTransA, bool kPrefetch, bool kSums>
void AnyWidthTile(const TileArgs& t, bool full) {
  if (full)
    Tile<kRows, kTransA, kPrefetch, kSums, true>(t);
  else
    Tile<kRows, kTransA, kPrefetch, kSums, false>(t);
}

// Rows [j0, j0 + kRows) of CT [., mp] = B [., depth] AT [depth, mp], mp = 16 * kVectors; rows
// from `last` on are computed as copies of row last - 1 and not stored (no tail instances).
// kRows broadcasts of B and kVectors loads of AT per step.
template <int kVectors, int kRows>
REEL_UNCHECKED_TILE void TileBAt(int64_t depth, const float* b, int64_t ldb, const float* at,
                                 float* ct, int64_t j0, int64_t last) {
  const float* rows[kRows];
#pragma GCC unroll 12
  for (int r = 0; r < kRows; ++r) rows[r] = b + std::min(j0 + r, last - 1) * ldb;
  __m512 acc[kRows][kVectors];
#pragma GCC unroll 12
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) acc[r][v] = _mm512_setzero_ps();
  constexpr int64_t mp = 16 * kVectors;
  for (int64_t p = 0; p < depth; ++p) {
    __m512 x[kVectors];
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) x[v] = _mm512_loadu_ps(at + p * mp + 16 * v);
#pragma GCC unroll 12
    for (int r = 0; r < kRows; ++r) {
      const __m512 br = _mm512_set1_ps(rows[r][p]);
#pragma GCC unroll 4
      for (int v = 0; v < kVectors; ++v) acc[r][v] = _mm512_fmadd_ps(br, x[v], acc[r][v]);
    }
  }
#pragma GCC unroll 12
  for (int r = 0; r < kRows; ++r)
    if (j0 + r < last)
#pragma GCC unroll 4
      for (int v = 0; v < kVectors; ++v) _mm512_storeu_ps(ct + (j0 + r) * mp + 16 * v, acc[r][v]);
}

template <int kVectors, int kRows>
void RowsBAt(const float* b, int64_t ldb, int64_t depth, const float* at, float* ct, int64_t n0,
             int64_t n1) {
  for (int64_t j = n0; j < n1; j += kRows) TileBAt<kVectors, kRows>(depth, b, ldb, at, ct, j, n1);
}

// Calls f.template operator()<r>() for r = rows (1..kTileRows), so every tile height is compiled
// with its accumulators in registers.
template <typename F>
void WithRows(int rows, F&& f) {
  switch (rows) {
    case 8:
      return f.template operator()<8>();
    case 7:
      return f.template operator()<7>();
    case 6:
      return f.template operator()<6>();
    case 5:
      return f.template operator()<5>();
    case 4:
      return f.template operator()<4>();
    case 3:
      return f.template operator()<3>();
    case 2:
      return f.template operator()<2>();
    default:
      return f.template operator()<1>();
  }
}

}  // namespace

bool Compiled() { return true; }

// Panel by panel (48 columns), and within a panel by chunks of kDepthChunk rows of B, so the
// chunk and A's matching columns stay in the first-level cache for every row group, and C's
// tiles are summed over the chunks in place. B is read from memory once: the row groups of each
// chunk prefetch the next panel's.
constexpr int64_t kDepthChunk = 64;

void Product(const ShortGemmArgs& g, int64_t n0, int64_t n1) {
  CheckRows(g.a, g.rows, g.depth, g.lda);
  CheckRows(g.b + n0, g.depth, n1 - n0, g.ldb);
  CheckRows(g.c + n0, g.rows, n1 - n0, g.ldc);
  if (g.bias != nullptr) CheckRows(g.bias + n0, 1, n1 - n0, 0);
  const int groups = static_cast<int>((g.rows + kTileRows - 1) / kTileRows);
  for (int64_t j = n0; j < n1; j += kTileCols) {
    const bool more = j + kTileCols < n1;
    for (int64_t p0 = 0; p0 < g.depth; p0 += kDepthChunk) {
      TileArgs t{std::min(kDepthChunk, g.depth - p0),
                 nullptr,
                 g.lda,
                 g.b + p0 * g.ldb + j,
                 g.ldb,
                 nullptr,
                 g.ldc,
                 MasksFor(std::min(kTileCols, n1 - j)),
                 g.accumulate || p0 > 0,
                 p0 == 0 && g.bias != nullptr ? g.bias + j : nullptr};
      t.next = t.b + kTileCols;
      t.line_step = groups;
      for (int64_t i = 0; i < g.rows; i += kTileRows) {
        t.a = g.a + i * g.lda + p0;
        t.c = g.c + i * g.ldc + j;
        t.first_line = static_cast<int>(i / kTileRows);
        WithRows(static_cast<int>(std::min<int64_t>(kTileRows, g.rows - i)), [&]<int kRows>() {
          if (more && t.first_line < 4)
            AnyWidthTile<kRows, false, true, false>(t, true);
          else
            AnyWidthTile<kRows, false, false, false>(t, j + kTileCols <= n1);
        });
      }
    }
  }
}

// Row group by row group over a chunk of columns whose B rows fit in the second-level cache, so C
// is written along its rows (streams the hardware prefetchers follow) and B is read from memory
// once per chunk. The first row group also sums B's columns when asked.
void ProductAtB(const ShortGemmArgs& g, int64_t n0, int64_t n1) {
  CheckRows(g.a, g.depth, g.rows, g.lda);
  CheckRows(g.b + n0, g.depth, n1 - n0, g.ldb);
  CheckRows(g.c + n0, g.rows, n1 - n0, g.ldc);
  if (g.b_sums != nullptr) CheckRows(g.b_sums + n0, 1, n1 - n0, 0);
  const int64_t chunk = std::max<int64_t>(
      kTileCols, (int64_t{128} << 10) / std::max<int64_t>(1, g.depth) / kTileCols * kTileCols);
  for (int64_t j0 = n0; j0 < n1; j0 += chunk) {
    const int64_t j1 = std::min(n1, j0 + chunk);
    for (int64_t i = 0; i < g.rows; i += kTileRows) {
      WithRows(static_cast<int>(std::min<int64_t>(kTileRows, g.rows - i)), [&]<int kRows>() {
        for (int64_t j = j0; j < j1; j += kTileCols) {
          TileArgs t{g.depth,     g.a + i,
                     g.lda,       g.b + j,
                     g.ldb,       g.c + i * g.ldc + j,
                     g.ldc,       MasksFor(std::min(kTileCols, j1 - j)),
                     g.accumulate};
          if (i == 0 && g.b_sums != nullptr) {
            t.sums = g.b_sums + j;
            AnyWidthTile<kRows, true, false, true>(t, j + kTileCols <= j1);
          } else {
            AnyWidthTile<kRows, true, false, false>(t, j + kTileCols <= j1);
          }
        }
      });
    }
  }
}

void ProductBAt(const float* b, int64_t ldb, int64_t depth, const float* at, int64_t mp, float* ct,
                int64_t n0, int64_t n1) {
  CheckRows(b + n0 * ldb, n1 - n0, depth, ldb);
  CheckRows(at, depth, mp, mp);
  CheckRows(ct + n0 * mp, n1 - n0, mp, mp);
  switch (mp) {
    case 16:
      return RowsBAt<1, 12>(b, ldb, depth, at, ct, n0, n1);
    case 32:
      return RowsBAt<2, 12>(b, ldb, depth, at, ct, n0, n1);
    case 48:
      return RowsBAt<3, 8>(b, ldb, depth, at, ct, n0, n1);
    default:
      return RowsBAt<4, 6>(b, ldb, depth, at, ct, n0, n1);
  }
}

void TransposeShort(const float* a, int64_t lda, int64_t m, int64_t mp, int64_t p0, int64_t p1,
                    float* at) {
  if (m * lda >= (int64_t{1} << 31)) {  // beyond 32-bit gather offsets (not a short A)
    for (int64_t p = p0; p < p1; ++p)
      for (int64_t i = 0; i < mp; ++i) at[p * mp + i] = i < m ? a[i * lda + p] : 0.0f;
    return;
  }
  // One gather of 16 rows' elements per vector of AT (masked past row m: zeros, no read).
  __m512i rows[4];
  __mmask16 masks[4];
  const __m512i lanes = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const int vectors = static_cast<int>(mp / 16);
  for (int v = 0; v < vectors; ++v) {
    rows[v] = _mm512_mullo_epi32(_mm512_add_epi32(lanes, _mm512_set1_epi32(16 * v)),
                                 _mm512_set1_epi32(static_cast<int>(lda)));
    masks[v] = MasksFor(m - 16 * v).v[0];
  }
  for (int64_t p = p0; p < p1; ++p)
    for (int v = 0; v < vectors; ++v)
      _mm512_storeu_ps(at + p * mp + 16 * v,
                       _mm512_mask_i32gather_ps(_mm512_setzero_ps(), masks[v], rows[v], a + p, 4));
}

}  // namespace reel::layers::short_gemm_avx512

#else  // no AVX-512 flags (not x86-64): never called, short_gemm.cc falls back to dnnl_sgemm.

namespace reel::layers::short_gemm_avx512 {
bool Compiled() { return false; }
void Product(const ShortGemmArgs&, int64_t, int64_t) {}
void ProductAtB(const ShortGemmArgs&, int64_t, int64_t) {}
void ProductBAt(const float*, int64_t, int64_t, const float*, int64_t, float*, int64_t, int64_t) {}
void TransposeShort(const float*, int64_t, int64_t, int64_t, int64_t, int64_t, float*) {}
}  // namespace reel::layers::short_gemm_avx512

#endif
