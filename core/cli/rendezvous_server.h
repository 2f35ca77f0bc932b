// The rendezvous of `reel launch --nnodes MIN:MAX`, served by the launcher of the --coordinator
// node in a thread of its own (docs/distributed.md, "Restarts"; the wire: rendezvous_wire.h).
//
// Rounds, as torchrun's: round R is open while launchers join it; it closes when MAX nodes
// joined, or when at least MIN joined (this node among them), every node of the round before
// that is still connected has joined, and `last_call` passed without a newcomer; at
// `join_timeout` it closes with what it has if that is MIN or more, else the job is aborted
// naming who joined. A closed round gives node rank 0 to this node, the others in the order
// they joined, and a free port for the ranks' coordinator. While a round runs, a Join from one
// of its nodes (its ranks failed: counted against `max_restarts`, and the job is aborted when
// none is left) or from a newcomer while the round has fewer than MAX nodes opens the next one
// and tells the round's other nodes to stop their ranks and join; a newcomer beyond MAX waits.
//
// Strangers: a connection must prove REEL_SECRET and the job identity in its first frame within
// kHelloSeconds, or it is dropped; frames are bounded (kMaxFrameBytes); at most
// kMaxUnauthenticated connections wait for their proof at once (the oldest is dropped for a
// newer one), so neither silence nor garbage holds the rendezvous up. Dropped connections are
// reported once per 10 s.
//
// The single point of failure: when this launcher ends, so does the rendezvous (torchrun's c10d
// rendezvous has the same); the other launchers' running ranks go on, but none can join again.
//
// Thread-safety: Start() and the destructor on one thread; the server's state is its thread's.
#ifndef REEL_CORE_CLI_RENDEZVOUS_SERVER_H_
#define REEL_CORE_CLI_RENDEZVOUS_SERVER_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "reel/status.h"

namespace reel::cli {

struct RendezvousOptions {
  std::string job_id;    // the launch's REEL_JOB_ID: a node of another job is refused
  std::string secret;    // REEL_SECRET
  std::string own_node;  // this launcher's node name: node rank 0 of every round
  int64_t min_nodes = 1, max_nodes = 1;
  int64_t max_restarts = 0;
  std::chrono::milliseconds last_call{3000};
  std::chrono::milliseconds join_timeout{600000};
};

class RendezvousServer {
 public:
  // Serves on `listen_fd` (listening; the server owns it from now on) in a new thread.
  static Result<std::unique_ptr<RendezvousServer>> Start(int listen_fd, RendezvousOptions options);
  // Stops serving: what is queued for the nodes is sent (for at most a second), then every
  // connection is closed.
  ~RendezvousServer();

  class State;  // the thread's (rendezvous_server.cc)

 private:
  RendezvousServer() = default;
  std::unique_ptr<State> state_;
};

// A listening socket at HOST:PORT when this machine has that address and the port is free: this
// launcher is the coordinator node's and serves the rendezvous. -1 otherwise.
int ListenForRendezvous(const std::string& host, const std::string& port);

}  // namespace reel::cli

#endif  // REEL_CORE_CLI_RENDEZVOUS_SERVER_H_
