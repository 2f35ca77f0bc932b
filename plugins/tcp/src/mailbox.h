// The receiving side of one tcp rank: matches arriving messages with receives, without sockets.
//
// Receives are matched by (tag, source) or (tag, any source), messages of one pair and tag in the
// order sent. A RecvInto that is waiting when a message starts to arrive *claims* it, and the
// connection's reader writes the payload straight into the caller's buffer (no copy). A message
// nobody waits for is read into a pooled staging buffer; a RecvInto posted while it is still
// arriving claims it at the next chunk boundary: the part already read is copied once, the rest
// goes straight to the caller. Complete unclaimed messages queue until a receive takes them.
//
// Peers end in two ways. One that *left* (sent goodbye: its communicator was destroyed) fails
// only receives that wait for it. One that *failed* (reset, end of stream without goodbye,
// heartbeat timeout, protocol violation) breaks the group: every receive that would have to wait
// returns Unavailable naming that rank, on every rank, instead of hanging until its deadline.
//
// Thread-safety: every method may be called from any thread. Inbound objects are used by one
// reader thread each.
#ifndef REEL_PLUGINS_TCP_SRC_MAILBOX_H_
#define REEL_PLUGINS_TCP_SRC_MAILBOX_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "reel/transport.h"
#include "wire.h"

namespace reel::tcp {

class Mailbox {
 public:
  // `where` prefixes every error, e.g. "tcp rank 2"; `rank` is this rank. `isolate_failures`: a
  // failed peer fails only receives from it (TransportContext::isolate_failures), not the group.
  Mailbox(std::string where, int rank, int world_size, bool isolate_failures = false);

  // ---- Bounded memory ----
  // What this rank holds of one source's messages for receives that have not asked for them
  // (complete ones queued, the staged part of one arriving, a part handed back by a receive that
  // gave up) may reach `bytes` (unbounded unless set); then a reader reads none of that source's
  // payload bytes that would be staged (Inbound::Ready) until a receive takes some, or asks for
  // the message arriving (a RecvInto claims it; a Recv that waits for it makes its bytes the
  // receiver's, as a RecvInto's buffer is). `on_room(source)` is called, with the Mailbox's lock
  // held (it must not call back), when a reader of `source` that may be paused could go on: a
  // message taken brought it under the budget, or a receive started to wait.
  void SetBudget(uint64_t bytes, std::function<void(int source)> on_room);
  // `on_abandon(source)` is called, without the lock, when a receive whose buffer `source`'s
  // reader is filling passes its deadline: the reader must hand it back (Inbound::
  // ReleaseIfAbandoned) even if no more bytes come. Unset, the receive waits for the next chunk.
  void SetOnAbandon(std::function<void(int source)> on_abandon);
  // True while what is held of `source`'s messages (above) is under the budget.
  bool HasRoom(int source) const;
  // Bytes held of `source`'s messages for receives that have not asked for them (above).
  uint64_t HeldBytes(int source) const;
  Mailbox(const Mailbox&) = delete;
  Mailbox& operator=(const Mailbox&) = delete;

  const std::string& where() const { return where_; }

  // ---- Receivers (caller threads) ----
  Result<Message> Recv(int source, int tag, Deadline deadline);
  Status RecvInto(int source, int tag, std::span<std::byte> out, Deadline deadline);

  // ---- Receives that do not wait, for a caller that reads the connection itself ----
  // A RecvInto(source, tag, out) in the making; it must stay in place until done() or withdrawn.
  struct Posted {
    enum class State { kWaiting, kClaimed, kDone };
    int source = 0;
    int tag = 0;
    std::span<std::byte> out;
    State state = State::kWaiting;  // guarded by mu_
    bool abandon = false;   // the receiver's deadline passed while its buffer was being filled
    Status status;          // final once done
    int claimed_from = -1;  // the source whose reader claimed it (kClaimed); guarded by mu_
  };
  // Posts `p` (source, tag and out set): done at once if a queued message matched it (copied)
  // or the source is unavailable (p.status says which), else in line for the next match.
  void Post(Posted& p);
  // True once `p` is done; p.status is then final.
  bool Done(const Posted& p) const;
  // Takes back a posted receive that is still waiting (it ends done with `status`); true if it
  // did. A claimed one is released with FrameReader::ReleaseClaim first.
  bool Withdraw(Posted& p, Status status);
  // OK, or what a receive from `source` with `tag` would fail with now (Unavailable).
  Status CanReceive(int source, int tag) const;

