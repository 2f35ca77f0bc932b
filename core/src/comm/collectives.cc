// Ring collectives over any Communicator's point-to-point calls (see reel/core/collectives.h).
#include "reel/core/collectives.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "reel/collective_agreement.h"
#include "reel/ring_allreduce.h"

namespace reel::core {
namespace {

// Runs one job at a time on a thread of its own: the sends of a ring step run there while the
// caller receives from the left, because a backend whose Send blocks until the peer reads (a
// socket with a full buffer) would otherwise deadlock two neighbours sending to each other; a
// pipelined allreduce also receives on one. The thread is started on first use, so
// communicators that never run a collective cost nothing.
class HelperThread {
 public:
  HelperThread() = default;
  HelperThread(const HelperThread&) = delete;
  HelperThread& operator=(const HelperThread&) = delete;
  ~HelperThread() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  // REQUIRES: the previous job was collected with Wait().
  void Post(std::function<Status()> job) {
    if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
    {
      std::lock_guard<std::mutex> lock(mu_);
      job_ = std::move(job);
      busy_ = true;
    }
    cv_.notify_all();
  }

  // Waits for the posted job (if any) and returns its status.
  Status Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !busy_; });
    return std::exchange(result_, Status::Ok());
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [this] { return stop_ || job_ != nullptr; });
      if (stop_) return;
      std::function<Status()> job = std::move(job_);
      job_ = nullptr;
      lock.unlock();
      Status s = job();
      lock.lock();
      result_ = std::move(s);
      busy_ = false;
      cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::function<Status()> job_;  // guarded by mu_
  bool busy_ = false;            // guarded by mu_
  bool stop_ = false;            // guarded by mu_
  Status result_;                // guarded by mu_
  std::thread thread_;
};

// One ring allreduce (reduce-scatter, then allgather; the schedule in reel/ring_allreduce.h), or
// one of its halves (ReduceScatter, AllGatherShards: the units of that Part alone), each
// segment cut into chunks that travel as separate messages so that sending, receiving and reducing
// overlap: a rank forwards chunk c of step s + 1 as soon as it has reduced chunk c of step s,
// while later chunks are still arriving. Reduce-scatter chunks arrive in a few scratch slots;
// allgather chunks straight into the caller's buffer (RecvInto), each once the reduce-scatter
// send from the same place is done.
//
// Three parties: SendAll() and ReceiveAll() run on helper threads, ReduceAll() on the caller (it
// receives too when there is one chunk per step). The first failure stops all three: nothing is
// sent after it. The ranks agreed on the size and operation before (collective_agreement.h), so
// every rank cuts the same chunks.
class RingAllReducePipeline {
 public:
  // About this many bytes per message: large enough that a message's fixed costs vanish, small
  // enough that a 1 MiB allreduce already pipelines.
  static constexpr size_t kChunkBytes = size_t{256} << 10;
  // Received reduce-scatter chunks that may wait for their reduction.
  static constexpr int64_t kSlots = 4;

  RingAllReducePipeline(Communicator& backend, std::span<float> data, ReduceOp op, int tag,
                        Deadline deadline, std::vector<float>& scratch, ring::Part part)
      : backend_(backend),
        data_(data),
        op_(op),
        tag_(tag),
        deadline_(deadline),
        n_(static_cast<size_t>(backend.size())),
        r_(static_cast<size_t>(backend.rank())),
        schedule_(data.size(), backend.size(), backend.rank(), kChunkBytes, part),
        chunks_(schedule_.chunks()),
        begin_(schedule_.begin()),
        end_(schedule_.end()),
        slot_floats_(schedule_.max_chunk()),
        scratch_(scratch) {
    const size_t slots = chunks_ == 1 ? 1 : static_cast<size_t>(kSlots);
    if (scratch_.size() < slots * slot_floats_) scratch_.resize(slots * slot_floats_);
  }

  size_t units_per_step() const { return chunks_; }

