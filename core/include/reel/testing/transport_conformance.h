// The transport conformance suite: what every Communicator must do (point-to-point, any-source
// receives, tags, deadlines, peers that leave, and every collective at awkward sizes), written
// once and run over every transport as one parameterised suite. A transport plugin's tests link
// `reel::transport_testing` and instantiate it in a file of their own (docs/plugin-guide.md, "A
// transport's own test binary", shows how, and how to start and register a run of one rank per
// process):
//
//   REEL_INSTANTIATE_TRANSPORT_CONFORMANCE(Tcp, conformance::RanksAsThreads("tcp", FreshGroup));
//   REEL_INSTANTIATE_TRANSPORT_CONFORMANCE(MpiWorld, conformance::RankPerProcess("mpi", World));
//
// Ranks as threads: `group()` is called for every group a test forms and returns a Transport whose
// ranks 0..n-1 can Connect() concurrently from threads of this process with the given coordinator
// (Connect blocks until the whole group has joined). The suite wraps the communicators with the
// core's ring collectives (reel/core/collectives.h), which forward to native ones.
//
// One rank per process: `group()` is called once per process; an empty coordinator comes from
// REEL_COORDINATOR, rank and world size from REEL_RANK and REEL_WORLD_SIZE (strictly parsed,
// reel/core/rank_environment.h) or, both unset, from the transport (kDiscover; MPI does). The
// tests communicate, so every process runs the same tests in the same order; tests that need more
// ranks than the world has, or make sense in one process only (a peer leaving, Connect deadlines,
// collectives called by some ranks), are skipped: a plugin's own fault tests kill a process.
//
// Test names carry the prefix and the transport's name (`--gtest_filter='Tcp/*'`; cases such as
// `tcp_3ranks_not_divisible`, `tcp_world_...` per process).
// Thread-safety: one thread per rank; each thread uses only its own communicator.
#ifndef REEL_TESTING_TRANSPORT_CONFORMANCE_H_
#define REEL_TESTING_TRANSPORT_CONFORMANCE_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "reel/transport.h"

