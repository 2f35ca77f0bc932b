// TimeModel (measure.h) steps as the trainer does (core/src/train/trainer.cc, TrainStep): with
// trainer.stop_on_nonfinite the timed step carries the trainer's pass over the gradient, so a
// profile prices it; that pass is seen working by the error it gives on a poisoned batch.
#include "measure.h"

#include <gtest/gtest.h>

#include <cmath>

#include "reel/core/conformance.h"
#include "reel/core/registry.h"
#include "train/testing.h"

namespace reel::cli {
namespace {

TEST(TimeModelTest, TheStepChecksTheGradientAsTheTrainerDoes) {
  core::Registry registry;
  ASSERT_TRUE(registry.RegisterBuiltins().ok());
  ASSERT_TRUE(
      registry
          .RegisterFrom(
              "measure_test", "", nullptr,
              [](Registrar& r) noexcept {
                return r.Add<Model>(
                    {"tiny_linear", "TinyModel", {}},
                    [](const Options&, const ModelContext& ctx) -> Result<std::unique_ptr<Model>> {
                      return std::unique_ptr<Model>(
                          new core::testing::TinyModel(6, static_cast<int>(ctx.num_classes)));
                    });
              })
          .ok());
  core::ConformanceOptions shape;
  shape.num_classes = 8;
  shape.features["x"] = {6, 1};
  auto model = registry.CreateModel("tiny_linear", {}, {.num_classes = shape.num_classes});
  ASSERT_TRUE(model.ok()) << model.status();
  auto batch = core::SyntheticBatch(**model, shape, 4, 1);
  ASSERT_TRUE(batch.ok()) << batch.status();
  batch->features.begin()->second.values.data()[0] = std::nanf("");

  StepInputs inputs;
  inputs.batches.push_back(*batch);
  inputs.clip_norm = 1.0;  // the sync optimizer clips, so the step checks with its own pass
  inputs.stop_on_nonfinite = true;
  auto checked = TimeModel(registry, "tiny_linear", {}, shape, 4, 1, 1, "adam", inputs);
  ASSERT_FALSE(checked.ok());
  EXPECT_EQ(checked.status().code(), StatusCode::kDataLoss) << checked.status();

  inputs.stop_on_nonfinite = false;  // the trainer would train on: so does the timing
  auto unchecked = TimeModel(registry, "tiny_linear", {}, shape, 4, 1, 1, "adam", inputs);
  ASSERT_TRUE(unchecked.ok()) << unchecked.status();
  EXPECT_EQ(unchecked->step.size(), 1u);
}

}  // namespace
}  // namespace reel::cli