  Status SendAll() {
    const int right = static_cast<int>((r_ + 1) % n_);
    for (int64_t u = begin_; u < end_; ++u) {
      if (!WaitFor([&] { return reduced_ >= u - static_cast<int64_t>(chunks_) + 1; })) break;
      std::span<const float> chunk = Chunk(u, /*sent=*/true);
      Status s = backend_.Send(right, tag_, std::as_bytes(chunk), deadline_);
      if (!s.ok()) return Fail(std::move(s));
      std::lock_guard<std::mutex> lock(mu_);
      sent_ = u + 1;
      cv_.notify_all();
    }
    return Status::Ok();
  }

  Status ReceiveAll() {
    for (int64_t u = begin_; u < end_; ++u) {
      if (!WaitFor([&] { return !Reducing(u) || u - reduced_ < kSlots; })) break;
      REEL_RETURN_IF_ERROR(ReceiveUnit(u));
      std::lock_guard<std::mutex> lock(mu_);
      received_ = u + 1;
      cv_.notify_all();
    }
    return Status::Ok();
  }

  // Reduces every received reduce-scatter chunk into the caller's buffer, receiving each first
  // if `receive_here`.
  void ReduceAll(bool receive_here) {
    for (int64_t u = begin_; u < end_; ++u) {
      if (receive_here ? !ReceiveUnit(u).ok() : !WaitFor([&] { return received_ > u; })) return;
      if (Reducing(u)) {
        std::span<float> into = Chunk(u, /*sent=*/false);
        ring::Reduce(into.data(), Slot(u).data(), into.size(), op_);
      }
      std::lock_guard<std::mutex> lock(mu_);
      reduced_ = u + 1;
      cv_.notify_all();
    }
  }

  // The first failure, or OK.
  Status status() {
    std::lock_guard<std::mutex> lock(mu_);
    return failed_;
  }

 private:
  bool Reducing(int64_t u) const { return schedule_.Reducing(u); }

  // The part of the caller's buffer that unit `u` sends (or, allgathering, receives into).
  std::span<float> Chunk(int64_t u, bool sent) const { return schedule_.Chunk(data_, u, sent); }
  // Where a received reduce-scatter chunk waits for its reduction.
  std::span<float> Slot(int64_t u) {
    const size_t slot = chunks_ == 1 ? 0 : static_cast<size_t>(u % kSlots);
    return std::span<float>(scratch_).subspan(slot * slot_floats_, slot_floats_);
  }

  Status ReceiveUnit(int64_t u) {
    const int left = static_cast<int>((r_ + n_ - 1) % n_);
    std::span<float> into = Chunk(u, /*sent=*/false);
    const size_t floats = into.size();
    if (Reducing(u)) {
      into = Slot(u).first(floats);
    } else {
      // An allgathered chunk overwrites what reduce-scatter sent from there (unit u - (n-1) *
      // chunks). The peer cannot have the final value before that send is done, but wait for it
      // here too, so no backend nor race detector has to rely on that.
      const int64_t earlier = schedule_.SentFromSamePlace(u);
      if (!WaitFor([&] { return sent_ > earlier; })) return status();
    }
    Status s = backend_.RecvInto(left, tag_, std::as_writable_bytes(into), deadline_);
    if (!s.ok())
      return Fail(s.WithContext("chunk of " + std::to_string(floats) + " floats from rank " +
                                std::to_string(left)));
    return s;
  }

  // Records the first failure and wakes the other parties; returns `s`.
  Status Fail(Status s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_.ok()) failed_ = s;
    cv_.notify_all();
    return s;
  }
  // Waits until `ready` or a failure. True to go on: nothing failed.
  template <typename Ready>
  bool WaitFor(Ready ready) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return ready() || !failed_.ok(); });
    return failed_.ok();
  }

  Communicator& backend_;
  const std::span<float> data_;
  const ReduceOp op_;
  const int tag_;
  const Deadline deadline_;
  const size_t n_, r_;
  const ring::Schedule schedule_;
  const size_t chunks_;        // per segment, the same on every rank
  const int64_t begin_, end_;  // the units of this Part
  const size_t slot_floats_;
  std::vector<float>& scratch_;
  std::mutex mu_;
  std::condition_variable cv_;
  // Units done (those before begin_ count as done); guarded by mu_.
  int64_t sent_ = begin_, received_ = begin_, reduced_ = begin_;
  Status failed_;  // guarded by mu_
};

