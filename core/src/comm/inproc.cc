// The in-process transport (see reel/core/inproc.h): one mailbox per rank, queues keyed by
// (tag, source), and a rendezvous table for groups formed by name through the Transport API.
#include "reel/core/inproc.h"

#include <atomic>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "builtins.h"

namespace reel::core {
namespace {

// Waits on `cv` until `deadline`; the far-future deadline waits without a timeout, because
// converting time_point::max() for a timed wait can overflow.
bool WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock, Deadline deadline) {
  if (deadline == Deadline::max()) {
    cv.wait(lock);
    return true;
  }
  return cv.wait_until(lock, deadline) == std::cv_status::no_timeout;
}

struct Queued {
  uint64_t arrival;  // group-wide counter: the oldest message wins an any-source receive
  std::vector<std::byte> payload;
};

struct Mailbox {
  explicit Mailbox(int group_size) : queued_bytes(static_cast<size_t>(group_size), 0) {}
  std::mutex mu;
  std::condition_variable cv;    // a message arrived
  std::condition_variable room;  // a receive took a message: senders over the budget retry
  std::map<std::pair<int, int>, std::deque<Queued>> queues;  // by (tag, source); guarded by mu
  std::vector<uint64_t> queued_bytes;                        // by source; guarded by mu
};

// The shared state of one formed group; each communicator holds a reference.
class Group {
 public:
  Group(std::string name, int size, uint64_t budget)
      : name_(std::move(name)), size_(size), budget_(budget), left_(size) {
    for (int i = 0; i < size; ++i) boxes_.push_back(std::make_unique<Mailbox>(size));
    for (auto& l : left_) l.store(false);
  }

  int size() const { return size_; }

  Status Send(int from, int dest, int tag, std::span<const std::byte> data, Deadline deadline) {
    if (dest < 0 || dest >= size_)
      return InvalidArgumentError(Where(from) + ": Send to rank " + std::to_string(dest) +
                                  " outside [0, " + std::to_string(size_) + ")");
    if (tag < 0 || tag > kMaxTag)
      return InvalidArgumentError(Where(from) + ": Send with tag " + std::to_string(tag) +
                                  " outside [0, " + std::to_string(kMaxTag) + "]");
    if (left_[dest].load())
      return UnavailableError(Where(from) + ": Send to rank " + std::to_string(dest) + " tag " +
                              std::to_string(tag) + ": rank " + std::to_string(dest) +
                              " has left the group");
    Mailbox& box = *boxes_[dest];
    std::vector<std::byte> payload = TakeBuffer(data.size());
    payload.assign(data.begin(), data.end());
    {
      std::unique_lock<std::mutex> lock(box.mu);
      uint64_t& held = box.queued_bytes[static_cast<size_t>(from)];
      // The receive budget: while this rank's messages that wait at `dest` fill it, the send
      // waits for `dest` to take some (as a full TCP connection would).
      while (held >= budget_) {
        if (left_[dest].load())
          return UnavailableError(Where(from) + ": Send to rank " + std::to_string(dest) + " tag " +
                                  std::to_string(tag) + ": rank " + std::to_string(dest) +
                                  " has left the group");
        if (!WaitUntil(box.room, lock, deadline) && held >= budget_)
          return DeadlineExceededError(
              Where(from) + ": Send to rank " + std::to_string(dest) + " tag " +
              std::to_string(tag) + " passed its deadline: rank " + std::to_string(dest) +
              " is not receiving (" + std::to_string(held) + " bytes from this rank wait there)");
      }
      held += payload.size();
      box.queues[{tag, from}].push_back(Queued{arrivals_.fetch_add(1), std::move(payload)});
    }
    box.cv.notify_all();  // several threads of the receiver may wait for different tags
    return Status::Ok();
  }

