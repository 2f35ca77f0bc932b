// Update rules on flat spans: SGD, momentum (heavy-ball or Nesterov), Adagrad and Adam (with bias
// correction). Any optimizer (sync, async parameter server, ...) applies one to a whole ParamArena
// or to a shard of it, so the arithmetic exists once.
//
// A rule owns its per-parameter state (moments), sized on first use to the span it is applied to;
// one rule instance serves one span layout. Thread-safety: none; one thread per instance.
#ifndef REEL_UPDATE_RULE_H_
#define REEL_UPDATE_RULE_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "reel/options.h"
#include "reel/status.h"

namespace reel {

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

inline UpdateRuleConfig UpdateRuleConfigFrom(const Options& o) {
  return {o.GetString("rule"), o.GetFloat("momentum"),  o.GetBool("nesterov"),
          o.GetFloat("beta1"), o.GetFloat("beta2"),     o.GetFloat("epsilon"),
          o.GetFloat("weight_decay"), o.GetFloat("adagrad_initial")};
}

class UpdateRule {
 public:
  virtual ~UpdateRule() = default;
  // params -= f(grads, state) for learning rate `lr`. REQUIRES: equal sizes, constant across calls.
  virtual void Apply(std::span<float> params, std::span<const float> grads, float lr) = 0;
  virtual int64_t steps() const { return steps_; }

  // The rule's state (step count and moments) as bytes, and back.
  std::string SaveState() const {
    std::string out(sizeof(int64_t), '\0');
    std::memcpy(out.data(), &steps_, sizeof(int64_t));
    for (const auto* s : {&s1_, &s2_}) {
      uint64_t n = s->size();
      out.append(reinterpret_cast<const char*>(&n), sizeof n);
      out.append(reinterpret_cast<const char*>(s->data()), n * sizeof(float));
    }
    return out;
  }
  Status RestoreState(std::string_view in) {
    auto take = [&](void* dst, size_t n) {
      if (in.size() < n) return false;
      if (n > 0) std::memcpy(dst, in.data(), n);  // dst may be null when n == 0
      in.remove_prefix(n);
      return true;
    };
    int64_t steps;
    if (!take(&steps, sizeof steps)) return DataLossError("update rule state is truncated");
    std::vector<float> s[2];
    for (auto& v : s) {
      uint64_t n;
      if (!take(&n, sizeof n) || n > in.size() / sizeof(float))
        return DataLossError("update rule state is truncated");
      v.resize(n);
      take(v.data(), n * sizeof(float));
    }
    if (!in.empty()) return DataLossError("update rule state has trailing bytes");
    steps_ = steps;
    s1_ = std::move(s[0]);
    s2_ = std::move(s[1]);
    return Status::Ok();
  }

 protected:
  void Ensure(std::vector<float>& s, size_t n, float fill = 0.0f) {
    if (s.size() != n) s.assign(n, fill);
  }
  int64_t steps_ = 0;
  std::vector<float> s1_, s2_;  // rule-specific moments
};

namespace update_rule_internal {

class Sgd final : public UpdateRule {
 public:
  explicit Sgd(UpdateRuleConfig c) : c_(c) {}
  void Apply(std::span<float> p, std::span<const float> g, float lr) override {
    const float wd = static_cast<float>(c_.weight_decay);
    for (size_t i = 0; i < p.size(); ++i) p[i] -= lr * (g[i] + wd * p[i]);
    ++steps_;
  }
 private:
  UpdateRuleConfig c_;
};

class Momentum final : public UpdateRule {
 public:
  explicit Momentum(UpdateRuleConfig c) : c_(c) {}
  void Apply(std::span<float> p, std::span<const float> g, float lr) override {
    Ensure(s1_, p.size());
    const float mu = static_cast<float>(c_.momentum), wd = static_cast<float>(c_.weight_decay);
    float* v = s1_.data();
    for (size_t i = 0; i < p.size(); ++i) {
      float gi = g[i] + wd * p[i];
      v[i] = mu * v[i] + gi;
      p[i] -= lr * (c_.nesterov ? gi + mu * v[i] : v[i]);
    }
    ++steps_;
  }
 private:
  UpdateRuleConfig c_;
};

class Adagrad final : public UpdateRule {
 public:
  explicit Adagrad(UpdateRuleConfig c) : c_(c) {}
  void Apply(std::span<float> p, std::span<const float> g, float lr) override {
    Ensure(s1_, p.size(), static_cast<float>(c_.adagrad_initial));
    const float eps = static_cast<float>(c_.epsilon), wd = static_cast<float>(c_.weight_decay);
    float* acc = s1_.data();
    for (size_t i = 0; i < p.size(); ++i) {
      float gi = g[i] + wd * p[i];
      acc[i] += gi * gi;
      p[i] -= lr * gi / (std::sqrt(acc[i]) + eps);
    }
    ++steps_;
  }
 private:
  UpdateRuleConfig c_;
};

// Adam as in Kingma & Ba (and torch.optim.Adam): bias-corrected first and second moments.
class Adam final : public UpdateRule {
 public:
  explicit Adam(UpdateRuleConfig c) : c_(c) {}
  void Apply(std::span<float> p, std::span<const float> g, float lr) override {
    Ensure(s1_, p.size());
    Ensure(s2_, p.size());
    ++steps_;
    const float b1 = static_cast<float>(c_.beta1), b2 = static_cast<float>(c_.beta2);
    const float eps = static_cast<float>(c_.epsilon), wd = static_cast<float>(c_.weight_decay);
    const double t = static_cast<double>(steps_);
    const float bc1 = static_cast<float>(1.0 - std::pow(c_.beta1, t));
    const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(c_.beta2, t)));
    const float step = lr / bc1;
    float* m = s1_.data();
    float* v = s2_.data();
    for (size_t i = 0; i < p.size(); ++i) {
      float gi = g[i] + wd * p[i];
      m[i] = b1 * m[i] + (1.0f - b1) * gi;
      v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
      p[i] -= step * m[i] / (std::sqrt(v[i]) / bc2_sqrt + eps);
    }
  }
 private:
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
