// AllReduce among ranks that share hosts: through each host's shared memory (host_memory.h)
// within it, and a ring of the hosts' leaders (each host's lowest rank) over TCP across hosts,
// as Horovod's hierarchical allreduce and NCCL reduce within a node first and cross the network
// once per node: a host's data crosses its link once instead of once per rank.
//
// Within a host the data goes through the segment in rounds of at most kSlotFloats elements per
// rank: each rank copies its part of the round into its own slot, but for its own piece (the
// host's i-th rank owns the round's i-th piece); once all have, each reduces the other slots'
// copies of its piece into its own buffer, in place, and copies the result into its slot; once
// all have, each copies the other reduced pieces out. Per byte of data a rank moves about 4
// bytes through memory (a copy in and out of the others' pieces, reading and writing its own).
// Across hosts only the leader copies out, runs the ring of the leaders on the whole buffer, and
// hands the result to the others through the segment, in rounds of the whole buffer. The segment
// holds two buffers that rounds alternate between, so that a rank writes one round while the others
// still read the one before.
//
// Progress: each rank's counter (HostStep) is 3r+1 once it wrote round r, 3r+2 once it reduced
// its piece and 3r+3 once it read all it reads of round r. A rank writes round r only once
// every counter is at 3(r-2)+3, so that nobody still reads round r-2 from that buffer. Every
// call takes the same rounds on every rank of a host (the ranks agreed on its size first), so
// the counters stay in step from call to call.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "allreduce_waiting.h"
#include "reel/collective_agreement.h"
#include "reel/ring_allreduce.h"
#include "tcp_communicator.h"

namespace reel::tcp {

namespace {

// After the ranks' counters in the segment: the first failure of a call on one of the host's
// ranks, so that the others stop waiting for it and say why.
struct HostFailure {
  HostStep rank;                     // 0, or 1 + the rank that failed (set once the rest is)
  std::atomic<uint32_t> claimed{0};  // the failing rank that writes the rest
  int32_t code = 0;                  // its StatusCode
  char why[1000] = {};               // its message, NUL-terminated
};

}  // namespace

class TcpCommunicator::HostRounds {
 public:
  // A round's floats per rank: 512 KiB, so that a round's copies stay in the cores' caches.
  static constexpr size_t kSlotFloats = size_t{128} << 10;
  static size_t SegmentBytes(size_t ranks) {
    return ControlBytes(ranks) + 2 * ranks * kSlotFloats * sizeof(float);
  }

  HostRounds(TcpCommunicator& comm, Deadline deadline)
      : comm_(comm),
        host_(comm.host_),
        n_(host_.ranks.size()),
        i_(static_cast<size_t>(std::find(host_.ranks.begin(), host_.ranks.end(), comm.rank_) -
                               host_.ranks.begin())),
        deadline_(deadline),
        steps_(reinterpret_cast<HostStep*>(host_.segment->data())),
        failure_(*reinterpret_cast<HostFailure*>(host_.segment->data() + n_ * sizeof(HostStep))),
        args_(host_.segment->data() + n_ * sizeof(HostStep) + FailureBytes()),
        floats_(reinterpret_cast<float*>(host_.segment->data() + ControlBytes(n_))) {}

  // `data` reduced over this host's ranks, into every rank's `data` (`everyone`) or into the
  // leader's only. With `agree` (a group on one host, whose calls need no TCP), the first round
  // also carries every rank's arguments: OK, or InvalidArgument on every rank alike
  // (agreement::CheckAgreement) with `data` untouched, if they differ.
  Status Reduce(std::span<float> data, ReduceOp op, bool everyone,
                const agreement::Args* agree = nullptr) {
    for (size_t at = 0; at < data.size() || (agree && at == 0); at += kSlotFloats) {
      const size_t length = std::min(kSlotFloats, data.size() - at);
      const uint64_t r = host_.round++;
      float* const round = data.data() + at;
      REEL_RETURN_IF_ERROR(WaitForEveryone(Counter(r - 2, 3)));
      // Every piece but this rank's own, which only it reads, into its slot.
      for (size_t q = 0; q < n_; ++q) {
        const auto [b, e] = Piece(length, q);
        if (q != i_) std::copy(round + b, round + e, Slot(r, i_) + b);
      }
      if (agree && at == 0) agreement::WriteArgs(*agree, Args(r, i_));
      Advance(steps_[i_], Counter(r, 1));
      REEL_RETURN_IF_ERROR(WaitForEveryone(Counter(r, 1)));
      if (agree && at == 0) {
        Status agreed = CheckArgs(r);
        if (!agreed.ok() || data.empty()) {
          Advance(steps_[i_], Counter(r, 3));  // reads nothing more of this round
          return agreed;
        }
      }
      // Its own piece: reduced in place in the caller's buffer, then into its slot for the others.
      const auto [begin, end] = Piece(length, i_);
      for (size_t q = 0; q < n_; ++q)
        if (q != i_) ring::Reduce(round + begin, Slot(r, q) + begin, end - begin, op);
      std::copy(round + begin, round + end, Slot(r, i_) + begin);
      if (!everyone && i_ != 0) {
        Advance(steps_[i_], Counter(r, 3));  // reads nothing more
        continue;
      }
      Advance(steps_[i_], Counter(r, 2));
      REEL_RETURN_IF_ERROR(WaitForEveryone(Counter(r, 2)));
      for (size_t q = 0; q < n_; ++q) {
        const auto [b, e] = Piece(length, q);
        if (q != i_) std::copy(Slot(r, q) + b, Slot(r, q) + e, round + b);
      }
      Advance(steps_[i_], Counter(r, 3));
    }
    return Status::Ok();
  }

