// Matching arriving messages with receives (see mailbox.h).
#include "mailbox.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <utility>

#include "waiting.h"

namespace reel::tcp {
namespace {

std::string SourceName(int source) {
  return source == kAnySource ? std::string("any rank") : "rank " + std::to_string(source);
}

// A receive's tag, or the native collective whose messages a negative tag stands for.
std::string TagName(int tag) {
  return tag >= 0 ? "tag " + std::to_string(tag)
                  : "collective " + std::to_string(-1 - int64_t{tag});
}

constexpr size_t kMinPooledBytes = 64 << 10;  // smaller buffers are cheap to allocate
constexpr size_t kMaxPooled = 4;

}  // namespace

Mailbox::Mailbox(std::string where, int rank, int world_size, bool isolate_failures)
    : where_(std::move(where)),
      rank_(rank),
      isolate_failures_(isolate_failures),
      left_(static_cast<size_t>(world_size), false),
      failed_(static_cast<size_t>(world_size)),
      held_bytes_(static_cast<size_t>(world_size), 0) {}

// ---- Bounded memory ----

void Mailbox::SetBudget(uint64_t bytes, std::function<void(int)> on_room) {
  std::lock_guard<std::mutex> lock(mu_);
  budget_ = bytes;
  on_room_ = std::move(on_room);
}

void Mailbox::SetOnAbandon(std::function<void(int)> on_abandon) {
  on_abandon_ = std::move(on_abandon);
}

bool Mailbox::HasRoom(int source) const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_bytes_[static_cast<size_t>(source)] < budget_;
}

uint64_t Mailbox::HeldBytes(int source) const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_bytes_[static_cast<size_t>(source)];
}

void Mailbox::Hold(int source, int64_t delta) {
  uint64_t& held = held_bytes_[static_cast<size_t>(source)];
  const bool was_full = held >= budget_;
  held += static_cast<uint64_t>(delta);
  if (was_full && held < budget_ && on_room_) on_room_(source);
}

bool Mailbox::MayStageLocked(int source, int tag) const {
  if (held_bytes_[static_cast<size_t>(source)] < budget_) return true;
  // A Recv that waits for this message asked for its bytes: they are the receiver's, as a
  // RecvInto's buffer is, unless a message queued already answers that Recv.
  auto waiting = [&](int from) {
    auto it = recv_waiting_.find({tag, from});
    return it != recv_waiting_.end() && it->second > 0;
  };
  if (waiting(source) && queues_.find({tag, source}) == queues_.end()) return true;
  if (waiting(kAnySource)) {
    auto it = queues_.lower_bound({tag, INT_MIN});
    if (it == queues_.end() || it->first.first != tag) return true;
  }
  return false;
}

void Mailbox::WakePausedReaders(int source) {
  if (!on_room_) return;
  for (size_t s = 0; s < held_bytes_.size(); ++s)
    if ((source == kAnySource || s == static_cast<size_t>(source)) && held_bytes_[s] >= budget_)
      on_room_(static_cast<int>(s));
}

// ---- Receivers ----

Result<Message> Mailbox::Recv(int source, int tag, Deadline deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  if (auto m = TakeQueued(source, tag)) return std::move(*m);
  // Waiting: the message may be staged past the budget (MayStageLocked).
  ++recv_waiting_[{tag, source}];
  WakePausedReaders(source);
  struct StopWaiting {
    Mailbox* box;
    int tag, source;
    ~StopWaiting() {
      auto it = box->recv_waiting_.find({tag, source});
      if (--it->second == 0) box->recv_waiting_.erase(it);
    }
  } stop_waiting{this, tag, source};  // destroyed before `lock`
  while (true) {
    if (auto m = TakeQueued(source, tag)) return std::move(*m);
    REEL_RETURN_IF_ERROR(UnavailableLocked(source, tag));
    if (!WaitUntil(cv_, lock, deadline)) {
      if (auto m = TakeQueued(source, tag)) return std::move(*m);
      return DeadlineExceededError(where_ + ": Recv from " + SourceName(source) + " " +
                                   TagName(tag) + " passed its deadline");
    }
  }
}