  Result<Message> Recv(int me, int source, int tag, Deadline deadline) {
    if (source != kAnySource && (source < 0 || source >= size_))
      return InvalidArgumentError(Where(me) + ": Recv from rank " + std::to_string(source) +
                                  " outside [0, " + std::to_string(size_) + ")");
    if (tag < 0 || tag > kMaxTag)
      return InvalidArgumentError(Where(me) + ": Recv with tag " + std::to_string(tag) +
                                  " outside [0, " + std::to_string(kMaxTag) + "]");
    Mailbox& box = *boxes_[me];
    std::unique_lock<std::mutex> lock(box.mu);
    while (true) {
      if (auto m = Take(box, source, tag)) return std::move(*m);
      if (Status gone = Gone(me, source, tag); !gone.ok()) return gone;
      if (!WaitUntil(box.cv, lock, deadline)) {
        if (auto m = Take(box, source, tag)) return std::move(*m);
        return DeadlineExceededError(Where(me) + ": Recv from " + SourceName(source) + " tag " +
                                     std::to_string(tag) + " passed its deadline");
      }
    }
  }

  // Payload buffers are recycled: a fresh multi-megabyte vector per message would cost page
  // faults on every touch (the allocator returns big blocks to the kernel), which dominated
  // large allreduces. RecvInto hands its buffer back; Recv gives the payload to the caller.
  std::vector<std::byte> TakeBuffer(size_t bytes) {
    std::lock_guard<std::mutex> lock(pool_mu_);
    auto best = pool_.end();
    for (auto it = pool_.begin(); it != pool_.end(); ++it)
      if (it->capacity() >= bytes && (best == pool_.end() || it->capacity() < best->capacity()))
        best = it;
    if (best == pool_.end()) return {};
    std::vector<std::byte> out = std::move(*best);
    pool_.erase(best);
    return out;
  }
  void ReturnBuffer(std::vector<std::byte> buffer) {
    if (buffer.capacity() < kMinPooledBytes) return;  // small ones are cheap to allocate
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (pool_.size() < kMaxPooledPerRank * static_cast<size_t>(size_))
      pool_.push_back(std::move(buffer));
  }

  // Marks `rank` gone and wakes every waiting receiver so they notice.
  void Leave(int rank) {
    left_[rank].store(true);
    for (auto& box : boxes_) {
      // Taking the lock orders this store before any receiver's next check (no lost wake-up).
      { std::lock_guard<std::mutex> lock(box->mu); }
      box->cv.notify_all();
      box->room.notify_all();  // senders waiting for room at a rank that left
    }
  }

 private:
  std::string Where(int rank) const {
    return "inproc group '" + name_ + "' rank " + std::to_string(rank);
  }
  static std::string SourceName(int source) {
    return source == kAnySource ? std::string("any rank") : "rank " + std::to_string(source);
  }

  // REQUIRES: box.mu held.
  static std::optional<Message> Take(Mailbox& box, int source, int tag) {
    auto best = box.queues.end();
    if (source != kAnySource) {
      best = box.queues.find({tag, source});
    } else {
      for (auto it = box.queues.lower_bound({tag, INT_MIN});
           it != box.queues.end() && it->first.first == tag; ++it)
        if (best == box.queues.end() || it->second.front().arrival < best->second.front().arrival)
          best = it;
    }
    if (best == box.queues.end()) return std::nullopt;
    Message m{best->first.second, tag, std::move(best->second.front().payload)};
    best->second.pop_front();
    if (best->second.empty()) box.queues.erase(best);  // queues only hold pending messages
    box.queued_bytes[static_cast<size_t>(m.source)] -= m.payload.size();
    box.room.notify_all();
    return m;
  }

  // Unavailable when nobody who could still send the awaited message is left.
  Status Gone(int me, int source, int tag) const {
    if (source != kAnySource) {
      if (!left_[source].load()) return Status::Ok();
      return UnavailableError(Where(me) + ": Recv from rank " + std::to_string(source) + " tag " +
                              std::to_string(tag) + ": rank " + std::to_string(source) +
                              " has left the group");
    }
    for (int r = 0; r < size_; ++r)
      if (r != me && !left_[r].load()) return Status::Ok();
    return UnavailableError(Where(me) + ": Recv from any rank tag " + std::to_string(tag) +
                            ": every other rank has left the group");
  }

