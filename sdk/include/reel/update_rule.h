// Update rules on flat spans: SGD, momentum (heavy-ball or Nesterov), Adagrad and Adam (with bias
// correction). Any optimizer (sync, async parameter server, ...) applies one to a whole ParamArena
// or to a shard of it, so the arithmetic exists once.
//
// A rule owns its per-parameter state (moments), sized on first use to the span it is applied to;
// one rule instance serves one span layout. Thread-safety: none; one thread per instance.
#ifndef REEL_UPDATE_RULE_H_
#define REEL_UPDATE_RULE_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "reel/options.h"
#include "reel/status.h"

namespace reel {

// Which rule and its hyper-parameters; the comment after each field says which rule reads it.
struct UpdateRuleConfig {
  std::string rule = "adam";  // sgd | momentum | adagrad | adam
  double momentum = 0.9;      // momentum
  bool nesterov = false;      // momentum
  double beta1 = 0.9;         // adam
  double beta2 = 0.999;       // adam
  double epsilon = 1e-8;      // adam, adagrad
  double weight_decay = 0.0;  // L2, added to the gradient
  double adagrad_initial = 0.1;
};

// The options an optimizer exposes for its rule, so every optimizer spells them the same.
inline OptionSchema UpdateRuleOptions() {
  return {StringOption("rule", "adam", "update rule: sgd, momentum, adagrad or adam"),
          FloatOption("momentum", 0.9, "momentum coefficient (rule: momentum)"),
          BoolOption("nesterov", false, "Nesterov momentum (rule: momentum)"),
          FloatOption("beta1", 0.9, "Adam first-moment decay"),
          FloatOption("beta2", 0.999, "Adam second-moment decay"),
          FloatOption("epsilon", 1e-8, "added to denominators (adam, adagrad)"),
          FloatOption("weight_decay", 0.0, "L2 penalty added to gradients"),
          FloatOption("adagrad_initial", 0.1, "initial accumulator value (rule: adagrad)")};
}

// The config from options parsed with a schema that includes UpdateRuleOptions().
inline UpdateRuleConfig UpdateRuleConfigFrom(const Options& o) {
  return {o.GetString("rule"),        o.GetFloat("momentum"),       o.GetBool("nesterov"),
          o.GetFloat("beta1"),        o.GetFloat("beta2"),          o.GetFloat("epsilon"),
          o.GetFloat("weight_decay"), o.GetFloat("adagrad_initial")};
}

// One update rule and its per-parameter state; MakeUpdateRule() builds the one a config names.
class UpdateRule {
 public:
  virtual ~UpdateRule() = default;
  // params -= f(grads, state) for learning rate `lr`. REQUIRES: equal sizes, constant across calls.
  void Apply(std::span<float> params, std::span<const float> grads, float lr) {
    BeginUpdate(params.size());
    ApplyPart(params, grads, lr, 0);
  }
  // Apply(), returning SumOfSquares(grads) bit for bit: the gradient's squared norm, summed in
  // the same pass over memory as the update, each block while it is in cache (an optimizer that
  // reports the norm without clipping saves a pass over the gradient). The parameters and state
  // come out exactly as Apply() leaves them.
  double ApplySummingSquares(std::span<float> params, std::span<const float> grads, float lr) {
    BeginUpdate(params.size());
    return Update(params, grads, lr, 0, grads.data());
  }
  // One update in pieces, with the same result as Apply() on the whole span (a parameter server
  // applies a push this way while its chunks arrive): BeginUpdate(n) once per update, for a span
  // of n floats (constant across calls), then ApplyPart() for disjoint pieces covering [0, n),
  // `params` and `grads` being the piece that starts at `offset`.
  virtual void BeginUpdate(size_t n) = 0;
  void ApplyPart(std::span<float> params, std::span<const float> grads, float lr, size_t offset) {
    Update(params, grads, lr, offset, nullptr);
  }
  // Taking back an update in pieces whose input stopped arriving half way (a parameter server's
  // push cut off): keep each piece's state (CopyState of every state vector) and parameters
  // before ApplyPart, put them back (SetState) for the pieces applied, then CancelUpdate.
  // State vectors: 0 (sgd), 1 (momentum, adagrad) or 2 (adam), sized by BeginUpdate.
  int state_vectors() const { return s2_.empty() ? (s1_.empty() ? 0 : 1) : 2; }
  void CopyState(int k, size_t offset, std::span<float> out) const {
    const std::vector<float>& s = k == 0 ? s1_ : s2_;
    std::memcpy(out.data(), s.data() + offset, out.size() * sizeof(float));
  }
  void SetState(int k, size_t offset, std::span<const float> in) {
    std::vector<float>& s = k == 0 ? s1_ : s2_;
    std::memcpy(s.data() + offset, in.data(), in.size() * sizeof(float));
  }
  void CancelUpdate() { --steps_; }
  virtual int64_t steps() const { return steps_; }
  // Arenas of this many floats or more are updated on all OpenMP threads (see ForBlocks()).
  static constexpr size_t kSplitMin = size_t{1} << 20;

