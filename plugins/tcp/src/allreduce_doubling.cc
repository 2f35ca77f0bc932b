// AllReduce by recursive doubling, for sizes where a message's latency, not the link's bandwidth,
// decides (option allreduce_doubling_bytes): ceil(log2 n) exchanges of the whole buffer instead of
// the ring's 2(n-1) steps of 1/n of it. Rank counts that are not a power of two fold first, as
// MPICH's MPIR_Allreduce_intra_recursive_doubling does: of the first 2*rem ranks (rem = n minus the
// largest power of two p below it) each even one hands its data to the odd one after it and waits,
// the other p ranks double, and each odd one hands the result back.
//
// Every rank ends with the same bits: at each exchange both partners combine the same two partial
// results with the lower-placed one as the left operand, so the reduction tree, and the order of
// every operation in it, is the same on every rank. It differs from the ring's order (float
// addition reassociated: docs/distributed.md).
//
// Messages go as the agreement's do (SendFrame, then the Mailbox's receive, on the call's
// collective frames): deadlines, a lost peer named, the receive budget, all as for any receive.
// Each carries the sender's element count after its data, so ranks that disagree about the size
// fail even if the agreement had not caught it.
#include <algorithm>
#include <cstring>

#include "reel/ring_allreduce.h"
#include "tcp_communicator.h"

namespace reel::tcp {
namespace {

constexpr size_t kDoublingCountBytes = sizeof(uint64_t);

// The largest power of two not above n (n >= 1).
size_t PowerOfTwoBelow(size_t n) {
  size_t p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

}  // namespace

Status TcpCommunicator::Doubling(const std::vector<int>& group, std::span<float> data, ReduceOp op,
                                 uint32_t seq, Deadline deadline) {
  const size_t n = group.size();
  const size_t me =
      static_cast<size_t>(std::find(group.begin(), group.end(), rank_) - group.begin());
  const size_t p = PowerOfTwoBelow(n), rem = n - p;
  const size_t bytes = data.size() * sizeof(float);
  const int tag = Mailbox::CollectiveTag(seq);
  // Sent: this rank's partial result, then its count; received: the partner's, into `in`.
  std::vector<std::byte>& out = doubling_out_;
  std::vector<std::byte>& in = doubling_in_;
  out.resize(bytes + kDoublingCountBytes);
  in.resize(bytes + kDoublingCountBytes);
  std::memcpy(out.data(), data.data(), bytes);
  const uint64_t count = data.size();
  std::memcpy(out.data() + bytes, &count, sizeof count);
  float* const mine = reinterpret_cast<float*>(out.data());
  float* const theirs = reinterpret_cast<float*>(in.data());

  auto send = [&](size_t to) {
    const int dest = group[to];
    return SendFrame(dest, FrameType::kCollective, seq & kCollectiveSeqMask, out, deadline,
                     Where() + ": recursive doubling, to rank " + std::to_string(dest));
  };
  auto receive = [&](size_t from) -> Status {
    const int source = group[from];
    Status s = mailbox_.RecvInto(source, tag, in, deadline);
    if (s.code() == StatusCode::kInvalidArgument)
      return InvalidArgumentError("rank " + std::to_string(source) + "'s message is not " +
                                  std::to_string(in.size()) + " bytes (" + s.message() +
                                  "; do all ranks pass the same size?)");
    REEL_RETURN_IF_ERROR(s);
    uint64_t their_count;
    std::memcpy(&their_count, in.data() + bytes, sizeof their_count);
    if (their_count != count)
      return InvalidArgumentError("rank " + std::to_string(source) + " reduces " +
                                  std::to_string(their_count) + " floats, this rank " +
                                  std::to_string(count) + " (do all ranks pass the same size?)");
    return Status::Ok();
  };
  // mine = lower op upper, whichever of the two partial results came from the lower place.
  auto combine = [&](bool theirs_lower) {
    if (theirs_lower) {
      ring::Reduce(theirs, mine, data.size(), op);
      std::memcpy(mine, theirs, bytes);
    } else {
      ring::Reduce(mine, theirs, data.size(), op);
    }
  };

  // Folding: place `me` among the p ranks that double, or none (an even one of the first 2*rem).
  size_t place = me - rem;
  if (me < 2 * rem) {
    if (me % 2 == 0) {
      REEL_RETURN_IF_ERROR(send(me + 1));
      REEL_RETURN_IF_ERROR(receive(me + 1));
      std::memcpy(data.data(), theirs, bytes);
      return Status::Ok();
    }
    REEL_RETURN_IF_ERROR(receive(me - 1));
    combine(/*theirs_lower=*/true);
    place = me / 2;
  }
  // Partners send to each other at once, each message staged on arrival until its receive is
  // posted, unless it exceeds the receive budget: then staging stops partway and two partners
  // blocked in their sends would wait for each other until the deadline. Such messages go one way
  // after the other instead, the lower place's first, into a receive that waits for them.
  const bool one_way_first = out.size() > options_.receive_budget_bytes;
  for (size_t mask = 1; mask < p; mask <<= 1) {
    const size_t other = place ^ mask;
    const size_t partner = other < rem ? 2 * other + 1 : other + rem;
    if (one_way_first && other < place) {
      REEL_RETURN_IF_ERROR(receive(partner));
      REEL_RETURN_IF_ERROR(send(partner));
    } else {
      REEL_RETURN_IF_ERROR(send(partner));
      REEL_RETURN_IF_ERROR(receive(partner));
    }
    combine(/*theirs_lower=*/other < place);
  }
  if (me < 2 * rem) REEL_RETURN_IF_ERROR(send(me - 1));
  std::memcpy(data.data(), mine, bytes);
  return Status::Ok();
}

// Doubling sends the whole buffer ceil(log2 n) times (and twice more where it folds), the ring
// 2(n-1)/n of it: on 3 and 4 simulated hosts at 1 Gbit/s doubling was faster at 16 KiB and
// slower at 64 KiB. On 2 ranks both send the buffer once, doubling as one message instead of two
// and without the ring's pipelining: faster up to 1 MiB, slower from 4 MiB. Hence 32 times the
// threshold there. Figures: plugins/tcp/README.md.
Status TcpCommunicator::RingOrDoubling(const std::vector<int>& group, std::span<float> data,
                                       ReduceOp op, uint32_t seq, Deadline deadline) {
  // At most 1 GiB in one message, as the option's largest value (wire.h's payload bound).
  const size_t limit =
      group.size() == 2
          ? std::min(options_.allreduce_doubling_bytes * TcpOptions::kDoublingPairFactor,
                     size_t{1} << 30)
          : options_.allreduce_doubling_bytes;
  if (data.size() * sizeof(float) <= limit && group.size() > 1)
    return Doubling(group, data, op, seq, deadline);
  return Ring(group, data, op, seq, deadline);
}

}  // namespace reel::tcp
