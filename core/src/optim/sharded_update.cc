// The sharded update (see sharded_update.h).
#include "optim/sharded_update.h"

#include <cmath>
#include <memory>
#include <vector>

#include "reel/core/schedule.h"

namespace reel::core {
namespace {

// Sum over the ranks of each rank's `mine`, added in rank order: the same double on every rank
// (an AllReduce of floats would round the squares' sum to a float).
Result<double> SumOverRanks(Communicator& comm, double mine, Deadline deadline) {
  std::vector<double> all(static_cast<size_t>(comm.size()));
  REEL_RETURN_IF_ERROR(comm.AllGather(std::as_bytes(std::span<const double>(&mine, 1)),
                                      std::as_writable_bytes(std::span<double>(all)), deadline)
                           .WithContext("summing the gradient's norm"));
  double sum = 0.0;
  for (double v : all) sum += v;
  return sum;
}

// How many moment vectors the configured rule keeps once it has stepped.
Result<int> StateVectors(const UpdateRuleConfig& config) {
  REEL_ASSIGN_OR_RETURN(std::unique_ptr<UpdateRule> probe, MakeUpdateRule(config));
  probe->BeginUpdate(1);
  return probe->state_vectors();
}

}  // namespace

ShardRange ShardOfRank(size_t total, const Communicator& comm) {
  return ShardOf(total, static_cast<size_t>(comm.size()), static_cast<size_t>(comm.rank()));
}

Result<double> ShardedStep(Communicator& comm, UpdateRule& rule, std::span<float> values,
                           std::span<float> grads, float lr, double clip_norm, Deadline deadline,
                           const ShardReducer& reducer) {
  REEL_RETURN_IF_ERROR(
      (reducer ? reducer(grads, deadline) : comm.ReduceScatter(grads, ReduceOp::kSum, deadline))
          .WithContext("reduce-scattering"));
  const ShardRange mine = ShardOfRank(grads.size(), comm);
  std::span<float> g = grads.subspan(mine.offset, mine.length);
  std::span<float> p = values.subspan(mine.offset, mine.length);
  const float inv = 1.0f / static_cast<float>(comm.size());
  for (float& x : g) x *= inv;
  // As ClipByGlobalNorm (reel/core/schedule.h) does over the whole gradient, the sum of squares
  // taken shard by shard.
  double norm;
  if (clip_norm > 0.0) {
    REEL_ASSIGN_OR_RETURN(double squares, SumOverRanks(comm, SumOfSquares(g), deadline));
    norm = std::sqrt(squares);
    ScaleToGlobalNorm(g, norm, clip_norm);
    rule.Apply(p, g, lr);
  } else {
    const double squares = rule.ApplySummingSquares(p, g, lr);
    REEL_ASSIGN_OR_RETURN(double sum, SumOverRanks(comm, squares, deadline));
    norm = std::sqrt(sum);
  }
  REEL_RETURN_IF_ERROR(
      comm.AllGatherShards(values, deadline).WithContext("all-gathering the parameters"));
  return norm;
}

Result<std::string> GatherRuleState(Communicator& comm, const UpdateRule& rule,
                                    const UpdateRuleConfig& config, size_t total,
                                    Deadline deadline) {
  // Before the first step no rule holds moments (an unsharded one neither); every rank has
  // taken as many steps, so all take the same branch.
  int vectors = 0;
  if (rule.steps() > 0) {
    REEL_ASSIGN_OR_RETURN(vectors, StateVectors(config));
  }
  const ShardRange mine = ShardOfRank(total, comm);
  std::vector<float> whole[2];
  for (int k = 0; k < vectors; ++k) {
    std::vector<float>& w = whole[k];
    w.assign(total, 0.0f);
    if (mine.length > 0)
      rule.CopyState(k, 0, std::span<float>(w).subspan(mine.offset, mine.length));
    REEL_RETURN_IF_ERROR(comm.AllGatherShards(w, deadline)
                             .WithContext("gathering moment vector " + std::to_string(k)));
  }
  return UpdateRule::EncodeState(rule.steps(), whole[0], whole[1]);
}

Result<std::string> RuleStateOfShard(std::string_view whole, ShardRange shard) {
  REEL_ASSIGN_OR_RETURN(UpdateRule::State state, UpdateRule::ParseState(whole));
  std::span<const float> part[2];
  for (int k = 0; k < 2; ++k) {
    const std::vector<float>& m = state.moments[k];
    if (m.empty()) continue;
    if (m.size() < shard.offset + shard.length)
      return InvalidArgumentError("update rule state holds " + std::to_string(m.size()) +
                                  " floats per moment, the shard needs [" +
                                  std::to_string(shard.offset) + ", " +
                                  std::to_string(shard.offset + shard.length) + ")");
    part[k] = std::span<const float>(m).subspan(shard.offset, shard.length);
  }
  return UpdateRule::EncodeState(state.steps, part[0], part[1]);
}

}  // namespace reel::core
