#include "reel/layers/bf16.h"

#include <array>
#include <dnnl.hpp>
#include <mutex>
#include <optional>

namespace reel::layers {
namespace {

// One matmul primitive per (trans_a, trans_b, accumulate) for the process, every dimension and
// stride given at execution: the packed batch changes the row count at every step and every
// batch, and a primitive per shape would compile a kernel for each. oneDNN's primitives may run
// on several threads at once (each with its own stream), so the encoder's two directions share
// them, and a thread started per layer finds them made.
class Matmuls {
 public:
  static Matmuls& Get() {
    static Matmuls* const instance = new Matmuls;  // never destroyed: threads may outlive main
    return *instance;
  }

  void Run(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const bf16_t* a, int64_t lda,
           const bf16_t* b, int64_t ldb, bool accumulate, float* c, int64_t ldc) {
    using dt = dnnl::memory::data_type;
    const dnnl::matmul& mm = Primitive((ta ? 4 : 0) | (tb ? 2 : 0) | (accumulate ? 1 : 0));
    thread_local dnnl::stream stream(engine_);
    dnnl::memory am(Desc(m, k, dt::bf16, ta, lda), engine_, const_cast<bf16_t*>(a));
    dnnl::memory bm(Desc(k, n, dt::bf16, tb, ldb), engine_, const_cast<bf16_t*>(b));
    dnnl::memory cm(Desc(m, n, dt::f32, false, ldc), engine_, c);
    mm.execute(stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    stream.wait();
  }

 private:
  Matmuls() : engine_(dnnl::engine::kind::cpu, 0) {}

  // X^T stored row-major as X [cols, rows] with stride ld: element (r, c) at c * ld + r.
  static dnnl::memory::desc Desc(int64_t rows, int64_t cols, dnnl::memory::data_type type,
                                 bool trans, int64_t ld) {
    return dnnl::memory::desc({rows, cols}, type,
                              trans ? dnnl::memory::dims{1, ld} : dnnl::memory::dims{ld, 1});
  }

  const dnnl::matmul& Primitive(int slot) {
    std::lock_guard<std::mutex> lock(mu_);
    std::optional<dnnl::matmul>& mm = prims_[static_cast<size_t>(slot)];
    if (!mm) {
      using dt = dnnl::memory::data_type;
      const int64_t kR = DNNL_RUNTIME_DIM_VAL;
      dnnl::primitive_attr attr;
      if (slot & 1) {  // accumulate: C += A B
        dnnl::post_ops ops;
        ops.append_sum(1.0f);
        attr.set_post_ops(ops);
      }
      const dnnl::matmul::desc d(Desc(kR, kR, dt::bf16, slot & 4, kR),
                                 Desc(kR, kR, dt::bf16, slot & 2, kR),
                                 Desc(kR, kR, dt::f32, false, kR));
      mm.emplace(dnnl::matmul::primitive_desc(d, attr, engine_));
    }
    return *mm;
  }

  dnnl::engine engine_;
  std::mutex mu_;
  std::array<std::optional<dnnl::matmul>, 8> prims_;  // made once, then only read
};

}  // namespace

bool CpuHasBf16() { return CpuConvertsBf16(); }

void ToBf16Rows(const float* in, int64_t ld_in, int64_t rows, int64_t cols, bf16_t* out,
                int64_t ld_out) {
  if (ld_in == cols && ld_out == cols) return ToBf16(in, rows * cols, out);
  for (int64_t r = 0; r < rows; ++r) ToBf16(in + r * ld_in, cols, out + r * ld_out);
}

void GemmBf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const bf16_t* a,
              int64_t lda, const bf16_t* b, int64_t ldb, bool accumulate, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    if (!accumulate)
      for (int64_t r = 0; r < m; ++r) std::memset(c + r * ldc, 0, sizeof(float) * n);
    return;
  }
  Matmuls::Get().Run(trans_a, trans_b, m, n, k, a, lda, b, ldb, accumulate, c, ldc);
}

}  // namespace reel::layers
