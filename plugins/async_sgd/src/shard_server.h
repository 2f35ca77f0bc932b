// One parameter server: holds a contiguous shard of the parameters and applies the workers'
// pushes to it with an update rule (reel/update_rule.h) as they arrive; the options `locking`,
// `staleness_aware` and `max_staleness` are the plugin README's. One thread per worker receives
// that worker's requests, so a slow worker never holds up the others. No lock is held while the
// network is waited on: a push is received whole before the shard's lock is taken, and replies
// are copied under it and sent after it, so a worker that stalls or is stopped mid-exchange delays
// the others by at most the one update in progress. Without `locking`, each float is read and
// written atomically (concurrent updates of one float may be lost, by design).
//
// A worker whose connection fails (Unavailable, or silent past the deadline) is dropped: its
// thread ends, the others carry on, and at the end the server names every dropped worker with its
// last step and the pushes applied on stderr (tallies() has the same). A worker may ask what was
// applied of another's pushes (kApplied, wire.h): the lead asks for the workers it lost; and who
// leads once the lead was lost (kLead): the lowest worker it has neither dropped nor seen done.
// Run() still succeeds on a server-only rank if any worker finished; it returns Unavailable naming
// the dropped ones if none did, or when colocated (the dropped worker's rank also served a shard).
//
// With WriteCheckpoints(), the server writes its shard and rule state itself every `every`
// updates (shard_checkpoints.h); a failed write fails Run() naming the file.
//
// A worker's kState request (the lead's checkpoint) is answered with a cut (Cut()): the shard's
// values, its rule's state and its version taken at one instant, between two updates, so the
// values hold exactly the updates the version counts.
//
// Thread-safety: Run() on one thread; Cut() and Restore() before Run() or from a worker's
// request, Cut() also from any thread while Run() serves.
#ifndef REEL_PLUGINS_ASYNC_SGD_SRC_SHARD_SERVER_H_
#define REEL_PLUGINS_ASYNC_SGD_SRC_SHARD_SERVER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "async_config.h"
#include "reel/update_rule.h"
#include "shard_checkpoints.h"
#include "wire.h"

namespace reel::async_sgd {

class ShardServer {
 public:
  // `initial` are the shard's starting values (copied).
  static Result<std::unique_ptr<ShardServer>> Create(const AsyncConfig& config, const Roles& roles,
                                                     Communicator& comm, int shard,
                                                     std::span<const float> initial);

  // Serves every worker until each has sent kDone or was dropped. Errors: a malformed request,
  // or pushes applied from a worker that differ from the count it reported (DataLoss).
  Status Run();

  // Makes Run() return soon (its receives wait in short slices and look at this between them),
  // for an owner that goes away before its workers said done. Thread-safe.
  void Stop() { stop_.store(true); }

  // Before Run(): write this shard's checkpoint every `every` (> 0) updates into `checkpoints`.
  void WriteCheckpoints(std::shared_ptr<ShardCheckpoints> checkpoints, int64_t every) {
    checkpoints_ = std::move(checkpoints);
    checkpoint_every_ = every;
  }

  // A cut of the shard: its values, version and state (int64 version, then the rule's state),
  // all taken between the same two updates. With locking under the shard's lock; Hogwild, no
  // update is in progress meanwhile either (each holds cut_mu_ shared while it applies and
  // counts itself).
  ShardSnapshot Cut();
  // `values`: the shard's parameters as the checkpoint holds them.
  Status Restore(std::string_view state, std::span<const float> values);

  struct Tally {
    int worker = 0;         // rank
    int64_t applied = 0;    // pushes applied
    int64_t last_step = 0;  // the worker's step of its last request
    // What the applied pushes carried: the worker's step after the newest one, and the sums of
    // their steps and examples (wire.h).
    int64_t applied_step = 0, applied_steps = 0, applied_examples = 0;
    int64_t refused = 0;  // pushes refused as staler than max_staleness, never applied
    bool done = false;    // reported done
    bool ended = false;   // its thread ended: nothing more of it will be applied
    std::string lost;     // why it was dropped, empty if it was not
  };
  std::vector<Tally> tallies() const;
  int64_t version() const { return version_.load(); }
  // A copy of the shard's values.
  std::vector<float> values() const;