// The tags a wrapper hands out: users get [0, user_end), its collectives cycle through
// [collective_begin, collective_begin + collective_count).
struct TagPlan {
  int user_end;
  int collective_begin;
  int64_t collective_count;
};
// A top-level communicator: the reserved tags below kSubgroupTagBase (reel/transport.h).
constexpr TagPlan kTopLevelTags{kCollectiveTagBase, kCollectiveTagBase,
                                int64_t{kSubgroupTagBase} - kCollectiveTagBase};
// A sub-group's own tag space, before SubGroupBackend moves it onto the parent's
// [kSubgroupTagBase, kMaxTag].
constexpr TagPlan kSubgroupTags{kSubgroupUserTags, kSubgroupUserTags,
                                int64_t{kMaxTag} - kSubgroupTagBase + 1 - kSubgroupUserTags};

// Point-to-point of a sub-group over its parent's backend: translates ranks (sub-group rank i is
// parent rank members[i]) and moves tags onto the parent's [kSubgroupTagBase, kMaxTag]. Holds
// `alive` so the parent knows a sub-group exists.
class SubGroupBackend final : public Communicator {
 public:
  SubGroupBackend(Communicator* parent, std::vector<int> members, int rank,
                  std::shared_ptr<void> alive)
      : parent_(parent), members_(std::move(members)), rank_(rank), alive_(std::move(alive)) {}

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }

  Status Send(int dest, int tag, std::span<const std::byte> data, Deadline deadline) override {
    REEL_ASSIGN_OR_RETURN(int to, ParentRank("Send to", dest));
    REEL_ASSIGN_OR_RETURN(int t, ParentTag("Send", tag));
    return parent_->Send(to, t, data, deadline);
  }
  Result<Message> Recv(int source, int tag, Deadline deadline) override {
    int from = kAnySource;
    if (source != kAnySource) {
      REEL_ASSIGN_OR_RETURN(from, ParentRank("Recv from", source));
    }
    REEL_ASSIGN_OR_RETURN(int t, ParentTag("Recv", tag));
    if (from != kAnySource) {
      REEL_ASSIGN_OR_RETURN(Message m, parent_->Recv(from, t, deadline));
      m.source = source;
      m.tag = tag;
      return m;
    }
    // Any source of the sub-group: the parent's any-source receive on this sub-group's tag can
    // only meet members, because only members send on it to this rank.
    REEL_ASSIGN_OR_RETURN(Message m, parent_->Recv(kAnySource, t, deadline));
    auto it = std::find(members_.begin(), members_.end(), m.source);
    if (it == members_.end())
      return InternalError("sub-group: message from parent rank " + std::to_string(m.source) +
                           ", not a member, on tag " + std::to_string(t));
    m.source = static_cast<int>(it - members_.begin());
    m.tag = tag;
    return m;
  }
  Status RecvInto(int source, int tag, std::span<std::byte> out, Deadline deadline) override {
    if (source == kAnySource) return Communicator::RecvInto(source, tag, out, deadline);
    REEL_ASSIGN_OR_RETURN(int from, ParentRank("Recv from", source));
    REEL_ASSIGN_OR_RETURN(int t, ParentTag("Recv", tag));
    return parent_->RecvInto(from, t, out, deadline);
  }

 private:
  Result<int> ParentRank(const char* what, int r) const {
    if (r < 0 || r >= size())
      return InvalidArgumentError("sub-group rank " + std::to_string(rank_) + ": " + what +
                                  " rank " + std::to_string(r) + " outside [0, " +
                                  std::to_string(size()) + ")");
    return members_[static_cast<size_t>(r)];
  }
  Result<int> ParentTag(const char* what, int tag) const {
    if (tag < 0 || tag > kMaxTag - kSubgroupTagBase)
      return InvalidArgumentError("sub-group rank " + std::to_string(rank_) + ": " + what +
                                  " with tag " + std::to_string(tag) + " outside [0, " +
                                  std::to_string(kMaxTag - kSubgroupTagBase) + "]");
    return kSubgroupTagBase + tag;
  }

  Communicator* parent_;  // not owned; outlives this sub-group
  std::vector<int> members_;
  int rank_;
  std::shared_ptr<void> alive_;
};

