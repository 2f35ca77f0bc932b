// The transport conformance suite: what every Communicator (with the core's collectives on top)
// must do, written once and run over every transport (style.md: one parameterised suite).
//
// The tests live in transport_conformance_test.cc; a transport joins by instantiating them in
// any file of the same test binary:
//
//   REEL_INSTANTIATE_TRANSPORT_CONFORMANCE(Tcp, (TransportUnderTest{"tcp", [](int n) {...}}));
//
// where the factory returns n connected communicators (rank i at index i) with working
// collectives, e.g. ConnectOnThreads(*transport, n, ...) for a Transport whose Connect blocks until
// the whole group has joined. Test names carry the prefix, so `--gtest_filter='Tcp/*'` selects
// one transport.
//
// Thread-safety: RunOnRanks runs one thread per communicator; each thread uses only its own.
#ifndef REEL_CORE_SRC_COMM_TRANSPORT_CONFORMANCE_H_
#define REEL_CORE_SRC_COMM_TRANSPORT_CONFORMANCE_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "reel/core/collectives.h"
#include "reel/transport.h"

namespace reel::core::conformance {

using Communicators = std::vector<std::unique_ptr<Communicator>>;

struct TransportUnderTest {
  std::string name;  // letters, digits and '_' only (it becomes part of test names)
  std::function<Result<Communicators>(int n)> connect;
};

// Runs fn(comm) for every communicator on its own thread; the statuses in rank order.
inline std::vector<Status> RunOnRanks(const Communicators& comms,
                                      const std::function<Status(Communicator&)>& fn) {
  std::vector<Status> statuses(comms.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < comms.size(); ++i)
    threads.emplace_back([&, i] { statuses[i] = fn(*comms[i]); });
  for (auto& t : threads) t.join();
  return statuses;
}

// Connects ranks 0..n-1 of `transport` concurrently (Connect blocks until all have joined) and
// wraps each in the core's collectives. The first failing rank's error, if any.
inline Result<Communicators> ConnectOnThreads(Transport& transport, int n,
                                              const std::string& coordinator, Deadline deadline) {
  std::vector<Result<std::unique_ptr<Communicator>>> results;
  for (int r = 0; r < n; ++r) results.emplace_back(InternalError("not connected"));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      results[static_cast<size_t>(r)] = transport.Connect({r, n, coordinator}, deadline);
    });
  for (auto& t : threads) t.join();
  Communicators comms;
  for (auto& r : results) {
    if (!r.ok()) return r.status();
    comms.push_back(WithRingCollectives(std::move(*r)));
  }
  return comms;
}

class TransportConformance : public ::testing::TestWithParam<TransportUnderTest> {
 protected:
  Communicators Connect(int n) {
    Result<Communicators> comms = GetParam().connect(n);
    EXPECT_TRUE(comms.ok()) << comms.status();
    return comms.ok() ? std::move(*comms) : Communicators{};
  }
};

// (transport, ranks, floats per rank)
using CollectiveCase = std::tuple<TransportUnderTest, int, int64_t>;
class CollectiveConformance : public ::testing::TestWithParam<CollectiveCase> {};

inline std::string TransportCaseName(const ::testing::TestParamInfo<TransportUnderTest>& info) {
  return info.param.name;
}
inline std::string CollectiveCaseName(const ::testing::TestParamInfo<CollectiveCase>& info) {
  return std::get<0>(info.param).name + "_" + std::to_string(std::get<1>(info.param)) + "ranks_" +
         std::to_string(std::get<2>(info.param)) + "floats";
}

}  // namespace reel::core::conformance

// Use at namespace scope, at most once per prefix.
#define REEL_INSTANTIATE_TRANSPORT_CONFORMANCE(prefix, transport)                      \
  using ::reel::core::conformance::TransportConformance;                               \
  using ::reel::core::conformance::CollectiveConformance;                              \
  INSTANTIATE_TEST_SUITE_P(prefix, TransportConformance, ::testing::Values(transport), \
                           ::reel::core::conformance::TransportCaseName);              \
  INSTANTIATE_TEST_SUITE_P(                                                            \
      prefix, CollectiveConformance,                                                   \
      ::testing::Combine(::testing::Values(transport), ::testing::Range(1, 6),         \
                         ::testing::Values<int64_t>(0, 1, 7, 1000, int64_t{1} << 20)), \
      ::reel::core::conformance::CollectiveCaseName)

#endif  // REEL_CORE_SRC_COMM_TRANSPORT_CONFORMANCE_H_
