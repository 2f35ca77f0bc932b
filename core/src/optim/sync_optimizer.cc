// The "sync" optimizer (see sync_optimizer.h).
//
// State format (SaveState/RestoreState), little-endian as the host writes it:
//   "RSYN" | uint32 version (1) | uint32 rule-name length | rule name | the rule's own state
//   (reel/update_rule.h: int64 steps, then per moment uint64 count + floats).
#include "optim/sync_optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "builtins.h"
#include "comm/compressed_ring.h"
#include "optim/gradient_buckets.h"
#include "optim/sharded_update.h"
#include "reel/core/schedule.h"
#include "reel/update_rule.h"

namespace reel::core {
namespace {

constexpr char kMagic[4] = {'R', 'S', 'Y', 'N'};
constexpr uint32_t kVersion = 1;
// bucket_mb's default: bench/journal/overlap.md (4 and 25 MiB measured alike there).
constexpr double kDefaultBucketMb = 4.0;
// error_feedback's default: bench/journal/compression.md (no GAP gain measured for its cost).
constexpr bool kDefaultErrorFeedback = false;

// Reads the moment counts out of a rule state that UpdateRule::RestoreState already accepted.
std::vector<uint64_t> MomentCounts(std::string_view rule_state) {
  std::vector<uint64_t> counts;
  size_t pos = sizeof(int64_t);
  while (pos + sizeof(uint64_t) <= rule_state.size()) {
    uint64_t n;
    std::memcpy(&n, rule_state.data() + pos, sizeof n);
    counts.push_back(n);
    pos += sizeof n + n * sizeof(float);
  }
  return counts;
}

// The option's words, in the order of their codes (compared between ranks at Setup).
constexpr const char* kCompressionWords[] = {"none", "bf16", "fp16"};

struct SyncSettings {
  bool sharded = false;      // zero_stage 1
  int64_t bucket_bytes = 0;  // 0: one exchange of the whole gradient in Step()
  int compression = 0;       // index into kCompressionWords
  bool error_feedback = false;
};

class SyncOptimizer final : public Optimizer {
 public:
  SyncOptimizer(UpdateRuleConfig config, std::unique_ptr<UpdateRule> rule, int64_t timeout_ms,
                SyncSettings settings)
      : config_(std::move(config)),
        rule_(std::move(rule)),
        timeout_ms_(timeout_ms),
        sharded_(settings.sharded),
        bucket_bytes_(settings.bucket_bytes),
        compression_(settings.compression),
        error_feedback_(settings.error_feedback) {}

  // Clipping the averaged gradient, not each rank's own, keeps N ranks x batch B equal to one
  // rank x batch N*B: every rank holds the same average, so all clip alike.
  bool AcceptGradientClipping(double max_norm) override {
    clip_norm_ = max_norm;
    return true;
  }
  double last_gradient_norm() const override { return last_norm_; }

  Status Setup(ParamArena& arena, Communicator& comm) override {
    if (!arena.finalized())
      return FailedPreconditionError("sync optimizer: the arena is not finalized");
    arena_ = &arena;
    comm_ = &comm;
    REEL_RETURN_IF_ERROR(CheckSameLayout());
    REEL_RETURN_IF_ERROR(CheckMoments(restored_counts_));
    REEL_RETURN_IF_ERROR(KeepShard());
    if (comm.size() > 1) {
      Status s = comm.Broadcast(std::as_writable_bytes(arena.values()), 0, NextDeadline());
      if (!s.ok()) return s.WithContext("sync optimizer: broadcasting rank 0's initial parameters");
    }
    buckets_.reset();
    ring_.reset();
    residual_.clear();
    if (comm.size() > 1 && compression_ != 0) {
      ring_ = std::make_unique<CompressedRing>(Wire(), kCompressedRingTag);
      // Not in checkpoints: a resumed run starts it from zero (docs/distributed.md).
      if (error_feedback_) residual_.assign(arena.grads().size(), 0.0f);
    }
    // zero_stage 1 reduce-scatters after backward: its halves are not overlapped (yet).
    if (comm.size() > 1 && bucket_bytes_ > 0 && !sharded_) {
      BucketReducer reducer;
      if (ring_)
        reducer = [this](std::span<float> bucket, Deadline deadline) {
          return Compressed(bucket, ring::Part::kAllReduce, deadline);
        };
      buckets_ = std::make_unique<GradientBuckets>(arena, comm, bucket_bytes_, timeout_ms_,
                                                   std::move(reducer));
    }
    return Status::Ok();
  }