class RingCommunicator final : public Communicator {
 public:
  // `report_failure`: set when a collective of this communicator fails (a sub-group's tells its
  // parent, whose next sub-group would reuse the same tags).
  RingCommunicator(std::unique_ptr<Communicator> backend, TagPlan tags, bool splittable,
                   std::shared_ptr<std::atomic<bool>> report_failure = nullptr)
      : backend_(std::move(backend)),
        caps_(backend_->capabilities()),
        tags_(tags),
        splittable_(splittable),
        report_failure_(std::move(report_failure)) {}

  int rank() const override { return backend_->rank(); }
  int size() const override { return backend_->size(); }
  CommunicatorCapabilities capabilities() const override { return caps_; }
  void SetComputeAlongside(bool alongside) override { backend_->SetComputeAlongside(alongside); }

  Status Send(int dest, int tag, std::span<const std::byte> data, Deadline deadline) override {
    REEL_RETURN_IF_ERROR(CheckUserTag("Send", tag));
    return backend_->Send(dest, tag, data, deadline);
  }
  Result<Message> Recv(int source, int tag, Deadline deadline) override {
    REEL_RETURN_IF_ERROR(CheckUserTag("Recv", tag));
    return backend_->Recv(source, tag, deadline);
  }
  Status RecvInto(int source, int tag, std::span<std::byte> out, Deadline deadline) override {
    REEL_RETURN_IF_ERROR(CheckUserTag("RecvInto", tag));
    return backend_->RecvInto(source, tag, out, deadline);
  }

  // Every collective: refused for good after a failure (reel/transport.h), forwarded if native,
  // else the ranks agree on its arguments (collective_agreement.h) before any data moves, so
  // arguments that disagree, or that every rank passes but none may, are InvalidArgument on
  // every rank with nothing moved.
  Status AllReduce(std::span<float> data, ReduceOp op, Deadline deadline) override {
    REEL_RETURN_IF_ERROR(Usable("AllReduce", caps_.native_allreduce));
    if (caps_.native_allreduce) return Native(backend_->AllReduce(data, op, deadline));
    if (size() == 1) return Status::Ok();
    const std::string what = "AllReduce of " + std::to_string(data.size()) + " floats";
    REEL_RETURN_IF_ERROR(Agree(agreement::AllReduceArgs(data.size(), op), deadline, what));
    if (data.empty()) return Status::Ok();
    return Failed(RingAllReduce(data, op, tag_, deadline), what);
  }
  Status Broadcast(std::span<std::byte> data, int root, Deadline deadline) override {
    REEL_RETURN_IF_ERROR(Usable("Broadcast", caps_.native_broadcast));
    if (caps_.native_broadcast) return Native(backend_->Broadcast(data, root, deadline));
    const std::string what =
        "Broadcast of " + std::to_string(data.size()) + " bytes from rank " + std::to_string(root);
    if (size() > 1)
      REEL_RETURN_IF_ERROR(Agree(agreement::BroadcastArgs(data.size(), root), deadline, what));
    if (root < 0 || root >= size())
      return InvalidArgumentError(Where() + ": Broadcast from root " + std::to_string(root) +
                                  " outside [0, " + std::to_string(size()) + ")");
    if (size() == 1 || data.empty()) return Status::Ok();
    return Failed(ChainBroadcast(data, root, tag_, deadline), what);
  }
  Status AllGather(std::span<const std::byte> in, std::span<std::byte> out,
                   Deadline deadline) override {
    REEL_RETURN_IF_ERROR(Usable("AllGather", caps_.native_allgather));
    if (caps_.native_allgather) return Native(backend_->AllGather(in, out, deadline));
    const bool out_fits = out.size() == in.size() * static_cast<size_t>(size());
    const std::string what = "AllGather of " + std::to_string(in.size()) + " bytes per rank";
    // A wrong output on some ranks only is a disagreement too: the others must not start.
    agreement::Args args = agreement::AllGatherArgs(in.size());
    if (!out_fits) args.detail = kWrongOutput;
    if (size() > 1) REEL_RETURN_IF_ERROR(Agree(args, deadline, what));
    if (!out_fits)
      return InvalidArgumentError(Where() + ": AllGather output has " + std::to_string(out.size()) +
                                  " bytes, expected " + std::to_string(size()) + " x " +
                                  std::to_string(in.size()));
    if (in.size() > kMaxMessageBytes)
      return InvalidArgumentError(Where() + ": " + what + ": at most " +
                                  std::to_string(kMaxMessageBytes) + " (kMaxMessageBytes)");
    return Failed(RingAllGather(in, out, tag_, deadline), what);
  }
  // The halves of RingAllReduce, each alone.
  Status ReduceScatter(std::span<float> data, ReduceOp op, Deadline deadline) override {
    REEL_RETURN_IF_ERROR(Usable("ReduceScatter", caps_.native_reduce_scatter));
    if (caps_.native_reduce_scatter) return Native(backend_->ReduceScatter(data, op, deadline));
    if (size() == 1) return Status::Ok();
    const std::string what = "ReduceScatter of " + std::to_string(data.size()) + " floats";
    REEL_RETURN_IF_ERROR(Agree(agreement::ReduceScatterArgs(data.size(), op), deadline, what));
    if (data.empty()) return Status::Ok();
    return Failed(RingAllReduce(data, op, tag_, deadline, ring::Part::kReduceScatter), what);
  }
  Status AllGatherShards(std::span<float> data, Deadline deadline) override {
    REEL_RETURN_IF_ERROR(Usable("AllGatherShards", caps_.native_reduce_scatter));
    if (caps_.native_reduce_scatter) return Native(backend_->AllGatherShards(data, deadline));
    if (size() == 1) return Status::Ok();
    const std::string what = "AllGatherShards of " + std::to_string(data.size()) + " floats";
    REEL_RETURN_IF_ERROR(Agree(agreement::AllGatherShardsArgs(data.size()), deadline, what));
    if (data.empty()) return Status::Ok();
    return Failed(RingAllReduce(data, ReduceOp::kSum, tag_, deadline, ring::Part::kAllGather),
                  what);
  }
  // The agreement is a barrier: every rank hears from every other.
  Status Barrier(Deadline deadline) override {
    REEL_RETURN_IF_ERROR(Usable("Barrier", caps_.native_barrier));
    if (caps_.native_barrier) return Native(backend_->Barrier(deadline));
    if (size() == 1) return Status::Ok();
    return Agree(agreement::BarrierArgs(), deadline, "Barrier");
  }