  // The leader's `data` into every other rank's of this host.
  Status HandOut(std::span<float> data) {
    const size_t per_round = n_ * kSlotFloats;
    for (size_t at = 0; at < data.size(); at += per_round) {
      const size_t length = std::min(per_round, data.size() - at);
      const uint64_t r = host_.round++;
      float* buffer = Slot(r, 0);
      if (i_ == 0) {
        REEL_RETURN_IF_ERROR(WaitForEveryone(Counter(r - 2, 3)));
        std::copy_n(data.data() + at, length, buffer);
        Advance(steps_[0], Counter(r, 3));  // written, and it reads nothing
      } else {
        REEL_RETURN_IF_ERROR(WaitFor(0, Counter(r, 1)));
        std::copy_n(buffer, length, data.data() + at);
        Advance(steps_[i_], Counter(r, 3));
      }
    }
    return Status::Ok();
  }

  // Tells the host's other ranks that this one failed the call, and why: they stop waiting.
  void GiveUp(const Status& why) {
    uint32_t none = 0;
    if (!failure_.claimed.compare_exchange_strong(none, 1)) return;  // another rank's came first
    failure_.code = static_cast<int32_t>(why.code());
    const std::string text = why.message().substr(0, sizeof failure_.why - 1);
    std::memcpy(failure_.why, text.c_str(), text.size() + 1);
    failure_.rank.value.store(static_cast<uint32_t>(comm_.rank_) + 1);  // after the rest
    for (size_t q = 0; q < n_; ++q) WakeAll(steps_[q]);
  }

 private:
  static size_t FailureBytes() { return (sizeof(HostFailure) + 63) / 64 * 64; }
  // The counters, the failure, and each round parity's arguments of every rank (kArgsBytes each).
  static size_t ControlBytes(size_t ranks) {
    return ranks * sizeof(HostStep) + FailureBytes() +
           (2 * ranks * agreement::kArgsBytes + 63) / 64 * 64;
  }
  std::byte* Args(uint64_t r, size_t q) const {
    return args_ + ((r % 2) * n_ + q) * agreement::kArgsBytes;
  }
  // Every rank's arguments of round r: OK, or InvalidArgument on every rank alike.
  Status CheckArgs(uint64_t r) const {
    std::vector<agreement::Args> all(n_);
    for (size_t q = 0; q < n_; ++q) all[q] = agreement::ReadArgs(Args(r, q));
    return agreement::CheckAgreement(all);
  }
  // The counter's value at `stage` (1 to 3) of round r; wraps as every rank's does.
  static uint32_t Counter(uint64_t r, uint32_t stage) {
    return static_cast<uint32_t>(3 * r + stage);
  }
  // Rank q's slot of round r's buffer (each rank's slot is kSlotFloats floats, one after another).
  float* Slot(uint64_t r, size_t q) const { return floats_ + ((r % 2) * n_ + q) * kSlotFloats; }
  // The q-th of n_ near-equal pieces of a round's `length` floats.
  std::pair<size_t, size_t> Piece(size_t length, size_t q) const {
    return {length * q / n_, length * (q + 1) / n_};
  }

  Status WaitForEveryone(uint32_t target) {
    for (size_t q = 0; q < n_; ++q)
      if (q != i_) REEL_RETURN_IF_ERROR(WaitFor(q, target));
    return Status::Ok();
  }

