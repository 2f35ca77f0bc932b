// A parameter server's shard (see shard_server.h).
#include "shard_server.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <thread>

namespace reel::async_sgd {

const char* KindName(Kind k) {
  switch (k) {
    case Kind::kPush:
      return "push";
    case Kind::kPushDelta:
      return "push-delta";
    case Kind::kPull:
      return "pull";
    case Kind::kState:
      return "state";
    case Kind::kDone:
      return "done";
    case Kind::kAck:
      return "ack";
    case Kind::kPulled:
      return "pulled";
    case Kind::kStateBytes:
      return "state-bytes";
    case Kind::kApplied:
      return "applied";
    case Kind::kAppliedWork:
      return "applied-work";
    case Kind::kPushPull:
      return "push-pull";
    case Kind::kPushPulled:
      return "push-pulled";
    case Kind::kLead:
      return "lead";
    case Kind::kLeadIs:
      return "lead-is";
    case Kind::kExamples:
      return "examples";
    case Kind::kExamplesAre:
      return "examples-are";
  }
  return "unknown";
}

Result<std::unique_ptr<ShardServer>> ShardServer::Create(const AsyncConfig& config,
                                                         const Roles& roles, Communicator& comm,
                                                         int shard,
                                                         std::span<const float> initial) {
  REEL_ASSIGN_OR_RETURN(std::unique_ptr<UpdateRule> rule, MakeUpdateRule(config.rule));
  return std::unique_ptr<ShardServer>(
      new ShardServer(config, roles, comm, shard, initial, std::move(rule)));
}

ShardServer::ShardServer(const AsyncConfig& config, const Roles& roles, Communicator& comm,
                         int shard, std::span<const float> initial,
                         std::unique_ptr<UpdateRule> rule)
    : config_(config),
      roles_(roles),
      comm_(comm),
      shard_(shard),
      size_(initial.size()),
      values_(initial.begin(), initial.end()),
      rule_(std::move(rule)) {
  for (int w = roles.first_worker; w < roles.world; ++w) {
    Tally t;
    t.worker = w;
    tallies_.push_back(t);
  }
}

Deadline ShardServer::NextDeadline() const {
  return config_.timeout_ms == 0 ? NoDeadline()
                                 : DeadlineIn(std::chrono::milliseconds(config_.timeout_ms));
}

std::string ShardServer::Where() const {
  return "async_sgd server rank " + std::to_string(comm_.rank()) + " (shard " +
         std::to_string(shard_) + ")";
}

Result<Header> ShardServer::NextRequest(int worker) {
  const Deadline end = NextDeadline();
  while (true) {
    const Deadline slice = std::min(end, DeadlineIn(std::chrono::milliseconds(100)));
    Result<Header> h = RecvHeader(comm_, worker, kRequestTag, slice);
    if (h.ok() || h.status().code() != StatusCode::kDeadlineExceeded || slice == end) return h;
    if (stop_.load())
      return CancelledError(Where() + ": stopped while waiting for rank " + std::to_string(worker));
  }
}

Status ShardServer::Run() {
  // Files newer than the shard belong to a history this run abandoned (it started afresh or
  // resumed from an older set): a later resume must not mistake them for this run's.
  if (checkpoints_)
    REEL_RETURN_IF_ERROR(checkpoints_->DeleteNewerThan(version_.load(), shard_, roles_.servers)
                             .WithContext(Where()));
  const int n = roles_.workers();
  std::vector<Status> results(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i)
    threads.emplace_back([this, i, &results] {
      results[static_cast<size_t>(i)] = ServeWorker(roles_.first_worker + i);
      std::lock_guard<std::mutex> lock(tally_mu_);
      tallies_[static_cast<size_t>(i)].ended = true;
      tally_ended_.notify_all();
    });
  for (auto& t : threads) t.join();
  for (const Status& s : results) REEL_RETURN_IF_ERROR(s);
  // Workers that were dropped: the run trained without the rest of their share.
  std::string lost;
  int finished = 0;
  for (const Tally& t : tallies()) {
    if (t.done) ++finished;
    if (t.lost.empty()) continue;
    const std::string line = "worker rank " + std::to_string(t.worker) +
                             " was lost after its step " + std::to_string(t.last_step) + " (" +
                             std::to_string(t.applied) + " pushes applied, up to its step " +
                             std::to_string(t.applied_step) + "): " + t.lost;
    lost += (lost.empty() ? "" : "; ") + line;
    // Said here too, on the server's own output: the lead asks for the counts (kApplied), but
    // a lead that was lost itself cannot tell them.
    if (!config_.colocated) std::fprintf(stderr, "%s: %s\n", Where().c_str(), line.c_str());
  }
  // Server-only ranks serve workers that step independently: the others finished the run. A
  // colocated worker also served a shard, and a run in which no worker finished failed.
  if (!lost.empty() && (config_.colocated || finished == 0))
    return UnavailableError(Where() + ": " + lost);
  return Status::Ok();
}

Status ShardServer::ServeWorker(int worker) {
  Tally& tally = tallies_[static_cast<size_t>(worker - roles_.first_worker)];
  auto lose = [&](const Status& why) {
    std::lock_guard<std::mutex> lock(tally_mu_);
    tally.lost = why.ToString();
    return Status::Ok();
  };
  const int64_t floats = static_cast<int64_t>(size_);
  std::vector<float> payload(size_);  // this worker's pushes land here, in place
  std::vector<float> reply(size_);    // the values sent back to it, copied under the lock
  while (true) {
    Result<Header> h = NextRequest(worker);
    if (!h.ok()) {
      if (h.status().code() == StatusCode::kCancelled) return h.status();
      const StatusCode code = h.status().code();
      if (code == StatusCode::kUnavailable || code == StatusCode::kDeadlineExceeded)
        return lose(h.status());
      return h.status().WithContext(Where() + ": request from rank " + std::to_string(worker));
    }
    {
      std::lock_guard<std::mutex> lock(tally_mu_);
      tally.last_step = h->step;
    }
    if (h->shard != static_cast<uint32_t>(shard_))
      return InvalidArgumentError(Where() + ": rank " + std::to_string(worker) + " sent a " +
                                  KindName(h->kind) + " for shard " + std::to_string(h->shard));
    const bool push = h->kind == Kind::kPush || h->kind == Kind::kPushDelta;
    if ((push || h->kind == Kind::kPushPull) && h->count != floats)
      return InvalidArgumentError(Where() + ": rank " + std::to_string(worker) + " pushed " +
                                  std::to_string(h->count) + " floats, the shard has " +
                                  std::to_string(floats));
    switch (h->kind) {
      case Kind::kPush:
      case Kind::kPushDelta: {
        // Received without the shard's lock: a worker that stalls mid-push holds up nobody.
        Status s = RecvPayload(worker, kPayloadTag, std::as_writable_bytes(std::span(payload)));
        if (s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded)
          return lose(s);
        REEL_RETURN_IF_ERROR(s);
        REEL_ASSIGN_OR_RETURN(const Applied done, Apply(*h, payload));
        Count(tally, *h, done.refused);
        Header ack = MakeHeader(Kind::kAck, shard_, 0, done.version);
        ack.aux = done.refused ? 1 : 0;
        Status a = SendHeader(comm_, worker, kReplyTag, ack, NextDeadline());
        if (a.code() == StatusCode::kUnavailable) return lose(a);
        REEL_RETURN_IF_ERROR(a);
        break;
      }
      case Kind::kPushPull: {
        if (!config_.locking || h->aux == 0)
          return InvalidArgumentError(
              Where() + ": rank " + std::to_string(worker) +
              " sent a pipelined push+pull, which needs locking and a chunk size");
        Status s = PushPull(worker, *h, payload, reply, tally);
        if (s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded)
          return lose(s);
        REEL_RETURN_IF_ERROR(s);
        break;
      }
      case Kind::kPull: {
        Status s = ReplyPull(worker, reply);
        if (s.code() == StatusCode::kUnavailable) return lose(s);
        REEL_RETURN_IF_ERROR(s);
        break;
      }
      case Kind::kApplied: {
        Status s = ReplyApplied(worker, h->step);
        if (s.code() == StatusCode::kUnavailable) return lose(s);
        REEL_RETURN_IF_ERROR(s);
        break;
      }
      case Kind::kLead: {
        Status s = ReplyLead(worker, h->step);
        if (s.code() == StatusCode::kUnavailable) return lose(s);
        REEL_RETURN_IF_ERROR(s);
        break;
      }
      case Kind::kExamples: {
        Status s = ReplyExamples(worker);
        if (s.code() == StatusCode::kUnavailable) return lose(s);
        REEL_RETURN_IF_ERROR(s);
        break;
      }
      case Kind::kState: {
        Status s = ReplyState(worker);
        if (s.code() == StatusCode::kUnavailable) return lose(s);
        REEL_RETURN_IF_ERROR(s);
        break;
      }
      case Kind::kDone: {
        std::lock_guard<std::mutex> lock(tally_mu_);
        tally.done = true;
        if (h->step != tally.applied)
          return DataLossError(Where() + ": rank " + std::to_string(worker) + " counts " +
                               std::to_string(h->step) + " pushes applied, " +
                               std::to_string(tally.applied) + " were");
        return Status::Ok();
      }
      default:
        return InvalidArgumentError(Where() + ": rank " + std::to_string(worker) +
                                    " sent a request of kind " +
                                    std::to_string(static_cast<uint32_t>(h->kind)));
    }
  }
}

void ShardServer::Count(Tally& tally, const Header& h, bool refused) {
  std::lock_guard<std::mutex> lock(tally_mu_);
  if (refused) {
    ++tally.refused;
    return;
  }
  ++tally.applied;
  tally.applied_step = h.step;
  tally.applied_steps += h.steps;
  tally.applied_examples += h.examples;
}

Status ShardServer::RecvPayload(int worker, int tag, std::span<std::byte> into) {
  const Deadline end = NextDeadline();
  while (true) {
    const Deadline slice = std::min(end, DeadlineIn(std::chrono::milliseconds(100)));
    // A receive that passes its deadline consumes nothing (reel/transport.h), so it is retried.
    Status s = comm_.RecvInto(worker, tag, into, slice);
    if (s.ok() || s.code() != StatusCode::kDeadlineExceeded || slice == end) return s;
    if (stop_.load())
      return CancelledError(Where() + ": stopped while receiving a push from rank " +
                            std::to_string(worker));
  }
}

// Staleness (Zhang et al. 2016): how many updates reached the shard since the version the push's
// gradient was computed on (wire.h: the request's `version`).
int64_t ShardServer::Staleness(const Header& h) const {
  return std::max<int64_t>(0, version_.load() - h.version);
}

// staleness_aware: the rate divided by the staleness; a push on the newest version (staleness 0)
// or one behind gets the full rate.
float ShardServer::Scale(const Header& h) const {
  return config_.staleness_aware ? 1.0f / static_cast<float>(std::max<int64_t>(1, Staleness(h)))
                                 : 1.0f;
}

bool ShardServer::TooStale(const Header& h) const {
  return config_.max_staleness > 0 && Staleness(h) > config_.max_staleness;
}

Result<ShardServer::Applied> ShardServer::Apply(const Header& h, std::span<const float> payload) {
  std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
  // Hogwild updates run concurrently with each other, but never while a cut is taken.
  std::shared_lock<std::shared_mutex> uncut(cut_mu_, std::defer_lock);
  if (config_.locking) {
    lock.lock();
  } else {
    uncut.lock();
  }
  // max_staleness: judged before anything is applied (with locking, against the version the
  // update would follow; Hogwild, against the version as last counted).
  if (TooStale(h)) return Applied{version_.load(), true};
  const float scale = Scale(h);
  if (h.kind == Kind::kPushDelta) {
    if (config_.locking) {
      for (size_t i = 0; i < size_; ++i) values_[i] += scale * payload[i];
    } else {
      for (size_t i = 0; i < size_; ++i) {
        std::atomic_ref<float> v(values_[i]);
        v.store(v.load(std::memory_order_relaxed) + scale * payload[i], std::memory_order_relaxed);
      }
    }
  } else if (config_.locking) {
    rule_->Apply(values_, payload, h.lr * scale);
  } else {
    // Hogwild sgd (ParseAsyncConfig allows no other rule without locking).
    const float lr = h.lr * scale, wd = static_cast<float>(config_.rule.weight_decay);
    for (size_t i = 0; i < size_; ++i) {
      std::atomic_ref<float> v(values_[i]);
      const float p = v.load(std::memory_order_relaxed);
      v.store(p - lr * (payload[i] + wd * p), std::memory_order_relaxed);
    }
  }
  REEL_ASSIGN_OR_RETURN(const int64_t version, CountUpdate(lock));
  return Applied{version, false};
}

Result<int64_t> ShardServer::CountUpdate(std::unique_lock<std::mutex>& lock) {
  const int64_t version = version_.fetch_add(1) + 1;
  if (!checkpoints_ || version % checkpoint_every_ != 0) return version;
  // Copied under the lock (a consistent shard with locking), written after it.
  const ShardSnapshot snapshot = Snapshot(version);
  if (lock.owns_lock()) lock.unlock();
  REEL_RETURN_IF_ERROR(checkpoints_->Write(snapshot).WithContext(Where()));
  return version;
}

// A push and a pull in one exchange (wire.h, kPushPull). The push's chunks are all received
// before the shard's lock is taken, so a worker that stalls or stops mid-push delays no other
// worker (Stop() ends the wait); under the lock the update is applied whole (one rule step, one
// version) and the fresh values copied out; they are sent back after the lock is released, so no
// lock is held across the network. A push cut off half way was never applied.
Status ShardServer::PushPull(int worker, const Header& h, std::vector<float>& payload,
                             std::vector<float>& reply, Tally& tally) {
  const size_t n = size_, chunk = h.aux;
  for (size_t at = 0; at < n; at += chunk) {
    const size_t len = std::min(chunk, n - at);
    REEL_RETURN_IF_ERROR(RecvPayload(worker, kPayloadTag,
                                     std::as_writable_bytes(std::span(payload).subspan(at, len))));
  }
  Applied done;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (TooStale(h)) {
      done = Applied{version_.load(), true};
    } else {
      rule_->Apply(values_, payload, h.lr * Scale(h));
      // Copied before CountUpdate, which may release the lock to write a checkpoint.
      std::copy(values_.begin(), values_.end(), reply.begin());
      REEL_ASSIGN_OR_RETURN(const int64_t version, CountUpdate(lock));
      done = Applied{version, false};
    }
    if (done.refused) std::copy(values_.begin(), values_.end(), reply.begin());
  }
  Count(tally, h, done.refused);
  for (size_t at = 0; at < n; at += chunk) {
    const size_t len = std::min(chunk, n - at);
    REEL_RETURN_IF_ERROR(comm_.Send(worker, kReplyPayloadTag,
                                    std::as_bytes(std::span(reply).subspan(at, len)),
                                    NextDeadline()));
  }
  Header out = MakeHeader(Kind::kPushPulled, shard_, 0, done.version, static_cast<int64_t>(n));
  out.aux = done.refused ? 1 : 0;
  return SendHeader(comm_, worker, kReplyTag, out, NextDeadline());
}