  // The rule's state (step count and moments) as bytes, and back.
  std::string SaveState() const { return EncodeState(steps_, s1_, s2_); }
  Status RestoreState(std::string_view in) {
    REEL_ASSIGN_OR_RETURN(State state, ParseState(in));
    steps_ = state.steps;
    s1_ = std::move(state.moments[0]);
    s2_ = std::move(state.moments[1]);
    return Status::Ok();
  }

  // A saved state taken apart, for code that cuts or joins the states of a span's pieces (a
  // parameter server's shards): the step count and the moment vectors, each empty or one float
  // per parameter of the span.
  struct State {
    int64_t steps = 0;
    std::vector<float> moments[2];
  };
  // SaveState's format: int64 steps, then per moment vector uint64 n and n floats.
  static std::string EncodeState(int64_t steps, std::span<const float> m0,
                                 std::span<const float> m1) {
    std::string out(sizeof(int64_t), '\0');
    std::memcpy(out.data(), &steps, sizeof(int64_t));
    for (std::span<const float> m : {m0, m1}) {
      const uint64_t n = m.size();
      out.append(reinterpret_cast<const char*>(&n), sizeof n);
      out.append(reinterpret_cast<const char*>(m.data()), n * sizeof(float));
    }
    return out;
  }
  // DataLoss when `in` is truncated or has trailing bytes.
  static Result<State> ParseState(std::string_view in) {
    auto take = [&](void* dst, size_t n) {
      if (in.size() < n) return false;
      if (n > 0) std::memcpy(dst, in.data(), n);  // dst may be null when n == 0
      in.remove_prefix(n);
      return true;
    };
    State state;
    if (!take(&state.steps, sizeof state.steps))
      return DataLossError("update rule state is truncated");
    for (std::vector<float>& m : state.moments) {
      uint64_t n;
      if (!take(&n, sizeof n) || n > in.size() / sizeof(float))
        return DataLossError("update rule state is truncated");
      m.resize(n);
      take(m.data(), n * sizeof(float));
    }
    if (!in.empty()) return DataLossError("update rule state has trailing bytes");
    return state;
  }

 protected:
  // ApplyPart(), and with `squares` (grads.data()) the sum of their squares as ForBlocks gives it.
  virtual double Update(std::span<float> params, std::span<const float> grads, float lr,
                        size_t offset, const float* squares) = 0;
  // Calls block.template operator()<N>(i) for blocks [i, i + N) covering [0, n): N = kBlock, then
  // N = 1 for the rest. A rule's arithmetic lives in a function template over N with __restrict
  // pointers, so its loop has a constant trip count and no aliasing: GCC vectorises it even at -O2
  // (whose cost model skips loops of unknown trip count), and an update streams at memory speed
  // instead of waiting on scalar square roots and divisions.
  //
  // An update streams its arrays once, and one core does not reach the memory rate: Adam over
  // the audio BiLSTM's 5.2M parameters took 7.8-8.0 ms on one thread and 4.0-5.9 on two (2 cores,
  // AVX-512). Compiled with OpenMP (the core and the oneDNN models are), an arena of kSplitMin
  // floats or more is split over the OpenMP threads, whose pool is already warm from the model's
  // own regions; the blocks write disjoint ranges, taken by the threads in chunks of kChunk
  // floats as they finish (on a shared machine, static halves left one thread waiting whenever
  // the other lost its core). Inside a parallel region, or without OpenMP, it runs on the calling
  // thread.
  //
  // With `squares` (n floats) it also returns their sum of squares, each block's added while the
  // block is in cache, in SumOfSquares' order whatever the threads.
  template <typename F>
  static double ForBlocks(size_t n, F&& block, const float* squares = nullptr) {
    return squares != nullptr ? ForChunks<true>(n, block, squares)
                              : ForChunks<false>(n, block, nullptr);
  }
  void Ensure(std::vector<float>& s, size_t n, float fill = 0.0f) {
    if (s.size() != n) s.assign(n, fill);
  }
  int64_t steps_ = 0;
  std::vector<float> s1_, s2_;  // rule-specific moments

 private:
  friend double SumOfSquares(std::span<const float> values);
  static constexpr size_t kBlock = 64;
  static constexpr size_t kLanes = 8;  // doubles summed side by side (AddSquares)
  static constexpr size_t kChunk = 1024 * kBlock;

