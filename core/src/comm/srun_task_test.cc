// The placement the command exports and Python's reel.train passes to its job is one: the step's
// REEL_* variables over the process's environment (set ones win), and the line saying where.
#include "reel/core/srun_task.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "comm/fake_environment.h"

namespace reel::core {
namespace {

using ::testing::HasSubstr;

std::map<std::string, std::string> TwoTasks(int rank) {
  return {{"SLURM_JOB_ID", "7"},
          {"SLURM_STEP_ID", "0"},
          {"SLURM_PROCID", std::to_string(rank)},
          {"SLURM_NTASKS", "2"},
          {"SLURM_LOCALID", std::to_string(rank)},
          {"SLURM_NODEID", "0"},
          {"SLURM_STEP_NODELIST", "node01"},
          {"SLURM_STEP_TASKS_PER_NODE", "2"},
          {"SLURM_STEP_RESV_PORTS", "12345-12346"},
          {"HOME", "/home/u"}};
}

std::string Get(const GetEnv& env, const char* name) {
  const char* v = env(name);
  return v == nullptr ? "<unset>" : v;
}

TEST(SrunTask, NoStepNoTask) {
  auto task = SrunTaskFromEnvironment(testing::FakeEnvironment({{"HOME", "/"}}), 4, 4);
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_FALSE(task->has_value());
}

TEST(SrunTask, TheEnvironmentAddsTheStepsVariablesToTheProcesss) {
  auto task = SrunTaskFromEnvironment(testing::FakeEnvironment(TwoTasks(1)), 4, 4);
  ASSERT_TRUE(task.ok()) << task.status();
  ASSERT_TRUE(task->has_value());
  const GetEnv& env = (*task)->env;
  EXPECT_EQ(Get(env, "REEL_RANK"), "1");
  EXPECT_EQ(Get(env, "REEL_WORLD_SIZE"), "2");
  EXPECT_EQ(Get(env, "REEL_COORDINATOR"), "127.0.0.1:12345");
  EXPECT_EQ(Get(env, "REEL_TRANSPORT"), "tcp");
  EXPECT_EQ(Get(env, "REEL_LOCAL_WORLD_SIZE"), "2");
  EXPECT_EQ(Get(env, "HOME"), "/home/u");
  EXPECT_EQ(Get(env, "REEL_NO_SUCH"), "<unset>");
  // Two tasks share 4 cores: 2 CPUs each.
  EXPECT_EQ((*task)->line,
            "started by srun (job 7, step 0): rank 1 of 2, transport tcp, coordinator "
            "127.0.0.1:12345, 2 CPUs");
}

TEST(SrunTask, AVariableTheUserSetKeepsItsValue) {
  auto vars = TwoTasks(0);
  vars["REEL_TRANSPORT"] = "inproc";
  auto task = SrunTaskFromEnvironment(testing::FakeEnvironment(vars), 4, 4);
  ASSERT_TRUE(task.ok()) << task.status();
  ASSERT_TRUE(task->has_value());
  EXPECT_EQ(Get((*task)->env, "REEL_TRANSPORT"), "inproc");
  EXPECT_THAT((*task)->line, HasSubstr("transport inproc"));
}

TEST(SrunTask, AnInconsistentStepIsRefusedNamingTheVariable) {
  auto vars = TwoTasks(0);
  vars["SLURM_STEP_TASKS_PER_NODE"] = "3";
  auto task = SrunTaskFromEnvironment(testing::FakeEnvironment(vars), 4, 4);
  ASSERT_FALSE(task.ok());
  EXPECT_EQ(task.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(task.status().message()), HasSubstr("SLURM_STEP_TASKS_PER_NODE"));
}

}  // namespace
}  // namespace reel::core
