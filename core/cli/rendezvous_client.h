// A launcher's side of `reel launch --nnodes MIN:MAX`'s rendezvous (docs/distributed.md,
// "Restarts"; the wire: rendezvous_wire.h): connects to the coordinator node's launcher, proves
// it holds REEL_SECRET and the job identity (and checks the server's proof), joins rounds and
// learns, while its ranks run, when a new round opens.
//
// Thread-safety: one thread.
#ifndef REEL_CORE_CLI_RENDEZVOUS_CLIENT_H_
#define REEL_CORE_CLI_RENDEZVOUS_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "reel/status.h"

namespace reel::cli {

// What a closed round gives this node.
struct RoundAssignment {
  int64_t round = 0;
  int64_t restarts = 0;  // rounds opened by a failure so far
  int64_t node_rank = 0;
  int64_t nodes = 0;
  int port = 0;         // the ranks' coordinator port, on the coordinator's host
  std::string members;  // every node of the round, in node rank order
};

class RendezvousClient {
 public:
  // Connects to HOST:PORT, retrying a refused connection until `deadline` (the coordinator
  // node's launcher may start later), and authenticates. Unavailable naming the address after the
  // deadline; FailedPrecondition with the server's reason when it refuses this node.
  static Result<std::unique_ptr<RendezvousClient>> Connect(
      const std::string& host, const std::string& port, const std::string& job_id,
      const std::string& secret, const std::string& node,
      std::chrono::steady_clock::time_point deadline);
  ~RendezvousClient();
  RendezvousClient(const RendezvousClient&) = delete;
  RendezvousClient& operator=(const RendezvousClient&) = delete;

  int fd() const { return fd_; }
  // Asks for the next round; `failure`: "" or what failed on this node (the server counts it).
  Status Join(const std::string& failure);
  // Waits for the next round's assignment (newer than `after`), as long as the server takes: its
  // timeouts end the wait; it says it is there every second meanwhile. nullopt: the job finished
  // before this node was admitted. Unavailable with the server's reason when it ends the job, when
  // the connection is lost, or when the server says nothing for `silence` (its launcher stopped,
  // its host frozen).
  Result<std::optional<RoundAssignment>> AwaitAssignment(int64_t after,
                                                         std::chrono::milliseconds silence);
  // Reads the message that made fd() readable while the ranks of `round` run: true when they must
  // stop (a newer round opened, or the job was aborted: abort_reason()). Sets lost() at the end
  // of the connection (the coordinator node's launcher ended); false then.
  bool StopRequested(int64_t round);
  bool lost() const { return lost_; }
  const std::string& abort_reason() const { return abort_reason_; }
  // Why the last new round opened ("node HOST:PID asks to join", or the failure), as the
  // server said it.
  const std::string& new_round_reason() const { return new_round_reason_; }
  // Tells the server this node's ranks all ended well; errors are of no consequence.
  void Done();

 private:
  RendezvousClient(int fd, std::string where) : fd_(fd), where_(std::move(where)) {}
  int fd_ = -1;
  std::string where_;   // "the rendezvous at HOST:PORT"
  std::string buffer_;  // bytes read after the last whole frame
  bool lost_ = false;
  std::string abort_reason_;
  std::string new_round_reason_;
};

}  // namespace reel::cli

#endif  // REEL_CORE_CLI_RENDEZVOUS_CLIENT_H_