ShardSnapshot ShardServer::Snapshot(int64_t version) {
  ShardSnapshot s;
  s.shard = shard_;
  s.shards = roles_.servers;
  s.version = version;
  s.values.resize(size_);
  for (size_t i = 0; i < size_; ++i)
    s.values[i] = std::atomic_ref<float>(values_[i]).load(std::memory_order_relaxed);
  s.state.assign(reinterpret_cast<const char*>(&version), sizeof version);
  s.state += rule_->SaveState();
  return s;
}

Status ShardServer::ReplyPull(int worker, std::vector<float>& scratch) {
  Header reply = MakeHeader(Kind::kPulled, shard_, 0, 0, static_cast<int64_t>(size_));
  if (config_.locking) {
    // Copied under the lock (a consistent version) and sent after it: a worker that does not
    // read its replies holds up nobody else.
    std::lock_guard<std::mutex> lock(mu_);
    reply.version = version_.load();
    std::copy(values_.begin(), values_.end(), scratch.begin());
  } else {
    reply.version = version_.load();
    for (size_t i = 0; i < size_; ++i)
      scratch[i] = std::atomic_ref<float>(values_[i]).load(std::memory_order_relaxed);
  }
  REEL_RETURN_IF_ERROR(SendHeader(comm_, worker, kReplyTag, reply, NextDeadline()));
  return comm_.Send(worker, kReplyPayloadTag, std::as_bytes(std::span(scratch)), NextDeadline());
}

