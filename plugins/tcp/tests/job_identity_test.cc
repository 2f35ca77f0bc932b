// What a group forms with: only processes of its own launch (job identity, both ways of every
// handshake, as the mesh too) and only ranks whose options agree.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <thread>

#include "blocking_io.h"
#include "reel/core/collectives.h"
#include "reel/job_id.h"
#include "tcp_test_util.h"

namespace reel::tcp::testing {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

using Comms = std::vector<std::unique_ptr<Communicator>>;

TcpOptions JobOptions(const std::string& job_id) {
  TcpOptions o = TestOptions();
  o.job_id = job_id;
  return o;
}

// Connects `ctx` through `transport` on a thread of its own; join() before reading `result`.
struct ConnectingRank {
  ConnectingRank(Transport& transport, TransportContext ctx, Deadline deadline)
      : thread([this, &transport, ctx, deadline] { result = transport.Connect(ctx, deadline); }) {}
  Result<std::unique_ptr<Communicator>> result = InternalError("not run");
  std::thread thread;
};

void ExpectTheGroupSums(Comms& raw) {
  Comms comms;
  for (auto& c : raw) comms.push_back(core::WithRingCollectives(std::move(c)));
  std::vector<Status> statuses(comms.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < comms.size(); ++r)
    threads.emplace_back([&, r] {
      std::vector<float> v(1000, 1.0f);
      statuses[r] = comms[r]->AllReduce(v, ReduceOp::kSum, DeadlineIn(60s));
      if (statuses[r].ok() && v.back() != static_cast<float>(comms.size()))
        statuses[r] = InternalError("wrong sum " + std::to_string(v.back()));
    });
  for (auto& t : threads) t.join();
  for (size_t r = 0; r < comms.size(); ++r) EXPECT_TRUE(statuses[r].ok()) << statuses[r];
}

// An earlier run's coordinator still listens with the same secret and port: a rank of the new
// launch refuses it naming both jobs (and never joins it), the coordinator refuses the rank in
// its own log; the old group is not disturbed.
TEST(TcpJobs, AnEarlierJobsCoordinatorIsRefusedNamingBothJobs) {
  CapturedStderr captured;
  const std::string coordinator = FreeCoordinator();
  auto old_job = MakeTcpTransport(JobOptions("1200.0"));
  auto new_job = MakeTcpTransport(JobOptions("1234.0"));
  ConnectingRank old_rank0(*old_job, {0, 2, coordinator}, DeadlineIn(60s));
  Result<std::unique_ptr<Communicator>> new_rank1 =
      new_job->Connect({1, 2, coordinator}, DeadlineIn(60s));
  EXPECT_EQ(new_rank1.status().code(), StatusCode::kFailedPrecondition) << new_rank1.status();
  EXPECT_THAT(new_rank1.status().message(),
              HasSubstr("tcp rank 1 of job 1234.0 refused a coordinator of job 1200.0"));
  // The old coordinator kept rank 1's slot for its own rank 1.
  Result<std::unique_ptr<Communicator>> old_rank1 =
      old_job->Connect({1, 2, coordinator}, DeadlineIn(60s));
  old_rank0.thread.join();
  ASSERT_TRUE(old_rank1.ok()) << old_rank1.status();
  ASSERT_TRUE(old_rank0.result.ok()) << old_rank0.result.status();
  // Said by the old coordinator's io thread before it took its own rank 1's join.
  EXPECT_THAT(captured.Restore(),
              HasSubstr(": rank 1 is of job 1234.0, this rank of job 1200.0 (a process of another "
                        "launch with the same secret and port?)"));
  Comms comms;
  comms.push_back(std::move(*old_rank0.result));
  comms.push_back(std::move(*old_rank1));
  ExpectTheGroupSums(comms);
}

// A rank left from an earlier run reaches the new coordinator: it refuses the coordinator, and a
// rank of its job that does not check (an older build, a hand-made client) is refused by the
// coordinator, naming both jobs. Neither takes a slot: the new job forms with its own rank 1.
TEST(TcpJobs, AStrayRankOfAnEarlierJobTakesNoSlot) {
  const std::string coordinator = FreeCoordinator();
  Result<Endpoint> at = ParseHostPort(coordinator, "test");
  ASSERT_TRUE(at.ok());
  auto new_job = MakeTcpTransport(JobOptions("1234.0"));
  auto old_job = MakeTcpTransport(JobOptions("1200.0"));
  ConnectingRank rank0(*new_job, {0, 2, coordinator}, DeadlineIn(60s));

  Result<std::unique_ptr<Communicator>> stray =
      old_job->Connect({1, 2, coordinator}, DeadlineIn(60s));
  EXPECT_EQ(stray.status().code(), StatusCode::kFailedPrecondition) << stray.status();
  EXPECT_THAT(stray.status().message(),
              HasSubstr("tcp rank 1 of job 1200.0 refused a coordinator of job 1234.0"));

  // The coordinator's side: a client that answers the challenge whatever its job.
  asio::io_context io;
  auto work = asio::make_work_guard(io);
  std::thread io_thread([&] { io.run(); });
  for (Purpose purpose : {Purpose::kJoin, Purpose::kData}) {
    tcp::socket s(io);
    ASSERT_TRUE(ConnectWithRetry(io, s, *at, "rank 0", DeadlineIn(10s)).ok());
    Hello hello{purpose, 1, 2, *FreshNonce(), {}, "1200.0"};
    const auto hello_bytes = EncodeHello(hello);
    ASSERT_TRUE(WriteAll(io, s, hello_bytes, "stray", DeadlineIn(10s)).ok());
    std::array<std::byte, kChallengeBytes> challenge;
    ASSERT_TRUE(ReadExact(io, s, challenge, "stray", DeadlineIn(10s)).ok());
    Result<Mac> mac = ClientMac("test secret", hello_bytes, challenge);
    ASSERT_TRUE(mac.ok());
    ASSERT_TRUE(WriteAll(io, s, EncodeResponse(*mac), "stray", DeadlineIn(10s)).ok());
    Result<Control> verdict = ReadControl(io, s, "rank 0", DeadlineIn(10s));
    EXPECT_EQ(verdict.status().code(), StatusCode::kFailedPrecondition) << verdict.status();
    EXPECT_THAT(verdict.status().message(),
                HasSubstr("tcp rank 0 refuses: rank 1 is of job 1200.0, this rank of job 1234.0"));
  }

  Result<std::unique_ptr<Communicator>> rank1 =
      new_job->Connect({1, 2, coordinator}, DeadlineIn(60s));
  rank0.thread.join();
  ASSERT_TRUE(rank1.ok()) << rank1.status();
  ASSERT_TRUE(rank0.result.ok()) << rank0.result.status();
  Comms comms;
  comms.push_back(std::move(*rank0.result));
  comms.push_back(std::move(*rank1));
  ExpectTheGroupSums(comms);
  work.reset();
  io_thread.join();
}

// The mesh checks the job too: a rank's listener found at a peer's endpoint but of another launch
// (or of another group of the same launch) is refused before this rank answers it.
TEST(TcpJobs, AMeshPeerOfAnotherJobOrGroupIsRefused) {
  const std::string coordinator = FreeCoordinator();
  TcpOptions options = JobOptions("1200.0");
  options.listen_port = FreePort();
  auto old_rank1_transport = MakeTcpTransport(options);
  auto old_rank0_transport = MakeTcpTransport(JobOptions("1200.0"));
  ConnectingRank old_rank0(*old_rank0_transport, {0, 2, coordinator}, DeadlineIn(60s));
  Result<std::unique_ptr<Communicator>> old_rank1 =
      old_rank1_transport->Connect({1, 2, coordinator}, DeadlineIn(60s));
  old_rank0.thread.join();
  ASSERT_TRUE(old_rank1.ok()) << old_rank1.status();

  asio::io_context io;
  auto work = asio::make_work_guard(io);
  std::thread io_thread([&] { io.run(); });
  const Endpoint peer{"127.0.0.1", static_cast<uint16_t>(options.listen_port)};
  std::map<std::string, Hello> hellos = {
      {"tcp rank 0 of job 1234.0 refused rank 1 of job 1200.0",
       Hello{Purpose::kData, 0, 2, {}, *FreshNonce(), "1234.0"}},
      {"tcp rank 0 refused rank 1 of another group of its job",
       Hello{Purpose::kData, 0, 2, {}, *FreshNonce(), "1200.0"}}};
  for (const auto& [expected, hello] : hellos) {
    tcp::socket s(io);
    Result<Nonce> theirs =
        ConnectAndAuthenticate(io, s, peer, "test secret", hello, 1, "rank 1", DeadlineIn(30s),
                               1000ms, nullptr, [](const std::string&) {});
    EXPECT_EQ(theirs.status().code(), StatusCode::kFailedPrecondition) << theirs.status();
    EXPECT_THAT(theirs.status().message(), HasSubstr(expected));
  }
  work.reset();
  io_thread.join();
}

// `reel launch --max-restarts` on several nodes: a restarted attempt's rank reaches the
// coordinator of the attempt before it (another node's launcher has not restarted yet). It does
// not fail — that would end its launch — but waits, and joins its own attempt's coordinator once
// that one listens at the port; the earlier attempt's group is not disturbed.
TEST(TcpJobs, ARestartedAttemptsRankWaitsOutAnEarlierAttemptsCoordinator) {
  CapturedStderr captured;
  const std::string coordinator = FreeCoordinator();
  const std::string launch = "run-7", restarted = JobIdOfAttempt(launch, 1);
  ASSERT_EQ(restarted, "run-7.restart-1");
  auto earlier = MakeTcpTransport(JobOptions(launch));
  auto later = MakeTcpTransport(JobOptions(restarted));
  {
    ConnectingRank old_rank0(*earlier, {0, 2, coordinator}, DeadlineIn(60s));
    ConnectingRank new_rank1(*later, {1, 2, coordinator}, DeadlineIn(120s));
    const std::string waits =
        "tcp rank 1 of job run-7.restart-1 found a coordinator of job run-7, "
        "an earlier attempt of its launch at " +
        coordinator + "; waiting for its own";
    for (int i = 0; i < 3000 && captured.SoFar().find(waits) == std::string::npos; ++i)
      std::this_thread::sleep_for(20ms);  // generous; not a timing assertion
    EXPECT_THAT(captured.SoFar(), HasSubstr(waits));
    // The earlier attempt forms with its own rank 1, works, and ends: its coordinator is gone.
    Result<std::unique_ptr<Communicator>> old_rank1 =
        earlier->Connect({1, 2, coordinator}, DeadlineIn(60s));
    old_rank0.thread.join();
    ASSERT_TRUE(old_rank1.ok()) << old_rank1.status();
    ASSERT_TRUE(old_rank0.result.ok()) << old_rank0.result.status();
    Comms old_group;
    old_group.push_back(std::move(*old_rank0.result));
    old_group.push_back(std::move(*old_rank1));
    ExpectTheGroupSums(old_group);
    old_group.clear();
    // This attempt's coordinator comes; the waiting rank joins it.
    Result<std::unique_ptr<Communicator>> new_rank0 =
        later->Connect({0, 2, coordinator}, DeadlineIn(60s));
    new_rank1.thread.join();
    ASSERT_TRUE(new_rank0.ok()) << new_rank0.status();
    ASSERT_TRUE(new_rank1.result.ok()) << new_rank1.result.status();
    Comms new_group;
    new_group.push_back(std::move(*new_rank0));
    new_group.push_back(std::move(*new_rank1.result));
    ExpectTheGroupSums(new_group);
  }
  // Only a later attempt waits: an identity of another launch, or of an earlier attempt of the
  // same, is refused as before (TcpJobs.AnEarlierJobsCoordinatorIsRefusedNamingBothJobs).
  EXPECT_TRUE(IsEarlierAttempt("run-7", "run-7.restart-1"));
  EXPECT_TRUE(IsEarlierAttempt("run-7.restart-2", "run-7.restart-10"));
  EXPECT_FALSE(IsEarlierAttempt("run-7.restart-1", "run-7"));
  EXPECT_FALSE(IsEarlierAttempt("run-7.restart-1", "run-7.restart-1"));
  EXPECT_FALSE(IsEarlierAttempt("run-6", "run-7.restart-1"));
  EXPECT_FALSE(IsEarlierAttempt("run-7", "run-7.restart-x"));
  EXPECT_FALSE(IsEarlierAttempt("run-7", "run-7.restart-01"));
  EXPECT_EQ(JobIdOfAttempt(launch, 0), launch);
}

TEST(JobId, ComesFromReelThenSlurmAndIsChecked) {
  auto from = [](std::map<std::string, std::string> vars) {
    return JobIdFromEnvironment([vars = std::move(vars)](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    });
  };
  EXPECT_EQ(*from({}), "");
  EXPECT_EQ(*from({{"SLURM_JOB_ID", "1234"}}), "1234");
  EXPECT_EQ(*from({{"SLURM_JOB_ID", "1234"}, {"SLURM_STEP_ID", "0"}}), "1234.0");
  EXPECT_EQ(*from({{"SLURM_JOBID", "7"}, {"SLURM_STEPID", "2"}}), "7.2");
  EXPECT_EQ(*from({{"REEL_JOB_ID", "mine"}, {"SLURM_JOB_ID", "1234"}}), "mine");
  for (const std::string& bad :
       {std::string("two words"), std::string(65, 'x'), std::string("tab\there")}) {
    Result<std::string> id = from({{"REEL_JOB_ID", bad}});
    EXPECT_EQ(id.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(id.status().message(), HasSubstr("REEL_JOB_ID=\"" + bad + "\" is not a job"));
  }
  Result<Options> parsed = ParseOptions(TcpOptionSchema(), {{"job_id", "a b"}});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_THAT(TcpOptionsFrom(*parsed).status().message(),
              HasSubstr("tcp option 'job_id'=\"a b\" is not a job identity"));
}

// Ranks whose AllReduce would run differently cannot form a group: both fail at once, naming the
// option, both values and both ranks.
TEST(TcpOptionsAgreement, RanksWithDifferentLayoutsAreRefusedNamingBothValuesAndRanks) {
  TcpOptions hierarchical = TestOptions(), flat = TestOptions(), small = TestOptions();
  hierarchical.allreduce_layout = TcpOptions::Layout::kHierarchical;
  flat.allreduce_layout = TcpOptions::Layout::kFlat;
  small.allreduce_layout = TcpOptions::Layout::kHierarchical;
  small.allreduce_small_bytes = 0;
  struct Case {
    TcpOptions rank1;
    std::string why;
  };
  for (const Case& c :
       {Case{flat,
             "tcp option 'allreduce_layout' is 'flat' on rank 1 but 'hierarchical' on rank 0"},
        Case{small, "tcp option 'allreduce_small_bytes' is '0' on rank 1 but '65536' on rank 0"}}) {
    const std::string coordinator = FreeCoordinator();
    auto t0 = MakeTcpTransport(hierarchical);
    auto t1 = MakeTcpTransport(c.rank1);
    ConnectingRank rank0(*t0, {0, 2, coordinator}, DeadlineIn(60s));
    Result<std::unique_ptr<Communicator>> rank1 = t1->Connect({1, 2, coordinator}, DeadlineIn(60s));
    rank0.thread.join();
    for (const auto* r : {&rank0.result, &rank1}) {
      EXPECT_EQ(r->status().code(), StatusCode::kFailedPrecondition) << r->status();
      EXPECT_THAT(r->status().message(), HasSubstr(c.why));
    }
  }
  EXPECT_EQ(OptionsDisagreement("a=1;b=2", 0, "a=1;b=2", 1), "");
  EXPECT_EQ(OptionsDisagreement("a=1", 0, "a=1;c=3", 4),
            "tcp option 'c' is '3' on rank 4 but '(not known)' on rank 0 (it must be the same on "
            "every rank)");
}

}  // namespace
}  // namespace reel::tcp::testing
