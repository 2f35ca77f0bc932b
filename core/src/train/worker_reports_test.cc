// The lead's view of independently stepping training ranks (train/worker_reports.h), over an
// inproc group: positions and example counts from the reports, a rank that leaves is lost with
// the share it did not train, and a malformed report is an error naming the rank.
#include "train/worker_reports.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "reel/core/inproc.h"

namespace reel::core {
namespace {

WorkerReport Make(ReportKind kind, int rank, int64_t step, int64_t examples, std::string pos,
                  int64_t start_step = 0) {
  WorkerReport r;
  r.kind = kind;
  r.rank = rank;
  r.step = step;
  r.start_step = start_step;
  r.examples = examples;
  r.position = std::move(pos);
  return r;
}

constexpr std::chrono::milliseconds kTimeout{10000};

TEST(WorkerReportsTest, TheLeadReadsReportsUpToTheStepItNeeds) {
  auto group = CreateInprocGroup(3);
  ASSERT_TRUE(group.ok()) << group.status();
  Communicator& lead = *(*group)[0];
  for (int w = 1; w < 3; ++w) {
    Communicator& c = *(*group)[static_cast<size_t>(w)];
    const std::string p = "rank" + std::to_string(w);
    ASSERT_TRUE(SendWorkerReport(c, 0, kWorkerReportTag,
                                 Make(ReportKind::kStart, 10 + w, 0, 0, p + "@0"), kTimeout)
                    .ok());
    ASSERT_TRUE(SendWorkerReport(c, 0, kWorkerReportTag,
                                 Make(ReportKind::kCheckpoint, 10 + w, 20, 320, p + "@20"),
                                 kTimeout)
                    .ok());
    ASSERT_TRUE(SendWorkerReport(c, 0, kWorkerReportTag,
                                 Make(ReportKind::kFinal, 10 + w, 30, 480, p + "@30"), kTimeout)
                    .ok());
  }
  WorkerReports reports(lead, kTimeout);
  ASSERT_TRUE(reports.CatchUp(0).ok());
  EXPECT_EQ(reports.Positions("lead"), (std::vector<std::string>{"lead", "rank1@0", "rank2@0"}));
  ASSERT_TRUE(reports.CatchUp(20).ok());
  EXPECT_EQ(reports.Positions("lead"), (std::vector<std::string>{"lead", "rank1@20", "rank2@20"}));
  EXPECT_EQ(reports.Examples(), 640);
  ASSERT_TRUE(reports.CatchUp(WorkerReports::kFinal).ok());
  EXPECT_EQ(reports.Positions("x"), (std::vector<std::string>{"x", "rank1@30", "rank2@30"}));
  EXPECT_EQ(reports.Examples(), 960);
  EXPECT_TRUE(reports.Lost(30).empty());
}

// A checkpoint's Poll takes what has arrived and waits for no rank: rank 2, behind, keeps its
// start position (and is not lost); what it sends later is read by the next Poll.
TEST(WorkerReportsTest, PollTakesWhatArrivedAndWaitsForNoRank) {
  auto group = CreateInprocGroup(3);
  ASSERT_TRUE(group.ok()) << group.status();
  Communicator& one = *(*group)[1];
  Communicator& two = *(*group)[2];
  ASSERT_TRUE(SendWorkerReport(one, 0, kWorkerReportTag, Make(ReportKind::kStart, 1, 0, 0, "one@0"),
                               kTimeout)
                  .ok());
  ASSERT_TRUE(SendWorkerReport(one, 0, kWorkerReportTag,
                               Make(ReportKind::kCheckpoint, 1, 20, 80, "one@20"), kTimeout)
                  .ok());
  ASSERT_TRUE(SendWorkerReport(one, 0, kWorkerReportTag,
                               Make(ReportKind::kCheckpoint, 1, 40, 160, "one@40"), kTimeout)
                  .ok());
  ASSERT_TRUE(SendWorkerReport(two, 0, kWorkerReportTag, Make(ReportKind::kStart, 2, 0, 0, "two@0"),
                               kTimeout)
                  .ok());
  WorkerReports reports(*(*group)[0], kTimeout);
  ASSERT_TRUE(reports.Poll().ok());
  EXPECT_EQ(reports.Positions("lead"), (std::vector<std::string>{"lead", "one@40", "two@0"}));
  EXPECT_EQ(reports.Examples(), 160);
  EXPECT_TRUE(reports.Lost(100).empty());
  ASSERT_TRUE(SendWorkerReport(two, 0, kWorkerReportTag,
                               Make(ReportKind::kCheckpoint, 2, 20, 80, "two@20"), kTimeout)
                  .ok());
  ASSERT_TRUE(reports.Poll().ok());
  EXPECT_EQ(reports.Positions("lead"), (std::vector<std::string>{"lead", "one@40", "two@20"}));
  EXPECT_TRUE(reports.Lost(100).empty());
}

TEST(WorkerReportsTest, ARankThatLeavesIsLostWithTheShareItDidNotTrain) {
  auto group = CreateInprocGroup(3);
  ASSERT_TRUE(group.ok()) << group.status();
  // Rank 2 reports its start and step 20 (at 16 examples a step), then its communicator goes
  // away without a final report, as when its process dies.
  ASSERT_TRUE(SendWorkerReport(*(*group)[2], 0, kWorkerReportTag,
                               Make(ReportKind::kStart, 7, 0, 0, "p0"), kTimeout)
                  .ok());
  ASSERT_TRUE(SendWorkerReport(*(*group)[2], 0, kWorkerReportTag,
                               Make(ReportKind::kCheckpoint, 7, 20, 320, "p20"), kTimeout)
                  .ok());
  (*group)[2].reset();
  ASSERT_TRUE(SendWorkerReport(*(*group)[1], 0, kWorkerReportTag,
                               Make(ReportKind::kStart, 6, 0, 0, "q0"), kTimeout)
                  .ok());
  ASSERT_TRUE(SendWorkerReport(*(*group)[1], 0, kWorkerReportTag,
                               Make(ReportKind::kFinal, 6, 100, 1600, "q100"), kTimeout)
                  .ok());
  WorkerReports reports(*(*group)[0], kTimeout);
  ASSERT_TRUE(reports.CatchUp(WorkerReports::kFinal).ok());
  const std::vector<LostRank> lost = reports.Lost(100);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].rank, 7);
  EXPECT_EQ(lost[0].group_rank, 2);
  EXPECT_EQ(lost[0].last_step, 20);
  EXPECT_EQ(lost[0].steps_not_trained, 80);
  EXPECT_EQ(lost[0].examples_not_trained, 80 * 16);
  EXPECT_EQ(lost[0].position, "p20");
  EXPECT_NE(lost[0].why.find("UNAVAILABLE"), std::string::npos) << lost[0].why;
  // Its last position goes into the checkpoint, so a resume trains the rest of its share.
  EXPECT_EQ(reports.Positions("l"), (std::vector<std::string>{"l", "q100", "p20"}));
  // Without a step budget (an epoch budget of unknown length) the share is unknown.
  EXPECT_EQ(reports.Lost(0)[0].steps_not_trained, -1);
}