namespace reel::conformance {

// One communicator per rank of a group, in rank order.
using Communicators = std::vector<std::unique_ptr<Communicator>>;

// What a test connects to: a transport and the coordinator address its ranks are given.
struct Group {
  std::unique_ptr<Transport> transport;
  std::string coordinator;
};

// Where a suite's ranks run: as threads of this process, or one per process under a launcher.
enum class Placement { kThreads, kProcesses };

// A transport as the suite sees it: a name for the tests, where its ranks run, and how to form
// a group.
struct TransportUnderTest {
  std::string name;  // letters, digits and '_' only (it becomes part of test names)
  Placement placement = Placement::kThreads;
  std::function<Result<Group>()> group;
};

// The two placements, by name.
inline TransportUnderTest RanksAsThreads(std::string name, std::function<Result<Group>()> group) {
  return {std::move(name), Placement::kThreads, std::move(group)};
}
inline TransportUnderTest RankPerProcess(std::string name, std::function<Result<Group>()> group) {
  return {std::move(name), Placement::kProcesses, std::move(group)};
}

// Runs fn(comm) for every communicator on its own thread; the statuses in rank order.
std::vector<Status> RunOnRanks(const Communicators& comms,
                               const std::function<Status(Communicator&)>& fn);

// Connects ranks 0..n-1 of `transport` concurrently (Connect blocks until all have joined) and
// wraps each in the core's collectives. The first failing rank's error (naming it), if any.
Result<Communicators> ConnectOnThreads(Transport& transport, int n, const std::string& coordinator,
                                       Deadline deadline);

// Which layer a test talks to: the backend's own communicator, or the one with collectives that
// every optimizer gets (user tags only).
enum class Layer { kBackend, kWithCollectives };

// The suite's fixture: each test forms groups of the transport under test and checks one promise
// of reel/transport.h.
class TransportConformance : public ::testing::TestWithParam<TransportUnderTest> {
 protected:
  // Runs fn on every rank of a group and records a failure naming the rank for every error:
  // as threads, `threads` ranks of a fresh group; per process, this process's rank of the world.
  // Skips the test if the world has fewer than `min_ranks` ranks.
  void OnRanks(int threads, int min_ranks, const std::function<Status(Communicator&)>& fn,
               Layer layer = Layer::kWithCollectives);
  // Connects a fresh group of n ranks as threads, raw backends (nothing wrapped); skips the test
  // (returns an empty vector) when ranks run one per process.
  Communicators ThreadsOnly(int n, const char* why);
  bool per_process() const { return GetParam().placement == Placement::kProcesses; }
};

// Element counts the collectives are checked at, relative to the group size n.
enum class Count { kEmpty, kOne, kFewerThanRanks, kNotDivisible, kLarge };
size_t Elements(Count count, int n);
std::vector<Count> AllCounts();

// (transport, ranks as threads or 0 for "the launched world", count)
using CollectiveCase = std::tuple<TransportUnderTest, int, Count>;
class CollectiveConformance : public ::testing::TestWithParam<CollectiveCase> {};

// 1..4 ranks as threads; {0} (the world) per process.
std::vector<int> RankCounts(const TransportUnderTest& transport);
std::string TransportCaseName(const ::testing::TestParamInfo<TransportUnderTest>& info);
std::string CollectiveCaseName(const ::testing::TestParamInfo<CollectiveCase>& info);

// Keeps the suite's test definitions linked into a binary that only instantiates them (a static
// library's objects are otherwise dropped); per process, also registers the environment that
// leaves the world in step once every test has run.
int LinkSuite(const TransportUnderTest& transport);

// Runs the whole suite over each of `transports` in this process, for a host that checks the
// transports it loaded (`reel plugins check`; library reel::transport_check): one outcome per test
// and transport, the reason being its first failure or its skip message. Returns the number of
// failed tests. All transports run in one go because GoogleTest registers its parameterised tests
// once per process: call it once per process, where nothing else uses GoogleTest, with transports
// of one placement (their names distinct).
struct SuiteOutcome {
  std::string name;  // e.g. "CollectiveConformance.AllReduceSums/tcp_3ranks_large"
  bool passed = false;
  bool skipped = false;
  std::string reason;
  std::string transport;  // the TransportUnderTest's name, e.g. "tcp"
};
int RunTransportSuite(const std::vector<TransportUnderTest>& transports,
                      const std::function<void(const SuiteOutcome&)>& report);
inline int RunTransportSuite(const TransportUnderTest& transport,
                             const std::function<void(const SuiteOutcome&)>& report) {
  return RunTransportSuite(std::vector<TransportUnderTest>{transport}, report);
}

}  // namespace reel::conformance

// Use at namespace scope (not inside a function), at most once per prefix. GoogleTest pastes
// the suite names into identifiers, hence the using-declarations.
#define REEL_INSTANTIATE_TRANSPORT_CONFORMANCE(prefix, transport)                         \
  using ::reel::conformance::TransportConformance;                                        \
  using ::reel::conformance::CollectiveConformance;                                       \
  INSTANTIATE_TEST_SUITE_P(prefix, TransportConformance, ::testing::Values(transport),    \
                           ::reel::conformance::TransportCaseName);                       \
  INSTANTIATE_TEST_SUITE_P(                                                               \
      prefix, CollectiveConformance,                                                      \
      ::testing::Combine(::testing::Values(transport),                                    \
                         ::testing::ValuesIn(::reel::conformance::RankCounts(transport)), \
                         ::testing::ValuesIn(::reel::conformance::AllCounts())),          \
      ::reel::conformance::CollectiveCaseName);                                           \
  [[maybe_unused]] static const int reel_conformance_linked_##prefix =                    \
      ::reel::conformance::LinkSuite(transport)

#endif  // REEL_TESTING_TRANSPORT_CONFORMANCE_H_