  // ---- Native collectives (collective frames, wire.h) ----
  // The messages of collective number `seq` go by this tag: negative, so that no receive (tags
  // >= 0) and none of the core's collectives can take them, nor they another collective's.
  static int CollectiveTag(uint32_t seq) { return -1 - static_cast<int>(seq & kCollectiveSeqMask); }
  // Collective `seq` starts on this rank, so every earlier one has ended here (messages of one
  // that succeeded were all received): what peers sent for an earlier one belongs to a collective
  // that failed here and must never be received. Drops those queued, and from now on those that
  // arrive (their bytes are read and discarded). Returns how many it dropped since the last call.
  uint64_t StartCollective(uint32_t seq);
  // Messages of ended collectives dropped so far.
  uint64_t stale_dropped() const;

  // ---- Peers ----
  void PeerLeft(int rank);
  // The first reason recorded for a rank wins (a reset often follows a protocol error). True if
  // this call recorded it (false if the rank had failed or left already). With `wake` false the
  // waiting receivers are not woken until WakeWaiters().
  bool PeerFailed(int rank, const std::string& why, bool wake = true);
  void WakeWaiters();
  // OK, or Unavailable naming `rank` if it left or failed (a send to it cannot succeed); in a
  // group broken by another rank's failure (not isolated), naming that rank first.
  Status PeerStatus(int rank) const;
  // Waits until `rank` has left or failed, or the deadline; then PeerStatus(rank).
  Status AwaitPeerEnd(int rank, Deadline deadline);
  // Unavailable naming the first failed rank if the group is broken.
  Status GroupStatus() const;

  // ---- Arriving messages (reader threads) ----
  class Inbound;
  // A message of `length` bytes from `source` with `tag` starts arriving.
  Inbound Begin(int source, int tag, uint64_t length);
  // A complete message that needs no reading (a rank sending to itself).
  void DeliverCopy(int source, int tag, std::span<const std::byte> payload);

  // Bytes a reader should read at most before calling Inbound::Advance again: small enough that
  // a late receive claims most of a message, large enough to cost nothing per chunk.
  static constexpr size_t kChunkBytes = size_t{512} << 10;

 private:
  struct Queued {
    uint64_t arrival;  // the oldest message wins an any-source receive
    std::vector<std::byte> payload;
  };

  // REQUIRES: mu_ held.
  std::optional<Message> TakeQueued(int source, int tag);
  // The oldest waiting receive that matches, now claimed; null if none, or if the one that
  // matched has the wrong size (*taken is then true: it took the message and failed).
  Posted* Claim(int source, int tag, uint64_t length, bool* taken);
  Status UnavailableLocked(int source, int tag) const;
  void Complete(Posted* p, Status status);
  void Enqueue(int source, int tag, std::vector<std::byte> payload);
  Status SizeMismatch(int source, int tag, uint64_t got, size_t want) const;
  // A message with `tag` belongs to a collective that has ended here.
  bool StaleLocked(int tag) const;

  // What is held of `source`'s messages grew or shrank by `delta` bytes. REQUIRES: mu_ held.
  void Hold(int source, int64_t delta);
  // A reader may stage more of a message from `source` with `tag` (Inbound::Ready).
  // REQUIRES: mu_ held.
  bool MayStageLocked(int source, int tag) const;
  // A receive for (`source` or any, `tag`) starts to wait: readers paused over the budget may
  // go on (on_room). REQUIRES: mu_ held.
  void WakePausedReaders(int source);

  std::vector<std::byte> TakeBuffer(size_t bytes);
  void ReturnBuffer(std::vector<std::byte> buffer);

