// bf16_matmul_probe M N K [TRANS_A]: oneDNN 2.6's matmul with fp32 and with bf16 inputs (float
// results, C += A B) beside dnnl_sgemm, one product shape, on OMP_NUM_THREADS threads; RT=1 in the
// environment gives the primitives runtime shapes (gemm:jit, as layers::GemmBf16 builds them)
// instead of fixed ones (brgemm). Prints each one's time, GFLOP/s and oneDNN's kernel. Answered
// for bench/journal/bf16.md whether another oneDNN kernel runs bf16 faster than fp32 on a CPU
// with AVX-512 BF16 but no AMX (none did), and how slow its emulation is (DNNL_MAX_CPU_ISA).
#include <dnnl.h>
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dnnl.hpp>
#include <unordered_map>
#include <vector>
using namespace dnnl;
using dt = memory::data_type;
double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
int main(int argc, char** argv) {
  long M = atol(argv[1]), N = atol(argv[2]), K = atol(argv[3]);
  int ta = argc > 4 ? atoi(argv[4]) : 0;
  engine eng(engine::kind::cpu, 0);
  stream s(eng);
  std::vector<float> a(M * K, 0.5f), b(K * N, 0.25f), c(M * N);
  for (size_t i = 0; i < a.size(); ++i) a[i] = (i % 7) * 0.1f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = (i % 5) * 0.1f;
  auto run = [&](dt t, const char* name) {
    const long R = DNNL_RUNTIME_DIM_VAL;
    bool rt = getenv("RT") != nullptr;
    memory::desc ad = ta ? memory::desc({rt ? R : M, rt ? R : K}, t, {1, rt ? R : M})
                         : memory::desc({rt ? R : M, rt ? R : K}, t, {rt ? R : K, 1});
    memory::desc bd({rt ? R : K, N}, t, {N, 1}), cd({rt ? R : M, N}, dt::f32, {N, 1});
    memory::desc ad2 = ta ? memory::desc({M, K}, t, {1, M}) : memory::desc({M, K}, t, {K, 1});
    memory::desc bd2({K, N}, t, {N, 1}), cd2({M, N}, dt::f32, {N, 1});
    primitive_attr attr;
    post_ops po;
    po.append_sum(1.0f);
    attr.set_post_ops(po);
    matmul::primitive_desc pd(matmul::desc(ad, bd, cd), attr, eng);
    matmul mm(pd);
    memory am(ad2, eng), bm(bd2, eng), cm(cd2, eng, c.data());
    // fill
    if (t == dt::f32) {
      memcpy(am.get_data_handle(), a.data(), a.size() * 4);
      memcpy(bm.get_data_handle(), b.data(), b.size() * 4);
    } else {
      auto* ap = (uint16_t*)am.get_data_handle();
      for (size_t i = 0; i < a.size(); ++i) {
        uint32_t u;
        memcpy(&u, &a[i], 4);
        ap[i] = u >> 16;
      }
      auto* bp = (uint16_t*)bm.get_data_handle();
      for (size_t i = 0; i < b.size(); ++i) {
        uint32_t u;
        memcpy(&u, &b[i], 4);
        bp[i] = u >> 16;
      }
    }
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}};
    for (int i = 0; i < 3; ++i) mm.execute(s, args);
    s.wait();
    int reps = 0;
    double t0 = now(), t1;
    do {
      mm.execute(s, args);
      ++reps;
      t1 = now();
    } while (t1 - t0 < 0.5);
    double per = (t1 - t0) / reps;
    printf("%-10s M=%ld N=%ld K=%ld ta=%d thr=%d: %.3f ms %.1f GFLOP/s impl=%s\n", name, M, N, K,
           ta, omp_get_max_threads(), per * 1e3, 2.0 * M * N * K / per / 1e9, pd.impl_info_str());
  };
  run(dt::f32, "mm_f32");
  run(dt::bf16, "mm_bf16");
  {
    int reps = 0;
    double t0 = now(), t1;
    do {
      dnnl_sgemm(ta ? 'T' : 'N', 'N', M, N, K, 1.0f, a.data(), ta ? M : K, b.data(), N, 1.0f,
                 c.data(), N);
      ++reps;
      t1 = now();
    } while (t1 - t0 < 0.5);
    double per = (t1 - t0) / reps;
    printf("%-10s M=%ld N=%ld K=%ld ta=%d thr=%d: %.3f ms %.1f GFLOP/s\n", "sgemm", M, N, K, ta,
           omp_get_max_threads(), per * 1e3, 2.0 * M * N * K / per / 1e9);
  }
}