  GradientSink* gradient_sink() override { return buckets_.get(); }

  Status Step(float lr) override {
    if (arena_ == nullptr) return FailedPreconditionError("sync optimizer: Step() before Setup()");
    std::span<float> grads = arena_->grads();
    if (Sharded()) {
      const int64_t step = rule_->steps() + 1;  // before the rule counts it
      ShardReducer reducer;
      if (ring_)
        reducer = [this](std::span<float> g, Deadline deadline) {
          return Compressed(g, ring::Part::kReduceScatter, deadline);
        };
      Result<double> norm = ShardedStep(*comm_, *rule_, arena_->values(), grads, lr, clip_norm_,
                                        NextDeadline(), reducer);
      if (!norm.ok())
        return norm.status().WithContext("sync optimizer (zero_stage 1): step " +
                                         std::to_string(step));
      last_norm_ = *norm;
      return Status::Ok();
    }
    if (comm_->size() > 1) {
      Status s = buckets_ ? buckets_->Finish()
                 : ring_  ? Compressed(grads, ring::Part::kAllReduce, NextDeadline())
                          : comm_->AllReduce(grads, ReduceOp::kSum, NextDeadline());
      if (!s.ok())
        return s.WithContext("sync optimizer: step " + std::to_string(rule_->steps() + 1));
      const float inv = 1.0f / static_cast<float>(comm_->size());
      for (float& g : grads) g *= inv;
    }
    // Without a clip the norm is only reported: the rule sums it in its own pass over the
    // gradient, the same to the last bit as ClipByGlobalNorm's.
    if (clip_norm_ > 0.0) {
      last_norm_ = ClipByGlobalNorm(grads, clip_norm_);
      rule_->Apply(arena_->values(), grads, lr);
    } else {
      last_norm_ = std::sqrt(rule_->ApplySummingSquares(arena_->values(), grads, lr));
    }
    return Status::Ok();
  }

  Result<std::string> SaveState() override {
    std::string out(kMagic, sizeof kMagic);
    auto put32 = [&out](uint32_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); };
    put32(kVersion);
    put32(static_cast<uint32_t>(config_.rule.size()));
    out += config_.rule;
    if (Sharded()) {
      if (gathered_steps_ != rule_->steps())
        return FailedPreconditionError(
            "sync optimizer (zero_stage 1): SaveState() without GatherState() on every rank "
            "since the last step (the state lives in shards on every rank)");
      out += gathered_;
      // Taken once: the whole state is as large as the model twice over (Adam).
      std::string().swap(gathered_);
      gathered_steps_ = -1;
    } else {
      out += rule_->SaveState();
    }
    return out;
  }

  // The lead keeps the whole state for its next SaveState(); the others drop theirs.
  Status GatherState() override {
    if (!Sharded()) return Status::Ok();
    Result<std::string> whole =
        GatherRuleState(*comm_, *rule_, config_, arena_->values().size(), NextDeadline());
    if (!whole.ok()) return whole.status().WithContext("sync optimizer (zero_stage 1)");
    gathered_steps_ = rule_->steps();
    gathered_ = comm_->rank() == 0 ? std::move(*whole) : std::string();
    return Status::Ok();
  }

  Status RestoreState(std::string_view state) override {
    auto get32 = [&state](uint32_t& v) {
      if (state.size() < sizeof v) return false;
      std::memcpy(&v, state.data(), sizeof v);
      state.remove_prefix(sizeof v);
      return true;
    };
    if (state.size() < sizeof kMagic || std::memcmp(state.data(), kMagic, sizeof kMagic) != 0)
      return DataLossError("sync optimizer state: missing the 'RSYN' header");
    state.remove_prefix(sizeof kMagic);
    uint32_t version, name_len;
    if (!get32(version) || !get32(name_len) || state.size() < name_len)
      return DataLossError("sync optimizer state is truncated");
    if (version != kVersion)
      return DataLossError("sync optimizer state has version " + std::to_string(version) +
                           ", this build reads version " + std::to_string(kVersion));
    std::string rule(state.substr(0, name_len));
    state.remove_prefix(name_len);
    if (rule != config_.rule)
      return InvalidArgumentError("sync optimizer state was saved by update rule '" + rule +
                                  "', this optimizer uses '" + config_.rule + "'");
    REEL_ASSIGN_OR_RETURN(std::unique_ptr<UpdateRule> restored, MakeUpdateRule(config_));
    REEL_RETURN_IF_ERROR(restored->RestoreState(state).WithContext("sync optimizer state"));
    std::vector<uint64_t> counts = MomentCounts(state);
    REEL_RETURN_IF_ERROR(CheckMoments(counts));
    rule_ = std::move(restored);
    restored_counts_ = std::move(counts);
    return KeepShard();
  }