Status Mailbox::RecvInto(int source, int tag, std::span<std::byte> out, Deadline deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  if (auto m = TakeQueued(source, tag)) {
    lock.unlock();
    Status s = m->payload.size() == out.size()
                   ? Status::Ok()
                   : SizeMismatch(m->source, tag, m->payload.size(), out.size());
    if (s.ok() && !out.empty()) std::memcpy(out.data(), m->payload.data(), out.size());
    ReturnBuffer(std::move(m->payload));
    return s;
  }
  REEL_RETURN_IF_ERROR(UnavailableLocked(source, tag));
  Posted p{source, tag, out, Posted::State::kWaiting, false, Status::Ok()};
  posted_.push_back(&p);
  WakePausedReaders(source);  // one paused over the budget may hold this receive's message
  while (p.state != Posted::State::kDone) {
    if (p.state == Posted::State::kWaiting) {
      if (Status gone = UnavailableLocked(source, tag); !gone.ok()) {
        posted_.remove(&p);
        return gone;
      }
    }
    if (WaitUntil(cv_, lock, deadline)) continue;
    if (p.state == Posted::State::kWaiting) {
      posted_.remove(&p);
      return DeadlineExceededError(where_ + ": Recv from " + SourceName(source) + " " +
                                   TagName(tag) + " passed its deadline");
    }
    // The reader is writing into `out`: it hands the message back (to the queue, so the timeout
    // consumes nothing) at its next chunk, or at once when told (a sender stalled mid-message
    // sends no next chunk), and only then may `out` go away.
    p.abandon = true;
    if (on_abandon_) {
      const int from = p.claimed_from;
      lock.unlock();
      on_abandon_(from);
      lock.lock();
    }
    while (p.state != Posted::State::kDone) cv_.wait(lock);
  }
  return p.status;
}

void Mailbox::Post(Posted& p) {
  std::unique_lock<std::mutex> lock(mu_);
  if (auto m = TakeQueued(p.source, p.tag)) {
    lock.unlock();
    p.status = m->payload.size() == p.out.size()
                   ? Status::Ok()
                   : SizeMismatch(m->source, p.tag, m->payload.size(), p.out.size());
    if (p.status.ok() && !p.out.empty()) std::memcpy(p.out.data(), m->payload.data(), p.out.size());
    ReturnBuffer(std::move(m->payload));
    lock.lock();
    p.state = Posted::State::kDone;
    return;
  }
  p.status = UnavailableLocked(p.source, p.tag);
  if (!p.status.ok()) {
    p.state = Posted::State::kDone;
    return;
  }
  p.state = Posted::State::kWaiting;
  posted_.push_back(&p);
  WakePausedReaders(p.source);
}

bool Mailbox::Done(const Posted& p) const {
  std::lock_guard<std::mutex> lock(mu_);
  return p.state == Posted::State::kDone;
}

bool Mailbox::Withdraw(Posted& p, Status status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (p.state != Posted::State::kWaiting) return false;
  posted_.remove(&p);
  p.status = std::move(status);
  p.state = Posted::State::kDone;
  return true;
}

Status Mailbox::CanReceive(int source, int tag) const {
  std::lock_guard<std::mutex> lock(mu_);
  return UnavailableLocked(source, tag);
}

// ---- Native collectives ----

uint64_t Mailbox::StartCollective(uint32_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  collectives_started_ = true;
  collective_floor_ = seq & kCollectiveSeqMask;
  for (auto it = queues_.begin(); it != queues_.end();) {
    if (StaleLocked(it->first.first)) {
      stale_dropped_ += it->second.size();
      for (const Queued& q : it->second)
        Hold(it->first.second, -static_cast<int64_t>(q.payload.size()));
      it = queues_.erase(it);
    } else {
      ++it;
    }
  }
  return stale_dropped_ - std::exchange(stale_reported_, stale_dropped_);
}

uint64_t Mailbox::stale_dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stale_dropped_;
}

// Collective numbers wrap at 2^31: `seq` is earlier than the floor if it is at most 2^30 behind.
bool Mailbox::StaleLocked(int tag) const {
  if (tag >= 0 || !collectives_started_) return false;
  const uint32_t seq = static_cast<uint32_t>(-1 - int64_t{tag});
  const uint32_t behind = (collective_floor_ - seq) & kCollectiveSeqMask;
  return behind > 0 && behind <= (kCollectiveSeqMask >> 1) + 1;
}

// ---- Peers ----

void Mailbox::PeerLeft(int rank) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    left_[static_cast<size_t>(rank)] = true;
  }
  cv_.notify_all();
}

bool Mailbox::PeerFailed(int rank, const std::string& why, bool wake) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& reason = failed_[static_cast<size_t>(rank)];
    if (!reason.empty() || left_[static_cast<size_t>(rank)]) return false;
    reason = why;
    if (first_failed_ < 0) first_failed_ = rank;
  }
  if (wake) WakeWaiters();
  return true;
}