  const std::string where_;
  const int rank_;
  const bool isolate_failures_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<int, int>, std::deque<Queued>> queues_;  // by (tag, source); guarded by mu_
  std::list<Posted*> posted_;                                 // waiting RecvInto's, oldest first
  uint64_t arrivals_ = 0;                                     // guarded by mu_
  std::vector<bool> left_;                                    // guarded by mu_
  std::vector<std::string> failed_;   // reason per rank, empty if alive; guarded by mu_
  std::vector<uint64_t> held_bytes_;  // per source (HeldBytes); guarded by mu_
  // Recv's waiting, by (tag, source or kAnySource): the message they wait for may be staged
  // past the budget. Guarded by mu_.
  std::map<std::pair<int, int>, int> recv_waiting_;
  uint64_t budget_ = std::numeric_limits<uint64_t>::max();  // guarded by mu_
  std::function<void(int)> on_room_;                        // guarded by mu_
  std::function<void(int)> on_abandon_;                     // set before any receive
  int first_failed_ = -1;                                   // guarded by mu_
  // Native collectives: the one running or last run; messages of earlier ones dropped.
  bool collectives_started_ = false;  // guarded by mu_
  uint32_t collective_floor_ = 0;     // guarded by mu_
  uint64_t stale_dropped_ = 0;        // guarded by mu_
  uint64_t stale_reported_ = 0;       // guarded by mu_
  std::mutex pool_mu_;
  std::vector<std::vector<std::byte>> pool_;  // recycled staging buffers; guarded by pool_mu_
};

// One arriving message. The reader asks Next() where the next bytes go (at most kChunkBytes),
// reads up to that many there, reports how many with Advance(), and calls Finish() at the end or
// Fail() if the connection broke.
class Mailbox::Inbound {
 public:
  Inbound(Inbound&&) noexcept;
  Inbound& operator=(Inbound&&) = delete;
  ~Inbound();  // an unfinished message fails its claimed receive (Internal)

  uint64_t remaining() const { return length_ - received_; }
  // Whether the reader may read more of this message now: it goes into a receive's buffer (one
  // that waits is claimed here), is dropped, or may be staged within the receive budget. A reader
  // told no leaves the bytes in the kernel and asks again when on_room says so.
  bool Ready();
  // Where the next bytes go (never empty while remaining() > 0).
  std::span<std::byte> Next();
  void Advance(size_t n);
  // If the receive being filled passed its deadline, hands it back (its bytes so far are staged,
  // as when a chunk arrives after the deadline).
  void ReleaseIfAbandoned();
  void Finish();
  void Fail(const Status& why);
  // If this message is being read into `p`, hands `p` back, done with `status`; the rest of
  // the message is staged and queued as if nobody had been waiting for it.
  void Unclaim(const Posted& p, const Status& status) {
    if (claimed_ == &p) Release(status);
  }

 private:
  friend class Mailbox;
  Inbound(Mailbox* box, int source, int tag, uint64_t length);
  void Release(Status status);  // hands the claimed receive back (abandoned or failed)
  void Stage(size_t need);      // grows staging_ to hold at least `need` bytes
  // Unclaimed: hands what arrived so far to the oldest receive waiting for it, if any.
  void TryClaim();
  // Sets what this message counts in its source's held bytes. REQUIRES: box_->mu_ held.
  void Count(uint64_t bytes);

  Mailbox* box_;
  int source_, tag_;
  uint64_t length_, received_ = 0;
  Posted* claimed_ = nullptr;       // writing into its buffer
  bool discard_ = false;            // the claimed receive had the wrong size; bytes are dropped
  std::vector<std::byte> staging_;  // unclaimed: the bytes so far (grows up to the whole message)
  std::vector<std::byte> drop_;     // discard_: one chunk of scratch
  uint64_t counted_ = 0;            // bytes of staging_ counted in the source's held bytes
  bool done_ = false;
};

}  // namespace reel::tcp

#endif  // REEL_PLUGINS_TCP_SRC_MAILBOX_H_
