// The conformance suite's own plumbing, shared by its test files (not installed): where a test's
// ranks come from (a fresh group of threads, or this process's rank of a launched world) and how
// their statuses are reported.
#ifndef REEL_CORE_TESTING_HARNESS_H_
#define REEL_CORE_TESTING_HARNESS_H_

#include <chrono>
#include <functional>

#include "reel/testing/transport_conformance.h"

namespace reel::conformance {

// Long enough never to fire on a loaded machine; only tests that expect a timeout use short ones.
inline Deadline Far() { return DeadlineIn(std::chrono::seconds(60)); }

// Runs fn on every rank (see TransportConformance::OnRanks) and records a failure naming the
// transport and rank for every error. `threads` ranks form a fresh group when ranks are threads.
void RunAndReport(const TransportUnderTest& transport, int threads, int min_ranks,
                  const std::function<Status(Communicator&)>& fn, Layer layer);

// Defined in each test file, so that LinkSuite() pulls every one of them into a test binary.
int PointToPointTestsLinked();
int CollectiveTestsLinked();
int CollectiveArgumentTestsLinked();
int SplitTestsLinked();

}  // namespace reel::conformance

#endif  // REEL_CORE_TESTING_HARNESS_H_
