// A stacked bidirectional LSTM over one frame-level feature, exact for variable lengths, pooled
// into one vector per video.
//
// Two implementations (EncoderConfig::impl), equal to float tolerance:
//  - kGemm (gemm_lstm.h): the batch in cuDNN's packed layout (sorted by length, only the running
//    sequences at each step), the input projections and weight gradients as single large GEMMs,
//    the recurrent products per step, fused gate passes. The backward direction visits the steps
//    from the last down, each sequence joining at its own last frame. No work on padding.
//  - kDnnlRnn: oneDNN's lstm_forward/lstm_backward primitives (dnnl_lstm.h), described next.
//
// Exactness of kDnnlRnn: each direction runs as a left-to-right LSTM with the padding at the end;
// the backward one reads each sequence reversed within its own length (frame len-1-t at time t).
// Padding then only influences later (padding) outputs, which pooling and the next layer never
// read, and its gradients are zero: a video's encoding and gradients do not depend on its batch's
// padding. The batch is trimmed to its longest video, so padding past every length costs nothing.
//
// Layer k > 0 reads [forward output, backward output] of layer k-1 in original time order (as
// torch.nn.LSTM(bidirectional=True) does). The encoding is [forward, backward] pooled: "last"
// takes each direction's final state (the forward one at frame len-1, the backward one after it
// has read frame 0, like torch's h_n); "mean" and "max" pool over the valid frames.
//
// Parameters, per layer k and direction d in {fwd, bwd}: "<prefix>/l<k>/<d>/wx" [I, 4, H],
// ".../wh" [H, 4, H], ".../b" [4, H] (one bias; torch's b_ih + b_hh), gate order i, f, c~, o.
//
// Ownership: keeps a pointer to the arena given to Declare(); the engine must outlive it.
// Thread-safety: one thread per instance. Internally, the two directions of a layer run on two
// threads, splitting the OpenMP threads (omp_get_max_threads()) between them (RunBoth()).
#ifndef REEL_PLUGINS_BILSTM_SRC_BILSTM_ENCODER_H_
#define REEL_PLUGINS_BILSTM_SRC_BILSTM_ENCODER_H_

#include <cstdint>
#include <dnnl.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dnnl_lstm.h"
#include "gemm_lstm.h"
#include "packed_layout.h"
#include "reel/batch.h"
#include "reel/layers/sequence.h"
#include "reel/model.h"
#include "reel/param_arena.h"
#include "reel/status.h"

namespace reel::bilstm {

enum class LstmImpl { kGemm, kDnnlRnn };

// Runs a() and b() concurrently, each on half of the OpenMP threads; in turn with one thread.
// Both run with denormals flushed (flush_denormals.h).
// The two directions of a layer are independent, so this replaces per-time-step thread barriers
// (hundreds per sequence, and costly whenever a core is shared) with one join per layer.
Status RunBoth(const std::function<Status()>& a, const std::function<Status()>& b);

// "gemm" | "dnnl_rnn"; InvalidArgument naming option 'impl' otherwise.
Result<LstmImpl> ParseLstmImpl(const std::string& name);

struct EncoderConfig {
  std::string feature;  // batch feature name, e.g. "rgb"
  int64_t width = 0;    // D, the feature's per-frame width
  int64_t hidden = 0;   // H per direction
  int64_t layers = 1;
  layers::Pooling pooling = layers::Pooling::kLast;
  LstmImpl impl = LstmImpl::kGemm;
  // kGemm's products in bf16 (GemmLstm); kDnnlRnn always computes in float.
  bool bf16 = false;
};

class BiLstmEncoder {
 public:
  BiLstmEncoder(EncoderConfig config, std::string prefix, const dnnl::engine& engine);

  Status Declare(ParamArena& arena);
  // Uniform in +-1/sqrt(H), as torch.nn.LSTM. REQUIRES: the arena is finalized.
  void Initialize(uint64_t seed);

  // The feature from `batch`, checked: present, [B, T, width], lengths 1..T. Errors are
  // InvalidArgument naming the feature (and the video for a bad length).
  Result<const Feature*> FindFeature(const Batch& batch) const;

