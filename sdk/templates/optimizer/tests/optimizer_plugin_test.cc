// The optimizer template's own test: on one rank (the core's in-process transport, with the
// core's collectives), one step from w = 0 with gradient 1 and rate 0.5 gives w = -0.5, and the
// second, with momentum 0.9, w = -0.5 - 0.5·1.9 = -1.45.
// usage: optimizer_plugin_test PATH/TO/libreel_template_optimizer.so
#include <cmath>
#include <cstdio>

#include "reel/core/collectives.h"
#include "reel/core/host.h"
#include "reel/core/inproc.h"

int main(int argc, char** argv) {
  if (argc != 2) return std::fprintf(stderr, "usage: %s PLUGIN.so\n", argv[0]), 2;
  auto host = reel::core::Host::Create({.plugin_files = {argv[1]}, .load_plugins = false});
  if (!host.ok()) return std::fprintf(stderr, "%s\n", host.status().ToString().c_str()), 1;
  auto optimizer = (*host)->registry().CreateOptimizer("template_momentum", {{"momentum", "0.9"}});
  auto group = reel::core::CreateInprocGroup(1);
  if (!optimizer.ok() || !group.ok()) return std::puts("create failed"), 1;
  auto comm = reel::core::WithRingCollectives(std::move((*group)[0]));
  reel::ParamArena arena;
  if (!arena.Declare("w", {1}).ok()) return 1;
  arena.Finalize();
  if (!(*optimizer)->Setup(arena, *comm).ok()) return std::puts("Setup failed"), 1;
  for (int step = 0; step < 2; ++step) {
    arena.grads()[0] = 1.0f;
    if (!(*optimizer)->Step(0.5f).ok()) return std::puts("Step failed"), 1;
  }
  std::printf("w = %.4f after two steps\n", arena.values()[0]);
  return std::abs(arena.values()[0] - (-1.45f)) < 1e-6f ? 0 : 1;
}