  static constexpr size_t kMinPooledBytes = 64 << 10;
  static constexpr size_t kMaxPooledPerRank = 2;

  const std::string name_;
  const int size_;
  const uint64_t budget_;
  std::mutex pool_mu_;
  std::vector<std::vector<std::byte>> pool_;  // guarded by pool_mu_
  std::vector<std::unique_ptr<Mailbox>> boxes_;
  std::vector<std::atomic<bool>> left_;
  std::atomic<uint64_t> arrivals_{0};
};

class InprocCommunicator final : public Communicator {
 public:
  InprocCommunicator(std::shared_ptr<Group> group, int rank)
      : group_(std::move(group)), rank_(rank) {}
  ~InprocCommunicator() override { group_->Leave(rank_); }

  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  Status Send(int dest, int tag, std::span<const std::byte> data, Deadline deadline) override {
    if (data.size() > kMaxMessageBytes)  // the promise of every backend (reel/transport.h)
      return InvalidArgumentError("rank " + std::to_string(rank_) + ": Send of " +
                                  std::to_string(data.size()) + " bytes: at most " +
                                  std::to_string(kMaxMessageBytes) + " (kMaxMessageBytes)");
    return group_->Send(rank_, dest, tag, data, deadline);  // waits only over the budget
  }
  Result<Message> Recv(int source, int tag, Deadline deadline) override {
    return group_->Recv(rank_, source, tag, deadline);
  }
  Status RecvInto(int source, int tag, std::span<std::byte> out, Deadline deadline) override {
    REEL_ASSIGN_OR_RETURN(Message m, group_->Recv(rank_, source, tag, deadline));
    if (m.payload.size() != out.size())
      return InvalidArgumentError("rank " + std::to_string(rank_) + ": message from rank " +
                                  std::to_string(m.source) + " tag " + std::to_string(tag) +
                                  " has " + std::to_string(m.payload.size()) + " bytes, expected " +
                                  std::to_string(out.size()));
    if (!out.empty()) std::memcpy(out.data(), m.payload.data(), out.size());
    group_->ReturnBuffer(std::move(m.payload));
    return Status::Ok();
  }

 private:
  std::shared_ptr<Group> group_;
  const int rank_;
};

// Groups being formed by name through InprocTransport::Connect.
struct Forming {
  int world_size = 0;
  std::vector<bool> joined;
  int count = 0;
  bool complete = false;
  std::shared_ptr<Group> group;
};

struct Rendezvous {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, std::shared_ptr<Forming>> forming;  // guarded by mu
};

Rendezvous& GlobalRendezvous() {
  static auto* r = new Rendezvous;  // never destroyed: threads may still be joining at exit
  return *r;
}

class InprocTransport final : public Transport {
 public:
  InprocTransport(std::string world, uint64_t budget) : world_(std::move(world)), budget_(budget) {}

