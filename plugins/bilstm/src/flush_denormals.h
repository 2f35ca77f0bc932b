// Flushes denormal floats to zero (x86 MXCSR FTZ and DAZ) on the calling thread and the threads
// of its OpenMP team for the lifetime of the object, restoring each thread's previous mode after.
//
// Why: on the way back through time the LSTM's gradients shrink by the forget gate at every step,
// and over hundreds of steps many of them fall below 1.2e-38. Every arithmetic operation on such
// a denormal takes a microcode assist, many times the cost of an ordinary one (Intel 64 and IA-32
// Architectures Optimization Reference Manual, "Floating-point Modes and Exceptions"). Values
// this small carry no information for training; GPUs flush them as well.
//
// Thread-safety: affects only the threads it runs on; create it on the thread that computes.
#ifndef REEL_PLUGINS_BILSTM_SRC_FLUSH_DENORMALS_H_
#define REEL_PLUGINS_BILSTM_SRC_FLUSH_DENORMALS_H_

#include <omp.h>

#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define REEL_HAVE_MXCSR 1
#endif

namespace reel::bilstm {

class ScopedFlushDenormals {
 public:
  ScopedFlushDenormals() {
#ifdef REEL_HAVE_MXCSR
    saved_.assign(static_cast<size_t>(omp_get_max_threads()), 0u);
#pragma omp parallel num_threads(static_cast <int>(saved_.size()))
    {
      const int t = omp_get_thread_num();
      saved_[static_cast<size_t>(t)] = _mm_getcsr();
      _mm_setcsr(saved_[static_cast<size_t>(t)] | kFtzDaz);
    }
#endif
  }
  ~ScopedFlushDenormals() {
#ifdef REEL_HAVE_MXCSR
#pragma omp parallel num_threads(static_cast <int>(saved_.size()))
    _mm_setcsr(saved_[static_cast<size_t>(omp_get_thread_num())]);
#endif
  }
  ScopedFlushDenormals(const ScopedFlushDenormals&) = delete;
  ScopedFlushDenormals& operator=(const ScopedFlushDenormals&) = delete;

 private:
  static constexpr unsigned kFtzDaz = 0x8040;  // flush-to-zero | denormals-are-zero
  std::vector<unsigned> saved_;
};

}  // namespace reel::bilstm

#endif  // REEL_PLUGINS_BILSTM_SRC_FLUSH_DENORMALS_H_