ShardSnapshot ShardServer::Cut() {
  // No update starts or is half-applied while both are held: Hogwild updates hold cut_mu_
  // shared, locking ones mu_, each until its version is counted.
  std::unique_lock<std::shared_mutex> uncut(cut_mu_);
  std::lock_guard<std::mutex> lock(mu_);
  return Snapshot(version_.load());
}

Status ShardServer::Restore(std::string_view state, std::span<const float> values) {
  if (values.size() != size_)
    return InvalidArgumentError(Where() + ": restoring " + std::to_string(values.size()) +
                                " values into a shard of " + std::to_string(size_));
  int64_t version;
  if (state.size() < sizeof version) return DataLossError(Where() + ": shard state is truncated");
  std::memcpy(&version, state.data(), sizeof version);
  state.remove_prefix(sizeof version);
  REEL_ASSIGN_OR_RETURN(std::unique_ptr<UpdateRule> rule, MakeUpdateRule(config_.rule));
  REEL_RETURN_IF_ERROR(rule->RestoreState(state).WithContext(Where()));
  std::lock_guard<std::mutex> lock(mu_);
  rule_ = std::move(rule);
  version_.store(version);
  std::copy(values.begin(), values.end(), values_.begin());
  return Status::Ok();
}

// The cut is copied under the locks and sent after them (wire.h, kState).
Status ShardServer::ReplyState(int worker) {
  const ShardSnapshot cut = Cut();
  Header reply =
      MakeHeader(Kind::kStateBytes, shard_, 0, cut.version, static_cast<int64_t>(cut.state.size()));
  reply.steps = static_cast<int64_t>(cut.values.size());
  REEL_RETURN_IF_ERROR(SendHeader(comm_, worker, kReplyTag, reply, NextDeadline()));
  REEL_RETURN_IF_ERROR(
      comm_.Send(worker, kReplyPayloadTag, std::as_bytes(std::span(cut.values)), NextDeadline()));
  return comm_.Send(worker, kReplyPayloadTag, std::as_bytes(std::span(cut.state)), NextDeadline());
}

