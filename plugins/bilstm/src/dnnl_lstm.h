// One unidirectional LSTM layer (left to right, zero initial state) on oneDNN 2.6's lstm_forward
// and lstm_backward primitives, with the primitives cached per shape.
//
// Weights are caller-owned plain arrays in oneDNN's user layouts: wx [I, 4, H] and wh [H, 4, H]
// ("ldigo" with one layer and one direction), bias [4, H] ("ldgo"); the gate order is oneDNN's and
// PyTorch's: input, forget, candidate (c~), output. Sequences are time-major: src [T, B, I],
// dst [T, B, H]. oneDNN has no per-sequence length: frames past a sequence's end only influence
// later frames, so callers keep padding at the end and read each sequence up to its length.
//
// Primitive descriptors, primitives, reorders and the training workspace are created on the first
// call for a (T, B, mode) and reused afterwards; stats() counts hits and misses.
//
// Ownership: owns its cache; the engine passed in must outlive it. Thread-safety: one thread per
// instance (the cached workspace is per instance).
#ifndef REEL_PLUGINS_BILSTM_SRC_DNNL_LSTM_H_
#define REEL_PLUGINS_BILSTM_SRC_DNNL_LSTM_H_

#include <cstdint>
#include <dnnl.hpp>
#include <map>
#include <memory>
#include <tuple>

#include "reel/status.h"

namespace reel::bilstm {

class DnnlLstm {
 public:
  struct CacheStats {
    int64_t hits = 0;
    int64_t misses = 0;
  };

  DnnlLstm(const dnnl::engine& engine, int64_t input, int64_t hidden);
  ~DnnlLstm();
  DnnlLstm(const DnnlLstm&) = delete;
  DnnlLstm& operator=(const DnnlLstm&) = delete;

  // dst [T, B, H] from src [T, B, I]. With train=true keeps the workspace Backward() needs.
  Status Forward(bool train, int64_t steps, int64_t batch, const float* src, const float* wx,
                 const float* wh, const float* bias, float* dst);

  // REQUIRES: the last Forward() was train=true with the same shape, src, weights and dst.
  // Writes dsrc [T, B, I], dwx, dwh, dbias (all overwritten) from ddst [T, B, H].
  Status Backward(int64_t steps, int64_t batch, const float* src, const float* dst, const float* wx,
                  const float* wh, const float* bias, const float* ddst, float* dsrc, float* dwx,
                  float* dwh, float* dbias);

  CacheStats stats() const { return stats_; }
  int64_t input() const { return input_; }
  int64_t hidden() const { return hidden_; }

 private:
  struct Plan;
  Result<Plan*> GetPlan(int64_t steps, int64_t batch, bool train);
  Plan* BuildPlan(int64_t steps, int64_t batch, bool train);  // may throw dnnl::error

  dnnl::engine engine_;
  dnnl::stream stream_;
  int64_t input_, hidden_;
  std::map<std::tuple<int64_t, int64_t, bool>, std::unique_ptr<Plan>> plans_;
  CacheStats stats_;
};

}  // namespace reel::bilstm

#endif  // REEL_PLUGINS_BILSTM_SRC_DNNL_LSTM_H_
