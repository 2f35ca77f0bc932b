// The conformance suite instantiated from outside the tree, over the installed core's inproc
// transport: ranks as threads, every test forming fresh groups of 1-4 ranks.
#include <atomic>
#include <string>

#include "reel/core/inproc.h"
#include "reel/testing/transport_conformance.h"

namespace {

reel::Result<reel::conformance::Group> FreshGroup() {
  static std::atomic<int> counter{0};
  return reel::conformance::Group{
      reel::core::MakeInprocTransport("suite-" + std::to_string(counter++)), ""};
}

REEL_INSTANTIATE_TRANSPORT_CONFORMANCE(Installed,
                                       reel::conformance::RanksAsThreads("inproc", FreshGroup));

}  // namespace
