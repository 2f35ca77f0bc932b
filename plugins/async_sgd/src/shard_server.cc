// A parameter server's shard (see shard_server.h).
#include "shard_server.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <thread>

#include "chunk_receiver.h"

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
        Status s = comm_.RecvInto(worker, kPayloadTag, std::as_writable_bytes(std::span(payload)),
                                  NextDeadline());
        if (s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded)
          return lose(s);
        REEL_RETURN_IF_ERROR(s);
        REEL_RETURN_IF_ERROR(Apply(*h, payload));
        CountApplied(tally, *h);
        const Header ack = MakeHeader(Kind::kAck, shard_, 0, version_.load());
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
        Status s = PushPull(worker, *h, payload, tally);
        if (s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded)
          return lose(s);
        REEL_RETURN_IF_ERROR(s);
        break;
      }
      case Kind::kPull: {
        Status s = ReplyPull(worker, payload);
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
          return DataLossError(Where() + ": rank " + std::to_string(worker) + " sent " +
                               std::to_string(h->step) + " pushes, " +
                               std::to_string(tally.applied) + " were applied");
        return Status::Ok();
      }
      default:
        return InvalidArgumentError(Where() + ": rank " + std::to_string(worker) +
                                    " sent a request of kind " +
                                    std::to_string(static_cast<uint32_t>(h->kind)));
    }
  }
}

void ShardServer::CountApplied(Tally& tally, const Header& h) {
  std::lock_guard<std::mutex> lock(tally_mu_);
  ++tally.applied;
  tally.applied_step = h.step;
  tally.applied_steps += h.steps;
  tally.applied_examples += h.examples;
}

// Staleness: how many updates reached the shard since the worker's copy was pulled. A push based
// on the newest version (staleness 0) or one behind gets the full rate.
float ShardServer::Scale(const Header& h) const {
  const int64_t staleness = std::max<int64_t>(0, version_.load() - h.version);
  return config_.staleness_aware ? 1.0f / static_cast<float>(std::max<int64_t>(1, staleness))
                                 : 1.0f;
}

