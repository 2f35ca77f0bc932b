// A transport plugin: the ranks of a group are threads of one process, and a message is a copy put
// in the receiver's queue. Groups meet by the coordinator address the host gives (any string
// here; a network transport would listen on it at rank 0). Copy it and replace the queues with
// your network; the rules it follows are those of reel/transport.h:
//   - Connect blocks until the whole group has joined, or its deadline passes (DeadlineExceeded
//     naming the ranks still missing);
//   - messages between a pair of ranks with one tag arrive in the order sent; a receive from
//     kAnySource takes the oldest message with that tag;
//   - tags outside [0, kMaxTag], ranks outside [0, size()) and messages over kMaxMessageBytes are
//     InvalidArgument at once;
//   - every wait honours its deadline (DeadlineExceeded naming the peer and the tag), and a rank
//     that left (its communicator destroyed) is Unavailable naming it, never a hang;
//   - collectives are left to the host, which runs its ring algorithms over Send and Recv.
#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>

#include "reel/plugin.h"

namespace {

struct Group {
  explicit Group(int size) : joined(size, false), left(size, false), queues(size) {}
  std::mutex mu;
  std::condition_variable changed;                // a join, a message or a departure
  std::vector<bool> joined, left;                 // guarded by mu
  std::vector<std::deque<reel::Message>> queues;  // per receiving rank; guarded by mu
  int size() const { return static_cast<int>(queues.size()); }
};

// Groups still forming, by coordinator. A complete group leaves the map, so the name can be
// used again.
std::mutex forming_mu;
std::map<std::string, std::shared_ptr<Group>> forming;  // guarded by forming_mu

class LocalCommunicator final : public reel::Communicator {
 public:
  LocalCommunicator(std::shared_ptr<Group> group, int rank)
      : group_(std::move(group)), rank_(rank) {}
  ~LocalCommunicator() override {
    std::lock_guard<std::mutex> lock(group_->mu);
    group_->left[rank_] = true;
    group_->changed.notify_all();
  }
  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }

  reel::Status Send(int dest, int tag, std::span<const std::byte> data, reel::Deadline) override {
    REEL_RETURN_IF_ERROR(Check(dest, tag, false));
    if (data.size() > reel::kMaxMessageBytes)
      return reel::InvalidArgumentError("Send of " + std::to_string(data.size()) +
                                        " bytes: at most " +
                                        std::to_string(reel::kMaxMessageBytes));
    std::lock_guard<std::mutex> lock(group_->mu);
    if (group_->left[dest])
      return reel::UnavailableError("rank " + std::to_string(dest) + " has left");
    group_->queues[dest].push_back({rank_, tag, std::vector<std::byte>(data.begin(), data.end())});
    group_->changed.notify_all();
    return reel::Status::Ok();
  }

  reel::Result<reel::Message> Recv(int source, int tag, reel::Deadline deadline) override {
    REEL_RETURN_IF_ERROR(Check(source, tag, true));
    std::unique_lock<std::mutex> lock(group_->mu);
    auto& queue = group_->queues[rank_];
    for (;;) {
      for (auto it = queue.begin(); it != queue.end(); ++it) {
        if (it->tag != tag || (source != reel::kAnySource && it->source != source)) continue;
        reel::Message m = std::move(*it);
        queue.erase(it);
        return m;
      }
      if (source != reel::kAnySource && group_->left[source])
        return reel::UnavailableError("rank " + std::to_string(source) + " has left");
      if (source == reel::kAnySource && EveryoneElseLeft())
        return reel::UnavailableError("every other rank has left (rank " + std::to_string(rank_) +
                                      " waits for tag " + std::to_string(tag) + ")");
      if (group_->changed.wait_until(lock, deadline) == std::cv_status::timeout &&
          !Ready(source, tag))
        return reel::DeadlineExceededError(
            "rank " + std::to_string(rank_) + " waited past its deadline for " +
            (source == reel::kAnySource ? "any rank" : "rank " + std::to_string(source)) +
            ", tag " + std::to_string(tag));
    }
  }

