#include "bilstm_model.h"

#include <omp.h>

#include <chrono>

#include "reel/layers/bf16.h"
#include "reel/layers/input.h"
#include "reel/layers/sequence.h"

namespace reel::bilstm {
namespace {

OptionSchema WithCommon(OptionSchema schema) {
  schema.push_back(IntOption("layers", 1, "stacked bidirectional layers"));
  schema.push_back(StringOption("impl", "gemm",
                                "LSTM implementation: gemm (packed sequences on large sgemm "
                                "products, fused gates) or dnnl_rnn (oneDNN's RNN primitive)"));
  schema.push_back(StringOption("pooling", "last",
                                "sequence encoding: last (final states of both directions), "
                                "mean or max over the valid frames"));
  for (OptionSpec& s : layers::HeadOptions("moe")) schema.push_back(std::move(s));
  return schema;
}

Status CheckPositive(const Options& o, const std::string& name) {
  if (o.GetInt(name) < 1)
    return InvalidArgumentError("option '" + name + "': " + std::to_string(o.GetInt(name)) +
                                " is not >= 1");
  return Status::Ok();
}

Result<EncoderConfig> StreamConfig(const Options& o, const std::string& feature_key,
                                   const std::string& width_key, const std::string& hidden_key) {
  for (const std::string& k : {width_key, hidden_key, std::string("layers")})
    REEL_RETURN_IF_ERROR(CheckPositive(o, k));
  EncoderConfig c;
  c.feature = o.GetString(feature_key);
  if (c.feature.empty()) return InvalidArgumentError("option '" + feature_key + "' is empty");
  c.width = o.GetInt(width_key);
  c.hidden = o.GetInt(hidden_key);
  c.layers = o.GetInt("layers");
  REEL_ASSIGN_OR_RETURN(c.pooling, layers::ParsePooling(o.GetString("pooling")));
  REEL_ASSIGN_OR_RETURN(c.impl, ParseLstmImpl(o.GetString("impl")));
  return c;
}

}  // namespace

OptionSchema BiLstmOptions(const std::string& feature, int64_t width, int64_t hidden) {
  return WithCommon({StringOption("feature", feature, "frame-level input feature name"),
                     IntOption("width", width, "values per frame of the input feature"),
                     IntOption("hidden", hidden, "LSTM units per direction")});
}

OptionSchema TwoStreamOptions() {
  return WithCommon({StringOption("video_feature", "rgb", "frame-level video feature name"),
                     StringOption("audio_feature", "audio", "frame-level audio feature name"),
                     IntOption("video_width", 1024, "values per frame of the video feature"),
                     IntOption("audio_width", 128, "values per frame of the audio feature"),
                     IntOption("video_hidden", 256, "video LSTM units per direction"),
                     IntOption("audio_hidden", 128, "audio LSTM units per direction")});
}

Result<std::unique_ptr<BiLstmModel>> BiLstmModel::Create(const std::string& kind,
                                                         const Options& options,
                                                         const ModelContext& context) {
  if (context.num_classes < 1)
    return InvalidArgumentError("model '" + kind + "': num_classes is " +
                                std::to_string(context.num_classes));
  std::unique_ptr<BiLstmModel> m(new BiLstmModel());
  m->kind_ = kind;
  m->classes_ = context.num_classes;
  if (context.threads < 0)
    return InvalidArgumentError("model '" + kind + "': threads is " +
                                std::to_string(context.threads));
  m->threads_ = context.threads;
  try {
    m->engine_ = dnnl::engine(dnnl::engine::kind::cpu, 0);
  } catch (const dnnl::error& e) {
    return InternalError("model '" + kind + "': no oneDNN CPU engine: " + e.what());
  }
  std::vector<std::pair<std::string, EncoderConfig>> streams;
  if (kind == "two_stream") {
    REEL_ASSIGN_OR_RETURN(EncoderConfig v,
                          StreamConfig(options, "video_feature", "video_width", "video_hidden"));
    REEL_ASSIGN_OR_RETURN(EncoderConfig a,
                          StreamConfig(options, "audio_feature", "audio_width", "audio_hidden"));
    if (v.feature == a.feature)
      return InvalidArgumentError(
          "model 'two_stream': options 'video_feature' and "
          "'audio_feature' are both '" +
          v.feature + "'");
    streams = {{"video", v}, {"audio", a}};
  } else {
    REEL_ASSIGN_OR_RETURN(EncoderConfig c, StreamConfig(options, "feature", "width", "hidden"));
    streams = {{kind == "bilstm_audio" ? "audio" : "video", c}};
  }
  if (context.precision == Precision::kBf16 && !layers::CpuHasBf16())
    return InvalidArgumentError("model '" + kind +
                                "': precision bf16 needs a CPU with AVX-512 BF16 (this one has "
                                "none); use precision fp32");
  for (auto& [prefix, config] : streams) {
    config.bf16 = context.precision == Precision::kBf16;
    m->streams_.push_back(std::make_unique<BiLstmEncoder>(config, prefix, m->engine_));
    m->enc_width_ += m->streams_.back()->output_width();
  }
  REEL_ASSIGN_OR_RETURN(m->head_, layers::MakeHead(options, "head", m->enc_width_, m->classes_));
  return m;
}

std::vector<std::string> BiLstmModel::InputFeatures() const {
  std::vector<std::string> out;
  for (const auto& s : streams_) out.push_back(s->config().feature);
  return out;
}

Status BiLstmModel::DeclareParams(ParamArena& arena) {
  arena_ = &arena;
  for (auto& s : streams_) REEL_RETURN_IF_ERROR(s->Declare(arena));
  return head_->Declare(arena);
}

Status BiLstmModel::Initialize(uint64_t seed) {
  REEL_RETURN_IF_ERROR(layers::RequireFinalizedArena(arena_, kind_, "Initialize"));
  for (auto& s : streams_) s->Initialize(seed);
  head_->Initialize(seed);
  return Status::Ok();
}

// omp_set_num_threads sets the calling thread's own team size, which the encoder's thread split
// (omp_get_max_threads) and oneDNN's sgemm both read: a trial of `reel tune` beside others uses
// its share of the cores instead of all of them.
void BiLstmModel::UseThreadBudget() const {
  if (threads_ > 0 && omp_get_max_threads() != threads_) omp_set_num_threads(threads_);
}

Result<Tensor> BiLstmModel::Forward(const Batch& batch, Mode mode) {
  UseThreadBudget();
  trained_ = false;
  REEL_RETURN_IF_ERROR(layers::RequireFinalizedArena(arena_, kind_, "Forward"));
  std::vector<const Feature*> features;
  for (auto& s : streams_) {
    REEL_ASSIGN_OR_RETURN(const Feature* f, s->FindFeature(batch));
    if (!features.empty() && f->values.dim(0) != features[0]->values.dim(0))
      return InvalidArgumentError("feature '" + s->config().feature + "' has " +
                                  std::to_string(f->values.dim(0)) + " videos, feature '" +
                                  streams_[0]->config().feature + "' has " +
                                  std::to_string(features[0]->values.dim(0)));
    features.push_back(f);
  }
  const int64_t b_n = features[0]->values.dim(0);
  const bool train = mode == Mode::kTrain;
  enc_.assign(static_cast<size_t>(b_n * enc_width_), 0.0f);
  int64_t col = 0;
  for (size_t i = 0; i < streams_.size(); ++i) {
    REEL_RETURN_IF_ERROR(streams_[i]->Forward(*features[i], train, enc_.data(), enc_width_, col));
    col += streams_[i]->output_width();
  }
  Tensor logits({b_n, classes_});
  const auto head_start = std::chrono::steady_clock::now();
  head_->Forward(enc_.data(), b_n, logits.data(), mode);
  head_seconds_ +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - head_start).count();
  batch_ = b_n;
  trained_ = train;
  return logits;
}