 private:
  // zero_stage 1 over more than one rank (on one, the shard is the whole arena): set up only.
  bool Sharded() const { return sharded_ && comm_ != nullptr && comm_->size() > 1; }
  // Cuts the rule's whole state (restored, or none) to this rank's shard.
  Status KeepShard() {
    if (!Sharded()) return Status::Ok();
    REEL_ASSIGN_OR_RETURN(
        std::string part,
        RuleStateOfShard(rule_->SaveState(), ShardOfRank(arena_->values().size(), *comm_)));
    gathered_steps_ = -1;
    return rule_->RestoreState(part);
  }

  WireFormat Wire() const { return compression_ == 2 ? WireFormat::kFp16 : WireFormat::kBf16; }

  // Sums `part` of the arena's gradient over the ranks on the compressed ring. With error
  // feedback, what this rank's roundings took away in the last step is added back first, and the
  // ring collects this step's (compressed_ring.h); on the communication thread while buckets
  // are in flight, each bucket's part of the residual is its own.
  Status Compressed(std::span<float> part, ring::Part which, Deadline deadline) {
    std::span<float> lost;
    if (!residual_.empty()) {
      const size_t at = static_cast<size_t>(part.data() - arena_->grads().data());
      lost = std::span<float>(residual_).subspan(at, part.size());
      for (size_t i = 0; i < part.size(); ++i) part[i] += lost[i];
      std::fill(lost.begin(), lost.end(), 0.0f);
    }
    return ring_->Run(*comm_, part, which, deadline, lost);
  }

  Deadline NextDeadline() const {
    return timeout_ms_ == 0 ? NoDeadline() : DeadlineIn(std::chrono::milliseconds(timeout_ms_));
  }

  // Every rank must hold the same layout, or the fused allreduce would mix unrelated floats, and
  // the same wire, or the compressed ring's messages would not match.
  Status CheckSameLayout() {
    const int n = comm_->size();
    if (n == 1) return Status::Ok();
    const int64_t mine[2] = {arena_->total_size(), compression_};
    std::vector<int64_t> all(2 * static_cast<size_t>(n));
    Status s = comm_->AllGather(std::as_bytes(std::span<const int64_t>(mine)),
                                std::as_writable_bytes(std::span<int64_t>(all)), NextDeadline());
    if (!s.ok()) return s.WithContext("sync optimizer: comparing parameter counts");
    for (size_t r = 0; r < static_cast<size_t>(n); ++r) {
      if (all[2 * r] != mine[0])
        return InvalidArgumentError("sync optimizer: rank " + std::to_string(comm_->rank()) +
                                    " has " + std::to_string(mine[0]) + " parameter floats, rank " +
                                    std::to_string(r) + " has " + std::to_string(all[2 * r]) +
                                    " (different models?)");
      if (all[2 * r + 1] != mine[1])
        return InvalidArgumentError(
            "sync optimizer: every rank must use the same compression (rank " +
            std::to_string(comm_->rank()) + ": " + kCompressionWords[mine[1]] + ", rank " +
            std::to_string(r) + ": " + kCompressionWords[all[2 * r + 1]] + ")");
    }
    return Status::Ok();
  }

  // Moments are empty (no step taken, or a rule without state) or sized to the whole arena.
  Status CheckMoments(const std::vector<uint64_t>& counts) const {
    if (arena_ == nullptr) return Status::Ok();  // checked again at Setup()
    for (uint64_t c : counts)
      if (c != 0 && c != static_cast<uint64_t>(arena_->total_size()))
        return InvalidArgumentError("sync optimizer state holds moments for " + std::to_string(c) +
                                    " parameter floats, the model has " +
                                    std::to_string(arena_->total_size()));
    return Status::Ok();
  }