 private:
  ShardServer(const AsyncConfig& config, const Roles& roles, Communicator& comm, int shard,
              std::span<const float> initial, std::unique_ptr<UpdateRule> rule);

  Status ServeWorker(int worker);
  // Receives a payload from `worker` without holding any lock, in short slices until the timeout
  // or Stop() (Cancelled).
  Status RecvPayload(int worker, int tag, std::span<std::byte> into);
  // Updates the shard has had since the version the push was computed on.
  int64_t Staleness(const Header& h) const;
  // The push's learning-rate factor for its staleness (staleness_aware).
  float Scale(const Header& h) const;
  // max_staleness is set and the push is staler than it: it is refused, not applied.
  bool TooStale(const Header& h) const;
  struct Applied {
    int64_t version = 0;   // the shard's version after it
    bool refused = false;  // too stale: not applied
  };
  Result<Applied> Apply(const Header& h, std::span<const float> payload);
  // kPushPull (wire.h): receives the push into `payload`, applies it under the lock and copies
  // the fresh shard into `reply`, sends that back after the lock, and counts it in `tally`.
  // Locking only.
  Status PushPull(int worker, const Header& h, std::vector<float>& payload,
                  std::vector<float>& reply, Tally& tally);
  // After an update: counts the version and writes the shard's checkpoint when it is due (then
  // releasing `lock` first). The new version.
  Result<int64_t> CountUpdate(std::unique_lock<std::mutex>& lock);
  void Count(Tally& tally, const Header& h, bool refused);
  // The shard as it is; the caller holds mu_ when locking.
  ShardSnapshot Snapshot(int64_t version);
  Status ReplyPull(int worker, std::vector<float>& scratch);
  Status ReplyState(int worker);
  // InvalidArgument unless `of` is a worker other than `worker` (who `asked` about it).
  Status CheckOtherWorker(int worker, int64_t of, const char* asked) const;
  // Waits (holding tally_mu_ in `lock`) until `t`'s thread ended, the deadline or Stop(); true if
  // it ended.
  bool AwaitEnded(const Tally& t, std::unique_lock<std::mutex>& lock);
  // kApplied: what was applied of rank `of`'s pushes, once its thread ended (or by the deadline).
  Status ReplyApplied(int worker, int64_t of);
  // kLead (wire.h): who leads once the lost lead `of` was dropped.
  Status ReplyLead(int worker, int64_t of);
  // kExamples (wire.h): what the pushes of every worker applied so far carried, summed.
  Status ReplyExamples(int worker);
  Deadline NextDeadline() const;
  // The next request's header from `worker`: waits in short slices until the timeout (a worker
  // silent that long is lost) or Stop().
  Result<Header> NextRequest(int worker);
  std::string Where() const;

  const AsyncConfig config_;
  const Roles roles_;
  Communicator& comm_;
  const int shard_;
  const size_t size_;      // the shard's floats
  mutable std::mutex mu_;  // with locking: the values, the rule and the buffers below
  // Hogwild: updates hold it shared while they apply and count themselves, Cut() exclusively.
  std::shared_mutex cut_mu_;
  std::vector<float> values_;
  std::unique_ptr<UpdateRule> rule_;
  std::atomic<int64_t> version_{0};
  std::atomic<bool> stop_{false};
  mutable std::mutex tally_mu_;
  std::condition_variable tally_ended_;            // a worker's thread ended
  std::vector<Tally> tallies_;                     // by worker index; guarded by tally_mu_
  std::shared_ptr<ShardCheckpoints> checkpoints_;  // null: the server writes none
  int64_t checkpoint_every_ = 0;
};

}  // namespace reel::async_sgd

#endif  // REEL_PLUGINS_ASYNC_SGD_SRC_SHARD_SERVER_H_