void Mailbox::WakeWaiters() { cv_.notify_all(); }

Status Mailbox::PeerStatus(int rank) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto r = static_cast<size_t>(rank);
  std::string own;  // what became of `rank` itself
  if (!failed_[r].empty())
    own = "rank " + std::to_string(rank) + " is unavailable: " + failed_[r];
  else if (left_[r])
    own = "rank " + std::to_string(rank) + " has left the group";
  else
    return Status::Ok();
  // In a broken group the ranks that end after the first failure usually end because of it
  // (their own calls failed, they gave up and exited): name the rank that failed first, as
  // receives do, and this one after it.
  if (first_failed_ >= 0 && first_failed_ != rank && !isolate_failures_)
    return UnavailableError(where_ + ": rank " + std::to_string(first_failed_) +
                            " is unavailable: " + failed_[static_cast<size_t>(first_failed_)] +
                            " (since then " + own + ")");
  return UnavailableError(where_ + ": " + own);
}

Status Mailbox::AwaitPeerEnd(int rank, Deadline deadline) {
  const auto r = static_cast<size_t>(rank);
  {
    std::unique_lock<std::mutex> lock(mu_);
    while (failed_[r].empty() && !left_[r])
      if (!WaitUntil(cv_, lock, deadline)) break;
  }
  return PeerStatus(rank);
}

Status Mailbox::GroupStatus() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (first_failed_ < 0) return Status::Ok();
  return UnavailableError(where_ + ": rank " + std::to_string(first_failed_) +
                          " is unavailable: " + failed_[static_cast<size_t>(first_failed_)]);
}

Status Mailbox::UnavailableLocked(int source, int tag) const {
  const std::string what = where_ + ": Recv from " + SourceName(source) + " " + TagName(tag) + ": ";
  if (first_failed_ >= 0 && !isolate_failures_)
    return UnavailableError(what + "rank " + std::to_string(first_failed_) +
                            " is unavailable: " + failed_[static_cast<size_t>(first_failed_)]);
  if (source != kAnySource) {
    const auto s = static_cast<size_t>(source);
    if (!failed_[s].empty())
      return UnavailableError(what + "rank " + std::to_string(source) +
                              " is unavailable: " + failed_[s]);
    if (!left_[s]) return Status::Ok();
    return UnavailableError(what + "rank " + std::to_string(source) + " has left the group");
  }
  for (size_t r = 0; r < left_.size(); ++r)
    if (!left_[r] && failed_[r].empty() && r != static_cast<size_t>(rank_)) return Status::Ok();
  return UnavailableError(what + "every other rank has left the group or failed");
}

Status Mailbox::SizeMismatch(int source, int tag, uint64_t got, size_t want) const {
  return InvalidArgumentError(where_ + ": message from rank " + std::to_string(source) + " " +
                              TagName(tag) + " has " + std::to_string(got) + " bytes, expected " +
                              std::to_string(want));
}

// ---- Queues ----

std::optional<Message> Mailbox::TakeQueued(int source, int tag) {
  auto best = queues_.end();
  if (source != kAnySource) {
    best = queues_.find({tag, source});
  } else {
    for (auto it = queues_.lower_bound({tag, INT_MIN});
         it != queues_.end() && it->first.first == tag; ++it)
      if (best == queues_.end() || it->second.front().arrival < best->second.front().arrival)
        best = it;
  }
  if (best == queues_.end()) return std::nullopt;
  Message m{best->first.second, tag, std::move(best->second.front().payload)};
  best->second.pop_front();
  Hold(m.source, -static_cast<int64_t>(m.payload.size()));
  if (best->second.empty()) queues_.erase(best);  // queues only hold pending messages
  return m;
}

Mailbox::Posted* Mailbox::Claim(int source, int tag, uint64_t length, bool* taken) {
  for (auto it = posted_.begin(); it != posted_.end(); ++it) {
    Posted* p = *it;
    if (p->tag != tag || (p->source != source && p->source != kAnySource)) continue;
    posted_.erase(it);
    *taken = true;
    if (p->out.size() != length) {  // the receive takes the message and fails, as in inproc
      Complete(p, SizeMismatch(source, tag, length, p->out.size()));
      return nullptr;
    }
    p->state = Posted::State::kClaimed;
    p->claimed_from = source;
    return p;
  }
  return nullptr;
}