  // Waits until rank q of the host reached `target`: polls for the group's allreduce_spin (as
  // the ring does, yielding the core if it yields), then sleeps on the counter in slices,
  // failing on another rank's giving up, on what the TCP side knows of the host's ranks (every
  // one is needed: one that left or failed fails the call), or at the deadline.
  Status WaitFor(size_t q, uint32_t target) {
    HostStep& step = steps_[q];
    const Deadline spin_until = Clock::now() + comm_.AllReduceSpin();
    for (bool checked = false;; checked = true) {
      const uint32_t seen = step.value.load();
      if (Reached(seen, target)) return Status::Ok();
      if (const uint32_t who = failure_.rank.value.load(); who != 0) return Failed(who - 1);
      const Deadline now = Clock::now();
      if (now >= deadline_)
        return DeadlineExceededError("passed its deadline waiting for rank " +
                                     std::to_string(host_.ranks[q]) +
                                     " of this host (shared memory)");
      const bool spinning = now < spin_until;
      if (!checked || !spinning)
        for (const int rank : host_.ranks)
          if (rank != comm_.rank_) REEL_RETURN_IF_ERROR(comm_.mailbox_.PeerStatus(rank));
      if (spinning) {
        if (comm_.AllReduceYield()) sched_yield();
        continue;
      }
      SleepOn(step, seen,
              std::chrono::ceil<std::chrono::microseconds>(
                  std::min<Clock::duration>(deadline_ - now, kCheckFailuresEvery)));
    }
  }

  // Another rank of the host failed the call: what this rank knows of a failed peer, else what
  // that rank wrote.
  Status Failed(uint32_t rank) {
    for (int r = 0; r < comm_.world_; ++r)
      if (r != comm_.rank_) REEL_RETURN_IF_ERROR(comm_.mailbox_.PeerStatus(r));
    return Status(static_cast<StatusCode>(failure_.code),
                  "rank " + std::to_string(rank) +
                      " of this host failed this AllReduce: " + std::string(failure_.why));
  }

  TcpCommunicator& comm_;
  HostLayout& host_;
  const size_t n_, i_;  // the host's ranks, and this one's place among them
  const Deadline deadline_;
  HostStep* const steps_;
  HostFailure& failure_;
  std::byte* const args_;
  float* const floats_;
};

Status TcpCommunicator::HostAllReduce(std::span<float> data, ReduceOp op, uint32_t seq,
                                      Deadline deadline) {
  const bool across = host_.leaders.size() > 1;
  if (!host_.segment)
    return RingOrDoubling(host_.leaders, data, op, seq, deadline);  // alone on its host
  HostRounds rounds(*this, deadline);
  Status s = rounds.Reduce(data, op, /*everyone=*/!across);
  if (s.ok() && across) {
    if (host_.ranks.front() == rank_) s = RingOrDoubling(host_.leaders, data, op, seq, deadline);
    if (s.ok()) s = rounds.HandOut(data);
  }
  if (!s.ok()) rounds.GiveUp(s);
  return s;
}

Status TcpCommunicator::OneHostAllReduce(std::span<float> data, ReduceOp op, Deadline deadline) {
  HostRounds rounds(*this, deadline);
  const agreement::Args args = agreement::AllReduceArgs(data.size(), op);
  Status s = rounds.Reduce(data, op, /*everyone=*/true, &args);
  if (!s.ok() && s.code() != StatusCode::kInvalidArgument) rounds.GiveUp(s);
  return s;
}

namespace {

std::string Counts(const std::map<std::string, std::vector<int>>& hosts) {
  std::vector<size_t> sizes;
  for (const auto& [id, ranks] : hosts) sizes.push_back(ranks.size());
  std::sort(sizes.rbegin(), sizes.rend());
  std::string s = std::to_string(hosts.size()) + " host(s), with ";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? "," : "") + std::to_string(sizes[i]);
  return s + " rank(s)";
}

}  // namespace

