// Options of the async_sgd optimizer (see async_config.h).
#include "async_config.h"

namespace reel::async_sgd {
namespace {

Status Bad(const std::string& option, const std::string& why) {
  return InvalidArgumentError("async_sgd option '" + option + "': " + why);
}

}  // namespace

OptionSchema AsyncOptions() {
  OptionSchema s = UpdateRuleOptions();
  s.push_back(IntOption("servers", 1,
                        "parameter-server ranks: the first `servers` ranks serve a contiguous "
                        "shard each and do not train (ignored when colocated)"));
  s.push_back(BoolOption("colocated", false,
                         "every rank trains and also serves one shard of the parameters"));
  s.push_back(IntOption("pull_every", 1, "local steps between pulls of fresh weights"));
  s.push_back(IntOption("push_every", 1,
                        "local steps whose gradients are accumulated (averaged) into one push"));
  s.push_back(StringOption("frequency", "step",
                           "step: push gradients every push_every steps (Downpour); epoch: train "
                           "locally and push the parameter delta once per epoch (Elephas)"));
  s.push_back(BoolOption("apply_locally", false,
                         "Downpour's client (Dean et al. 2012): apply every step's gradient to "
                         "the local copy (plain sgd) and push the sum of the gradients every "
                         "push_every steps; false: the local copy changes only by pulls, and a "
                         "push carries the mean (frequency: step, no overlap)"));
  s.push_back(BoolOption("locking", true,
                         "serialise updates per shard; false applies concurrent pushes "
                         "Hogwild-style (rule sgd only)"));
  s.push_back(BoolOption("staleness_aware", false,
                         "divide a push's learning rate by its staleness (Zhang et al. 2016)"));
  s.push_back(IntOption("max_staleness", 0,
                        "a push computed more than this many updates behind its shard is refused "
                        "before it is applied, and its worker pulls before its next step; "
                        "0: no bound"));
  s.push_back(BoolOption("overlap", false,
                         "push and pull on a thread of their own while the next step computes "
                         "(its weights are then one step older; frequency: step only)"));
  s.push_back(BoolOption("pipeline", true,
                         "a step that pushes and pulls does both in one exchange: the push in "
                         "chunks, the fresh weights back in chunks once the server applied it "
                         "(locking only); false: push, await the ack, then pull"));
  s.push_back(IntOption("pipeline_chunk", 262144, "floats per chunk of a pipelined push+pull"));
  s.push_back(IntOption("server_checkpoint_every", 0,
                        "updates of its shard between the checkpoints each server writes of its "
                        "own shard into trainer.checkpoint_dir; 0: about as often as "
                        "trainer.checkpoint_every_steps (its steps x workers / push_every), "
                        "-1: never"));
  s.push_back(IntOption("timeout_ms", 600000,
                        "deadline of each message in milliseconds (a lost peer fails the call "
                        "instead of hanging); 0 waits forever"));
  return s;
}

Result<AsyncConfig> ParseAsyncConfig(const Options& o, const OptimizerContext& ctx) {
  AsyncConfig c;
  c.rule = UpdateRuleConfigFrom(o);
  REEL_RETURN_IF_ERROR(MakeUpdateRule(c.rule).status());
  const int64_t servers = o.GetInt("servers");
  c.colocated = o.GetBool("colocated");
  c.pull_every = o.GetInt("pull_every");
  c.push_every = o.GetInt("push_every");
  const std::string frequency = o.GetString("frequency");
  c.locking = o.GetBool("locking");
  c.staleness_aware = o.GetBool("staleness_aware");
  c.max_staleness = o.GetInt("max_staleness");
  c.timeout_ms = o.GetInt("timeout_ms");
  c.overlap = o.GetBool("overlap");
  c.apply_locally = o.GetBool("apply_locally");
  c.pipeline = o.GetBool("pipeline");
  c.pipeline_chunk = o.GetInt("pipeline_chunk");
  c.server_checkpoint_every = o.GetInt("server_checkpoint_every");
  if (c.server_checkpoint_every < -1)
    return Bad("server_checkpoint_every", std::to_string(c.server_checkpoint_every) +
                                              " is below -1 (0: the trainer's "
                                              "cadence, -1: never)");
  if (frequency != "step" && frequency != "epoch")
    return Bad("frequency", "'" + frequency + "' is neither 'step' nor 'epoch'");
  c.per_epoch = frequency == "epoch";
  if (c.overlap && c.per_epoch)
    return Bad("overlap",
               "true needs frequency 'step' (an epoch's single push has nothing to "
               "overlap with)");
  if (c.apply_locally && (c.per_epoch || c.overlap))
    return Bad("apply_locally",
               "true needs frequency 'step' and overlap false (the local copy is updated in "
               "line with the step)");
  if (c.pull_every < 1) return Bad("pull_every", std::to_string(c.pull_every) + " is below 1");
  if (c.push_every < 1) return Bad("push_every", std::to_string(c.push_every) + " is below 1");
  if (c.max_staleness < 0)
    return Bad("max_staleness", std::to_string(c.max_staleness) + " is negative (0: no bound)");
  if (c.timeout_ms < 0) return Bad("timeout_ms", std::to_string(c.timeout_ms) + " is negative");
  if (c.pipeline_chunk < 1 || c.pipeline_chunk > (int64_t{1} << 28))
    return Bad("pipeline_chunk",
               std::to_string(c.pipeline_chunk) + " is outside [1, 268435456] floats");
  if (!c.locking && c.rule.rule != "sgd")
    return Bad("locking", "false (Hogwild) needs rule 'sgd': rule '" + c.rule.rule +
                              "' keeps per-parameter state that concurrent pushes would corrupt");
  if (c.colocated) {
    c.servers = ctx.world_size;
    return c;
  }
  if (servers < 1) return Bad("servers", std::to_string(servers) + " is below 1");
  if (servers >= ctx.world_size)
    return Bad("servers", std::to_string(servers) + " server rank(s) in a world of " +
                              std::to_string(ctx.world_size) +
                              " leave no worker: start more ranks, lower 'servers' or set "
                              "'colocated: true'");
  c.servers = static_cast<int>(servers);
  return c;
}

Roles RolesFor(const AsyncConfig& c, int world) {
  Roles r;
  r.world = world;
  r.colocated = c.colocated;
  r.servers = c.colocated ? world : c.servers;
  r.first_worker = c.colocated ? 0 : c.servers;
  return r;
}

}  // namespace reel::async_sgd