void Mailbox::Complete(Posted* p, Status status) {
  p->status = std::move(status);
  p->state = Posted::State::kDone;
  cv_.notify_all();
}

// The payload's bytes are counted in held_bytes_ already (staged as they arrived).
void Mailbox::Enqueue(int source, int tag, std::vector<std::byte> payload) {
  if (StaleLocked(tag)) {  // its collective ended here while it arrived
    ++stale_dropped_;
    Hold(source, -static_cast<int64_t>(payload.size()));
    return;
  }
  queues_[{tag, source}].push_back(Queued{arrivals_++, std::move(payload)});
  cv_.notify_all();  // several threads may wait for different tags
}

void Mailbox::DeliverCopy(int source, int tag, std::span<const std::byte> payload) {
  Inbound in = Begin(source, tag, payload.size());
  while (in.remaining() > 0) {
    std::span<std::byte> dst = in.Next();
    std::memcpy(dst.data(), payload.data() + (payload.size() - in.remaining()), dst.size());
    in.Advance(dst.size());
  }
  in.Finish();
}

// Staging buffers are recycled: a fresh multi-megabyte vector per message would cost page
// faults on every touch (the allocator returns big blocks to the kernel).
std::vector<std::byte> Mailbox::TakeBuffer(size_t bytes) {
  std::vector<std::byte> out;
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    auto best = pool_.end();
    for (auto it = pool_.begin(); it != pool_.end(); ++it)
      if (it->capacity() >= bytes && (best == pool_.end() || it->capacity() < best->capacity()))
        best = it;
    if (best != pool_.end()) {
      out = std::move(*best);
      pool_.erase(best);
    }
  }
  out.resize(bytes);
  return out;
}

void Mailbox::ReturnBuffer(std::vector<std::byte> buffer) {
  if (buffer.capacity() < kMinPooledBytes) return;
  std::lock_guard<std::mutex> lock(pool_mu_);
  if (pool_.size() < kMaxPooled) pool_.push_back(std::move(buffer));
}

// ---- Inbound ----

Mailbox::Inbound Mailbox::Begin(int source, int tag, uint64_t length) {
  Inbound in(this, source, tag, length);
  std::lock_guard<std::mutex> lock(mu_);
  if (StaleLocked(tag)) {  // nobody can receive it any more: its bytes are read and dropped
    ++stale_dropped_;
    in.discard_ = true;
    return in;
  }
  bool taken = false;
  in.claimed_ = Claim(source, tag, length, &taken);
  in.discard_ = taken && !in.claimed_;  // a receive of the wrong size took it and failed
  return in;
}

Mailbox::Inbound::Inbound(Mailbox* box, int source, int tag, uint64_t length)
    : box_(box), source_(source), tag_(tag), length_(length) {}

Mailbox::Inbound::Inbound(Inbound&& o) noexcept
    : box_(o.box_),
      source_(o.source_),
      tag_(o.tag_),
      length_(o.length_),
      received_(o.received_),
      claimed_(std::exchange(o.claimed_, nullptr)),
      discard_(o.discard_),
      staging_(std::move(o.staging_)),
      drop_(std::move(o.drop_)),
      counted_(std::exchange(o.counted_, 0)),
      done_(std::exchange(o.done_, true)) {}

Mailbox::Inbound::~Inbound() {
  if (!done_)
    Fail(InternalError(box_->where_ + ": message from rank " + std::to_string(source_) + " " +
                       TagName(tag_) + " abandoned mid-way"));
}

std::span<std::byte> Mailbox::Inbound::Next() {
  const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunkBytes, remaining()));
  if (claimed_) return claimed_->out.subspan(static_cast<size_t>(received_), n);
  if (discard_) {
    drop_.resize(std::max(drop_.size(), n));
    return {drop_.data(), n};
  }
  const size_t need = static_cast<size_t>(received_) + n;
  if (staging_.size() < need) Stage(need);
  return std::span<std::byte>(staging_).subspan(static_cast<size_t>(received_), n);
}

// The staging buffer grows with the bytes that arrived, at least doubling each time (the copies
// cost at most the message once more), never beyond the message: a header's length is only a
// claim, and a peer that claims a terabyte and sends a few bytes must not make this rank
// allocate the terabyte (found by the tcp_stream fuzzer).
void Mailbox::Inbound::Stage(size_t need) {
  const size_t size = static_cast<size_t>(
      std::min<uint64_t>(length_, std::max({need, 2 * staging_.size(), kChunkBytes})));
  if (staging_.capacity() >= size) {
    staging_.resize(size);
    return;
  }
  std::vector<std::byte> grown = box_->TakeBuffer(size);
  if (received_ > 0) std::memcpy(grown.data(), staging_.data(), static_cast<size_t>(received_));
  if (!staging_.empty()) box_->ReturnBuffer(std::move(staging_));
  staging_ = std::move(grown);
}