  Result<std::unique_ptr<Communicator>> Split(int color, int key, Deadline deadline) override {
    if (color < 0)
      return InvalidArgumentError(Where() + ": Split with color " + std::to_string(color) +
                                  " (must be >= 0)");
    Result<std::unique_ptr<Communicator>> native = backend_->Split(color, key, deadline);
    if (native.ok()) return WithRingCollectives(std::move(*native));
    if (native.status().code() != StatusCode::kUnimplemented) return native.status();
    if (!splittable_)
      return UnimplementedError(Where() +
                                ": a sub-group built over point-to-point cannot be "
                                "split again");
    if (!sub_alive_.expired())
      return FailedPreconditionError(Where() +
                                     ": Split while an earlier sub-group of this "
                                     "communicator is alive (one at a time shares its tags)");
    if (subgroup_failed_->load())
      return FailedPreconditionError(Where() +
                                     ": Split after a collective of an earlier sub-group failed "
                                     "(its messages may linger on the sub-group tags, which a new "
                                     "one would reuse)");
    const int32_t mine[2] = {color, key};
    std::vector<int32_t> all(2 * static_cast<size_t>(size()));
    REEL_RETURN_IF_ERROR(AllGather(std::as_bytes(std::span<const int32_t>(mine)),
                                   std::as_writable_bytes(std::span<int32_t>(all)), deadline)
                             .WithContext("Split"));
    std::vector<int> members;
    for (int r = 0; r < size(); ++r)
      if (all[2 * static_cast<size_t>(r)] == color) members.push_back(r);
    std::stable_sort(members.begin(), members.end(), [&all](int a, int b) {
      return all[2 * static_cast<size_t>(a) + 1] < all[2 * static_cast<size_t>(b) + 1];
    });
    const int sub_rank =
        static_cast<int>(std::find(members.begin(), members.end(), rank()) - members.begin());
    auto alive = std::make_shared<int>(0);
    sub_alive_ = alive;
    return std::unique_ptr<Communicator>(
        new RingCommunicator(std::make_unique<SubGroupBackend>(backend_.get(), std::move(members),
                                                               sub_rank, std::move(alive)),
                             kSubgroupTags, /*splittable=*/false, subgroup_failed_));
  }

