// Ring collectives over any Communicator's point-to-point calls (see reel/core/collectives.h).
#include "reel/core/collectives.h"

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace reel::core {
namespace {

// Runs one send at a time on a helper thread, so a ring step can send to the right while the
// caller receives from the left: a backend whose Send blocks until the peer reads (a socket with
// a full buffer) would otherwise deadlock two neighbours sending to each other. The thread is
// started on first use, so communicators that never run a collective cost nothing.
class SendWorker {
 public:
  SendWorker() = default;
  SendWorker(const SendWorker&) = delete;
  SendWorker& operator=(const SendWorker&) = delete;
  ~SendWorker() {
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

// dst[i] = op(dst[i], src[i]).
void Reduce(float* __restrict dst, std::span<const float> src_span, ReduceOp op) {
  const float* __restrict src = src_span.data();
  const size_t n = src_span.size();
  switch (op) {
    case ReduceOp::kSum:
      for (size_t i = 0; i < n; ++i) dst[i] += src[i];
      break;
    case ReduceOp::kMax:
      for (size_t i = 0; i < n; ++i) dst[i] = std::max(dst[i], src[i]);
      break;
    case ReduceOp::kMin:
      for (size_t i = 0; i < n; ++i) dst[i] = std::min(dst[i], src[i]);
      break;
  }
}

// Splits `total` items into `parts` contiguous segments whose sizes differ by at most one.
struct Segments {
  size_t total, parts;
  size_t offset(size_t i) const { return i * (total / parts) + std::min(i, total % parts); }
  size_t length(size_t i) const { return total / parts + (i < total % parts ? 1 : 0); }
};

class RingCommunicator final : public Communicator {
 public:
  explicit RingCommunicator(std::unique_ptr<Communicator> backend)
      : backend_(std::move(backend)), caps_(backend_->capabilities()) {}

  int rank() const override { return backend_->rank(); }
  int size() const override { return backend_->size(); }
  CommunicatorCapabilities capabilities() const override { return caps_; }

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

  Status AllReduce(std::span<float> data, ReduceOp op, Deadline deadline) override {
    if (caps_.native_allreduce) return backend_->AllReduce(data, op, deadline);
    const int tag = NextTag();
    if (size() == 1 || data.empty()) return Status::Ok();
    return Context(RingAllReduce(data, op, tag, deadline),
                   "AllReduce of " + std::to_string(data.size()) + " floats");
  }
  Status Broadcast(std::span<std::byte> data, int root, Deadline deadline) override {
    if (caps_.native_broadcast) return backend_->Broadcast(data, root, deadline);
    if (root < 0 || root >= size())
      return InvalidArgumentError(Where() + ": Broadcast from root " + std::to_string(root) +
                                  " outside [0, " + std::to_string(size()) + ")");
    const int tag = NextTag();
    if (size() == 1 || data.empty()) return Status::Ok();
    return Context(
        ChainBroadcast(data, root, tag, deadline),
        "Broadcast of " + std::to_string(data.size()) + " bytes from rank " + std::to_string(root));
  }
  Status AllGather(std::span<const std::byte> in, std::span<std::byte> out,
                   Deadline deadline) override {
    if (caps_.native_allgather) return backend_->AllGather(in, out, deadline);
    if (out.size() != in.size() * static_cast<size_t>(size()))
      return InvalidArgumentError(Where() + ": AllGather output has " + std::to_string(out.size()) +
                                  " bytes, expected " + std::to_string(size()) + " x " +
                                  std::to_string(in.size()));
    const int tag = NextTag();
    return Context(RingAllGather(in, out, tag, deadline),
                   "AllGather of " + std::to_string(in.size()) + " bytes per rank");
  }
  Status Barrier(Deadline deadline) override {
    if (caps_.native_barrier) return backend_->Barrier(deadline);
    const int tag = NextTag();
    return Context(DisseminationBarrier(tag, deadline), "Barrier");
  }

 private:
  // Largest piece a broadcast forwards at once: big enough to amortise a message, small enough
  // that the next rank starts forwarding early.
  static constexpr size_t kBroadcastChunk = size_t{1} << 20;
  // Collective tags cycle through [kCollectiveTagBase, kMaxTag].
  static constexpr int64_t kTagSpace = int64_t{kMaxTag} - kCollectiveTagBase + 1;

  std::string Where() const { return "rank " + std::to_string(rank()); }
  Status Context(Status s, const std::string& what) const {
    return s.ok() ? s : s.WithContext(Where() + ": " + what);
  }
  Status CheckUserTag(const char* call, int tag) const {
    if (tag >= 0 && tag < kCollectiveTagBase) return Status::Ok();
    return InvalidArgumentError(Where() + ": " + call + " with tag " + std::to_string(tag) +
                                ": user tags must lie in [0, " +
                                std::to_string(kCollectiveTagBase) +
                                "); the rest is reserved for collectives");
  }
  int NextTag() { return static_cast<int>(kCollectiveTagBase + (seq_++ % kTagSpace)); }
  int Right(int k = 1) const { return (rank() + k) % size(); }
  int Left(int k = 1) const { return (rank() - k % size() + size()) % size(); }

  // Posts a send of `data` to `dest` on the worker. `data` must stay untouched until Wait().
  void PostSend(int dest, int tag, std::span<const std::byte> data, Deadline deadline) {
    worker_.Post(
        [this, dest, tag, data, deadline] { return backend_->Send(dest, tag, data, deadline); });
  }
  // The first error of a step: the receive's, else the overlapped send's. Always collects the
  // send, so no job outlives the step that posted it.
  Status FinishStep(Status recv) {
    Status send = worker_.Wait();
    return recv.ok() ? send : recv;
  }

  Status RingAllReduce(std::span<float> data, ReduceOp op, int tag, Deadline deadline) {
    const size_t n = static_cast<size_t>(size()), r = static_cast<size_t>(rank());
    const Segments seg{data.size(), n};
    if (scratch_.size() < seg.length(0)) scratch_.resize(seg.length(0));
    auto bytes = [&](size_t i) {
      return std::as_bytes(data.subspan(seg.offset(i), seg.length(i)));
    };
    // Reduce-scatter: after step s, this rank's segment (r - s - 1) holds s + 2 ranks' sum; after
    // n - 1 steps segment (r + 1) is complete.
    for (size_t s = 0; s + 1 < n; ++s) {
      const size_t send_i = (r + n - s) % n, recv_i = (r + 2 * n - s - 1) % n;
      PostSend(Right(), tag, bytes(send_i), deadline);
      // Received into a scratch buffer that lives as long as the communicator, so that a
      // backend may reuse its own buffers (RecvInto) and no step allocates.
      std::span<float> in(scratch_.data(), seg.length(recv_i));
      Status st = backend_->RecvInto(Left(), tag, std::as_writable_bytes(in), deadline);
      if (st.code() == StatusCode::kInvalidArgument)
        st = st.WithContext("segment of " + std::to_string(in.size()) +
                            " floats (do all ranks pass the same size?)");
      if (st.ok()) Reduce(data.data() + seg.offset(recv_i), in, op);
      REEL_RETURN_IF_ERROR(FinishStep(st));
    }
    // Allgather: pass the complete segments around the ring.
    for (size_t s = 0; s + 1 < n; ++s) {
      const size_t send_i = (r + 1 + n - s) % n, recv_i = (r + n - s) % n;
      PostSend(Right(), tag, bytes(send_i), deadline);
      auto out = std::as_writable_bytes(data.subspan(seg.offset(recv_i), seg.length(recv_i)));
      REEL_RETURN_IF_ERROR(FinishStep(backend_->RecvInto(Left(), tag, out, deadline)));
    }
    return Status::Ok();
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
        REEL_RETURN_IF_ERROR(worker_.Wait());  // the previous chunk's send
        PostSend(Right(), tag, chunk, deadline);
      }
    }
    return worker_.Wait();
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

  // Round k: tell rank + 2^k, hear from rank - 2^k; after ceil(log2 n) rounds every rank has
  // (transitively) heard from every other, so all have arrived.
  Status DisseminationBarrier(int tag, Deadline deadline) {
    for (int k = 1; k < size(); k <<= 1) {
      PostSend(Right(k), tag, {}, deadline);
      Result<Message> m = backend_->Recv(Left(k), tag, deadline);
      REEL_RETURN_IF_ERROR(FinishStep(m.ok() ? Status::Ok() : m.status()));
    }
    return Status::Ok();
  }

  std::unique_ptr<Communicator> backend_;
  const CommunicatorCapabilities caps_;
  int64_t seq_ = 0;
  std::vector<float> scratch_;  // one allreduce segment
  SendWorker worker_;           // declared last: its thread stops before backend_ goes away
};

}  // namespace

std::unique_ptr<Communicator> WithRingCollectives(std::unique_ptr<Communicator> backend) {
  return std::make_unique<RingCommunicator>(std::move(backend));
}

}  // namespace reel::core
