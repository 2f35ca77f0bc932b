// Agreeing on a collective's arguments before any of its data moves, for every ring that runs
// collectives over point-to-point messages: the core's ring over any backend
// (reel/core/collectives.h) and a transport's native AllReduce that drives a ring itself (tcp).
//
// Every rank learns every rank's arguments (which collective, its size, its operation or root)
// in ceil(log2 n) rounds of one small message each (Bruck's allgather: in round k a rank sends
// what it knows of 2^k ranks to rank - 2^k and hears as much from rank + 2^k). So ranks that
// disagree all return InvalidArgument with the same explanation, none has touched its data, and
// no message of the call is left unreceived: the communicator stays in step (reel/transport.h,
// "after a failed collective"). Every rank also hears from every other, so the round is a barrier.
//
// Messages are kArgsBytes per rank known, in host byte order (as the collectives' data).
// Thread-safety: free functions on the caller's values.
#ifndef REEL_COLLECTIVE_AGREEMENT_H_
#define REEL_COLLECTIVE_AGREEMENT_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "reel/status.h"
#include "reel/transport.h"

namespace reel::agreement {

// Which collective a call is (on the wire: these values).
enum class Collective : uint32_t {
  kAllReduce = 1,
  kBroadcast = 2,
  kAllGather = 3,
  kBarrier = 4,
  kReduceScatter = 5,
  kAllGatherShards = 6
};

// What every rank of one collective call must pass alike.
struct Args {
  Collective collective = Collective::kBarrier;
  int32_t detail = 0;  // AllReduce, ReduceScatter: the ReduceOp; Broadcast: the root; else 0
  uint64_t count = 0;  // floats; Broadcast: bytes; AllGather: bytes per rank
  bool operator==(const Args&) const = default;
};
constexpr size_t kArgsBytes = 16;

// Args as they travel (kArgsBytes at `at`: collective, detail, count, in host byte order).
inline void WriteArgs(const Args& a, std::byte* at) {
  const uint32_t collective = static_cast<uint32_t>(a.collective);
  std::memcpy(at, &collective, 4);
  std::memcpy(at + 4, &a.detail, 4);
  std::memcpy(at + 8, &a.count, 8);
}
inline Args ReadArgs(const std::byte* at) {
  Args a;
  uint32_t collective = 0;
  std::memcpy(&collective, at, 4);
  a.collective = static_cast<Collective>(collective);
  std::memcpy(&a.detail, at + 4, 4);
  std::memcpy(&a.count, at + 8, 8);
  return a;
}

// The Args of each collective call.
inline Args AllReduceArgs(size_t floats, ReduceOp op) {
  return {Collective::kAllReduce, static_cast<int32_t>(op), floats};
}
inline Args BroadcastArgs(size_t bytes, int root) { return {Collective::kBroadcast, root, bytes}; }
inline Args AllGatherArgs(size_t bytes) { return {Collective::kAllGather, 0, bytes}; }
inline Args BarrierArgs() { return {}; }
inline Args ReduceScatterArgs(size_t floats, ReduceOp op) {
  return {Collective::kReduceScatter, static_cast<int32_t>(op), floats};
}
inline Args AllGatherShardsArgs(size_t floats) { return {Collective::kAllGatherShards, 0, floats}; }

// E.g. "AllReduce (sum) of 10 floats", "Broadcast of 64 bytes from rank 1".
inline std::string Describe(const Args& a) {
  const std::string count = std::to_string(a.count);
  switch (a.collective) {
    case Collective::kAllReduce:
    case Collective::kReduceScatter: {
      const char* op = a.detail == static_cast<int32_t>(ReduceOp::kSum)   ? "sum"
                       : a.detail == static_cast<int32_t>(ReduceOp::kMax) ? "max"
                       : a.detail == static_cast<int32_t>(ReduceOp::kMin) ? "min"
                                                                          : "unknown operation";
      return std::string(a.collective == Collective::kAllReduce ? "AllReduce ("
                                                                : "ReduceScatter (") +
             op + ") of " + count + " floats";
    }
    case Collective::kAllGatherShards:
      return "AllGatherShards of " + count + " floats";
    case Collective::kBroadcast:
      return "Broadcast of " + count + " bytes from rank " + std::to_string(a.detail);
    case Collective::kAllGather:
      return "AllGather of " + count + " bytes per rank";
    case Collective::kBarrier:
      return "Barrier";
  }
  return "collective " + std::to_string(static_cast<uint32_t>(a.collective));
}

// OK if all of `all` (one per rank, in rank order) are equal; otherwise InvalidArgument naming
// what each rank passed (at most a few variants and ranks each), the same text on every rank
// that holds the same `all`.
inline Status CheckAgreement(std::span<const Args> all) {
  constexpr size_t kVariantsShown = 4, kRanksShown = 8;
  std::vector<Args> variants;
  std::vector<std::vector<size_t>> ranks;
  for (size_t r = 0; r < all.size(); ++r) {
    size_t v = 0;
    while (v < variants.size() && !(variants[v] == all[r])) ++v;
    if (v == variants.size()) {
      variants.push_back(all[r]);
      ranks.emplace_back();
    }
    ranks[v].push_back(r);
  }
  if (variants.size() <= 1) return Status::Ok();
  std::string text =
      "the ranks disagree about the collective's arguments (every rank must call "
      "the same collective with the same size, operation and root): ";
  for (size_t v = 0; v < variants.size() && v < kVariantsShown; ++v) {
    text += (v > 0 ? "; " : "") + Describe(variants[v]) +
            (ranks[v].size() > 1 ? " on ranks " : " on rank ");
    for (size_t i = 0; i < ranks[v].size() && i < kRanksShown; ++i)
      text += (i > 0 ? ", " : "") + std::to_string(ranks[v][i]);
    if (ranks[v].size() > kRanksShown)
      text += " and " + std::to_string(ranks[v].size() - kRanksShown) + " more";
  }
  if (variants.size() > kVariantsShown)
    text += "; and " + std::to_string(variants.size() - kVariantsShown) + " more variants";
  return InvalidArgumentError(text);
}

// Bruck's allgather of `mine` over the caller's messages: send(dest, bytes) -> Status sends one
// message to rank `dest`; recv(source) -> Result<std::vector<std::byte>> receives the next one
// from rank `source`. Both on the one tag of this collective call. Returns every rank's Args, in
// rank order. A send must not wait for its receiver to receive (messages of a few bytes per rank
// are buffered by every backend), because every rank sends before it receives.
template <typename SendFn, typename RecvFn>
Result<std::vector<Args>> GatherArgs(int rank, int size, const Args& mine, SendFn send,
                                     RecvFn recv) {
  const size_t n = static_cast<size_t>(size), r = static_cast<size_t>(rank);
  std::vector<Args> have{mine};  // have[i]: the Args of rank (rank + i) % size
  std::vector<std::byte> out;
  while (have.size() < n) {
    const size_t m = have.size(), k = std::min(m, n - m);
    out.resize(k * kArgsBytes);
    for (size_t i = 0; i < k; ++i) WriteArgs(have[i], out.data() + i * kArgsBytes);
    REEL_RETURN_IF_ERROR(send(static_cast<int>((r + n - m) % n), std::span<const std::byte>(out)));
    const int source = static_cast<int>((r + m) % n);
    REEL_ASSIGN_OR_RETURN(std::vector<std::byte> in, recv(source));
    if (in.size() != k * kArgsBytes)
      return InternalError("agreeing on a collective's arguments: rank " + std::to_string(source) +
                           " sent " + std::to_string(in.size()) + " bytes, expected " +
                           std::to_string(k * kArgsBytes) + " (is it in another collective?)");
    for (size_t i = 0; i < k; ++i) have.push_back(ReadArgs(in.data() + i * kArgsBytes));
  }
  std::vector<Args> all(n);
  for (size_t i = 0; i < n; ++i) all[(r + i) % n] = have[i];
  return all;
}

}  // namespace reel::agreement

#endif  // REEL_COLLECTIVE_AGREEMENT_H_
