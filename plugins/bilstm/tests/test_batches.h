// Synthetic batches and model construction for the bilstm tests.
#ifndef REEL_PLUGINS_BILSTM_TESTS_TEST_BATCHES_H_
#define REEL_PLUGINS_BILSTM_TESTS_TEST_BATCHES_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bilstm_model.h"
#include "reel/batch.h"
#include "reel/layers/init.h"

namespace reel::bilstm::testing {

// Frames of one video: `length` x `width` values in [-1, 1), from (seed, feature).
inline std::vector<float> VideoFrames(uint64_t seed, const std::string& feature, int64_t length,
                                      int64_t width) {
  layers::Rng rng(layers::BlockSeed(seed, feature));
  std::vector<float> v(static_cast<size_t>(length * width));
  for (float& x : v) x = rng.Symmetric(1.0f);
  return v;
}

// Adds feature `name` [B, steps, width] to `batch`: video b's frames come from video_seeds[b], so
// the same seed gives the same video whatever batch it is in; padding is zero.
inline void AddFeature(Batch& batch, const std::string& name, int64_t width, int64_t steps,
                       const std::vector<int32_t>& lengths,
                       const std::vector<uint64_t>& video_seeds) {
  const int64_t b_n = static_cast<int64_t>(lengths.size());
  Feature f;
  f.values = Tensor({b_n, steps, width});
  f.lengths = lengths;
  for (int64_t b = 0; b < b_n; ++b) {
    std::vector<float> frames = VideoFrames(video_seeds[b], name, lengths[b], width);
    std::copy(frames.begin(), frames.end(), f.values.data() + b * steps * width);
  }
  batch.features[name] = std::move(f);
}

// Ids "v<seed>", labels {seed % classes, (seed * 7 + 1) % classes}.
inline void AddIdsAndLabels(Batch& batch, const std::vector<uint64_t>& video_seeds,
                            int64_t classes) {
  for (uint64_t s : video_seeds) {
    batch.ids.push_back("v" + std::to_string(s));
    batch.label_ids.push_back(static_cast<int32_t>(s % classes));
    const int32_t second = static_cast<int32_t>((s * 7 + 1) % classes);
    if (second != batch.label_ids.back()) batch.label_ids.push_back(second);
    batch.label_offsets.push_back(static_cast<int64_t>(batch.label_ids.size()));
  }
}

struct Built {
  std::unique_ptr<ParamArena> arena;
  std::unique_ptr<BiLstmModel> model;
};

// Builds, declares, finalizes and initializes a model; fails the test on error.
inline Built Build(const std::string& kind, const std::map<std::string, std::string>& given,
                   int64_t classes, uint64_t seed = 1, int threads = 0,
                   Precision precision = Precision::kFp32) {
  Built out;
  OptionSchema schema = kind == "two_stream"     ? TwoStreamOptions()
                        : kind == "bilstm_audio" ? BiLstmOptions("audio", 128, 128)
                                                 : BiLstmOptions("rgb", 1024, 256);
  Result<Options> options = ParseOptions(schema, given, kind);
  EXPECT_TRUE(options.ok()) << options.status();
  if (!options.ok()) return out;
  ModelContext context;
  context.num_classes = classes;
  context.threads = threads;
  context.precision = precision;
  auto model = BiLstmModel::Create(kind, *options, context);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return out;
  out.model = std::move(*model);
  out.arena = std::make_unique<ParamArena>();
  EXPECT_TRUE(out.model->DeclareParams(*out.arena).ok());
  out.arena->Finalize();
  EXPECT_TRUE(out.model->Initialize(seed).ok());
  return out;
}

}  // namespace reel::bilstm::testing

#endif  // REEL_PLUGINS_BILSTM_TESTS_TEST_BATCHES_H_