  Result<std::unique_ptr<Communicator>> Connect(const TransportContext& ctx,
                                                Deadline deadline) override {
    const std::string where = "inproc group '" + world_ + "'";
    if (ctx.rank == kDiscover && ctx.world_size == kDiscover)
      return Connect({0, 1, ctx.coordinator}, deadline);  // nobody else is in this process's world
    if (ctx.world_size < 1)
      return InvalidArgumentError(where + ": world size " + std::to_string(ctx.world_size) +
                                  " < 1");
    if (ctx.rank < 0 || ctx.rank >= ctx.world_size)
      return InvalidArgumentError(where + ": rank " + std::to_string(ctx.rank) + " outside [0, " +
                                  std::to_string(ctx.world_size) + ")");
    Rendezvous& rv = GlobalRendezvous();
    std::unique_lock<std::mutex> lock(rv.mu);
    auto& slot = rv.forming[world_];
    if (!slot) {
      slot = std::make_shared<Forming>();
      slot->world_size = ctx.world_size;
      slot->joined.assign(ctx.world_size, false);
      slot->group = std::make_shared<Group>(world_, ctx.world_size, budget_);
    }
    std::shared_ptr<Forming> f = slot;
    if (f->world_size != ctx.world_size)
      return InvalidArgumentError(where + ": rank " + std::to_string(ctx.rank) +
                                  " joins with world size " + std::to_string(ctx.world_size) +
                                  ", the group was started with " + std::to_string(f->world_size));
    if (f->joined[ctx.rank])
      return AlreadyExistsError(where + ": rank " + std::to_string(ctx.rank) +
                                " has already joined");
    f->joined[ctx.rank] = true;
    if (++f->count == f->world_size) {
      f->complete = true;
      rv.forming.erase(world_);  // the name is free for the next group
      rv.cv.notify_all();
    }
    while (!f->complete) {
      if (!WaitUntil(rv.cv, lock, deadline) && !f->complete) {
        f->joined[ctx.rank] = false;  // give the slot back so a retry can take it
        if (--f->count == 0) {
          auto it = rv.forming.find(world_);
          if (it != rv.forming.end() && it->second == f) rv.forming.erase(it);
        }
        std::string missing;
        int count = 0;
        for (int r = 0; r < f->world_size; ++r)
          if (!f->joined[r] && r != ctx.rank) {
            missing += (missing.empty() ? "" : ", ") + std::to_string(r);
            ++count;
          }
        return DeadlineExceededError(where + ": rank " + std::to_string(ctx.rank) +
                                     " timed out waiting for " + (count == 1 ? "rank " : "ranks ") +
                                     missing + " to join");
      }
    }
    return std::unique_ptr<Communicator>(new InprocCommunicator(f->group, ctx.rank));
  }

 private:
  std::string world_;
  uint64_t budget_;
};

}  // namespace

Result<std::vector<std::unique_ptr<Communicator>>> CreateInprocGroup(
    int n, uint64_t receive_budget_bytes) {
  if (n < 1)
    return InvalidArgumentError("inproc group of " + std::to_string(n) + " ranks (need >= 1)");
  static std::atomic<int> counter{0};
  auto group = std::make_shared<Group>("anonymous-" + std::to_string(counter.fetch_add(1)), n,
                                       receive_budget_bytes);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < n; ++r) comms.push_back(std::make_unique<InprocCommunicator>(group, r));
  return comms;
}

std::unique_ptr<Transport> MakeInprocTransport(std::string world, uint64_t receive_budget_bytes) {
  return std::make_unique<InprocTransport>(std::move(world), receive_budget_bytes);
}

Status RegisterInprocTransport(Registrar& registrar) {
  OptionSchema schema = {
      StringOption(
          "world", "default",
          "name of the in-process group; threads connecting with the same name form one group"),
      IntOption("receive_budget_bytes", static_cast<int64_t>(kDefaultInprocReceiveBudgetBytes),
                "bytes of one rank's messages that may wait at another for a receive; past it "
                "a Send waits (until its deadline) for the receiver to take some. A message is "
                "always accepted below it, so at most this plus one message waits per pair")};
  return registrar.Add<Transport>(
      {"inproc", "N ranks as threads of this process (tests, demos, single-machine hosts)", schema},
      [](const Options& o) -> Result<std::unique_ptr<Transport>> {
        const int64_t budget = o.GetInt("receive_budget_bytes");
        if (budget < 0)
          return InvalidArgumentError(
              "inproc option 'receive_budget_bytes': " + std::to_string(budget) + " is below 0");
        return MakeInprocTransport(o.GetString("world"), static_cast<uint64_t>(budget));
      });
}

}  // namespace reel::core