// Once formed, every rank: its host's ranks send their process ids to the host's leader over
// their authenticated connections; the leader creates the segment and sends back its socket's
// name (or why it has none); each fetches and maps the segment. Then one AllReduce (kMin, the
// flat ring's) tells every rank whether every host's memory is shared.
Status TcpCommunicator::SetUpHostAllReduce(Deadline deadline) {
  std::map<std::string, std::vector<int>> hosts;
  for (int r = 0; r < world_; ++r) hosts[peers_[static_cast<size_t>(r)]->machine].push_back(r);
  host_.ranks = hosts[peers_[static_cast<size_t>(rank_)]->machine];
  for (const auto& [id, ranks] : hosts) host_.leaders.push_back(ranks.front());
  std::sort(host_.leaders.begin(), host_.leaders.end());
  const bool some_share =
      std::any_of(hosts.begin(), hosts.end(), [](const auto& h) { return h.second.size() > 1; });
  const std::string layout = Counts(hosts);
  if (options_.allreduce_layout == TcpOptions::Layout::kFlat || !some_share) {
    LogOncePerProcess("AllReduce runs the ring of every rank (" + layout +
                      (some_share ? "; allreduce_layout=flat)" : ")"));
    return Status::Ok();
  }
  const int leader = host_.ranks.front();
  const size_t bytes = HostRounds::SegmentBytes(host_.ranks.size());
  std::string why_not;  // why this rank has no shared memory
  std::unique_ptr<HostSegment> segment;
  std::unique_ptr<SegmentOffer> offer;
  std::vector<pid_t> pids;
  {
    std::unique_lock<DeadlineMutex> one_at_a_time(collective_mu_);
    const uint32_t seq = collective_seq_++;
    mailbox_.StartCollective(seq);
    auto send = [&](int dest, const std::string& what) {
      return SendFrame(dest, FrameType::kCollective, seq & kCollectiveSeqMask,
                       std::as_bytes(std::span(what)), deadline,
                       Where() + ": setting up shared memory, to rank " + std::to_string(dest));
    };
    auto receive = [&](int source) -> Result<std::string> {
      REEL_ASSIGN_OR_RETURN(Message m,
                            mailbox_.Recv(source, Mailbox::CollectiveTag(seq), deadline));
      return std::string(reinterpret_cast<const char*>(m.payload.data()), m.payload.size());
    };
    if (host_.ranks.size() > 1 && rank_ != leader) {
      REEL_RETURN_IF_ERROR(send(leader, std::to_string(getpid())));
      REEL_ASSIGN_OR_RETURN(std::string name, receive(leader));
      Result<UniqueFd> fd = UnavailableError("");
      if (name.starts_with("!")) {
        why_not =
            "rank " + std::to_string(leader) + " (this host's first) has none: " + name.substr(1);
      } else if (!(fd =
                       FetchSegment(name, std::min(deadline, DeadlineIn(std::chrono::seconds(10)))))
                      .ok()) {
        why_not = fd.status().message();
      } else if (Result<std::unique_ptr<HostSegment>> s = HostSegment::Map(std::move(*fd));
                 !s.ok()) {
        why_not = s.status().message();
      } else if ((*s)->size() < bytes) {
        why_not = "the shared segment has " + std::to_string((*s)->size()) + " bytes, not " +
                  std::to_string(bytes);
      } else {
        segment = std::move(*s);
      }
    } else if (host_.ranks.size() > 1) {
      for (size_t i = 1; i < host_.ranks.size(); ++i) {
        REEL_ASSIGN_OR_RETURN(std::string pid, receive(host_.ranks[i]));
        pids.push_back(static_cast<pid_t>(std::atoll(pid.c_str())));
      }
      Result<std::unique_ptr<HostSegment>> s = HostSegment::Create(bytes);
      Result<std::unique_ptr<SegmentOffer>> o = SegmentOffer::Open();
      if (!s.ok() || !o.ok()) {
        why_not = (!s.ok() ? s.status() : o.status()).message();
      } else {
        segment = std::move(*s);
        offer = std::move(*o);
      }
      for (size_t i = 1; i < host_.ranks.size(); ++i)
        REEL_RETURN_IF_ERROR(send(host_.ranks[i], why_not.empty() ? offer->name() : "!" + why_not));
    }
  }
  // The leader hands the segment out while every rank says whether its host's memory is shared.
  std::atomic<bool> stop{false};
  int strangers = 0;
  std::thread server;
  if (offer)
    server =
        std::thread([&] { (void)offer->HandOut(segment->fd(), pids, stop, deadline, &strangers); });
  float shared = why_not.empty() ? 1.0f : 0.0f;
  Status agreed = AllReduce(std::span<float>(&shared, 1), ReduceOp::kMin, deadline);
  stop = true;
  if (server.joinable()) server.join();
  if (strangers > 0)
    Log("turned away " + std::to_string(strangers) +
        " connection(s) of other processes to the shared memory's socket");
  REEL_RETURN_IF_ERROR(agreed.WithContext(Where() + ": agreeing on shared memory"));
  if (!why_not.empty()) Log("no shared memory on this host: " + why_not);
  if (shared == 0.0f) {
    if (options_.allreduce_layout == TcpOptions::Layout::kHierarchical)
      return FailedPreconditionError(
          Where() + ": allreduce_layout=hierarchical, but some host could not share memory" +
          (why_not.empty() ? " (see its log)" : ": this one: " + why_not));
    LogOncePerProcess("AllReduce runs the ring of every rank: some host could not share memory (" +
                      layout + ")");
    return Status::Ok();
  }
  if (host_.ranks.size() > 1) host_.segment = std::move(segment);
  host_.shared = true;
  LogOncePerProcess(host_.leaders.size() > 1
                        ? "AllReduce is hierarchical: through shared memory within a host, a "
                          "ring of one rank per host across (" +
                              layout + ")"
                        : "AllReduce runs through shared memory (" + layout + ")");
  return Status::Ok();
}

}  // namespace reel::tcp
