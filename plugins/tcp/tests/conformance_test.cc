// The communicator conformance suite over tcp: ranks as threads of this process, each group
// formed afresh on loopback through the real rendezvous.
#include "comm/transport_conformance.h"
#include "tcp_test_util.h"

namespace reel::tcp::testing {
namespace {

using core::conformance::ConnectOnThreads;
using core::conformance::TransportUnderTest;

REEL_INSTANTIATE_TRANSPORT_CONFORMANCE(Tcp, (TransportUnderTest{
                                                "tcp", [](int n) {
                                                  auto transport = MakeTcpTransport(TestOptions());
                                                  return ConnectOnThreads(
                                                      *transport, n, FreeCoordinator(),
                                                      DeadlineIn(std::chrono::seconds(60)));
                                                }}));

}  // namespace
}  // namespace reel::tcp::testing