  UpdateRuleConfig config_;
  std::unique_ptr<UpdateRule> rule_;
  int64_t timeout_ms_;
  bool sharded_;                 // zero_stage 1
  std::string gathered_;         // the lead's whole rule state from GatherState()
  int64_t gathered_steps_ = -1;  // the steps it was gathered at
  double clip_norm_ = 0.0;       // <= 0: no clipping
  double last_norm_ = 0.0;
  ParamArena* arena_ = nullptr;   // not owned; outlives this optimizer
  Communicator* comm_ = nullptr;  // not owned; outlives this optimizer
  std::vector<uint64_t> restored_counts_;
  const int64_t bucket_bytes_;  // 0: one allreduce of the whole gradient in Step()
  const int compression_;       // index into kCompressionWords
  const bool error_feedback_;
  // The compressed exchange (compression_ != 0, several ranks) and the error feedback's residual
  // over the whole arena (empty without it).
  std::unique_ptr<CompressedRing> ring_;
  std::vector<float> residual_;
  // Reduces buckets during backward (bucket_bytes_ > 0, several ranks); destroyed first, so its
  // thread ends before the communicator may go.
  std::unique_ptr<GradientBuckets> buckets_;
};

}  // namespace

OptionSchema SyncOptimizerOptions() {
  OptionSchema schema = UpdateRuleOptions();
  schema.push_back(IntOption(
      "zero_stage", 0,
      "ZeRO stage, as DeepSpeed and PyTorch's ZeroRedundancyOptimizer call it: 0, every rank "
      "updates every parameter; 1, the gradient is reduce-scattered, each rank updates its 1/N of "
      "the parameters and holds that part of the optimizer state, then the parameters are "
      "all-gathered (docs/distributed.md)"));
  schema.push_back(
      IntOption("timeout_ms", 600000,
                "deadline of each collective in milliseconds (a lost rank fails the step "
                "instead of hanging); 0 waits forever"));
  schema.push_back(FloatOption(
      "bucket_mb", kDefaultBucketMb,
      "size of the gradient buckets reduced while backward goes on, in MiB (docs/distributed.md, "
      "\"Overlapping the exchange with backward\"); 0 reduces the whole gradient after backward; "
      "not used with zero_stage 1, whose reduce-scatter runs after backward"));
  schema.push_back(StringOption(
      "compression", "none",
      "the gradient on the wire: none (fp32), bf16 or fp16 (with a scale per message); summed in "
      "fp32, every rank ends with the same bits; with zero_stage 1 only the reduce-scatter is "
      "compressed (docs/distributed.md, \"Compression on the wire\")"));
  schema.push_back(BoolOption(
      "error_feedback", kDefaultErrorFeedback,
      "with compression: carry each rank's rounding error into its next step's gradient "
      "(docs/distributed.md, \"Compression on the wire\"); ignored without compression"));
  return schema;
}

Result<std::unique_ptr<Optimizer>> MakeSyncOptimizer(const Options& options) {
  UpdateRuleConfig config = UpdateRuleConfigFrom(options);
  REEL_ASSIGN_OR_RETURN(std::unique_ptr<UpdateRule> rule, MakeUpdateRule(config));
  const int64_t timeout_ms = options.GetInt("timeout_ms");
  if (timeout_ms < 0)
    return InvalidArgumentError("option 'timeout_ms': " + std::to_string(timeout_ms) +
                                " is negative");
  const int64_t zero_stage = options.GetInt("zero_stage");
  if (zero_stage != 0 && zero_stage != 1)
    return InvalidArgumentError("option 'zero_stage': " + std::to_string(zero_stage) +
                                " is not 0 or 1 (stages 2 and 3 are not implemented)");
  const double bucket_mb = options.GetFloat("bucket_mb");
  if (!(bucket_mb >= 0.0 && bucket_mb <= 2048.0))
    return InvalidArgumentError("option 'bucket_mb': " + std::to_string(bucket_mb) +
                                " is outside [0, 2048]");
  const std::string compression = options.GetString("compression");
  const auto* word = std::find(std::begin(kCompressionWords), std::end(kCompressionWords),
                               std::string_view(compression));
  if (word == std::end(kCompressionWords))
    return InvalidArgumentError("option 'compression': '" + compression +
                                "' is not one of none, bf16, fp16");
  SyncSettings settings{
      .sharded = zero_stage == 1,
      .bucket_bytes = static_cast<int64_t>(bucket_mb * 1024.0 * 1024.0),
      .compression = static_cast<int>(word - std::begin(kCompressionWords)),
      .error_feedback = options.GetBool("error_feedback"),
  };
  return std::unique_ptr<Optimizer>(
      new SyncOptimizer(std::move(config), std::move(rule), timeout_ms, settings));
}

Status RegisterSyncOptimizer(Registrar& registrar) {
  return registrar.Add<Optimizer>(
      {"sync", "synchronous data parallelism: ring-allreduced gradients, then an update rule",
       SyncOptimizerOptions()},
      [](const Options& o, const OptimizerContext&) { return MakeSyncOptimizer(o); });
}

}  // namespace reel::core
