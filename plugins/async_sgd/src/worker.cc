// The async_sgd worker (see worker.h).
#include "worker.h"

#include <algorithm>

namespace reel::async_sgd {

Result<std::unique_ptr<Worker>> Worker::Create(const AsyncConfig& config, const Roles& roles,
                                               Communicator& comm, ParamArena& arena) {
  std::unique_ptr<UpdateRule> local_rule;
  if (config.per_epoch) {
    REEL_ASSIGN_OR_RETURN(local_rule, MakeUpdateRule(config.rule));
  }
  return std::unique_ptr<Worker>(new Worker(config, roles, comm, arena, std::move(local_rule)));
}

Worker::Worker(const AsyncConfig& config, const Roles& roles, Communicator& comm, ParamArena& arena,
               std::unique_ptr<UpdateRule> local_rule)
    : config_(config),
      roles_(roles),
      comm_(comm),
      arena_(arena),
      local_rule_(std::move(local_rule)),
      versions_(static_cast<size_t>(roles.servers), 0),
      applied_(static_cast<size_t>(roles.servers), 0) {
  if (config.per_epoch) {
    pending_.assign(arena.values().begin(), arena.values().end());
  } else if (config.push_every > 1) {
    pending_.assign(static_cast<size_t>(arena.total_size()), 0.0f);
  }
  if (config.overlap) {
    outbox_.assign(static_cast<size_t>(arena.total_size()), 0.0f);
    inbox_.assign(static_cast<size_t>(arena.total_size()), 0.0f);
  }
}

Worker::~Worker() {
  if (exchange_.joinable()) exchange_.join();
}

Status Worker::Settle() {
  if (!exchange_.joinable()) return Status::Ok();
  exchange_.join();
  Status s = std::move(exchange_status_);
  exchange_status_ = Status::Ok();
  REEL_RETURN_IF_ERROR(s);
  if (inbox_full_) {
    std::copy(inbox_.begin(), inbox_.end(), arena_.values().begin());
    versions_ = inbox_versions_;
    inbox_full_ = false;
  }
  return Status::Ok();
}

void Worker::StartExchange(bool push, bool pull, float lr, std::vector<int64_t> based_on) {
  // Taken here, on the optimizer's thread: the next NoteStep() may come while the exchange runs.
  const Carried carried = push ? TakeCarried() : Carried{};
  const int64_t step = CurrentStep();
  inbox_versions_ = versions_;
  exchange_ = std::thread([this, push, pull, lr, carried, step, based_on = std::move(based_on)] {
    Status s = Status::Ok();
    if (push && pull && Pipelined()) {
      s = PushPull(outbox_, based_on, inbox_, inbox_versions_, lr, carried);
      inbox_full_ = s.ok();
    } else {
      s = push ? Push(Kind::kPush, outbox_, based_on, lr, carried) : Status::Ok();
      if (s.ok() && pull) {
        s = Pull(inbox_, inbox_versions_, step);
        inbox_full_ = s.ok();
      }
    }
    exchange_status_ = std::move(s);
  });
}

void Worker::Accumulate(std::span<const float> grads, const std::vector<int64_t>& computed_on,
                        float lr) {
  // A mean of gradients is as stale as its oldest: the versions of the first pending step.
  if (pending_steps_ == 0) pending_based_on_ = computed_on;
  for (size_t i = 0; i < grads.size(); ++i) pending_[i] += grads[i];
  ++pending_steps_;
  pending_lr_ = lr;
}

Deadline Worker::NextDeadline() const {
  return config_.timeout_ms == 0 ? NoDeadline()
                                 : DeadlineIn(std::chrono::milliseconds(config_.timeout_ms));
}

std::string Worker::Where() const {
  return "async_sgd worker rank " + std::to_string(comm_.rank());
}

int64_t Worker::ScheduleStep(int64_t local_step) const {
  if (config_.per_epoch) return local_step;
  return newest_version_.load() * config_.push_every / std::max(1, roles_.workers());
}

Status Worker::Step(float lr) {
  // The versions of the weights this step's gradient was computed on: those in the arena now.
  std::vector<int64_t> computed_on = versions_;
  // overlap: the weights the last exchange pulled go in place now, after the trainer computed
  // this step's gradient on the ones before them (so its push carries the older versions).
  REEL_RETURN_IF_ERROR(Settle());
  std::span<float> grads = arena_.grads();
  ++steps_;
  ++unpushed_steps_;
  if (config_.per_epoch) {
    local_rule_->Apply(arena_.values(), grads, lr);
    ++pending_steps_;
    return Status::Ok();
  }
  if (config_.overlap) {
    bool push = config_.push_every == 1;
    if (push) {
      std::copy(grads.begin(), grads.end(), outbox_.begin());
    } else {
      Accumulate(grads, computed_on, lr);
      if (pending_steps_ == config_.push_every) {
        const float inv = 1.0f / static_cast<float>(pending_steps_);
        for (size_t i = 0; i < pending_.size(); ++i) outbox_[i] = pending_[i] * inv;
        std::fill(pending_.begin(), pending_.end(), 0.0f);
        pending_steps_ = 0;
        push = true;
        lr = pending_lr_;
        computed_on = pending_based_on_;
      }
    }
    const bool pull = steps_ % config_.pull_every == 0 || must_pull_;
    if (pull && steps_ % config_.pull_every != 0) ++forced_pulls_;
    if (push || pull) StartExchange(push, pull, lr, std::move(computed_on));
    return Status::Ok();
  }
  if (config_.apply_locally) {  // Downpour: the step's gradient updates the local copy at once
    std::span<float> values = arena_.values();
    for (size_t i = 0; i < values.size(); ++i) values[i] -= lr * grads[i];
  }
  // In line: this step's push, if it makes one (its gradient, or the mean of push_every steps',
  // or with apply_locally their sum).
  std::span<const float> push;
  if (config_.push_every == 1) {
    push = grads;
  } else {
    Accumulate(grads, computed_on, lr);
    if (pending_steps_ == config_.push_every) {
      AveragePending();
      push = pending_;
      lr = pending_lr_;
      computed_on = pending_based_on_;
    }
  }
  const bool scheduled = steps_ % config_.pull_every == 0;
  if (!push.empty() && (scheduled || must_pull_) && Pipelined()) {
    if (!scheduled) ++forced_pulls_;
    REEL_RETURN_IF_ERROR(
        PushPull(push, computed_on, arena_.values(), versions_, lr, TakeCarried()));
    ClearPending();
    return Status::Ok();
  }
  if (!push.empty()) {
    REEL_RETURN_IF_ERROR(Push(Kind::kPush, push, computed_on, lr, TakeCarried()));
    ClearPending();
  }
  if (scheduled) return Pull();
  if (must_pull_) {
    ++forced_pulls_;
    return Pull();
  }
  return Status::Ok();
}

Status Worker::EndEpoch() {
  if (!config_.per_epoch) return Status::Ok();  // (overlap is never per epoch)
  REEL_RETURN_IF_ERROR(PushPending());
  return Pull();
}

Status Worker::Refresh() {
  REEL_RETURN_IF_ERROR(Settle());
  REEL_RETURN_IF_ERROR(PushPending());
  return Pull();
}

Status Worker::Finish() {
  REEL_RETURN_IF_ERROR(Settle());
  REEL_RETURN_IF_ERROR(PushPending());
  for (int s = 0; s < roles_.servers; ++s) {
    const Header done = MakeHeader(Kind::kDone, s, applied_[static_cast<size_t>(s)]);
    REEL_RETURN_IF_ERROR(SendHeader(comm_, roles_.server_rank(s), kRequestTag, done, NextDeadline())
                             .WithContext(Where() + ": telling server rank " +
                                          std::to_string(roles_.server_rank(s)) + " it is done"));
  }
  return Status::Ok();
}

// step: the mean of the pending gradients; epoch: the delta since the last pull.
Status Worker::PushPending() {
  if (pending_steps_ == 0) return Status::Ok();
  if (config_.per_epoch) {
    std::span<const float> values = arena_.values();
    for (size_t i = 0; i < pending_.size(); ++i) pending_[i] = values[i] - pending_[i];
    REEL_RETURN_IF_ERROR(Push(Kind::kPushDelta, pending_, versions_, 0.0f, TakeCarried()));
  } else {
    AveragePending();
    REEL_RETURN_IF_ERROR(
        Push(Kind::kPush, pending_, pending_based_on_, pending_lr_, TakeCarried()));
  }
  ClearPending();
  return Status::Ok();
}

void Worker::AveragePending() {
  if (config_.apply_locally) return;  // Downpour pushes the accumulated sum
  const float inv = 1.0f / static_cast<float>(pending_steps_);
  for (float& g : pending_) g *= inv;
}

void Worker::ClearPending() {
  if (config_.per_epoch || pending_steps_ == 0) {
    pending_steps_ = 0;
    return;
  }
  std::fill(pending_.begin(), pending_.end(), 0.0f);
  pending_steps_ = 0;
}

Worker::Carried Worker::TakeCarried() {
  Carried c{CurrentStep(), unpushed_steps_, unpushed_examples_};
  unpushed_steps_ = unpushed_examples_ = 0;
  return c;
}

Status Worker::Push(Kind kind, std::span<const float> data, const std::vector<int64_t>& based_on,
                    float lr, const Carried& carried) {
  for (int s = 0; s < roles_.servers; ++s) {
    const ShardRange r = Range(s);
    const int dest = roles_.server_rank(s);
    Header h = MakeHeader(kind, s, carried.step, based_on[static_cast<size_t>(s)], r.size, lr);
    h.steps = carried.steps;
    h.examples = carried.examples;
    Status st = SendHeader(comm_, dest, kRequestTag, h, NextDeadline());
    if (st.ok())
      st = comm_.Send(
          dest, kPayloadTag,
          std::as_bytes(data.subspan(static_cast<size_t>(r.offset), static_cast<size_t>(r.size))),
          NextDeadline());
    if (!st.ok())
      return st.WithContext(Where() + ": pushing shard " + std::to_string(s) + " to server rank " +
                            std::to_string(dest));
  }
  ++pushes_;
  for (int s = 0; s < roles_.servers; ++s) {
    const int src = roles_.server_rank(s);
    Result<Header> ack = RecvHeader(comm_, src, kReplyTag, NextDeadline());
    if (!ack.ok())
      return ack.status().WithContext(Where() + ": waiting for server rank " + std::to_string(src) +
                                      " to apply a push");
    if (ack->kind != Kind::kAck)
      return InternalError(Where() + ": server rank " + std::to_string(src) +
                           " answered a push with " + KindName(ack->kind));
    if (s == 0) newest_version_ = ack->version;
    Counted(s, ack->aux == 1);
  }
  return Status::Ok();
}

void Worker::Counted(int shard, bool refused) {
  if (!refused) {
    ++applied_[static_cast<size_t>(shard)];
    return;
  }
  // Too stale for max_staleness: this copy is pulled afresh before the next step.
  ++refused_;
  must_pull_ = true;
}

// A thread sends the push's chunks while this one receives the fresh ones, so both directions
// of each server's link carry data at once (wire.h, kPushPull).
Status Worker::PushPull(std::span<const float> data, const std::vector<int64_t>& based_on,
                        std::span<float> into, std::vector<int64_t>& versions, float lr,
                        const Carried& carried) {
  const size_t chunk = static_cast<size_t>(config_.pipeline_chunk);
  for (int s = 0; s < roles_.servers; ++s) {
    const ShardRange r = Range(s);
    Header h =
        MakeHeader(Kind::kPushPull, s, carried.step, based_on[static_cast<size_t>(s)], r.size, lr);
    h.steps = carried.steps;
    h.examples = carried.examples;
    h.aux = static_cast<uint32_t>(chunk);
    REEL_RETURN_IF_ERROR(SendHeader(comm_, roles_.server_rank(s), kRequestTag, h, NextDeadline())
                             .WithContext(Where() + ": pushing to server rank " +
                                          std::to_string(roles_.server_rank(s))));
  }
  // Each shard's chunks in order, shard after shard: the order the servers take them in.
  auto chunks = [&](auto&& each) -> Status {
    for (int s = 0; s < roles_.servers; ++s) {
      const ShardRange r = Range(s);
      for (size_t at = 0; at < static_cast<size_t>(r.size); at += chunk)
        REEL_RETURN_IF_ERROR(each(s, static_cast<size_t>(r.offset) + at,
                                  std::min(chunk, static_cast<size_t>(r.size) - at)));
    }
    return Status::Ok();
  };
  Status sent = Status::Ok();
  std::thread sender([&] {
    sent = chunks([&](int s, size_t at, size_t len) {
      return comm_
          .Send(roles_.server_rank(s), kPayloadTag, std::as_bytes(data.subspan(at, len)),
                NextDeadline())
          .WithContext(Where() + ": pushing shard " + std::to_string(s) + " to server rank " +
                       std::to_string(roles_.server_rank(s)));
    });
  });
  Status got = chunks([&](int s, size_t at, size_t len) {
    return comm_
        .RecvInto(roles_.server_rank(s), kReplyPayloadTag,
                  std::as_writable_bytes(into.subspan(at, len)), NextDeadline())
        .WithContext(Where() + ": pulling shard " + std::to_string(s) + " from server rank " +
                     std::to_string(roles_.server_rank(s)));
  });
  for (int s = 0; got.ok() && s < roles_.servers; ++s) {
    const int src = roles_.server_rank(s);
    Result<Header> reply = RecvHeader(comm_, src, kReplyTag, NextDeadline());
    got = reply.status();
    if (got.ok() && (reply->kind != Kind::kPushPulled || reply->count != Range(s).size))
      got = InternalError(std::string("answered a push+pull with ") + KindName(reply->kind) +
                          " of " + std::to_string(reply->count) + " floats");
    if (!got.ok()) {
      got = got.WithContext(Where() + ": push+pull of shard " + std::to_string(s) +
                            " with server rank " + std::to_string(src));
      break;
    }
    versions[static_cast<size_t>(s)] = reply->version;
    if (s == 0) newest_version_ = reply->version;
    Counted(s, reply->aux == 1);
  }
  sender.join();
  REEL_RETURN_IF_ERROR(got);
  REEL_RETURN_IF_ERROR(sent);
  ++pushes_;
  ++pulls_;
  must_pull_ = false;
  return Status::Ok();
}

Status Worker::Pull(std::span<float> values, std::vector<int64_t>& versions, int64_t step) {
  for (int s = 0; s < roles_.servers; ++s) {
    const Header h = MakeHeader(Kind::kPull, s, step);
    REEL_RETURN_IF_ERROR(SendHeader(comm_, roles_.server_rank(s), kRequestTag, h, NextDeadline())
                             .WithContext(Where() + ": asking server rank " +
                                          std::to_string(roles_.server_rank(s)) +
                                          " for its shard"));
  }
  for (int s = 0; s < roles_.servers; ++s) {
    const int src = roles_.server_rank(s);
    const ShardRange r = Range(s);
    Result<Header> reply = RecvHeader(comm_, src, kReplyTag, NextDeadline());
    Status st = reply.status();
    if (st.ok() && (reply->kind != Kind::kPulled || reply->count != r.size))
      st = InternalError(std::string("answered a pull with ") + KindName(reply->kind) + " of " +
                         std::to_string(reply->count) + " floats, expected " +
                         std::to_string(r.size));
    if (st.ok())
      st = comm_.RecvInto(src, kReplyPayloadTag,
                          std::as_writable_bytes(values.subspan(static_cast<size_t>(r.offset),
                                                                static_cast<size_t>(r.size))),
                          NextDeadline());
    if (!st.ok())
      return st.WithContext(Where() + ": pulling shard " + std::to_string(s) +
                            " from server rank " + std::to_string(src));
    versions[static_cast<size_t>(s)] = reply->version;
    if (s == 0) newest_version_ = reply->version;
  }
  must_pull_ = false;
  ++pulls_;
  if (config_.per_epoch) pending_.assign(values.begin(), values.end());
  return Status::Ok();
}

Result<AppliedWork> Worker::AppliedWorkOf(int rank) {
  REEL_RETURN_IF_ERROR(Settle());
  const std::string what =
      Where() + ": asking what was applied of worker rank " + std::to_string(rank) + "'s pushes";
  for (int s = 0; s < roles_.servers; ++s)
    REEL_RETURN_IF_ERROR(SendHeader(comm_, roles_.server_rank(s), kRequestTag,
                                    MakeHeader(Kind::kApplied, s, rank), NextDeadline())
                             .WithContext(what));
  AppliedWork fewest;
  for (int s = 0; s < roles_.servers; ++s) {
    const int src = roles_.server_rank(s);
    // The server answers once it dropped that worker, which may take it up to its timeout.
    const Deadline d = config_.timeout_ms == 0
                           ? NoDeadline()
                           : DeadlineIn(std::chrono::milliseconds(2 * config_.timeout_ms));
    Result<Header> reply = RecvHeader(comm_, src, kReplyTag, d);
    if (!reply.ok())
      return reply.status().WithContext(what + " (server rank " + std::to_string(src) + ")");
    if (reply->kind != Kind::kAppliedWork)
      return InternalError(what + ": server rank " + std::to_string(src) + " answered with " +
                           KindName(reply->kind));
    if (s == 0 || reply->version < fewest.updates)
      fewest = AppliedWork{reply->step, reply->steps, reply->examples, reply->version};
  }
  return fewest;
}

Result<int64_t> Worker::ExamplesApplied() {
  // The exchange in flight (overlap) must not interleave its requests with this one.
  REEL_RETURN_IF_ERROR(Settle());
  const int server = roles_.server_rank(0);
  const std::string what =
      Where() + ": asking server rank " + std::to_string(server) + " for the examples it applied";
  REEL_RETURN_IF_ERROR(SendHeader(comm_, server, kRequestTag,
                                  MakeHeader(Kind::kExamples, 0, CurrentStep()), NextDeadline())
                           .WithContext(what));
  Result<Header> reply = RecvHeader(comm_, server, kReplyTag, NextDeadline());
  if (!reply.ok()) return reply.status().WithContext(what);
  if (reply->kind != Kind::kExamplesAre)
    return InternalError(what + ": it answered with " + KindName(reply->kind));
  return reply->examples;
}

Result<int> Worker::LeadAfter(int lost) {
  REEL_RETURN_IF_ERROR(Settle());
  const int server = roles_.server_rank(0);
  const std::string what = Where() + ": asking server rank " + std::to_string(server) +
                           " who leads after worker rank " + std::to_string(lost);
  REEL_RETURN_IF_ERROR(
      SendHeader(comm_, server, kRequestTag, MakeHeader(Kind::kLead, 0, lost), NextDeadline())
          .WithContext(what));
  // The server answers once it dropped the lead, which may take it up to its timeout.
  const Deadline d = config_.timeout_ms == 0
                         ? NoDeadline()
                         : DeadlineIn(std::chrono::milliseconds(2 * config_.timeout_ms));
  Result<Header> reply = RecvHeader(comm_, server, kReplyTag, d);
  if (!reply.ok()) return reply.status().WithContext(what);
  if (reply->kind != Kind::kLeadIs)
    return InternalError(what + ": it answered with " + KindName(reply->kind));
  return reply->aux == 1 ? static_cast<int>(reply->step) : lost;
}

Result<std::vector<std::string>> Worker::CollectCut() {
  REEL_RETURN_IF_ERROR(Settle());
  REEL_RETURN_IF_ERROR(PushPending());
  std::span<float> values = arena_.values();
  for (int s = 0; s < roles_.servers; ++s) {
    const Header h = MakeHeader(Kind::kState, s, CurrentStep());
    REEL_RETURN_IF_ERROR(SendHeader(comm_, roles_.server_rank(s), kRequestTag, h, NextDeadline())
                             .WithContext(Where() + ": asking server rank " +
                                          std::to_string(roles_.server_rank(s)) +
                                          " for a cut of its shard"));
  }
  std::vector<std::string> out;
  for (int s = 0; s < roles_.servers; ++s) {
    const int src = roles_.server_rank(s);
    const ShardRange r = Range(s);
    Result<Header> reply = RecvHeader(comm_, src, kReplyTag, NextDeadline());
    Status st = reply.status();
    if (st.ok() && (reply->kind != Kind::kStateBytes || reply->steps != r.size ||
                    reply->count < static_cast<int64_t>(sizeof(int64_t))))
      st = InternalError(std::string("answered a state request with ") + KindName(reply->kind) +
                         " of " + std::to_string(reply->steps) + " floats and " +
                         std::to_string(reply->count) + " bytes, expected " +
                         std::to_string(r.size) + " floats");
    if (st.ok())
      st = comm_.RecvInto(src, kReplyPayloadTag,
                          std::as_writable_bytes(values.subspan(static_cast<size_t>(r.offset),
                                                                static_cast<size_t>(r.size))),
                          NextDeadline());
    std::string state;
    if (st.ok()) {
      state.resize(static_cast<size_t>(reply->count));
      st = comm_.RecvInto(src, kReplyPayloadTag, std::as_writable_bytes(std::span(state)),
                          NextDeadline());
    }
    if (!st.ok())
      return st.WithContext(Where() + ": collecting a cut of shard " + std::to_string(s) +
                            " from server rank " + std::to_string(src));
    versions_[static_cast<size_t>(s)] = reply->version;
    if (s == 0) newest_version_ = reply->version;
    out.push_back(std::move(state));
  }
  // As after a pull: the next epoch's delta counts from these values.
  if (config_.per_epoch) pending_.assign(values.begin(), values.end());
  must_pull_ = false;
  return out;
}

}  // namespace reel::async_sgd
