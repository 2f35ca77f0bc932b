// The conformance suite run over one transport chosen at run time (a host's `reel plugins
// check`), instead of instantiated by a test binary: the instantiations below read the transport
// only when GoogleTest registers its tests, so RunTransportSuite sets it first.
#include <gtest/gtest.h>

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

// Turns GoogleTest's events into one outcome per test, with the first failure as the reason.
class Reporter final : public ::testing::EmptyTestEventListener {
 public:
  explicit Reporter(std::function<void(const SuiteOutcome&)> report) : report_(std::move(report)) {}
  void OnTestStart(const ::testing::TestInfo&) override { reason_.clear(); }
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if ((r.failed() || r.skipped()) && reason_.empty()) reason_ = r.message();
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    std::string suite = info.test_suite_name();
    suite = suite.substr(suite.find('/') + 1);  // without "ReelCheck/"
    const ::testing::TestResult& r = *info.result();
    report_({suite + "." + info.name(), r.Passed() && !r.Skipped(), r.Skipped(), reason_});
  }

 private:
  std::function<void(const SuiteOutcome&)> report_;
  std::string reason_;
};

}  // namespace

int RunTransportSuite(const TransportUnderTest& transport,
                      const std::function<void(const SuiteOutcome&)>& report) {
  Checked() = {transport};
  LinkSuite(transport);
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
