#include "video_level_model.h"

#include <cerrno>
#include <cstdlib>

#include "reel/layers/input.h"

namespace reel::moe {

OptionSchema VideoLevelOptions(bool with_experts) {
  OptionSchema schema = {
      StringListOption("features", "mean_rgb,mean_audio",
                       "video-level input features, concatenated in this order"),
      StringListOption("widths", "1024,128", "values per video of each feature, in order")};
  if (with_experts)
    schema.push_back(IntOption("experts", 2, "experts per class (plus the dummy expert)"));
  return schema;
}

Result<std::unique_ptr<VideoLevelModel>> VideoLevelModel::Create(const std::string& kind,
                                                                 const Options& options,
                                                                 const ModelContext& context) {
  if (context.num_classes < 1)
    return InvalidArgumentError("model '" + kind + "': num_classes is " +
                                std::to_string(context.num_classes));
  std::unique_ptr<VideoLevelModel> m(new VideoLevelModel());
  m->kind_ = kind;
  m->classes_ = context.num_classes;
  m->features_ = options.GetStringList("features");
  const std::vector<std::string> widths = options.GetStringList("widths");
  if (m->features_.empty()) return InvalidArgumentError("option 'features' is empty");
  if (widths.size() != m->features_.size())
    return InvalidArgumentError("option 'widths' has " + std::to_string(widths.size()) +
                                " values for " + std::to_string(m->features_.size()) +
                                " features (option 'features')");
  for (const std::string& w : widths) {
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(w.c_str(), &end, 10);
    if (w.empty() || *end != '\0' || errno == ERANGE || v < 1)
      return InvalidArgumentError("option 'widths': '" + w + "' is not a positive integer");
    m->widths_.push_back(v);
    m->input_width_ += v;
  }
  if (kind == "moe") {
    const int64_t experts = options.GetInt("experts");
    if (experts < 1)
      return InvalidArgumentError("option 'experts': " + std::to_string(experts) + " is not >= 1");
    m->head_ = std::make_unique<layers::MoeHead>("head", m->input_width_, m->classes_, experts);
  } else {
    m->head_ = std::make_unique<layers::LogisticHead>("head", m->input_width_, m->classes_);
  }
  return m;
}

Status VideoLevelModel::DeclareParams(ParamArena& arena) {
  arena_ = &arena;
  return head_->Declare(arena);
}

Status VideoLevelModel::Initialize(uint64_t seed) {
  REEL_RETURN_IF_ERROR(layers::RequireFinalizedArena(arena_, kind_, "Initialize"));
  head_->Initialize(seed);
  return Status::Ok();
}

Result<Tensor> VideoLevelModel::Forward(const Batch& batch, Mode mode) {
  trained_ = false;
  REEL_RETURN_IF_ERROR(layers::RequireFinalizedArena(arena_, kind_, "Forward"));
  std::vector<const Feature*> feats;
  int64_t b_n = -1;
  for (size_t i = 0; i < features_.size(); ++i) {
    REEL_ASSIGN_OR_RETURN(const Feature* f,
                          layers::CheckedFeature(batch, features_[i], widths_[i], b_n));
    b_n = f->values.dim(0);
    feats.push_back(f);
  }
  x_.assign(static_cast<size_t>(b_n * input_width_), 0.0f);
  int64_t col = 0;
  for (size_t i = 0; i < feats.size(); ++i) {
    const Feature& f = *feats[i];
    const int64_t t_n = f.values.dim(1), w = widths_[i];
    for (int64_t b = 0; b < b_n; ++b) {
      float* out = x_.data() + b * input_width_ + col;
      const int32_t len = f.lengths[static_cast<size_t>(b)];
      for (int32_t t = 0; t < len; ++t) {
        const float* frame = f.values.data() + (b * t_n + t) * w;
        for (int64_t j = 0; j < w; ++j) out[j] += frame[j];
      }
      if (len > 1)
        for (int64_t j = 0; j < w; ++j) out[j] /= static_cast<float>(len);
    }
    col += w;
  }
  Tensor logits({b_n, classes_});
  head_->Forward(x_.data(), b_n, logits.data(), mode);
  batch_ = b_n;
  trained_ = mode == Mode::kTrain;
  return logits;
}

void VideoLevelModel::SetGradientSink(GradientSink* sink) { head_->set_gradient_sink(sink); }

Status VideoLevelModel::Backward(const Batch& batch, const Tensor& dlogits) {
  (void)batch;  // the head's input was kept by Forward
  REEL_RETURN_IF_ERROR(layers::RequireBackwardInput(kind_, trained_, dlogits, batch_, classes_));
  head_->Backward(x_.data(), dlogits.data(), batch_, nullptr);
  return Status::Ok();
}

}  // namespace reel::moe
