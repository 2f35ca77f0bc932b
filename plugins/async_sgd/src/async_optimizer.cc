// The async_sgd optimizer (see async_optimizer.h).
#include "async_optimizer.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <thread>

#include "shard_states.h"

namespace reel::async_sgd {
namespace {

constexpr char kOptimizerStateMagic[4] = {'R', 'A', 'S', 'G'};
constexpr uint32_t kStateVersion = 1;

}  // namespace

Result<std::unique_ptr<AsyncOptimizer>> AsyncOptimizer::Create(const Options& options,
                                                               const OptimizerContext& ctx) {
  REEL_ASSIGN_OR_RETURN(AsyncConfig config, ParseAsyncConfig(options, ctx));
  return std::unique_ptr<AsyncOptimizer>(new AsyncOptimizer(std::move(config), ctx));
}

AsyncOptimizer::~AsyncOptimizer() {
  // A colocated server whose workers never all said done (the run failed elsewhere, or the owner
  // never called Finish): stop it before its state goes away.
  if (colocated_) {
    server_->Stop();
    colocated_->join();
  }
}

bool AsyncOptimizer::IsServerOnly() const { return !roles_.trains(ctx_.rank); }

Status AsyncOptimizer::Ready(const char* call) {
  if (comm_ == nullptr)
    return FailedPreconditionError(std::string("async_sgd: ") + call + "() before Setup()");
  // The first call after Setup() on every rank (a worker's Refresh or Step, a server's Serve).
  if (!first_use_checked_) {
    first_use_checked_ = true;
    REEL_RETURN_IF_ERROR(RefuseShardsWithoutCheckpoint());
  }
  return Status::Ok();
}

Status AsyncOptimizer::Setup(ParamArena& arena, Communicator& comm) {
  if (!arena.finalized()) return FailedPreconditionError("async_sgd: the arena is not finalized");
  if (comm.rank() != ctx_.rank || comm.size() != ctx_.world_size)
    return InvalidArgumentError("async_sgd: set up for rank " + std::to_string(ctx_.rank) + " of " +
                                std::to_string(ctx_.world_size) + ", given rank " +
                                std::to_string(comm.rank()) + " of " + std::to_string(comm.size()));
  if (arena.total_size() < roles_.servers)
    return InvalidArgumentError("async_sgd: " + std::to_string(roles_.servers) +
                                " shards for a model of " + std::to_string(arena.total_size()) +
                                " parameter floats: every shard needs at least one");
  comm_ = &comm;
  // Every rank must hold the same layout, and all start from rank 0's values.
  int64_t mine = arena.total_size();
  std::vector<int64_t> all(static_cast<size_t>(comm.size()));
  const Deadline d = config_.timeout_ms == 0
                         ? NoDeadline()
                         : DeadlineIn(std::chrono::milliseconds(config_.timeout_ms));
  REEL_RETURN_IF_ERROR(comm.AllGather(std::as_bytes(std::span<const int64_t>(&mine, 1)),
                                      std::as_writable_bytes(std::span<int64_t>(all)), d)
                           .WithContext("async_sgd: comparing parameter counts"));
  for (int r = 0; r < comm.size(); ++r)
    if (all[static_cast<size_t>(r)] != mine)
      return InvalidArgumentError("async_sgd: rank " + std::to_string(comm.rank()) + " has " +
                                  std::to_string(mine) + " parameter floats, rank " +
                                  std::to_string(r) + " has " +
                                  std::to_string(all[static_cast<size_t>(r)]));
  REEL_RETURN_IF_ERROR(comm.Broadcast(std::as_writable_bytes(arena.values()), 0, d)
                           .WithContext("async_sgd: broadcasting rank 0's initial parameters"));
  if (roles_.serves(ctx_.rank)) {
    const ShardRange r = ShardOf(arena.total_size(), roles_.servers, ctx_.rank);
    REEL_ASSIGN_OR_RETURN(server_,
                          ShardServer::Create(config_, roles_, comm, ctx_.rank,
                                              arena.values().subspan(static_cast<size_t>(r.offset),
                                                                     static_cast<size_t>(r.size))));
  }
  if (offered_ && offered_->storage != nullptr && !offered_->dir.empty()) {
    shard_checkpoints_ =
        std::make_shared<ShardCheckpoints>(*offered_->storage, offered_->dir, offered_->keep);
    if (server_ && ServerCheckpointEvery() > 0)
      server_->WriteCheckpoints(shard_checkpoints_, ServerCheckpointEvery());
  }
  if (roles_.trains(ctx_.rank)) {
    REEL_ASSIGN_OR_RETURN(worker_, Worker::Create(config_, roles_, comm, arena));
  }
  arena_ = &arena;
  if (pending_state_) {
    std::string state = std::move(*pending_state_);
    pending_state_.reset();
    return RestoreState(state);
  }
  return Status::Ok();
}

void AsyncOptimizer::StartColocatedServer() {
  if (!config_.colocated || colocated_ || server_ == nullptr) return;
  colocated_ = std::make_unique<std::thread>([this] { colocated_status_ = server_->Run(); });
}

Status AsyncOptimizer::JoinColocatedServer() {
  if (!colocated_) return Status::Ok();
  colocated_->join();
  colocated_.reset();
  return colocated_status_;
}

Status AsyncOptimizer::Step(float lr) {
  REEL_RETURN_IF_ERROR(Ready("Step"));
  if (!worker_)
    return FailedPreconditionError("async_sgd: Step() on server-only rank " +
                                   std::to_string(ctx_.rank));
  StartColocatedServer();
  return worker_->Step(lr);
}

Status AsyncOptimizer::EndEpoch(int64_t) {
  REEL_RETURN_IF_ERROR(Ready("EndEpoch"));
  if (!worker_) return Status::Ok();
  StartColocatedServer();
  return worker_->EndEpoch();
}

Status AsyncOptimizer::Refresh() {
  REEL_RETURN_IF_ERROR(Ready("Refresh"));
  if (!worker_) return Status::Ok();
  StartColocatedServer();
  return worker_->Refresh();
}

Status AsyncOptimizer::Serve() {
  REEL_RETURN_IF_ERROR(Ready("Serve"));
  if (!server_ || worker_)
    return FailedPreconditionError("async_sgd: Serve() on rank " + std::to_string(ctx_.rank) +
                                   ", which is not a server-only rank");
  served_ = true;
  return server_->Run();
}

Status AsyncOptimizer::Finish() {
  REEL_RETURN_IF_ERROR(Ready("Finish"));
  if (finished_) return Status::Ok();
  finished_ = true;
  // A server-only rank whose owner never called Serve(): its workers are waiting for it.
  if (!worker_ && !served_) return Serve();
  if (worker_) {
    StartColocatedServer();
    REEL_RETURN_IF_ERROR(worker_->Finish());
  }
  return JoinColocatedServer();
}

int64_t AsyncOptimizer::ScheduleStep(int64_t local_step) const {
  return worker_ ? worker_->ScheduleStep(local_step) : local_step;
}

Result<std::optional<AppliedWork>> AsyncOptimizer::AppliedWorkOf(int rank) {
  REEL_RETURN_IF_ERROR(Ready("AppliedWorkOf"));
  if (!worker_) return std::optional<AppliedWork>();
  StartColocatedServer();
  REEL_ASSIGN_OR_RETURN(AppliedWork work, worker_->AppliedWorkOf(rank));
  return std::optional<AppliedWork>(work);
}

Result<std::optional<int64_t>> AsyncOptimizer::ExamplesApplied() {
  REEL_RETURN_IF_ERROR(Ready("ExamplesApplied"));
  if (!worker_) return std::optional<int64_t>();
  StartColocatedServer();
  REEL_ASSIGN_OR_RETURN(const int64_t examples, worker_->ExamplesApplied());
  return std::optional<int64_t>(examples);
}

Result<std::optional<int>> AsyncOptimizer::LeadAfter(int lost) {
  REEL_RETURN_IF_ERROR(Ready("LeadAfter"));
  if (!worker_ || config_.colocated) return std::optional<int>();
  REEL_ASSIGN_OR_RETURN(const int lead, worker_->LeadAfter(lost));
  return std::optional<int>(lead);
}

std::string AsyncOptimizer::Encode(const std::vector<std::string>& shards) {
  std::string out(kOptimizerStateMagic, sizeof kOptimizerStateMagic);
  auto put = [&out](const auto& v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(kStateVersion);
  put(static_cast<uint32_t>(shards.size()));
  for (const std::string& s : shards) {
    put(static_cast<uint64_t>(s.size()));
    out += s;
  }
  return out;
}

Result<std::string> AsyncOptimizer::SaveState() {
  REEL_RETURN_IF_ERROR(Ready("SaveState"));
  if (!worker_) return FailedPreconditionError("async_sgd: SaveState() on a server-only rank");
  StartColocatedServer();
  REEL_ASSIGN_OR_RETURN(std::vector<std::string> shards, worker_->CollectCut());
  return Encode(shards);
}

Result<std::vector<std::string>> AsyncOptimizer::SplitState(std::string_view state) const {
  char magic[4];
  uint32_t version = 0, shards = 0;
  if (!TakeBytes(state, magic, sizeof magic) ||
      std::memcmp(magic, kOptimizerStateMagic, sizeof kOptimizerStateMagic) != 0)
    return DataLossError(
        "async_sgd state: missing the 'RASG' header (saved by another optimizer?)");
  if (!TakeBytes(state, &version, sizeof version) || !TakeBytes(state, &shards, sizeof shards))
    return DataLossError("async_sgd state is truncated");
  if (version != kStateVersion)
    return DataLossError("async_sgd state has version " + std::to_string(version) +
                         ", this build reads version " + std::to_string(kStateVersion));
  std::vector<std::string_view> parts;
  for (uint32_t s = 0; s < shards; ++s) {
    uint64_t n = 0;
    if (!TakeBytes(state, &n, sizeof n) || n > state.size() || n < sizeof(int64_t))
      return DataLossError("async_sgd state: shard " + std::to_string(s) + " is truncated");
    parts.push_back(state.substr(0, n));
    state.remove_prefix(n);
  }
  if (!state.empty()) return DataLossError("async_sgd state has trailing bytes");
  if (static_cast<int>(shards) == roles_.servers)
    return std::vector<std::string>(parts.begin(), parts.end());
  // Another number of servers (colocated ranks that came back fewer or more): cut anew.
  if (arena_ == nullptr) return std::vector<std::string>();  // checked again after Setup
  Result<std::vector<std::string>> recut =
      ReshardStates(parts, arena_->total_size(), roles_.servers);
  if (!recut.ok())
    return recut.status().WithContext("async_sgd: the checkpoint's " + std::to_string(shards) +
                                      " shard states for " + std::to_string(roles_.servers) +
                                      " servers");
  return recut;
}

// About as often as the trainer's checkpoints: each worker step (push_every of them per push)
// updates every shard once per worker; an epoch's delta once per worker and epoch.
int64_t AsyncOptimizer::ServerCheckpointEvery() const {
  if (config_.server_checkpoint_every != 0)
    return std::max<int64_t>(0, config_.server_checkpoint_every);
  if (!offered_ || offered_->every_steps <= 0) return 0;
  if (config_.per_epoch) return roles_.workers();
  return std::max<int64_t>(1, offered_->every_steps * roles_.workers() / config_.push_every);
}

Result<ShardSet> AsyncOptimizer::NewestShardSet() {
  // A rank that cannot list the sets still joins the agreement below (-2), so that the others
  // fail with it instead of waiting for it.
  ShardSet newest;
  Status listed = Status::Ok();
  if (shard_checkpoints_) {
    Result<std::vector<ShardSet>> sets = shard_checkpoints_->CompleteSets();
    if (!sets.ok()) {
      listed = sets.status().WithContext("async_sgd rank " + std::to_string(ctx_.rank) +
                                         ": listing the servers' shard checkpoints");
      newest.version = -2;
    } else if (!sets->empty()) {
      // Of two layouts' sets of one version (rare), this run's own needs no cutting.
      newest = sets->back();
      for (const ShardSet& s : *sets)
        if (s.version == newest.version && s.shards == roles_.servers) newest = s;
    }
  }
  // Every rank must have seen the same set (a rank on another disk may not see it at all).
  const int64_t mine[2] = {newest.version, newest.shards};
  std::vector<int64_t> all(2 * static_cast<size_t>(comm_->size()));
  const Deadline d = config_.timeout_ms == 0
                         ? NoDeadline()
                         : DeadlineIn(std::chrono::milliseconds(config_.timeout_ms));
  REEL_RETURN_IF_ERROR(comm_
                           ->AllGather(std::as_bytes(std::span<const int64_t>(mine)),
                                       std::as_writable_bytes(std::span<int64_t>(all)), d)
                           .WithContext("async_sgd: agreeing on the shard set to resume from"));
  REEL_RETURN_IF_ERROR(listed);
  auto name = [](int64_t version, int64_t shards) {
    return version == -2 ? std::string("none (it could not list them)")
           : version < 0
               ? std::string("none")
               : "version " + std::to_string(version) + " of " + std::to_string(shards) + " shards";
  };
  for (int r = 0; r < comm_->size(); ++r) {
    const int64_t version = all[2 * static_cast<size_t>(r)];
    const int64_t shards = all[2 * static_cast<size_t>(r) + 1];
    if (version != newest.version || shards != newest.shards)
      return FailedPreconditionError(
          "async_sgd: rank " + std::to_string(ctx_.rank) + " sees newest complete shard set " +
          name(newest.version, newest.shards) + ", rank " + std::to_string(r) + " sees " +
          name(version, shards) + "; every rank must see the same checkpoint directory");
  }
  return newest;
}

Result<ShardSet> AsyncOptimizer::NewerShardSet(const std::vector<int64_t>& versions) {
  REEL_ASSIGN_OR_RETURN(const ShardSet newest, NewestShardSet());
  const int64_t restored = *std::max_element(versions.begin(), versions.end());
  const ShardSet chosen = newest.version > restored ? newest : ShardSet{};
  if (ctx_.rank == 0 && shard_checkpoints_) {
    std::string found = "none";
    if (newest.version >= 0) {
      found = "version " + std::to_string(newest.version);
      if (newest.shards != roles_.servers)
        found += " of " + std::to_string(newest.shards) + " shards";
    }
    std::string from = "the checkpoint";
    if (chosen.version >= 0) {
      from = "the shard set";
      if (chosen.shards != roles_.servers)
        from += ", cut anew for " + std::to_string(roles_.servers) + " servers";
    }
    std::fprintf(stderr,
                 "async_sgd: newest complete shard set in %s: %s; the checkpoint's shards are at "
                 "version %lld at most: resuming the shards from %s\n",
                 shard_checkpoints_->dir().c_str(), found.c_str(), static_cast<long long>(restored),
                 from.c_str());
  }
  return chosen;
}

// The set's values and state of this rank's shard. A set of another number of servers is read
// whole: its values laid end to end are the arena's, its states are cut anew (shard_states.h).
Result<ShardSnapshot> AsyncOptimizer::ReadShardOf(const ShardSet& set) {
  if (set.shards == roles_.servers)
    return shard_checkpoints_->Read(set.version, ctx_.rank, roles_.servers);
  const int64_t total = arena_->total_size();
  std::vector<float> values;
  values.reserve(static_cast<size_t>(total));
  std::vector<std::string> states;
  for (int s = 0; s < set.shards; ++s) {
    REEL_ASSIGN_OR_RETURN(ShardSnapshot part, shard_checkpoints_->Read(set.version, s, set.shards));
    const int64_t want = ShardOf(total, set.shards, s).size;
    if (static_cast<int64_t>(part.values.size()) != want)
      return DataLossError(shard_checkpoints_->Uri(ShardFileName(set.version, s, set.shards)) +
                           ": holds " + std::to_string(part.values.size()) +
                           " values, its shard of this model has " + std::to_string(want));
    values.insert(values.end(), part.values.begin(), part.values.end());
    states.push_back(std::move(part.state));
  }
  const std::vector<std::string_view> parts(states.begin(), states.end());
  REEL_ASSIGN_OR_RETURN(std::vector<std::string> recut,
                        ReshardStates(parts, total, roles_.servers));
  const ShardRange r = ShardOf(total, roles_.servers, ctx_.rank);
  ShardSnapshot mine{
      ctx_.rank, roles_.servers, set.version, {}, std::move(recut[static_cast<size_t>(ctx_.rank)])};
  mine.values.assign(values.begin() + r.offset, values.begin() + r.offset + r.size);
  return mine;
}

// A resume that found no trainer checkpoint: the trainer started afresh (Setup without
// RestoreState). The servers' own files cannot stand in for it: they hold no data positions and
// no step, so the run could honour neither its budget nor its data order; and starting afresh
// would delete them (ShardServer::Run). Every rank refuses instead, naming both.
Status AsyncOptimizer::RefuseShardsWithoutCheckpoint() {
  if (!offered_ || !offered_->resume || restored_) return Status::Ok();
  REEL_ASSIGN_OR_RETURN(const ShardSet newest, NewestShardSet());
  if (newest.version < 0) return Status::Ok();
  return FailedPreconditionError(
      "async_sgd: --resume found no trainer checkpoint (ckpt-*.reelckpt) in " + offered_->dir +
      ", but the servers' complete shard set of version " + std::to_string(newest.version) + " (" +
      ShardFileName(newest.version, 0, newest.shards) +
      " and the other shards) is there; the shard files hold no data positions and no step, so "
      "they cannot resume the run alone. Run without --resume to start afresh (the servers "
      "then delete those files), or move them away first to keep them");
}

// The servers take their shard's values from the arena as it is then: the trainer restores the
// checkpoint's parameters before Setup().
Status AsyncOptimizer::RestoreState(std::string_view state) {
  REEL_ASSIGN_OR_RETURN(std::vector<std::string> parts, SplitState(state));
  if (arena_ == nullptr) {  // before Setup: applied at its end
    pending_state_ = std::string(state);
    return Status::Ok();
  }
  restored_ = true;
  std::vector<int64_t> versions;
  for (size_t s = 0; s < parts.size(); ++s) {
    int64_t v;
    std::memcpy(&v, parts[s].data(), sizeof v);
    versions.push_back(v);
  }
  // A resume of the trainer's (on every rank): the servers' own checkpoints may be newer.
  ShardSet set;
  if (offered_ && offered_->resume) {
    REEL_ASSIGN_OR_RETURN(set, NewerShardSet(versions));
  }
  if (server_) {
    const ShardRange r = ShardOf(arena_->total_size(), roles_.servers, ctx_.rank);
    auto mine =
        arena_->values().subspan(static_cast<size_t>(r.offset), static_cast<size_t>(r.size));
    if (set.version < 0) {
      REEL_RETURN_IF_ERROR(server_->Restore(parts[static_cast<size_t>(ctx_.rank)], mine));
    } else {
      REEL_ASSIGN_OR_RETURN(ShardSnapshot snap, ReadShardOf(set));
      REEL_RETURN_IF_ERROR(server_->Restore(snap.state, snap.values));
    }
  }
  if (!worker_) return Status::Ok();
  if (set.version < 0) {
    worker_->SetVersions(std::move(versions));
    return Status::Ok();
  }
  // The arena holds the trainer checkpoint's older parameters: pull the set's before training.
  worker_->SetVersions(std::vector<int64_t>(versions.size(), set.version));
  StartColocatedServer();
  return worker_->Refresh().WithContext("async_sgd: pulling the resumed shards");
}

}  // namespace reel::async_sgd
