// Connecting several ranks of one process at once (see reel/core/connect.h).
#include "reel/core/connect.h"

#include <thread>

namespace reel::core {

Result<std::vector<std::unique_ptr<Communicator>>> ConnectConcurrently(
    Transport& transport, std::span<const TransportContext> ranks, Deadline deadline) {
  std::vector<Result<std::unique_ptr<Communicator>>> results;
  for (size_t i = 0; i < ranks.size(); ++i) results.emplace_back(InternalError("not connected"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks.size(); ++i)
    threads.emplace_back([&, i] { results[i] = transport.Connect(ranks[i], deadline); });
  for (auto& t : threads) t.join();
  std::vector<std::unique_ptr<Communicator>> comms;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (!results[i].ok()) {
      const int rank = ranks[i].rank;
      return results[i].status().WithContext(
          rank == kDiscover ? std::string("connecting this process's rank")
                            : "connecting rank " + std::to_string(rank) + " of " +
                                  std::to_string(ranks[i].world_size));
    }
    comms.push_back(std::move(*results[i]));
  }
  return comms;
}

}  // namespace reel::core
