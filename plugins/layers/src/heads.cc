#include "reel/layers/heads.h"

#include <algorithm>
#include <cmath>

namespace reel::layers {
namespace {

// log(sigmoid(a)), stable for any a.
inline float LogSigmoid(float a) {
  return a >= 0 ? -std::log1p(std::exp(-a)) : a - std::log1p(std::exp(a));
}
inline float Sigmoid(float a) {
  if (a >= 0) return 1.0f / (1.0f + std::exp(-a));
  const float e = std::exp(a);
  return e / (1.0f + e);
}

// log(sum exp(v[i])) and softmax weights w (may alias nothing); n small (experts + 1).
float LogSumExp(const float* v, int64_t n, float* w) {
  float m = v[0];
  for (int64_t i = 1; i < n; ++i) m = std::max(m, v[i]);
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += (w[i] = std::exp(v[i] - m));
  for (int64_t i = 0; i < n; ++i) w[i] /= s;
  return m + std::log(s);
}

}  // namespace

MoeHead::MoeHead(std::string name, int64_t in, int64_t classes, int64_t experts)
    : classes_(classes),
      experts_(experts),
      gates_(name + "/gates", in, classes * (experts + 1), false),
      experts_dense_(name + "/experts", in, classes * experts, true) {}

Status MoeHead::Declare(ParamArena& arena) {
  REEL_RETURN_IF_ERROR(gates_.Declare(arena));
  return experts_dense_.Declare(arena);
}

void MoeHead::Initialize(uint64_t seed) {
  gates_.Initialize(seed);
  experts_dense_.Initialize(seed);
}

// Per class: gate logits z[0..E] (z[0] the dummy expert's), expert logits a[0..E-1].
//   log p     = LSE_e(log g_{e+1} + log sigmoid(a_e))
//   log (1-p) = LSE(log g_0, log g_{e+1} + log sigmoid(-a_e))
void MoeHead::Forward(const float* x, int64_t batch, float* logits) {
  const int64_t e1 = experts_ + 1;
  gate_act_.resize(static_cast<size_t>(batch * classes_ * e1));
  expert_act_.resize(static_cast<size_t>(batch * classes_ * experts_));
  gates_.Forward(x, batch, gate_act_.data());
  experts_dense_.Forward(x, batch, expert_act_.data());
  std::vector<float> u(static_cast<size_t>(e1)), v(static_cast<size_t>(e1)),
      w(static_cast<size_t>(e1));
  for (int64_t i = 0; i < batch * classes_; ++i) {
    const float* z = gate_act_.data() + i * e1;
    const float* a = expert_act_.data() + i * experts_;
    const float lse_z = LogSumExp(z, e1, w.data());
    v[0] = z[0] - lse_z;
    for (int64_t e = 0; e < experts_; ++e) {
      const float log_g = z[e + 1] - lse_z;
      u[static_cast<size_t>(e)] = log_g + LogSigmoid(a[e]);
      v[static_cast<size_t>(e + 1)] = log_g + LogSigmoid(-a[e]);
    }
    logits[i] = LogSumExp(u.data(), experts_, w.data()) - LogSumExp(v.data(), e1, w.data());
  }
}

// With w = softmax(u) and r = softmax(v) from Forward's terms, the logit's derivatives are
//   d/dz_0 = -r_0,  d/dz_{e+1} = w_e - r_{e+1}   (the softmax's -g terms cancel),
//   d/da_e = w_e sigmoid(-a_e) + r_{e+1} sigmoid(a_e).
void MoeHead::Backward(const float* x, const float* dlogits, int64_t batch, float* dx) {
  const int64_t e1 = experts_ + 1;
  dgate_.resize(gate_act_.size());
  dexpert_.resize(expert_act_.size());
  std::vector<float> u(static_cast<size_t>(e1)), v(static_cast<size_t>(e1));
  std::vector<float> w(static_cast<size_t>(e1)), r(static_cast<size_t>(e1)),
      g(static_cast<size_t>(e1));
  for (int64_t i = 0; i < batch * classes_; ++i) {
    const float* z = gate_act_.data() + i * e1;
    const float* a = expert_act_.data() + i * experts_;
    const float lse_z = LogSumExp(z, e1, g.data());
    v[0] = z[0] - lse_z;
    for (int64_t e = 0; e < experts_; ++e) {
      const float log_g = z[e + 1] - lse_z;
      u[static_cast<size_t>(e)] = log_g + LogSigmoid(a[e]);
      v[static_cast<size_t>(e + 1)] = log_g + LogSigmoid(-a[e]);
    }
    LogSumExp(u.data(), experts_, w.data());
    LogSumExp(v.data(), e1, r.data());
    const float d = dlogits[i];
    float* dz = dgate_.data() + i * e1;
    float* da = dexpert_.data() + i * experts_;
    dz[0] = -d * r[0];
    for (int64_t e = 0; e < experts_; ++e) {
      const size_t se = static_cast<size_t>(e);
      dz[e + 1] = d * (w[se] - r[se + 1]);
      da[e] = d * (w[se] * Sigmoid(-a[e]) + r[se + 1] * Sigmoid(a[e]));
    }
  }
  if (dx == nullptr) {
    gates_.Backward(x, dgate_.data(), batch, nullptr);
    experts_dense_.Backward(x, dexpert_.data(), batch, nullptr);
    return;
  }
  dx_part_.resize(static_cast<size_t>(batch * gates_.in()));
  gates_.Backward(x, dgate_.data(), batch, dx);
  experts_dense_.Backward(x, dexpert_.data(), batch, dx_part_.data());
  for (size_t j = 0; j < dx_part_.size(); ++j) dx[j] += dx_part_[j];
}

Result<std::unique_ptr<Head>> MakeHead(const Options& options, std::string name, int64_t in,
                                       int64_t classes) {
  const std::string kind = options.GetString("head");
  if (kind == "logistic")
    return std::unique_ptr<Head>(new LogisticHead(std::move(name), in, classes));
  if (kind == "moe") {
    const int64_t experts = options.GetInt("experts");
    if (experts < 1)
      return InvalidArgumentError("option 'experts': " + std::to_string(experts) + " is not >= 1");
    return std::unique_ptr<Head>(new MoeHead(std::move(name), in, classes, experts));
  }
  return InvalidArgumentError("option 'head': unknown head '" + kind + "' (known: logistic, moe)");
}

}  // namespace reel::layers