Status ShardServer::Apply(const Header& h, std::span<const float> payload) {
  std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
  if (config_.locking) lock.lock();
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
  return CountUpdate(lock).status();
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

namespace {

// Rule sgd's step over the gradient: grads = params - lr * (grads + wd * params), the expression
// of UpdateRule's Sgd (reel/update_rule.h), so the result is the same bit for bit (the OneWorker
// and CutOff tests compare). In blocks of a constant length with __restrict pointers, as that rule
// does, so GCC vectorises it at -O2.
template <size_t N>
void SgdBlock(float* __restrict g, const float* __restrict p, float lr, float wd) {
  for (size_t i = 0; i < N; ++i) g[i] = p[i] - lr * (g[i] + wd * p[i]);
}
void SgdOverGrads(std::span<float> grads, std::span<const float> params, float lr, float wd) {
  constexpr size_t kBlock = 64;
  const size_t n = grads.size(), blocks = n / kBlock;
  for (size_t b = 0; b < blocks; ++b)
    SgdBlock<kBlock>(grads.data() + b * kBlock, params.data() + b * kBlock, lr, wd);
  for (size_t i = blocks * kBlock; i < n; ++i)
    SgdBlock<1>(grads.data() + i, params.data() + i, lr, wd);
}

}  // namespace

// The push's chunks are applied as they arrive, each chunk's fresh values sent straight back, so
// the push and the pull cross the link in both directions at once. One update (one rule step,
// one version) under the lock for its whole length, as a push and a pull in a row would be with
// nothing between them. The chunks are received on a thread of their own, each receive posted
// before its chunk arrives (chunk_receiver.h), from before the lock is taken, so that a push
// arrives while another worker's exchange holds the lock. A push cut off half way (the worker died)
// is taken back, so that nothing of it remains:
//   * rule sgd (no state) writes each chunk's new values over its gradient in `payload`, still
//     in cache from its arrival, sends them from there, and swaps `payload` with the shard's
//     values once the last chunk arrived: a cut-off push never touched them, no copy is made and
//     no second shard is kept (the worker's receive buffer, which exists anyway, serves);
//   * the other rules update their state in place: what each chunk held before (values and
//     state) is kept (undo_*) until the last chunk arrived, and put back if it does not.
// If only the way back fails, the push arrived whole and counts.
Status ShardServer::PushPull(int worker, const Header& h, std::vector<float>& payload,
                             Tally& tally) {
  const size_t n = size_, chunk = h.aux;
  // Receiving before the lock is taken: the push arrives while another worker's exchange holds it.
  ChunkReceiver receiver(comm_, worker, kPayloadTag, std::span(payload), chunk,
                         [this] { return NextDeadline(); });
  std::unique_lock<std::mutex> lock(mu_);
  const float lr = h.lr * Scale(h);
  rule_->BeginUpdate(n);
  const bool out_of_place = config_.rule.rule == "sgd";
  const int vectors = rule_->state_vectors();
  if (!out_of_place) {
    undo_values_.resize(n);
    undo_state_.resize(static_cast<size_t>(vectors) * n);
  }
  auto take_back = [&](size_t applied) {
    if (!out_of_place) {
      std::copy_n(undo_values_.begin(), applied, values_.begin());
      for (int k = 0; k < vectors; ++k)
        rule_->SetState(k, 0, std::span<const float>(undo_state_).subspan(k * n, applied));
    }
    rule_->CancelUpdate();
  };
  Status back = Status::Ok();
  for (size_t at = 0; at < n; at += chunk) {
    const size_t len = std::min(chunk, n - at);
    if (Status got = receiver.Await(at + len); !got.ok()) {
      take_back(at);
      return got;
    }
    std::span<float> in = std::span(payload).subspan(at, len);
    std::span<float> shard = std::span(values_).subspan(at, len), fresh = shard;
    if (out_of_place) {
      fresh = in;
      SgdOverGrads(fresh, shard, lr, static_cast<float>(config_.rule.weight_decay));
    } else {
      std::copy(shard.begin(), shard.end(), undo_values_.begin() + static_cast<ptrdiff_t>(at));
      for (int k = 0; k < vectors; ++k)
        rule_->CopyState(k, at, std::span(undo_state_).subspan(k * n + at, len));
      rule_->ApplyPart(shard, in, lr, at);
    }
    if (back.ok())
      back = comm_.Send(worker, kReplyPayloadTag, std::as_bytes(fresh), NextDeadline());
  }
  if (out_of_place) values_.swap(payload);
  CountApplied(tally, h);
  REEL_ASSIGN_OR_RETURN(const int64_t version, CountUpdate(lock));
  REEL_RETURN_IF_ERROR(back);
  const Header reply = MakeHeader(Kind::kPushPulled, shard_, 0, version, static_cast<int64_t>(n));
  return SendHeader(comm_, worker, kReplyTag, reply, NextDeadline());
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
    // Sent from the shard itself, under the lock: a consistent version, no copy.
    std::lock_guard<std::mutex> lock(mu_);
    reply.version = version_.load();
    REEL_RETURN_IF_ERROR(SendHeader(comm_, worker, kReplyTag, reply, NextDeadline()));
    return comm_.Send(worker, kReplyPayloadTag, std::as_bytes(std::span(values_)), NextDeadline());
  }
  reply.version = version_.load();
  for (size_t i = 0; i < size_; ++i)
    scratch[i] = std::atomic_ref<float>(values_[i]).load(std::memory_order_relaxed);
  REEL_RETURN_IF_ERROR(SendHeader(comm_, worker, kReplyTag, reply, NextDeadline()));
  return comm_.Send(worker, kReplyPayloadTag, std::as_bytes(std::span(scratch)), NextDeadline());
}

std::string ShardServer::Save() {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t version = version_.load();
  std::string out(reinterpret_cast<const char*>(&version), sizeof version);
  out += rule_->SaveState();
  return out;
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

Status ShardServer::ReplyState(int worker) {
  const std::string state = Save();
  const Header reply =
      MakeHeader(Kind::kStateBytes, shard_, 0, version_.load(), static_cast<int64_t>(state.size()));
  REEL_RETURN_IF_ERROR(SendHeader(comm_, worker, kReplyTag, reply, NextDeadline()));
  return comm_.Send(worker, kReplyPayloadTag, std::as_bytes(std::span(state)), NextDeadline());
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