  // Writes the encoding [B, 2H] into columns [col, col + 2H) of enc [B, enc_ld].
  // REQUIRES: `feature` passed FindFeature().
  Status Forward(const Feature& feature, bool train, float* enc, int64_t enc_ld, int64_t col);
  // REQUIRES: the last Forward() had train=true. Writes every parameter's gradient (overwriting)
  // from denc's columns [col, col + 2H).
  Status Backward(const float* denc, int64_t enc_ld, int64_t col);
  // Where Backward() reports each layer's blocks (both directions) once their gradients are
  // final, the top layer first (reel/model.h's GradientSink); null: nowhere.
  void set_gradient_sink(GradientSink* sink) { sink_ = sink; }

  // The top layer's outputs of the last Forward(), [B, T, 2H] in original time order
  // ([forward, backward] per frame, as torch.nn.LSTM's output), zero past each length; T is the
  // batch's longest length. For tests and inspection.
  std::vector<float> TopOutputs() const;

  int64_t output_width() const { return 2 * config_.hidden; }
  const EncoderConfig& config() const { return config_; }
  // Summed over every layer and direction (kDnnlRnn; zero for kGemm).
  DnnlLstm::CacheStats cache_stats() const;
  // kGemm's time per phase since the last reset: summed over the layers, averaged over the two
  // directions (which run concurrently, so this approximates wall time). Zero for kDnnlRnn.
  LstmPhases phases() const;
  void ResetPhases();

 private:
  struct Dir {
    std::unique_ptr<DnnlLstm> lstm;  // kDnnlRnn
    std::unique_ptr<GemmLstm> gemm;  // kGemm
    ParamArena::BlockId wx = -1, wh = -1, b = -1;
    // kDnnlRnn: [T, B, I] and [T, B, H], in this direction's time order (kGemm: unused).
    std::vector<float> in, out;
  };
  struct Layer {
    Dir fwd, bwd;
    std::vector<float> packed_out;               // kGemm: [rows, 2H], [forward, backward] per frame
    std::vector<layers::bf16_t> packed_in_bf16;  // kGemm in bf16: the layer's input as bf16
  };
  Status RunForward(Dir& d, bool train);
  Status RunBackward(Dir& d, const std::vector<float>& dout, std::vector<float>& din);
  void BuildLayerInputs(size_t k);
  // kGemm (bilstm_encoder_gemm.cc): the layers on the packed layout; PoolGemm() pools one
  // direction of the top layer's packed outputs into enc, BackwardGemm() starts from the pooled
  // gradient denc.
  Status ForwardGemm(const Feature& feature);
  void PoolGemm(float* enc, int64_t enc_ld, int64_t col, bool backward_dir);
  Status BackwardGemm(const float* denc, int64_t enc_ld, int64_t col);
  Status ForwardDnnl(const Feature& feature, bool train);
  Status BackwardDnnl();

  EncoderConfig config_;
  std::string prefix_;
  dnnl::engine engine_;
  ParamArena* arena_ = nullptr;
  GradientSink* sink_ = nullptr;  // not owned
  std::vector<Layer> layers_;
  // State of the last Forward().
  int64_t batch_ = 0, steps_ = 0;
  std::vector<int32_t> lengths_;
  bool trained_ = false;
  std::vector<int32_t> argmax_fwd_, argmax_bwd_;
  // Backward scratch.
  std::vector<float> dout_fwd_, dout_bwd_, din_fwd_, din_bwd_;
  // kGemm: the batch's packed layout, the first layer's packed input [rows, width], and the
  // gradient reaching a layer's packed outputs [rows, 2H] (two buffers, one per layer in turn).
  PackedLayout layout_;
  std::vector<float> packed_input_, dpacked_, dpacked_next_;
  LstmPhases input_grad_phases_;  // kGemm: the input gradients of layers k > 0
};

}  // namespace reel::bilstm

#endif  // REEL_PLUGINS_BILSTM_SRC_BILSTM_ENCODER_H_
