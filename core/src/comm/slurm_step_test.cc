// A task that srun started is placed from Slurm's variables: rank, coordinator on the step's
// first host, transport, the tasks sharing its cores; REEL_* variables win; a broken or
// inconsistent environment, rank 0 off the first host, or a multi-node tcp step without a secret,
// is refused naming the variable.
#include "reel/core/slurm_step.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "comm/fake_environment.h"
#include "train/thread_budget.h"

namespace reel::core {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Pair;
using Vars = std::map<std::string, std::string>;

// Rank 3 of 8 as srun -N3 -n8 sets it: 3 + 3 + 2 tasks, rank 3 the first on node02.
Vars Srun() {
  return {{"SLURM_JOB_ID", "12"},
          {"SLURM_STEP_ID", "0"},
          {"SLURM_PROCID", "3"},
          {"SLURM_NTASKS", "8"},
          {"SLURM_LOCALID", "0"},
          {"SLURM_NODEID", "1"},
          {"SLURM_STEP_NODELIST", "node[01-03]"},
          {"SLURM_TASKS_PER_NODE", "3(x2),2"},
          {"REEL_SECRET", "s"}};
}

Vars With(Vars vars, const Vars& changes) {
  for (const auto& [k, v] : changes) vars[k] = v;
  return vars;
}

SlurmStep Step(const Vars& vars, int cores = 4) {
  auto step = SlurmStepFromEnvironment(testing::FakeEnvironment(vars), cores);
  EXPECT_TRUE(step.ok()) << step.status();
  EXPECT_TRUE(step.ok() && step->has_value());
  return step.ok() && step->has_value() ? **step : SlurmStep{};
}

const int kPort = kSlurmPortBase + 12 * kSlurmPortsPerJob;

TEST(SlurmStep, NotStartedBySrunIsNoStep) {
  auto step = SlurmStepFromEnvironment(testing::FakeEnvironment({}), 4);
  ASSERT_TRUE(step.ok());
  EXPECT_FALSE(step->has_value());
  // The batch script: a job but no step.
  Vars batch = Srun();
  batch.erase("SLURM_STEP_ID");
  step = SlurmStepFromEnvironment(testing::FakeEnvironment(batch), 4);
  ASSERT_TRUE(step.ok());
  EXPECT_FALSE(step->has_value());
}

TEST(SlurmStep, PlacesTheTaskAsReelLaunchWould) {
  SlurmStep s = Step(Srun());
  EXPECT_EQ(s.rank, 3);
  EXPECT_EQ(s.world_size, 8);
  EXPECT_EQ(s.local_rank, 0);
  EXPECT_EQ(s.local_tasks, 3);
  EXPECT_EQ(s.nodes, 3);
  EXPECT_EQ(s.transport, "tcp");
  EXPECT_EQ(s.coordinator, "node01:" + std::to_string(kPort));
  EXPECT_THAT(s.variables, Contains(Pair("REEL_RANK", "3")));
  EXPECT_THAT(s.variables, Contains(Pair("REEL_WORLD_SIZE", "8")));
  EXPECT_THAT(s.variables, Contains(Pair("REEL_COORDINATOR", s.coordinator)));
  EXPECT_THAT(s.variables, Contains(Pair("REEL_TRANSPORT", "tcp")));
  EXPECT_THAT(s.variables, Contains(Pair("REEL_LOCAL_RANK", "0")));
  EXPECT_THAT(s.variables, Contains(Pair("REEL_NODE_RANK", "1")));
  EXPECT_THAT(s.variables, Contains(Pair("REEL_LOCAL_WORLD_SIZE", "3")));
  EXPECT_EQ(s.Describe(),
            "started by srun (job 12, step 0): rank 3 of 8, transport tcp, "
            "coordinator node01:" +
                std::to_string(kPort));
}

TEST(SlurmStep, StepVariablesWinOverTheJobs) {
  // A step of 2 tasks on node02 and node03 inside a job of 8 on three nodes.
  SlurmStep s = Step(With(Srun(), {{"SLURM_STEP_NUM_TASKS", "2"},
                                   {"SLURM_PROCID", "1"},
                                   {"SLURM_LOCALID", "0"},
                                   {"SLURM_NODEID", "1"},
                                   {"SLURM_STEP_NODELIST", "node[02-03]"},
                                   {"SLURM_STEP_TASKS_PER_NODE", "1(x2)"}}));
  EXPECT_EQ(s.world_size, 2);
  EXPECT_EQ(s.local_tasks, 1);
  EXPECT_EQ(s.coordinator, "node02:" + std::to_string(kPort));
}

TEST(SlurmStep, PortsDifferBetweenStepsAndJobsAndReservedPortsWin) {
  EXPECT_NE(Step(With(Srun(), {{"SLURM_STEP_ID", "1"}})).coordinator, Step(Srun()).coordinator);
  EXPECT_NE(Step(With(Srun(), {{"SLURM_JOB_ID", "13"}})).coordinator, Step(Srun()).coordinator);
  const std::string c = Step(With(Srun(), {{"SLURM_JOB_ID", "4000000"}})).coordinator;
  const int port = std::stoi(c.substr(c.find(':') + 1));
  EXPECT_GE(port, kSlurmPortBase);
  EXPECT_LT(port, kSlurmPortBase + kSlurmPortSpan);
  EXPECT_EQ(Step(With(Srun(), {{"SLURM_STEP_RESV_PORTS", "12000-12003"}})).coordinator,
            "node01:12000");
}

// Job ids 625 apart met on one port (job * 64 + step mod 20000): 1000, 1625 and 2250 all on
// 14000. Now any two jobs fewer than 5000 apart, in any of their first four steps, differ.
TEST(SlurmStep, JobsCloseInIdNeverShareAFallbackPort) {
  std::map<int, std::pair<long long, long long>> taken;
  for (long long job = 1000; job < 6000; ++job)
    for (long long step = 0; step < kSlurmPortsPerJob; ++step) {
      const int port = SlurmFallbackPort(job, step);
      ASSERT_GE(port, kSlurmPortBase);
      ASSERT_LT(port, kSlurmPortBase + kSlurmPortSpan);
      const auto [it, fresh] = taken.emplace(port, std::pair{job, step});
      ASSERT_TRUE(fresh) << "job " << job << " step " << step << " and job " << it->second.first
                         << " step " << it->second.second << " both take port " << port;
    }
  EXPECT_EQ(SlurmFallbackPort(1000, 0), SlurmFallbackPort(6000, 0));  // the price, documented
}

TEST(SlurmStep, ReelVariablesWin) {
  SlurmStep s = Step(With(Srun(), {{"REEL_COORDINATOR", "10.0.0.1:29500"},
                                   {"REEL_TRANSPORT", "tcp2"},
                                   {"REEL_LOCAL_WORLD_SIZE", "1"}}));
  EXPECT_EQ(s.coordinator, "10.0.0.1:29500");
  EXPECT_EQ(s.transport, "tcp2");
  for (const char* name : {"REEL_COORDINATOR", "REEL_TRANSPORT", "REEL_LOCAL_WORLD_SIZE"})
    EXPECT_THAT(s.variables, Not(Contains(Pair(name, ::testing::_)))) << name;
  // Placed by another launcher (srun reel launch ...): Slurm's variables are not read.
  auto step = SlurmStepFromEnvironment(
      testing::FakeEnvironment(With(Srun(), {{"REEL_RANK", "0"}, {"SLURM_PROCID", "x"}})), 4);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_FALSE(step->has_value());
}

TEST(SlurmStep, PmixOrAnMpiLauncherMeansMpiWhichPlacesTheRanks) {
  SlurmStep s = Step(With(Srun(), {{"PMIX_RANK", "3"}}));
  EXPECT_EQ(s.transport, "mpi");
  EXPECT_EQ(s.coordinator, "");
  EXPECT_THAT(s.variables, Not(Contains(Pair("REEL_RANK", ::testing::_))));
  EXPECT_THAT(s.Describe(), HasSubstr("rank 3 of 8, transport mpi"));
  // No secret needed: tcp is not used.
  Vars no_secret = With(Srun(), {{"PMI_RANK", "3"}});
  no_secret.erase("REEL_SECRET");
  EXPECT_EQ(Step(no_secret).transport, "mpi");
}

TEST(SlurmStep, MpirunInsideABatchJobPlacesItsRanksItself) {
  // Open MPI's mpirun: the step's variables are those of its daemons, one per node.
  auto step = SlurmStepFromEnvironment(
      testing::FakeEnvironment(With(Srun(), {{"OMPI_COMM_WORLD_RANK", "3"}})), 4);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_FALSE(step->has_value());
  // Another launcher whose rank is not SLURM_PROCID (MPICH's mpiexec through srun).
  step = SlurmStepFromEnvironment(
      testing::FakeEnvironment(With(Srun(), {{"PMI_RANK", "5"}, {"SLURM_PROCID", "1"}})), 4);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_FALSE(step->has_value());
}

TEST(SlurmStep, OneTaskRunsAlone) {
  SlurmStep s = Step(With(Srun(), {{"SLURM_PROCID", "0"},
                                   {"SLURM_NTASKS", "1"},
                                   {"SLURM_NODEID", "0"},
                                   {"SLURM_STEP_NODELIST", "node01"},
                                   {"SLURM_TASKS_PER_NODE", "1"}}));
  EXPECT_EQ(s.transport, "");
  EXPECT_THAT(s.variables, Not(Contains(Pair("REEL_RANK", ::testing::_))));
  EXPECT_EQ(s.Describe(), "started by srun (job 12, step 0): rank 0 of 1, alone");
}

TEST(SlurmStep, TasksShareTheCoresSlurmDidNotBindApart) {
  // Not bound: this task's mask holds the node's 8 allocated CPUs, shared by its 3 tasks.
  EXPECT_THAT(Step(With(Srun(), {{"SLURM_CPUS_ON_NODE", "8"}}), 8).variables,
              Contains(Pair("REEL_LOCAL_WORLD_SIZE", "3")));
  // --cpus-per-task=2, bound: 2 of the 6 allocated CPUs are this task's alone.
  EXPECT_THAT(
      Step(With(Srun(), {{"SLURM_CPUS_ON_NODE", "6"}, {"SLURM_CPUS_PER_TASK", "2"}}), 2).variables,
      Contains(Pair("REEL_LOCAL_WORLD_SIZE", "1")));
  // A mask larger than the allocation (no cgroup, no binding): every task of the node shares it.
  EXPECT_THAT(Step(With(Srun(), {{"SLURM_CPUS_ON_NODE", "2"}}), 16).variables,
              Contains(Pair("REEL_LOCAL_WORLD_SIZE", "3")));
}

// The CPUs each rank computes on, as `reel` says after "started by srun": the thread budget
// (train/thread_budget.h) over the environment the placement exports.
int CpusPerRank(const Vars& vars, int cores) {
  auto step = SlurmStepFromEnvironment(testing::FakeEnvironment(vars), cores);
  EXPECT_TRUE(step.ok() && step->has_value());
  Vars placed = vars;
  if (step.ok() && step->has_value())
    for (const auto& [name, value] : (*step)->variables) placed.emplace(name, value);
  auto budget = ThreadsPerRank(testing::FakeEnvironment(placed), 1, cores, cores);
  EXPECT_TRUE(budget.ok()) << budget.status();
  return budget.ok() && budget->threads > 0 ? budget->threads : cores;
}

TEST(SlurmStep, SaysTheCpusEachRankComputesOn) {
  // --cpus-per-task=4, bound: the task's 4 CPUs are its own.
  EXPECT_EQ(CpusPerRank(With(Srun(), {{"SLURM_CPUS_ON_NODE", "12"}}), 4), 4);
  // Not bound: the node's 3 tasks divide its 12.
  EXPECT_EQ(CpusPerRank(With(Srun(), {{"SLURM_CPUS_ON_NODE", "12"}}), 12), 4);
  // The user's REEL_LOCAL_WORLD_SIZE, as the thread budget divides by it.
  EXPECT_EQ(
      CpusPerRank(With(Srun(), {{"SLURM_CPUS_ON_NODE", "12"}, {"REEL_LOCAL_WORLD_SIZE", "6"}}), 12),
      2);
  // The placement of PlacesTheTaskAsReelLaunchWould: 3 tasks on 4 cores.
  EXPECT_EQ(CpusPerRank(Srun(), 4), 1);
}

void ExpectRefused(const Vars& vars, const std::string& text) {
  auto step = SlurmStepFromEnvironment(testing::FakeEnvironment(vars), 4);
  ASSERT_FALSE(step.ok()) << text;
  EXPECT_EQ(step.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(step.status().message(), HasSubstr(text));
}

Vars Without(Vars vars, const std::string& name) {
  vars.erase(name);
  return vars;
}

TEST(SlurmStep, MissingVariablesAreNamed) {
  for (const char* name : {"SLURM_JOB_ID", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
                           "SLURM_NODEID", "SLURM_STEP_NODELIST", "SLURM_TASKS_PER_NODE"}) {
    ExpectRefused(Without(Srun(), name), std::string(name));
    ExpectRefused(Without(Srun(), name), "is not set");
  }
  ExpectRefused(With(Srun(), {{"SLURM_PROCID", ""}}), "SLURM_PROCID is not set");
}

TEST(SlurmStep, MalformedVariablesAreNamed) {
  ExpectRefused(With(Srun(), {{"SLURM_PROCID", "three"}}), "SLURM_PROCID=\"three\"");
  ExpectRefused(With(Srun(), {{"SLURM_NTASKS", "-8"}}), "SLURM_NTASKS=\"-8\"");
  ExpectRefused(With(Srun(), {{"SLURM_JOB_ID", "12a"}}), "SLURM_JOB_ID=\"12a\"");
  ExpectRefused(With(Srun(), {{"SLURM_STEP_NODELIST", "node[01-03"}}), "SLURM_STEP_NODELIST:");
  ExpectRefused(With(Srun(), {{"SLURM_TASKS_PER_NODE", "3(x2"}}), "SLURM_TASKS_PER_NODE:");
  ExpectRefused(With(Srun(), {{"SLURM_STEP_RESV_PORTS", "none"}}), "SLURM_STEP_RESV_PORTS");
  ExpectRefused(With(Srun(), {{"SLURM_CPUS_ON_NODE", "x"}}), "SLURM_CPUS_ON_NODE");
}

TEST(SlurmStep, InconsistentVariablesAreNamed) {
  ExpectRefused(With(Srun(), {{"SLURM_PROCID", "8"}}),
                "SLURM_PROCID=8 is outside the step's SLURM_NTASKS=8");
  ExpectRefused(With(Srun(), {{"SLURM_NTASKS", "0"}}), "SLURM_NTASKS=0: no tasks");
  ExpectRefused(With(Srun(), {{"SLURM_NTASKS", "9"}}), "adds up to 8 tasks, not SLURM_NTASKS=9");
  ExpectRefused(With(Srun(), {{"SLURM_TASKS_PER_NODE", "4(x2)"}}), "names 3");
  ExpectRefused(With(Srun(), {{"SLURM_NODEID", "3"}}), "SLURM_NODEID=3 is outside");
  ExpectRefused(With(Srun(), {{"SLURM_LOCALID", "3"}}), "SLURM_LOCALID=3 is outside node 1's 3");
}

TEST(SlurmStep, SeveralNodesOverTcpNeedASecret) {
  ExpectRefused(Without(Srun(), "REEL_SECRET"), "export REEL_SECRET=$(openssl rand -hex 32)");
  ExpectRefused(With(Srun(), {{"REEL_SECRET", ""}}), "REEL_SECRET is not set");
  // One node: loopback, which the tcp transport accepts without a secret.
  SlurmStep one = Step(Without(With(Srun(), {{"SLURM_PROCID", "1"},
                                             {"SLURM_LOCALID", "1"},
                                             {"SLURM_NODEID", "0"},
                                             {"SLURM_NTASKS", "2"},
                                             {"SLURM_STEP_NODELIST", "node01"},
                                             {"SLURM_TASKS_PER_NODE", "2"}}),
                               "REEL_SECRET"));
  EXPECT_EQ(one.coordinator, "127.0.0.1:" + std::to_string(kPort));
}

// srun -N2 -n3 -m arbitrary -w node02,node01,node02: rank 0 and 2 on node02 (SLURM_NODEID=1),
// rank 1 on node01, which heads the (sorted) node list where the ranks would look for rank 0.
Vars Arbitrary(const Vars& task) {
  return With(Srun(), With({{"SLURM_NTASKS", "3"},
                            {"SLURM_STEP_NODELIST", "node[01-02]"},
                            {"SLURM_TASKS_PER_NODE", "1,2"},
                            {"SLURM_DISTRIBUTION", "arbitrary"}},
                           task));
}

TEST(SlurmStep, RankZeroOffTheFirstNodeIsRefusedWhereItCanBeSeen) {
  // Rank 0 itself, and rank 2 beside it.
  for (const char* rank : {"0", "2"})
    ExpectRefused(Arbitrary({{"SLURM_PROCID", rank},
                             {"SLURM_NODEID", "1"},
                             {"SLURM_LOCALID", rank[0] == '0' ? "0" : "1"},
                             {"SLURM_GTIDS", "0,2"}}),
                  "the ranks of this step meet rank 0 on node01, the first host of "
                  "SLURM_STEP_NODELIST=node[01-02], but SLURM_DISTRIBUTION=arbitrary placed it "
                  "on node02 (SLURM_NODEID=1, SLURM_GTIDS=0,2): start rank 0 on node01, or set "
                  "REEL_COORDINATOR=");
  // Rank 1, on the first node, without rank 0.
  ExpectRefused(Arbitrary({{"SLURM_PROCID", "1"},
                           {"SLURM_NODEID", "0"},
                           {"SLURM_LOCALID", "0"},
                           {"SLURM_GTIDS", "1"}}),
                "placed it elsewhere (this node's tasks are SLURM_GTIDS=1)");
  // A coordinator the user named is where rank 0 is.
  EXPECT_EQ(Step(Arbitrary({{"SLURM_PROCID", "0"},
                            {"SLURM_NODEID", "1"},
                            {"SLURM_LOCALID", "0"},
                            {"SLURM_GTIDS", "0,2"},
                            {"REEL_COORDINATOR", "node02:29500"}}))
                .coordinator,
            "node02:29500");
  // The usual placement: rank 0 among node01's tasks (10 is not 0).
  EXPECT_EQ(
      Step(With(Srun(), {{"SLURM_PROCID", "0"}, {"SLURM_NODEID", "0"}, {"SLURM_GTIDS", "10,0,1"}}))
          .rank,
      0);
  EXPECT_EQ(Step(With(Srun(), {{"SLURM_GTIDS", "3,4,10"}})).rank, 3);
  ExpectRefused(With(Srun(), {{"SLURM_GTIDS", "3,0"}}), "placed it on node02");
}

}  // namespace
}  // namespace reel::core