 private:
  // Largest piece a broadcast forwards at once: big enough to amortise a message, small enough
  // that the next rank starts forwarding early.
  static constexpr size_t kBroadcastChunk = size_t{1} << 20;

  std::string Where() const { return "rank " + std::to_string(rank()); }
  Status CheckUserTag(const char* call, int tag) const {
    if (tag >= 0 && tag < tags_.user_end) return Status::Ok();
    return InvalidArgumentError(Where() + ": " + call + " with tag " + std::to_string(tag) +
                                ": user tags must lie in [0, " + std::to_string(tags_.user_end) +
                                "); the rest is reserved for collectives");
  }
  int NextTag() {
    return static_cast<int>(tags_.collective_begin + (seq_++ % tags_.collective_count));
  }

  // AllGatherArgs' detail when this rank's output has the wrong size.
  static constexpr int32_t kWrongOutput = 1;

  // FailedPrecondition once a collective failed (reel/transport.h: its messages may linger on
  // tags that later collectives reuse). A `forwarded` (native) call is left to the backend, which
  // keeps the same contract for its own failures (and may lift it, as mpi does after a Barrier),
  // unless one of the ring's failed: the backend knows nothing of those.
  Status Usable(const char* collective, bool forwarded) const {
    if (collectives_failed_.empty() || (forwarded && !ring_failed_)) return Status::Ok();
    return FailedPreconditionError(Where() + ": " + collective +
                                   ": this communicator's collectives are unusable since one "
                                   "failed (" +
                                   collectives_failed_ + "); connect a new communicator");
  }
  // Records a failure of a collective that may have moved data (so every later one is refused),
  // with context.
  Status Failed(Status s, const std::string& what) {
    if (s.ok()) return s;
    s = s.WithContext(Where() + ": " + what);
    if (collectives_failed_.empty()) {
      collectives_failed_ = s.message();
      ring_failed_ = true;
      if (report_failure_) report_failure_->store(true);
    }
    return s;
  }
  // A native collective's result, recorded for the ring's collectives if it failed other than by
  // InvalidArgument (which moved nothing, reel/transport.h).
  Status Native(Status s) {
    if (!s.ok() && s.code() != StatusCode::kInvalidArgument && collectives_failed_.empty())
      collectives_failed_ = s.message();
    return s;
  }
  // Takes this call's tag (tag_) and gathers every rank's arguments on it: InvalidArgument (and
  // the communicator in step) if they differ; a failure of the messages is recorded as Failed.
  Status Agree(const agreement::Args& mine, Deadline deadline, const std::string& what) {
    tag_ = NextTag();
    Result<std::vector<agreement::Args>> all = agreement::GatherArgs(
        rank(), size(), mine,
        [&](int dest, std::span<const std::byte> bytes) {
          return backend_->Send(dest, tag_, bytes, deadline);
        },
        [&](int source) -> Result<std::vector<std::byte>> {
          REEL_ASSIGN_OR_RETURN(Message m, backend_->Recv(source, tag_, deadline));
          return std::move(m.payload);
        });
    if (!all.ok()) return Failed(all.status(), what);
    Status agreed = agreement::CheckAgreement(*all);
    return agreed.ok() ? agreed : agreed.WithContext(Where() + ": " + what);
  }
  int Right(int k = 1) const { return (rank() + k) % size(); }
  int Left(int k = 1) const { return (rank() - k % size() + size()) % size(); }