// What the optimizer applied of a lost rank's work (AppliedWorkOf) counts instead of its last
// report: here 57 steps, long after its report at step 20, at its applied mean batch of 8.
TEST(WorkerReportsTest, ALostRanksShareCountsWhatWasApplied) {
  auto group = CreateInprocGroup(2);
  ASSERT_TRUE(group.ok()) << group.status();
  ASSERT_TRUE(SendWorkerReport(*(*group)[1], 0, kWorkerReportTag,
                               Make(ReportKind::kStart, 7, 10, 0, "p10", 10), kTimeout)
                  .ok());
  ASSERT_TRUE(SendWorkerReport(*(*group)[1], 0, kWorkerReportTag,
                               Make(ReportKind::kCheckpoint, 7, 20, 160, "p20", 10), kTimeout)
                  .ok());
  (*group)[1].reset();
  WorkerReports reports(*(*group)[0], kTimeout);
  ASSERT_TRUE(reports.CatchUp(WorkerReports::kFinal).ok());
  const std::map<int, AppliedWork> applied = {{7, AppliedWork{57, 47, 47 * 8, 47}}};
  const std::vector<LostRank> lost = reports.Lost(100, applied);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].last_step, 20);
  EXPECT_EQ(lost[0].applied_step, 57);
  EXPECT_EQ(lost[0].applied_updates, 47);
  EXPECT_EQ(lost[0].steps_not_trained, 43);
  EXPECT_EQ(lost[0].examples_not_trained, 43 * 8);
  // The data position stays the last reported one: a resume trains from there.
  EXPECT_EQ(lost[0].position, "p20");
  // Nothing applied in this session: its share is counted from its start (step 10), at the mean
  // batch it reported, and another rank's work does not change it.
  const std::vector<LostRank> none = reports.Lost(100, {{7, AppliedWork{0, 0, 0, 0}}});
  EXPECT_EQ(none[0].applied_step, 10);
  EXPECT_EQ(none[0].steps_not_trained, 90);
  EXPECT_EQ(none[0].examples_not_trained, 90 * 16);
  EXPECT_EQ(reports.Lost(100, {{6, AppliedWork{57, 47, 47 * 8, 47}}})[0].steps_not_trained, 80);
}

