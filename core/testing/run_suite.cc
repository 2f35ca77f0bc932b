// The conformance suite run over transports chosen at run time (a host's `reel plugins check`),
// instead of instantiated by a test binary: the instantiations below read the transports only
// when GoogleTest registers its tests, so RunTransportSuite sets them first.
#include <gtest/gtest.h>

#include <map>

#include "reel/testing/transport_conformance.h"

namespace reel::conformance {
namespace {

std::vector<TransportUnderTest>& Checked() {
  static auto* checked = new std::vector<TransportUnderTest>;
  return *checked;
}
std::vector<int> CheckedRankCounts() {
  return Checked().empty() ? std::vector<int>{} : RankCounts(Checked().front());
}

INSTANTIATE_TEST_SUITE_P(ReelCheck, TransportConformance, ::testing::ValuesIn(Checked()),
                         TransportCaseName);
INSTANTIATE_TEST_SUITE_P(ReelCheck, CollectiveConformance,
                         ::testing::Combine(::testing::ValuesIn(Checked()),
                                            ::testing::ValuesIn(CheckedRankCounts()),
                                            ::testing::ValuesIn(AllCounts())),
                         CollectiveCaseName);

// Which checked transport a test case belongs to: its case name (after the '/') is exactly one
// of the names the instantiations above give that transport's cases.
std::map<std::string, std::string> TransportOfCase() {
  std::map<std::string, std::string> owner;
  size_t index = 0;
  for (const TransportUnderTest& t : Checked()) {
    owner[TransportCaseName({t, index})] = t.name;
    for (int ranks : CheckedRankCounts())
      for (Count count : AllCounts())
        owner[CollectiveCaseName({CollectiveCase{t, ranks, count}, index})] = t.name;
    ++index;
  }
  return owner;
}

// Turns GoogleTest's events into one outcome per test, with the first failure as the reason.
class Reporter final : public ::testing::EmptyTestEventListener {
 public:
  explicit Reporter(std::function<void(const SuiteOutcome&)> report)
      : report_(std::move(report)), owner_(TransportOfCase()) {}
  void OnTestStart(const ::testing::TestInfo&) override { reason_.clear(); }
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if ((r.failed() || r.skipped()) && reason_.empty()) reason_ = r.message();
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    std::string suite = info.test_suite_name();
    suite = suite.substr(suite.find('/') + 1);  // without "ReelCheck/"
    const ::testing::TestResult& r = *info.result();
    const std::string name = info.name();
    auto owner = owner_.find(name.substr(name.find('/') + 1));
    report_({suite + "." + name, r.Passed() && !r.Skipped(), r.Skipped(), reason_,
             owner == owner_.end() ? "" : owner->second});
  }

 private:
  std::function<void(const SuiteOutcome&)> report_;
  std::map<std::string, std::string> owner_;
  std::string reason_;
};

}  // namespace

int RunTransportSuite(const std::vector<TransportUnderTest>& transports,
                      const std::function<void(const SuiteOutcome&)>& report) {
  if (transports.empty()) return 0;
  Checked() = transports;
  LinkSuite(transports.front());
  int argc = 2;
  std::string filter = "--gtest_filter=ReelCheck/*";
  char arg0[] = "reel";
  char* argv[] = {arg0, filter.data(), nullptr};
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
  delete listeners.Release(listeners.default_result_printer());
  int failed = 0;
  listeners.Append(new Reporter([&](const SuiteOutcome& o) {
    failed += !o.passed && !o.skipped;
    report(o);
  }));
  [[maybe_unused]] const int gtest_status = RUN_ALL_TESTS();  // failures are counted above
  return failed;
}

}  // namespace reel::conformance
