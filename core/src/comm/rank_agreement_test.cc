// CheckRanksAgree: every rank learns of the first setting where any rank differs from rank 0.
#include "reel/core/rank_agreement.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "reel/core/collectives.h"
#include "reel/core/inproc.h"
#include "reel/testing/transport_conformance.h"

namespace reel::core {
namespace {

using ::testing::HasSubstr;

// Runs CheckRanksAgree on `settings.size()` inproc ranks, rank r passing settings[r].
std::vector<Status> Check(const std::vector<RankSettings>& settings) {
  auto made = CreateInprocGroup(static_cast<int>(settings.size()));
  EXPECT_TRUE(made.ok());
  conformance::Communicators comms;
  for (auto& c : *made) comms.push_back(WithRingCollectives(std::move(c)));
  return conformance::RunOnRanks(comms, [&](Communicator& c) {
    return CheckRanksAgree(c, settings[static_cast<size_t>(c.rank())], "because.",
                           std::chrono::seconds(30));
  });
}

TEST(CheckRanksAgree, SameSettingsPass) {
  const RankSettings s = {{"a", "1"}, {"b", "two"}};
  for (const Status& st : Check({s, s, s})) EXPECT_TRUE(st.ok()) << st;
}

TEST(CheckRanksAgree, EveryRankNamesTheFirstDifferenceFromRankZero) {
  const RankSettings lead = {{"a", "1"}, {"b", "2"}, {"c", "3"}};
  RankSettings other = lead, third = lead;
  other["c"] = "30";  // rank 1 differs later in name order than rank 2
  third["b"] = "20";
  std::vector<Status> st = Check({lead, other, third});
  for (size_t r = 0; r < st.size(); ++r) {
    EXPECT_EQ(st[r].code(), StatusCode::kInvalidArgument) << "rank " << r << ": " << st[r];
    EXPECT_EQ(st[r].message(), "every rank must use the same b (rank 0: 2, rank 2: 20): because.")
        << "rank " << r;
  }
}

TEST(CheckRanksAgree, ASettingOnlySomeRanksHaveIsUnsetOnTheOthers) {
  std::vector<Status> st = Check({{{"a", "1"}}, {{"a", "1"}, {"extra", "x"}}});
  for (const Status& s : st) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr("the same extra (rank 0: (unset), rank 1: x)"));
  }
}

TEST(CheckRanksAgree, ValuesMayHoldAnyBytes) {
  const std::string odd("a\0b", 3);
  RankSettings one = {{"k", odd}}, two = {{"k", odd}};
  for (const Status& s : Check({one, two})) EXPECT_TRUE(s.ok()) << s;
  two["k"] = std::string("a\0c", 3);
  for (const Status& s : Check({one, two})) EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

TEST(CheckRanksAgree, OneRankAgreesWithItself) {
  for (const Status& s : Check({{{"a", "1"}}})) EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace reel::core