  // Chunk c covers [c * kChunk, min(n, (c + 1) * kChunk)). Element i's square, as a double, goes
  // to lane i % kLanes of its chunk, in order of i; the chunk's sum is its lanes folded pairwise,
  // and the whole sum adds the chunks' in order. So the result depends on n alone, not on the
  // threads, and no sum of squared floats can overflow a double.
  template <bool kSum, typename F>
  static double ForChunks(size_t n, F& block, const float* squares) {
    const int64_t chunks = static_cast<int64_t>((n + kChunk - 1) / kChunk);
    std::vector<double> sums(kSum ? static_cast<size_t>(chunks) : 0);
    auto chunk = [&](int64_t c) {
      const size_t begin = static_cast<size_t>(c) * kChunk, end = std::min(n, begin + kChunk);
      [[maybe_unused]] double lanes[kLanes] = {};
      size_t i = begin;
      for (; i + kBlock <= end; i += kBlock) {
        block.template operator()<kBlock>(i);
        if constexpr (kSum) AddSquares(squares + i, lanes);
      }
      for (; i < end; ++i) {
        block.template operator()<1>(i);
        if constexpr (kSum) lanes[i % kLanes] += static_cast<double>(squares[i]) * squares[i];
      }
      if constexpr (kSum)
        sums[static_cast<size_t>(c)] = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
                                       ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
    };
#if defined(_OPENMP)
    if (n >= kSplitMin && omp_get_max_threads() > 1 && !omp_in_parallel()) {
#pragma omp parallel for schedule(dynamic, 1)
      for (int64_t c = 0; c < chunks; ++c) chunk(c);
    } else
#endif
    {
      for (int64_t c = 0; c < chunks; ++c) chunk(c);
    }
    double sum = 0.0;
    for (double s : sums) sum += s;
    return sum;
  }
  // Eight named accumulators, not an array: GCC keeps them in registers then (two doubles a
  // vector, four independent chains), where an array's went through memory at every step.
  static void AddSquares(const float* __restrict g, double* __restrict lanes) {
    double a0 = lanes[0], a1 = lanes[1], a2 = lanes[2], a3 = lanes[3];
    double a4 = lanes[4], a5 = lanes[5], a6 = lanes[6], a7 = lanes[7];
    auto sq = [g](size_t i) { return static_cast<double>(g[i]) * g[i]; };
    for (size_t i = 0; i < kBlock; i += kLanes) {
      a0 += sq(i);
      a1 += sq(i + 1);
      a2 += sq(i + 2);
      a3 += sq(i + 3);
      a4 += sq(i + 4);
      a5 += sq(i + 5);
      a6 += sq(i + 6);
      a7 += sq(i + 7);
    }
    lanes[0] = a0, lanes[1] = a1, lanes[2] = a2, lanes[3] = a3;
    lanes[4] = a4, lanes[5] = a5, lanes[6] = a6, lanes[7] = a7;
  }
};

// The sum of the squares of `values` in double precision (no sum of squared floats overflows it),
// on the OpenMP threads for kSplitMin floats or more, the same to the last bit whatever the
// threads: lanes of every 8th element within chunks of 64K, folded pairwise, chunks added in
// order (UpdateRule::ForChunks). What a gradient's global norm is the square root of, here and
// in every rule's ApplySummingSquares.
inline double SumOfSquares(std::span<const float> values) {
  auto none = []<size_t N>(size_t) {};
  return UpdateRule::ForChunks<true>(values.size(), none, values.data());
}

namespace update_rule_internal {

// params -= lr * (grad + weight_decay * params).
class Sgd final : public UpdateRule {
 public:
  explicit Sgd(UpdateRuleConfig c) : c_(c) {}
  void BeginUpdate(size_t) override { ++steps_; }
  double Update(std::span<float> p, std::span<const float> g, float lr, size_t,
                const float* squares) override {
    const K k{lr, static_cast<float>(c_.weight_decay)};
    return ForBlocks(
        p.size(), [&]<size_t N>(size_t i) { Block<N>(p.data() + i, g.data() + i, k); }, squares);
  }

 private:
  struct K {
    float lr, wd;
  };
  template <size_t N>
  static void Block(float* __restrict p, const float* __restrict g, const K& k) {
    for (size_t i = 0; i < N; ++i) p[i] -= k.lr * (g[i] + k.wd * p[i]);
  }
  UpdateRuleConfig c_;
};

// Heavy-ball momentum, or Nesterov's variant: a velocity per parameter.
class Momentum final : public UpdateRule {
 public:
  explicit Momentum(UpdateRuleConfig c) : c_(c) {}
  void BeginUpdate(size_t n) override {
    Ensure(s1_, n);
    ++steps_;
  }
  double Update(std::span<float> p, std::span<const float> g, float lr, size_t at,
                const float* squares) override {
    const K k{lr, static_cast<float>(c_.momentum), static_cast<float>(c_.weight_decay),
              c_.nesterov};
    float* v = s1_.data() + at;
    return ForBlocks(
        p.size(), [&]<size_t N>(size_t i) { Block<N>(p.data() + i, g.data() + i, v + i, k); },
        squares);
  }