 private:
  reel::Status Check(int peer, int tag, bool any_allowed) const {
    if (tag < 0 || tag > reel::kMaxTag)
      return reel::InvalidArgumentError("tag " + std::to_string(tag) + " outside [0, " +
                                        std::to_string(reel::kMaxTag) + "]");
    if ((peer < 0 || peer >= size()) && !(any_allowed && peer == reel::kAnySource))
      return reel::InvalidArgumentError("rank " + std::to_string(peer) + " outside [0, " +
                                        std::to_string(size()) + ")");
    return reel::Status::Ok();
  }
  // REQUIRES: group_->mu held.
  bool EveryoneElseLeft() const {
    for (int r = 0; r < size(); ++r)
      if (r != rank_ && !group_->left[r]) return false;
    return true;
  }
  // REQUIRES: group_->mu held. Whether the next loop round has something to return.
  bool Ready(int source, int tag) const {
    for (const reel::Message& m : group_->queues[rank_])
      if (m.tag == tag && (source == reel::kAnySource || m.source == source)) return true;
    return source == reel::kAnySource ? EveryoneElseLeft() : group_->left[source];
  }

  std::shared_ptr<Group> group_;
  int rank_;
};

class LocalTransport final : public reel::Transport {
 public:
  reel::Result<std::unique_ptr<reel::Communicator>> Connect(const reel::TransportContext& ctx,
                                                            reel::Deadline deadline) override {
    if (ctx.rank == reel::kDiscover && ctx.world_size == reel::kDiscover)
      return Connect({0, 1, ctx.coordinator}, deadline);  // no launcher placed others here
    if (ctx.world_size < 1 || ctx.rank < 0 || ctx.rank >= ctx.world_size)
      return reel::InvalidArgumentError("rank " + std::to_string(ctx.rank) + " of world size " +
                                        std::to_string(ctx.world_size));
    std::unique_lock<std::mutex> lock(forming_mu);
    std::shared_ptr<Group>& slot = forming[ctx.coordinator];
    if (!slot) slot = std::make_shared<Group>(ctx.world_size);
    std::shared_ptr<Group> group = slot;
    if (group->size() != ctx.world_size)
      return reel::InvalidArgumentError("group '" + ctx.coordinator + "' has world size " +
                                        std::to_string(group->size()));
    std::unique_lock<std::mutex> group_lock(group->mu);
    if (group->joined[ctx.rank])
      return reel::AlreadyExistsError("rank " + std::to_string(ctx.rank) + " has joined already");
    group->joined[ctx.rank] = true;
    group->changed.notify_all();
    lock.unlock();
    auto complete = [&] {
      return std::find(group->joined.begin(), group->joined.end(), false) == group->joined.end();
    };
    if (!group->changed.wait_until(group_lock, deadline, complete)) {
      group->joined[ctx.rank] = false;  // a later attempt may take the rank again
      std::string missing;
      for (int r = 0; r < group->size(); ++r)
        if (!group->joined[r] && r != ctx.rank) missing += " rank " + std::to_string(r);
      return reel::DeadlineExceededError("group '" + ctx.coordinator +
                                         "' did not form; missing:" + missing);
    }
    group_lock.unlock();
    lock.lock();
    if (auto it = forming.find(ctx.coordinator); it != forming.end() && it->second == group)
      forming.erase(it);
    return std::unique_ptr<reel::Communicator>(new LocalCommunicator(group, ctx.rank));
  }
};

reel::Status Register(reel::Registrar& r) {
  return r.Add<reel::Transport>(
      {"template_local", "ranks as threads of one process", {}},
      [](const reel::Options&) -> reel::Result<std::unique_ptr<reel::Transport>> {
        return std::unique_ptr<reel::Transport>(new LocalTransport());
      });
}

}  // namespace

REEL_PLUGIN("template_transport", "0.1.0", "Template transport plugin: copy me", Register)
