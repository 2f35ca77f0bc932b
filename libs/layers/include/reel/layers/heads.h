// Classifier heads: a feature vector per video [B, in] to logits [B, C].
//
//  - logistic: one dense layer, logits = x W + b.
//  - moe: the YouTube-8M starter code's mixture of experts. Per class c, E experts with
//    sigmoid outputs s_e = sigmoid(a_e) (a = x We + be) and E + 1 gates g = softmax(x Wg) (the
//    extra gate belongs to a dummy expert that always predicts 0; the gates have no bias, as in
//    the starter code). The class probability is p = sum_e g_e s_e. The head returns the logit
//    log p - log(1 - p), computed in log space from log-softmax and log-sigmoid terms (1 - p is
//    the dummy gate plus sum_e g_e sigmoid(-a_e)), so it never takes log of 0 or divides by p.
//    The core's sigmoid cross-entropy on that logit is exactly the starter code's loss on p
//    (without its 1e-5 epsilon).
//
// Ownership: a head keeps a pointer to the arena given to Declare(), which must outlive it.
// Thread-safety: one thread per instance.
#ifndef REEL_LAYERS_HEADS_H_
#define REEL_LAYERS_HEADS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "reel/layers/dense.h"
#include "reel/model.h"
#include "reel/options.h"
#include "reel/param_arena.h"
#include "reel/status.h"

namespace reel::layers {

class Head {
 public:
  virtual ~Head() = default;
  virtual Status Declare(ParamArena& arena) = 0;
  virtual void Initialize(uint64_t seed) = 0;
  // logits [batch, C] from x [batch, in]; in Mode::kTrain also keeps what Backward() needs.
  virtual void Forward(const float* x, int64_t batch, float* logits, Mode mode) = 0;
  // REQUIRES: the last Forward() had the same x and batch, in Mode::kTrain. Writes the head's
  // parameter gradients (overwriting) and, when dx is not null, dx [batch, in].
  virtual void Backward(const float* x, const float* dlogits, int64_t batch, float* dx) = 0;
  // Where Backward() reports the head's blocks as their gradients are final (reel/model.h's
  // GradientSink, the model's own); null: nowhere.
  void set_gradient_sink(GradientSink* sink) { sink_ = sink; }

 protected:
  GradientSink* sink_ = nullptr;  // not owned
};

class LogisticHead final : public Head {
 public:
  LogisticHead(std::string name, int64_t in, int64_t classes)
      : dense_(std::move(name), in, classes, true) {}
  Status Declare(ParamArena& arena) override { return dense_.Declare(arena); }
  void Initialize(uint64_t seed) override { dense_.Initialize(seed); }
  void Forward(const float* x, int64_t batch, float* logits, Mode) override {
    dense_.Forward(x, batch, logits);
  }
  void Backward(const float* x, const float* dlogits, int64_t batch, float* dx) override {
    dense_.Backward(x, dlogits, batch, dx);
    dense_.ReportGradients(sink_);
  }

 private:
  Dense dense_;
};

class MoeHead final : public Head {
 public:
  // Blocks "<name>/gates/w" [in, C*(E+1)], "<name>/experts/w" [in, C*E], "<name>/experts/b".
  MoeHead(std::string name, int64_t in, int64_t classes, int64_t experts);
  Status Declare(ParamArena& arena) override;
  void Initialize(uint64_t seed) override;
  void Forward(const float* x, int64_t batch, float* logits, Mode mode) override;
  void Backward(const float* x, const float* dlogits, int64_t batch, float* dx) override;

 private:
  int64_t classes_, experts_;
  Dense gates_, experts_dense_;
  std::vector<float> gate_act_, expert_act_;  // pre-activations from Forward()
  // From a training Forward(): d logit / d pre-activation, as gate_act_ and expert_act_.
  std::vector<float> unit_dgate_, unit_dexpert_;
  std::vector<float> dgate_, dexpert_;  // scratch for Backward()
};

// The head options every model exposes, so they read the same everywhere.
inline OptionSchema HeadOptions(std::string_view default_head) {
  return {StringOption("head", std::string(default_head), "classifier head: logistic or moe"),
          IntOption("experts", 2, "mixture-of-experts head: experts per class (head: moe)")};
}

// Builds the head named by options "head" and "experts". Errors: InvalidArgument naming the
// option for an unknown head or experts < 1.
Result<std::unique_ptr<Head>> MakeHead(const Options& options, std::string name, int64_t in,
                                       int64_t classes);

}  // namespace reel::layers

#endif  // REEL_LAYERS_HEADS_H_