 private:
  struct K {
    float lr, mu, wd;
    bool nesterov;
  };
  template <size_t N>
  static void Block(float* __restrict p, const float* __restrict g, float* __restrict v,
                    const K& k) {
    for (size_t i = 0; i < N; ++i) {
      const float gi = g[i] + k.wd * p[i];
      v[i] = k.mu * v[i] + gi;
      p[i] -= k.lr * (k.nesterov ? gi + k.mu * v[i] : v[i]);
    }
  }
  UpdateRuleConfig c_;
};

// Adagrad: a running sum of squared gradients per parameter scales each step.
class Adagrad final : public UpdateRule {
 public:
  explicit Adagrad(UpdateRuleConfig c) : c_(c) {}
  void BeginUpdate(size_t n) override {
    Ensure(s1_, n, static_cast<float>(c_.adagrad_initial));
    ++steps_;
  }
  double Update(std::span<float> p, std::span<const float> g, float lr, size_t at,
                const float* squares) override {
    const K k{lr, static_cast<float>(c_.epsilon), static_cast<float>(c_.weight_decay)};
    float* acc = s1_.data() + at;
    return ForBlocks(
        p.size(), [&]<size_t N>(size_t i) { Block<N>(p.data() + i, g.data() + i, acc + i, k); },
        squares);
  }

 private:
  struct K {
    float lr, eps, wd;
  };
  template <size_t N>
  static void Block(float* __restrict p, const float* __restrict g, float* __restrict acc,
                    const K& k) {
    for (size_t i = 0; i < N; ++i) {
      const float gi = g[i] + k.wd * p[i];
      acc[i] += gi * gi;
      p[i] -= k.lr * gi / (std::sqrt(acc[i]) + k.eps);
    }
  }
  UpdateRuleConfig c_;
};

// Adam as in Kingma & Ba (and torch.optim.Adam): bias-corrected first and second moments.
class Adam final : public UpdateRule {
 public:
  explicit Adam(UpdateRuleConfig c) : c_(c) {}
  void BeginUpdate(size_t n) override {
    Ensure(s1_, n);
    Ensure(s2_, n);
    ++steps_;
  }
  double Update(std::span<float> p, std::span<const float> g, float lr, size_t at,
                const float* squares) override {
    const double t = static_cast<double>(steps_);
    const K k{static_cast<float>(c_.beta1),
              static_cast<float>(c_.beta2),
              static_cast<float>(c_.epsilon),
              static_cast<float>(c_.weight_decay),
              lr / static_cast<float>(1.0 - std::pow(c_.beta1, t)),
              static_cast<float>(std::sqrt(1.0 - std::pow(c_.beta2, t)))};
    float *m = s1_.data() + at, *v = s2_.data() + at;
    return ForBlocks(
        p.size(),
        [&]<size_t N>(size_t i) { Block<N>(p.data() + i, g.data() + i, m + i, v + i, k); },
        squares);
  }

 private:
  struct K {
    float b1, b2, eps, wd;
    float step;      // lr / (1 - beta1^t)
    float bc2_sqrt;  // sqrt(1 - beta2^t)
  };
  template <size_t N>
  static void Block(float* __restrict p, const float* __restrict g, float* __restrict m,
                    float* __restrict v, const K& k) {
    for (size_t i = 0; i < N; ++i) {
      const float gi = g[i] + k.wd * p[i];
      m[i] = k.b1 * m[i] + (1.0f - k.b1) * gi;
      v[i] = k.b2 * v[i] + (1.0f - k.b2) * gi * gi;
      p[i] -= k.step * m[i] / (std::sqrt(v[i]) / k.bc2_sqrt + k.eps);
    }
  }
  UpdateRuleConfig c_;
};

}  // namespace update_rule_internal

// InvalidArgument naming the rule when it is not one of sgd, momentum, adagrad, adam.
inline Result<std::unique_ptr<UpdateRule>> MakeUpdateRule(const UpdateRuleConfig& c) {
  using namespace update_rule_internal;
  if (c.rule == "sgd") return std::unique_ptr<UpdateRule>(new Sgd(c));
  if (c.rule == "momentum") return std::unique_ptr<UpdateRule>(new Momentum(c));
  if (c.rule == "adagrad") return std::unique_ptr<UpdateRule>(new Adagrad(c));
  if (c.rule == "adam") return std::unique_ptr<UpdateRule>(new Adam(c));
  return InvalidArgumentError("unknown update rule '" + c.rule +
                              "' (known: sgd, momentum, adagrad, adam)");
}

}  // namespace reel

#endif  // REEL_UPDATE_RULE_H_
