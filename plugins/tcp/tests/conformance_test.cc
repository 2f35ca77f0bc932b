// The communicator conformance suite over tcp: ranks as threads of this process, each group
// formed afresh on loopback through the real rendezvous.
#include "reel/testing/transport_conformance.h"
#include "tcp_test_util.h"

namespace reel::tcp::testing {
namespace {

Result<conformance::Group> FreshGroup() {
  return conformance::Group{MakeTcpTransport(TestOptions()), FreeCoordinator()};
}

REEL_INSTANTIATE_TRANSPORT_CONFORMANCE(Tcp, conformance::RanksAsThreads("tcp", FreshGroup));

}  // namespace
}  // namespace reel::tcp::testing
