// The bilstm plugin's models: bidirectional LSTM encoders (one per input stream) whose encodings
// are concatenated into one classifier head (logistic or mixture of experts).
//
//  - bilstm_video: one encoder over "rgb" (1024 wide);
//  - bilstm_audio: one encoder over "audio" (128 wide);
//  - two_stream:   an "rgb" encoder and an "audio" encoder, trained jointly through one head.
//
// Options are in BiLstmOptions() / TwoStreamOptions(). The parameter blocks are named
// "<stream>/l<k>/<fwd|bwd>/{wx,wh,b}" (stream "video" or "audio") and "head/...".
//
// Ownership: keeps a pointer to the arena given to DeclareParams(), which must outlive it.
// Thread-safety: one thread per instance; instances are independent.
#ifndef REEL_PLUGINS_BILSTM_SRC_BILSTM_MODEL_H_
#define REEL_PLUGINS_BILSTM_SRC_BILSTM_MODEL_H_

#include <dnnl.hpp>
#include <memory>
#include <string>
#include <vector>

#include "bilstm_encoder.h"
#include "reel/layers/heads.h"
#include "reel/model.h"
#include "reel/options.h"

namespace reel::bilstm {

// Schema of bilstm_video (feature "rgb", width 1024, hidden 256) and bilstm_audio ("audio", 128,
// 128).
OptionSchema BiLstmOptions(const std::string& feature, int64_t width, int64_t hidden);
OptionSchema TwoStreamOptions();

class BiLstmModel final : public Model {
 public:
  // `kind` is "bilstm_video", "bilstm_audio" or "two_stream"; `options` were parsed with that
  // kind's schema. Errors: InvalidArgument naming the option at fault.
  static Result<std::unique_ptr<BiLstmModel>> Create(const std::string& kind,
                                                     const Options& options,
                                                     const ModelContext& context);

  std::vector<std::string> InputFeatures() const override;
  Status DeclareParams(ParamArena& arena) override;
  Status Initialize(uint64_t seed) override;
  Result<Tensor> Forward(const Batch& batch, Mode mode) override;
  Status Backward(const Batch& batch, const Tensor& dlogits) override;
  // Reports the head first, then each stream's layers top down, the last stream first: the
  // reverse of the arena's order (reel/model.h's GradientSink).
  void SetGradientSink(GradientSink* sink) override;

  // oneDNN primitive cache hits and misses, summed over every LSTM of the model (impl dnnl_rnn).
  DnnlLstm::CacheStats cache_stats() const;

  // Seconds per phase since the last reset, for benchmarks: the encoders' (impl gemm only; see
  // BiLstmEncoder::phases()) and the head's forward and backward.
  struct Phases {
    LstmPhases lstm;
    double head = 0;
  };
  Phases phases() const;
  void ResetPhases();

 private:
  BiLstmModel() = default;

  // Honours ModelContext::threads: the calling thread's OpenMP team size for Forward/Backward.
  void UseThreadBudget() const;

  std::string kind_;
  int64_t classes_ = 0;
  int threads_ = 0;  // ModelContext::threads; 0: OpenMP's default (every core)
  dnnl::engine engine_;
  std::vector<std::unique_ptr<BiLstmEncoder>> streams_;
  std::unique_ptr<layers::Head> head_;
  int64_t enc_width_ = 0;
  ParamArena* arena_ = nullptr;
  // State of the last training Forward().
  bool trained_ = false;
  int64_t batch_ = 0;
  std::vector<float> enc_, denc_;
  double head_seconds_ = 0;
};

}  // namespace reel::bilstm

#endif  // REEL_PLUGINS_BILSTM_SRC_BILSTM_MODEL_H_