// The lead tells the others its own reports; one that takes over after the lead was lost keeps
// the newest that arrived (the lead's position goes into its checkpoints), counts the lead lost
// with its share, and reads the others' reports, which they now send to it. Before that, its
// wait for the lead's end fails with the lead's loss. An end (kEnd) ends the wait.
TEST(WorkerReportsTest, ARankTakingOverKeepsTheLostLeadsReports) {
  auto group = CreateInprocGroup(3);
  ASSERT_TRUE(group.ok()) << group.status();
  {
    WorkerReports lead(*(*group)[0], kTimeout);
    lead.TellOthers(Make(ReportKind::kStart, 5, 0, 0, "lead@0"));
    lead.TellOthers(Make(ReportKind::kCheckpoint, 5, 20, 80, "lead@20"));
  }
  (*group)[0].reset();
  ASSERT_TRUE(SendWorkerReport(*(*group)[2], 1, kWorkerReportTag,
                               Make(ReportKind::kFinal, 7, 100, 400, "two@100"), kTimeout)
                  .ok());
  WorkerReports next(*(*group)[1], kTimeout);
  const Status lost = next.AwaitEnd(0);
  EXPECT_EQ(lost.code(), StatusCode::kUnavailable) << lost;
  ASSERT_TRUE(next.LoseLead(0, 5, lost.ToString()).ok());
  ASSERT_TRUE(next.CatchUp(WorkerReports::kFinal).ok());
  EXPECT_EQ(next.Positions("me"), (std::vector<std::string>{"lead@20", "me", "two@100"}));
  EXPECT_EQ(next.Examples(), 480);
  const std::vector<LostRank> gone = next.Lost(100);
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0].rank, 5);
  EXPECT_EQ(gone[0].group_rank, 0);
  EXPECT_EQ(gone[0].last_step, 20);
  EXPECT_EQ(gone[0].steps_not_trained, 80);
  EXPECT_EQ(gone[0].examples_not_trained, 80 * 4);
  // Rank 2 waits for the new lead's end, which comes after a report of its own.
  next.TellOthers(Make(ReportKind::kFinal, 6, 100, 400, "me@100"));
  next.TellOthers(Make(ReportKind::kEnd, 6, 100, 400, "me@100"));
  WorkerReports two(*(*group)[2], kTimeout);
  EXPECT_TRUE(two.AwaitEnd(1).ok());
}

// A lead lost before it told anything is still named, by the world rank the caller knows.
TEST(WorkerReportsTest, ALeadLostBeforeItsFirstReportIsNamed) {
  auto group = CreateInprocGroup(2);
  ASSERT_TRUE(group.ok()) << group.status();
  (*group)[0].reset();
  WorkerReports next(*(*group)[1], kTimeout);
  ASSERT_TRUE(next.LoseLead(0, 9, "gone").ok());
  const std::vector<LostRank> gone = next.Lost(10);
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0].rank, 9);
  EXPECT_EQ(gone[0].steps_not_trained, 10);
  EXPECT_EQ(gone[0].why, "gone");
}

TEST(WorkerReportsTest, AMalformedReportIsDataLossNamingTheRank) {
  auto group = CreateInprocGroup(2);
  ASSERT_TRUE(group.ok()) << group.status();
  const char shorter[5] = "abcd";
  ASSERT_TRUE((*group)[1]
                  ->Send(0, kWorkerReportTag, std::as_bytes(std::span<const char>(shorter, 4)),
                         DeadlineIn(kTimeout))
                  .ok());
  WorkerReports reports(*(*group)[0], kTimeout);
  Status s = reports.CatchUp(0);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("training rank 1 sent a report of 4 bytes"), std::string::npos) << s;

  auto again = CreateInprocGroup(2);
  ASSERT_TRUE(again.ok()) << again.status();
  char bad_kind[40] = {};  // a whole header
  const uint32_t kind = 9;
  std::memcpy(bad_kind, &kind, sizeof kind);
  ASSERT_TRUE((*again)[1]
                  ->Send(0, kWorkerReportTag, std::as_bytes(std::span<const char>(bad_kind, 40)),
                         DeadlineIn(kTimeout))
                  .ok());
  WorkerReports other(*(*again)[0], kTimeout);
  s = other.CatchUp(0);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("training rank 1 sent a report of kind 9"), std::string::npos) << s;
}

}  // namespace
}  // namespace reel::core
