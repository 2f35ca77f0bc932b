// The model template's own test, through the public API as a host uses it: load the module,
// build the model, and check that one gradient step on a batch lowers the core's loss there.
// usage: model_plugin_test PATH/TO/libreel_template_model.so
#include <cstdio>

#include "reel/core/host.h"
#include "reel/core/loss.h"

int main(int argc, char** argv) {
  if (argc != 2) return std::fprintf(stderr, "usage: %s PLUGIN.so\n", argv[0]), 2;
  auto host = reel::core::Host::Create({.plugin_files = {argv[1]}, .load_plugins = false});
  if (!host.ok()) return std::fprintf(stderr, "%s\n", host.status().ToString().c_str()), 1;
  reel::ModelContext ctx{.num_classes = 3};
  auto model = (*host)->registry().CreateModel("template_linear", {{"width", "4"}}, ctx);
  reel::ParamArena arena;
  if (!model.ok() || !(*model)->DeclareParams(arena).ok()) return std::puts("create failed"), 1;
  arena.Finalize();
  if (!(*model)->Initialize(1).ok()) return std::puts("Initialize failed"), 1;

  reel::Batch batch;
  batch.ids = {"a", "b"};
  batch.label_offsets = {0, 1, 2};
  batch.label_ids = {0, 2};
  batch.features["mean_rgb"] = {reel::Tensor({2, 1, 4}, {1, 0, 0, 1, 0, 1, 1, 0}), {1, 1}};
  double loss[2];
  for (int step = 0; step < 2; ++step) {
    auto logits = (*model)->Forward(batch, reel::Mode::kTrain);
    auto l = logits.ok() ? reel::core::SigmoidCrossEntropy(*logits, batch)
                         : reel::Result<reel::core::LossResult>(logits.status());
    if (!l.ok()) return std::fprintf(stderr, "%s\n", l.status().ToString().c_str()), 1;
    loss[step] = l->loss;
    if (!(*model)->Backward(batch, l->dlogits).ok()) return std::puts("Backward failed"), 1;
    for (size_t i = 0; i < arena.values().size(); ++i) arena.values()[i] -= 0.5f * arena.grads()[i];
  }
  std::printf("loss %.4f -> %.4f after one step\n", loss[0], loss[1]);
  return loss[1] < loss[0] ? 0 : 1;
}
