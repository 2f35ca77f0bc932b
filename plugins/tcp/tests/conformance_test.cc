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

// The collectives again with AllReduce busy waiting (option allreduce_spin_us) before it sleeps,
// on 2 ranks, what the option is for (3 ranks would add 10 s under TSan and run no other code).
Result<conformance::Group> FreshSpinningGroup() {
  TcpOptions options = TestOptions();
  options.allreduce_spin = std::chrono::milliseconds(2);
  return conformance::Group{MakeTcpTransport(options), FreeCoordinator()};
}
const conformance::TransportUnderTest kSpinning =
    conformance::RanksAsThreads("tcp_spinning", FreshSpinningGroup);
INSTANTIATE_TEST_SUITE_P(TcpSpinning, CollectiveConformance,
                         ::testing::Combine(::testing::Values(kSpinning), ::testing::Values(2),
                                            ::testing::ValuesIn(conformance::AllCounts())),
                         conformance::CollectiveCaseName);

}  // namespace
}  // namespace reel::tcp::testing