Status ShardServer::CheckOtherWorker(int worker, int64_t of, const char* asked) const {
  if (of < roles_.first_worker || of >= roles_.world || of == worker)
    return InvalidArgumentError(Where() + ": rank " + std::to_string(worker) + " asked " + asked +
                                " rank " + std::to_string(of) + ", which is not another worker");
  return Status::Ok();
}

bool ShardServer::AwaitEnded(const Tally& t, std::unique_lock<std::mutex>& lock) {
  const Deadline end = NextDeadline();
  // In slices, so that Stop() is seen (it does not notify).
  while (!t.ended && !stop_.load() && Clock::now() < end)
    tally_ended_.wait_until(lock, std::min(end, DeadlineIn(std::chrono::milliseconds(100))));
  return t.ended;
}

// Waits for the worker's thread to end first: a push that had arrived whole before the worker
// died may still be being applied.
Status ShardServer::ReplyApplied(int worker, int64_t of) {
  REEL_RETURN_IF_ERROR(CheckOtherWorker(worker, of, "what was applied of"));
  const Tally& t = tallies_[static_cast<size_t>(of - roles_.first_worker)];
  Header reply = MakeHeader(Kind::kAppliedWork, shard_, 0, 0);
  {
    std::unique_lock<std::mutex> lock(tally_mu_);
    reply.aux = AwaitEnded(t, lock) ? 1 : 0;
    reply.step = t.applied_step;
    reply.version = t.applied;
    reply.steps = t.applied_steps;
    reply.examples = t.applied_examples;
  }
  return SendHeader(comm_, worker, kReplyTag, reply, NextDeadline());
}