Status BiLstmModel::Backward(const Batch& batch, const Tensor& dlogits) {
  UseThreadBudget();
  (void)batch;  // everything Backward needs was kept by Forward
  REEL_RETURN_IF_ERROR(layers::RequireBackwardInput(kind_, trained_, dlogits, batch_, classes_));
  denc_.resize(enc_.size());
  const auto head_start = std::chrono::steady_clock::now();
  head_->Backward(enc_.data(), dlogits.data(), batch_, denc_.data());
  head_seconds_ +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - head_start).count();
  // The last stream first: its blocks lie after the earlier streams' in the arena, so their
  // buckets are reduced first (each stream's gradient depends only on its columns of denc).
  int64_t col = enc_width_;
  for (size_t i = streams_.size(); i-- > 0;) {
    col -= streams_[i]->output_width();
    REEL_RETURN_IF_ERROR(streams_[i]->Backward(denc_.data(), enc_width_, col));
  }
  return Status::Ok();
}

void BiLstmModel::SetGradientSink(GradientSink* sink) {
  head_->set_gradient_sink(sink);
  for (auto& s : streams_) s->set_gradient_sink(sink);
}

DnnlLstm::CacheStats BiLstmModel::cache_stats() const {
  DnnlLstm::CacheStats total;
  for (const auto& s : streams_) {
    total.hits += s->cache_stats().hits;
    total.misses += s->cache_stats().misses;
  }
  return total;
}

BiLstmModel::Phases BiLstmModel::phases() const {
  Phases p;
  p.head = head_seconds_;
  for (const auto& s : streams_) {
    const LstmPhases l = s->phases();
    p.lstm.projections += l.projections;
    p.lstm.recurrence += l.recurrence;
    p.lstm.gates += l.gates;
  }
  return p;
}

void BiLstmModel::ResetPhases() {
  head_seconds_ = 0;
  for (auto& s : streams_) s->ResetPhases();
}

}  // namespace reel::bilstm