  // Posts a send of `data` to `dest` on the sender. `data` must stay untouched until Wait().
  void PostSend(int dest, int tag, std::span<const std::byte> data, Deadline deadline) {
    sender_.Post(
        [this, dest, tag, data, deadline] { return backend_->Send(dest, tag, data, deadline); });
  }
  // The first error of a step: the receive's, else the overlapped send's. Always collects the
  // send, so no job outlives the step that posted it.
  Status FinishStep(Status recv) {
    Status send = sender_.Wait();
    return recv.ok() ? send : recv;
  }

  Status RingAllReduce(std::span<float> data, ReduceOp op, int tag, Deadline deadline,
                       ring::Part part = ring::Part::kAllReduce) {
    RingAllReducePipeline pipeline(*backend_, data, op, tag, deadline, scratch_, part);
    // Messages of one chunk need no receiving thread: this one receives and reduces in turn.
    const bool receive_here = pipeline.units_per_step() == 1;
    sender_.Post([&pipeline] { return pipeline.SendAll(); });
    if (!receive_here) receiver_.Post([&pipeline] { return pipeline.ReceiveAll(); });
    pipeline.ReduceAll(receive_here);
    // Both jobs end (each stops at the first failure anywhere), so none outlives `data`.
    (void)sender_.Wait();  // their errors are in the pipeline's status
    if (!receive_here) (void)receiver_.Wait();
    return pipeline.status();
  }

  // A chain root -> root+1 -> ... in chunks: each rank forwards chunk k while receiving k + 1.
  Status ChainBroadcast(std::span<std::byte> data, int root, int tag, Deadline deadline) {
    const int pos = (rank() - root + size()) % size();
    const bool receives = pos != 0, forwards = pos != size() - 1;
    for (size_t off = 0; off < data.size(); off += kBroadcastChunk) {
      auto chunk = data.subspan(off, std::min(kBroadcastChunk, data.size() - off));
      if (receives) {
        Status st = backend_->RecvInto(Left(), tag, chunk, deadline);
        if (!st.ok()) return FinishStep(st);
      }
      if (forwards) {
        REEL_RETURN_IF_ERROR(sender_.Wait());  // the previous chunk's send
        PostSend(Right(), tag, chunk, deadline);
      }
    }
    return sender_.Wait();
  }

  Status RingAllGather(std::span<const std::byte> in, std::span<std::byte> out, int tag,
                       Deadline deadline) {
    const size_t n = static_cast<size_t>(size()), r = static_cast<size_t>(rank()), len = in.size();
    if (len == 0) return Status::Ok();
    std::memmove(out.data() + r * len, in.data(), len);  // `in` may alias its own block of `out`
    for (size_t s = 0; s + 1 < n; ++s) {
      const size_t send_i = (r + n - s) % n, recv_i = (r + 2 * n - s - 1) % n;
      PostSend(Right(), tag, out.subspan(send_i * len, len), deadline);
      REEL_RETURN_IF_ERROR(
          FinishStep(backend_->RecvInto(Left(), tag, out.subspan(recv_i * len, len), deadline)));
    }
    return Status::Ok();
  }

  std::unique_ptr<Communicator> backend_;
  const CommunicatorCapabilities caps_;
  const TagPlan tags_;
  const bool splittable_;
  std::weak_ptr<void> sub_alive_;  // the sub-group Split() built over point-to-point, if alive
  // Set by a sub-group built over point-to-point when one of its collectives fails.
  std::shared_ptr<std::atomic<bool>> subgroup_failed_ = std::make_shared<std::atomic<bool>>(false);
  const std::shared_ptr<std::atomic<bool>> report_failure_;  // this one's parent's, or null
  int64_t seq_ = 0;
  int tag_ = 0;                     // the running collective's (Agree takes it)
  std::string collectives_failed_;  // the first failure of a collective, if any
  bool ring_failed_ = false;        // ... and it was one of the ring's
  // The allreduce's received chunks, kept between calls so that no step allocates.
  std::vector<float> scratch_;
  // Declared last: their threads stop before backend_ goes away.
  HelperThread sender_;
  HelperThread receiver_;  // the pipelined allreduce's receives
};

}  // namespace

std::unique_ptr<Communicator> WithRingCollectives(std::unique_ptr<Communicator> backend) {
  return std::make_unique<RingCommunicator>(std::move(backend), kTopLevelTags,
                                            /*splittable=*/true);
}

}  // namespace reel::core
