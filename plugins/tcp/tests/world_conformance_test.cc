// The communicator conformance suite over tcp, one rank per process: run under `reel launch -n N
// reel_tcp_world_tests` (CTest runs N = 2 and 3), which gives every process REEL_RANK,
// REEL_WORLD_SIZE, REEL_COORDINATOR and REEL_SECRET; the transport reads them as `reel train`
// does. Each process is a real peer, so the ring collectives cross process boundaries.
#include <cstdlib>

#include "reel/testing/transport_conformance.h"
#include "tcp_test_util.h"

namespace reel::tcp::testing {
namespace {

Result<conformance::Group> World() {
  TcpOptions options;
  if (const char* secret = std::getenv("REEL_SECRET")) options.secret = secret;
  if (options.secret.empty())
    return FailedPreconditionError("REEL_SECRET is not set: start this under `reel launch`");
  return conformance::Group{MakeTcpTransport(std::move(options)), ""};
}

REEL_INSTANTIATE_TRANSPORT_CONFORMANCE(TcpWorld, conformance::RankPerProcess("tcp", World));

}  // namespace
}  // namespace reel::tcp::testing