// The successor of a lost lead: the lowest worker whose thread has not ended. Workers wait for
// the lead's end before they say done, so every worker still training or waiting is a
// candidate, and every lower one is gone; the asker itself is one, so there always is an answer.
Status ShardServer::ReplyLead(int worker, int64_t of) {
  REEL_RETURN_IF_ERROR(CheckOtherWorker(worker, of, "who leads after"));
  const Tally& t = tallies_[static_cast<size_t>(of - roles_.first_worker)];
  Header reply = MakeHeader(Kind::kLeadIs, shard_, of, 0);
  {
    std::unique_lock<std::mutex> lock(tally_mu_);
    if (AwaitEnded(t, lock)) {
      reply.aux = 1;
      for (const Tally& c : tallies_)
        if (!c.ended) {
          reply.step = c.worker;
          break;
        }
    }
  }
  return SendHeader(comm_, worker, kReplyTag, reply, NextDeadline());
}

Status ShardServer::ReplyExamples(int worker) {
  Header reply = MakeHeader(Kind::kExamplesAre, shard_);
  for (const Tally& t : tallies()) {
    reply.version += t.applied;
    reply.steps += t.applied_steps;
    reply.examples += t.applied_examples;
  }
  return SendHeader(comm_, worker, kReplyTag, reply, NextDeadline());
}

std::vector<float> ShardServer::values() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<float> out(size_);
  // Hogwild writers do not take the lock: read each float atomically (atomic_ref needs non-const).
  for (size_t i = 0; i < size_; ++i)
    out[i] = std::atomic_ref<float>(const_cast<float&>(values_[i])).load(std::memory_order_relaxed);
  return out;
}

std::vector<ShardServer::Tally> ShardServer::tallies() const {
  std::lock_guard<std::mutex> lock(tally_mu_);
  return tallies_;
}

}  // namespace reel::async_sgd