void Mailbox::Inbound::Count(uint64_t bytes) {
  box_->Hold(source_, static_cast<int64_t>(bytes) - static_cast<int64_t>(counted_));
  counted_ = bytes;
}

bool Mailbox::Inbound::Ready() {
  if (claimed_ || discard_ || remaining() == 0) return true;
  TryClaim();
  if (claimed_ || discard_) return true;
  std::lock_guard<std::mutex> lock(box_->mu_);
  return box_->MayStageLocked(source_, tag_);
}

void Mailbox::Inbound::Advance(size_t n) {
  received_ += n;
  if (discard_) return;
  if (claimed_) {
    if (remaining() > 0) ReleaseIfAbandoned();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(box_->mu_);
    Count(received_);
  }
  if (remaining() > 0) TryClaim();  // else Finish() does the last hand-over
}

void Mailbox::Inbound::TryClaim() {
  std::unique_lock<std::mutex> lock(box_->mu_);
  bool taken = false;
  Posted* p = box_->Claim(source_, tag_, length_, &taken);
  if (!p) {
    if (taken) {  // a receive of the wrong size took it and failed: drop the rest
      discard_ = true;
      Count(0);
      lock.unlock();
      box_->ReturnBuffer(std::move(staging_));
      staging_ = {};
    }
    return;
  }
  Count(0);  // the receive's buffer holds it from here on
  lock.unlock();
  if (received_ > 0) std::memcpy(p->out.data(), staging_.data(), static_cast<size_t>(received_));
  box_->ReturnBuffer(std::move(staging_));
  staging_ = {};
  claimed_ = p;
}

void Mailbox::Inbound::ReleaseIfAbandoned() {
  if (!claimed_) return;
  {
    std::lock_guard<std::mutex> lock(box_->mu_);
    if (!claimed_->abandon) return;
  }
  Release(DeadlineExceededError(box_->where_ + ": Recv from rank " + std::to_string(source_) + " " +
                                TagName(tag_) + " passed its deadline"));
}

void Mailbox::Inbound::Release(Status status) {
  // Move what `claimed_` holds back into staging, so the message can still be delivered; staging
  // grows from there as bytes arrive (Stage), not to the whole claimed length at once.
  staging_ = box_->TakeBuffer(
      static_cast<size_t>(std::min<uint64_t>(length_, std::max<uint64_t>(received_, kChunkBytes))));
  std::memcpy(staging_.data(), claimed_->out.data(), static_cast<size_t>(received_));
  std::lock_guard<std::mutex> lock(box_->mu_);
  Count(received_);  // held for nobody now: counted, though it may pass the budget
  box_->Complete(std::exchange(claimed_, nullptr), std::move(status));
}

void Mailbox::Inbound::Finish() {
  done_ = true;
  if (discard_) return;
  std::unique_lock<std::mutex> lock(box_->mu_);
  if (claimed_) {
    box_->Complete(std::exchange(claimed_, nullptr), Status::Ok());
    return;
  }
  bool taken = false;
  Posted* p = box_->Claim(source_, tag_, length_, &taken);
  if (taken && !p) {
    Count(0);
    lock.unlock();
    box_->ReturnBuffer(std::move(staging_));
    return;
  }
  if (!p) {
    staging_.resize(static_cast<size_t>(length_));  // Next() grew it to length_ (0: nothing)
    Count(length_);
    counted_ = 0;  // the queue's from now on
    box_->Enqueue(source_, tag_, std::move(staging_));
    return;
  }
  Count(0);
  lock.unlock();
  if (length_ > 0) std::memcpy(p->out.data(), staging_.data(), static_cast<size_t>(length_));
  box_->ReturnBuffer(std::move(staging_));
  lock.lock();
  box_->Complete(p, Status::Ok());
}

void Mailbox::Inbound::Fail(const Status& why) {
  done_ = true;
  {
    std::lock_guard<std::mutex> lock(box_->mu_);
    Count(0);
    if (claimed_) box_->Complete(std::exchange(claimed_, nullptr), why);
  }
  if (!staging_.empty()) box_->ReturnBuffer(std::move(staging_));
}

}  // namespace reel::tcp
