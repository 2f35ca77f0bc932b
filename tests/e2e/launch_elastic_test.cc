// `reel launch --nnodes MIN:MAX` (docs/distributed.md, "Restarts"): launchers on loopback, each
// a separate process standing for a node, meet at the rendezvous the --coordinator node's launcher
// serves. A node lost with its launcher leaves the others to re-form at the size left and train
// every example of the epoch once; a node started later joins at the next round; fewer than MIN
// ends the launch naming who joined; strangers at the rendezvous port stop nothing; bad sizes are
// refused before anything starts.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "e2e_util.h"
#include "launch_util.h"

namespace reel::e2e {
namespace {

namespace fs = std::filesystem;

// Waits (generously; not a timing assertion) until `path` exists.
bool WaitForPath(const std::string& path) {
  for (int i = 0; i < 3000; ++i) {
    if (fs::exists(path)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// Waits (generously) until `launch`'s stderr holds `text`.
bool WaitForSaid(const Background& launch, const std::string& text) {
  for (int i = 0; i < 3000; ++i) {
    if (launch.err().find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// A connection to 127.0.0.1:port, -1 if none.
int ConnectTo(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Launchers of one job on this machine: the same secret and job identity, the rendezvous at a
// free loopback port; node 0 is started first and serves it.
class Nodes {
 public:
  Nodes(std::string dir, std::vector<std::string> flags)
      : dir_(std::move(dir)), port_(FreeLoopbackPort()), flags_(std::move(flags)) {}
  int port() const { return port_; }
  std::string coordinator() const { return "127.0.0.1:" + std::to_string(port_); }

  // Starts node `k` (output in dir/nodeK) running `script` under `sh -c`; node 0 is waited for
  // until it serves the rendezvous.
  Background& Start(int k, const std::string& script, const std::string& job_id = "elastic-test",
                    const std::string& secret = "elastic-test-secret") {
    const std::string out = dir_ + "/node" + std::to_string(k);
    fs::create_directories(out);
    std::vector<std::string> args = {"launch", "-n", "1", "--coordinator", coordinator()};
    args.insert(args.end(), flags_.begin(), flags_.end());
    args.insert(args.end(), {"--", "sh", "-c", script});
    ::setenv("REEL_SECRET", secret.c_str(), 1);
    ::setenv("REEL_JOB_ID", job_id.c_str(), 1);
    nodes_.push_back(std::make_unique<Background>(out, args));
    ::unsetenv("REEL_SECRET");
    ::unsetenv("REEL_JOB_ID");
    Background& b = *nodes_.back();
    if (k == 0) EXPECT_TRUE(WaitForSaid(b, "reel launch: serving the rendezvous at ")) << b.err();
    return b;
  }

 private:
  std::string dir_;
  int port_;
  std::vector<std::string> flags_;
  std::vector<std::unique_ptr<Background>> nodes_;
};

TEST(LaunchElasticTest, BadSizesAreRefusedBeforeAnythingStarts) {
  const std::string marker = ScratchDir("launch_elastic_bad") + "/started";
  const std::string c = "127.0.0.1:" + std::to_string(FreeLoopbackPort());
  struct Case {
    std::vector<std::string> flags;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"--nnodes", "3:2", "--coordinator", c},
       "flag '--nnodes': '3:2' is not MIN:MAX with 1 <= MIN <= MAX <= 65536"},
      {{"--nnodes", "0:2", "--coordinator", c},
       "flag '--nnodes': '0:2' is not MIN:MAX with 1 <= MIN <= MAX <= 65536"},
      {{"--nnodes", "a:b", "--coordinator", c},
       "flag '--nnodes': 'a:b' is not MIN:MAX with 1 <= MIN <= MAX <= 65536"},
      {{"--nnodes", "2:", "--coordinator", c},
       "flag '--nnodes': '2:' is not MIN:MAX with 1 <= MIN <= MAX <= 65536"},
      {{"--nnodes", "2:3", "--node-rank", "0", "--coordinator", c},
       "flag '--node-rank' does not go with --nnodes 2:3: the rendezvous gives each node its "
       "node rank"},
      {{"--nnodes", "2:3"},
       "flag '--coordinator' (HOST:PORT of the node whose launcher serves "
       "the rendezvous) is required with --nnodes 2:3"},
      {{"--nnodes", "2", "--node-rank", "0", "--coordinator", c, "--rdzv-timeout-seconds", "5"},
       "flag '--rdzv-timeout-seconds' goes with --nnodes MIN:MAX only"},
      {{"--nnodes", "2:3", "--coordinator", c, "--rdzv-last-call-seconds", "-1"},
       "flag '--rdzv-last-call-seconds': '-1' is not a number of seconds in 0..86400"},
  };
  ::setenv("REEL_SECRET", "s", 1);
  ::setenv("REEL_JOB_ID", "elastic-bad", 1);
  for (const Case& k : cases) {
    std::vector<std::string> args = {"launch", "-n", "1"};
    args.insert(args.end(), k.flags.begin(), k.flags.end());
    args.insert(args.end(), {"--", "touch", marker});
    RunResult r = Reel(args);
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_NE(r.err.find(k.says), std::string::npos) << r.err;
  }
  ::unsetenv("REEL_SECRET");
  RunResult r =
      Reel({"launch", "-n", "1", "--nnodes", "1:2", "--coordinator", c, "--", "touch", marker});
  ::unsetenv("REEL_JOB_ID");
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("REEL_SECRET is not set: the rendezvous of --nnodes 1:2 admits the nodes "
                       "that hold it"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(marker)) << "a rank was started";
}

// One node of --nnodes 2:3: the round stays below MIN; after the timeout the launch ends (75, a
// scheduler may requeue it) naming the node that joined, and starts no rank.
TEST(LaunchElasticTest, FewerThanMinEndsAfterTheTimeoutNamingWhoJoined) {
  const std::string dir = ScratchDir("launch_elastic_min");
  Nodes nodes(dir, {"--nnodes", "2:3", "--rdzv-timeout-seconds", "1"});
  Background& node0 = nodes.Start(0, "touch " + dir + "/started");
  const std::optional<int> code = node0.WaitAtMost(std::chrono::seconds(120));
  ASSERT_TRUE(code.has_value()) << node0.err();
  EXPECT_EQ(*code, 75) << node0.err();
  const std::string err = node0.err();
  EXPECT_NE(err.find("reel launch: UNAVAILABLE: rendezvous round 0: 1 node(s) joined within 1 s "
                     "(--rdzv-timeout-seconds), fewer than the 2 --nnodes 2:3 needs; joined: "),
            std::string::npos)
      << err;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  EXPECT_NE(err.find("; joined: " + std::string(host) + ":"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(dir + "/started")) << err;
  fs::remove_all(dir);
}

// While node 0 waits for a second node: a silent connection, one of random bytes, one announcing
// a frame far over the limit, a node with another secret and one of another job. The strangers
// are turned away (the two nodes refused, saying why); the real second node joins and both ranks
// run in a world of 2.
TEST(LaunchElasticTest, StrangersAtTheRendezvousStopNothing) {
  const std::string dir = ScratchDir("launch_elastic_strangers");
  Nodes nodes(dir, {"--nnodes", "2:2", "--rdzv-timeout-seconds", "120"});
  const std::string script = "echo rank $REEL_RANK of $REEL_WORLD_SIZE round $REEL_RESTART_COUNT";
  Background& node0 = nodes.Start(0, script);
  const int silent = ConnectTo(nodes.port());
  ASSERT_GE(silent, 0);
  const int noise = ConnectTo(nodes.port());
  ASSERT_GE(noise, 0);
  std::string junk(8192, '\0');
  for (size_t i = 0; i < junk.size(); ++i) junk[i] = static_cast<char>((i * 7919 + 13) % 251);
  EXPECT_GT(::send(noise, junk.data(), junk.size(), MSG_NOSIGNAL), 0);
  const int huge = ConnectTo(nodes.port());
  ASSERT_GE(huge, 0);
  const char too_long[] = {'\xff', '\xff', '\xff', '\x7f', 2};
  EXPECT_GT(::send(huge, too_long, sizeof too_long, MSG_NOSIGNAL), 0);
  Background& wrong_secret = nodes.Start(1, "touch " + dir + "/wrong", "elastic-test", "other");
  Background& other_job = nodes.Start(2, "touch " + dir + "/wrong", "another-job");
  EXPECT_EQ(wrong_secret.WaitAtMost(std::chrono::seconds(120)).value_or(-1), 1)
      << wrong_secret.err();
  EXPECT_NE(wrong_secret.err().find("refused this node: not admitted: no proof of this job's "
                                    "REEL_SECRET"),
            std::string::npos)
      << wrong_secret.err();
  EXPECT_EQ(other_job.WaitAtMost(std::chrono::seconds(120)).value_or(-1), 1) << other_job.err();
  EXPECT_NE(other_job.err().find("refused this node: this rendezvous is job elastic-test's, not "
                                 "another-job's"),
            std::string::npos)
      << other_job.err();
  Background& node1 = nodes.Start(3, script);
  EXPECT_EQ(node0.WaitAtMost(std::chrono::seconds(120)).value_or(-1), 0) << node0.err();
  EXPECT_EQ(node1.WaitAtMost(std::chrono::seconds(120)).value_or(-1), 0) << node1.err();
  EXPECT_EQ(node0.out(), "[rank 0] rank 0 of 2 round 0\n") << node0.err();
  EXPECT_EQ(node1.out(), "[rank 1] rank 1 of 2 round 0\n") << node1.err();
  EXPECT_FALSE(fs::exists(dir + "/wrong"));
  for (int fd : {silent, noise, huge}) ::close(fd);
  fs::remove_all(dir);
}

// Node rank 1's rank fails (exit 75, as a rank that lost a peer) in every round of --nnodes 2:2
// under --max-restarts 1: round 1 is the one restart; the failure in it ends the job on both
// nodes, naming every failure by round, and no round 2 starts.
TEST(LaunchElasticTest, AFailureAfterTheLastRestartEndsTheJobOnEveryNode) {
  const std::string dir = ScratchDir("launch_elastic_spent");
  Nodes nodes(dir, {"--nnodes", "2:2", "--max-restarts", "1", "--rdzv-timeout-seconds", "120"});
  const std::string script =
      "echo round $REEL_RESTART_COUNT; if [ $REEL_NODE_RANK = 1 ]; then exit 75; fi; "
      "exec sleep 600";
  Background& node0 = nodes.Start(0, script);
  Background& node1 = nodes.Start(1, script);
  for (Background* b : {&node0, &node1}) {
    EXPECT_EQ(b->WaitAtMost(std::chrono::seconds(120)).value_or(-1), 75) << b->err();
    const std::string err = b->err();
    EXPECT_NE(err.find("reel launch: round 1 (1 restart(s)): node rank "), std::string::npos)
        << err;
    EXPECT_NE(err.find(": rank 1 exited with status 75 after 1 restart(s), the most "
                       "--max-restarts allows; every failure: round 0: node "),
              std::string::npos)
        << err;
    EXPECT_EQ(err.find("round 2"), std::string::npos) << err;
  }
  EXPECT_EQ(node1.out(), "[rank 1] round 0\n[rank 1] round 1\n") << node1.err();
  fs::remove_all(dir);
}

// The coordinator node's launcher SIGKILLed (its rank goes with it) while node 1's rank runs:
// node 1's rank then fails as a rank that lost a peer does, and its launcher, which can join no
// round any more, ends naming the lost rendezvous, with the rank's status.
TEST(LaunchElasticTest, ALostCoordinatorNodeEndsTheOthersWhenTheyNeedARound) {
  const std::string dir = ScratchDir("launch_elastic_coordinator");
  Nodes nodes(dir, {"--nnodes", "1:2", "--max-restarts", "3", "--rdzv-last-call-seconds", "30",
                    "--rdzv-timeout-seconds", "120"});
  const std::string script = "echo $PPID > " + dir + "/launcher.$REEL_NODE_RANK; while [ ! -e " +
                             dir + "/gone ]; do sleep 0.05; done; exit 75";
  nodes.Start(0, script);
  Background& node1 = nodes.Start(1, script);
  ASSERT_TRUE(WaitForPath(dir + "/launcher.0") && WaitForPath(dir + "/launcher.1"));
  ASSERT_EQ(::kill(std::stoi(ReadFile(dir + "/launcher.0")), SIGKILL), 0);
  WriteFile(dir + "/gone", "");
  EXPECT_EQ(node1.WaitAtMost(std::chrono::seconds(120)).value_or(-1), 75) << node1.err();
  EXPECT_NE(node1.err().find("reel launch: UNAVAILABLE: the rendezvous at " + nodes.coordinator() +
                             " is lost"),
            std::string::npos)
      << node1.err();
  fs::remove_all(dir);
}

// Round 0 runs on three nodes of --nnodes 2:3; node rank 2's launcher is stopped (SIGSTOP), then
// node rank 1's rank fails (exit 75): round 1 opens, node 0 joins it, and the stopped launcher,
// still connected, cannot. The round waits for it until --rdzv-timeout-seconds, no longer, then
// forms with the two, naming it. Continued (SIGCONT), it stops its rank of round 0 and asks to
// join: round 2 opens (not a restart: --max-restarts 1 is spent by the failure), and all three
// end well in it.
TEST(LaunchElasticTest, AStoppedLauncherIsLeftOutAfterTheTimeoutAndJoinsWhenContinued) {
  const std::string dir = ScratchDir("launch_elastic_sigstop");
  const std::string d = "'" + dir + "'";
  Nodes nodes(dir, {"--nnodes", "2:3", "--max-restarts", "1", "--rdzv-timeout-seconds", "10",
                    "--grace-seconds", "10"});
  const std::string script =
      "case $REEL_RESTART_COUNT in 0) echo $PPID > " + d +
      "/launcher.$REEL_NODE_RANK; if [ $REEL_NODE_RANK = 1 ]; then while [ ! -e " + d +
      "/fail ]; do sleep 0.05; done; exit 75; fi; exec sleep 600;; 1) echo round 1 of "
      "$REEL_WORLD_SIZE; exec sleep 600;; *) echo round $REEL_RESTART_COUNT of "
      "$REEL_WORLD_SIZE;; esac";
  std::vector<Background*> launches;
  for (int k = 0; k < 3; ++k) launches.push_back(&nodes.Start(k, script));
  for (int k = 0; k < 3; ++k)
    ASSERT_TRUE(WaitForPath(dir + "/launcher." + std::to_string(k))) << launches[0]->err();
  ASSERT_NE(launches[0]->err().find("reel launch: rendezvous: round 0 formed with 3 node(s)"),
            std::string::npos)
      << launches[0]->err();
  const pid_t stopped = std::stoi(ReadFile(dir + "/launcher.2"));
  ASSERT_EQ(::kill(stopped, SIGSTOP), 0);
  WriteFile(dir + "/fail", "");
  ASSERT_TRUE(launches[0]->WaitForLines(1)) << launches[0]->err();
  EXPECT_EQ(launches[0]->out(), "[rank 0] round 1 of 2\n");
  const std::string err = launches[0]->err();
  EXPECT_NE(err.find("reel launch: rendezvous: round 1 formed with 2 node(s): "), std::string::npos)
      << err;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string node2 = std::string(host) + ":" + std::to_string(stopped);
  EXPECT_NE(err.find(node2 + " of round 0, connected but not joined within 10 s "
                             "(--rdzv-timeout-seconds)"),
            std::string::npos)
      << err;
  ASSERT_EQ(::kill(stopped, SIGCONT), 0);
  for (Background* b : launches) {
    EXPECT_EQ(b->WaitAtMost(std::chrono::seconds(120)).value_or(-1), 0) << b->err();
    EXPECT_NE(b->out().find("] round 2 of 3\n"), std::string::npos) << b->out() << b->err();
  }
  EXPECT_NE(launches[0]->err().find("reel launch: rendezvous: round 2 opens: node "),
            std::string::npos)
      << launches[0]->err();
  EXPECT_NE(launches[0]->err().find(node2 + " asks to join"), std::string::npos)
      << launches[0]->err();
  EXPECT_NE(launches[2]->err().find("reel launch: round 2 (1 restart(s)): node rank "),
            std::string::npos)
      << launches[2]->err();
  fs::remove_all(dir);
}

// A user's Ctrl-C twice, or a scheduler's SIGTERM and then SIGINT, to one launcher of a running
// round: each signal reaches its rank (which stops on the second), no restart, no new round, and
// the launcher exits 130 as every interrupted reel command; the other node's rank runs on and
// its launcher ends well.
TEST(LaunchElasticTest, ASecondInterruptDuringARoundStopsTheRanksAndExits130) {
  const std::string dir = ScratchDir("launch_elastic_interrupt");
  const std::string d = "'" + dir + "'";
  Nodes nodes(dir, {"--nnodes", "1:2", "--max-restarts", "3", "--rdzv-timeout-seconds", "120",
                    "--grace-seconds", "60"});
  const std::string script =
      "echo $PPID > " + d + "/launcher.$REEL_NODE_RANK; echo $$ > " + d +
      "/pid.$REEL_NODE_RANK; if [ $REEL_NODE_RANK = 0 ]; then while [ ! -e " + d +
      "/end ]; do sleep 0.05; done; exit 0; fi; n=0; trap 'n=$((n+1)); echo $n >> " + d +
      "/signals; if [ $n = 2 ]; then exit 130; fi' TERM INT; while :; do sleep 0.05; done";
  Background& node0 = nodes.Start(0, script);
  Background& node1 = nodes.Start(1, script);
  ASSERT_TRUE(WaitForPath(dir + "/launcher.1") && WaitForPath(dir + "/pid.1")) << node1.err();
  const pid_t launcher = std::stoi(ReadFile(dir + "/launcher.1"));
  const pid_t rank = std::stoi(ReadFile(dir + "/pid.1"));
  ASSERT_EQ(::kill(launcher, SIGTERM), 0);
  ASSERT_TRUE(WaitForPath(dir + "/signals")) << node1.err();
  ASSERT_EQ(::kill(launcher, SIGINT), 0);
  EXPECT_EQ(node1.WaitAtMost(std::chrono::seconds(120)).value_or(-1), 130) << node1.err();
  EXPECT_EQ(ReadFile(dir + "/signals"), "1\n2\n");
  EXPECT_NE(::kill(rank, 0), 0) << "rank 1 still runs";
  EXPECT_NE(node1.err().find("interrupted; every rank has finished"), std::string::npos)
      << node1.err();
  EXPECT_EQ(node1.err().find("round 1"), std::string::npos) << node1.err();
  WriteFile(dir + "/end", "");
  EXPECT_EQ(node0.WaitAtMost(std::chrono::seconds(120)).value_or(-1), 0) << node0.err();
  EXPECT_EQ(node0.err().find("round 1 opens"), std::string::npos) << node0.err();
  fs::remove_all(dir);
}

// A launcher interrupted while it waits in the rendezvous ends at once (130) and is not counted:
// the round of --nnodes 3:3 forms with the three nodes that are there.
TEST(LaunchElasticTest, ALauncherInterruptedWhileWaitingIsNotCountedInTheRound) {
  const std::string dir = ScratchDir("launch_elastic_waiting");
  Nodes nodes(dir, {"--nnodes", "3:3", "--rdzv-timeout-seconds", "120"});
  const std::string script = "echo round $REEL_RESTART_COUNT of $REEL_WORLD_SIZE";
  Background& node0 = nodes.Start(0, script);
  Background& quitter = nodes.Start(1, script);
  // Both have joined round 0 at the rendezvous: node 0 said so twice.
  for (int i = 0; i < 3000; ++i) {
    const std::string err = node0.err();
    const size_t first = err.find(" joined round 0");
    if (first != std::string::npos && err.find(" joined round 0", first + 1) != std::string::npos)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  quitter.Signal(SIGINT);
  EXPECT_EQ(quitter.WaitAtMost(std::chrono::seconds(120)).value_or(-1), 130) << quitter.err();
  EXPECT_NE(quitter.err().find("reel: interrupted (SIGINT)"), std::string::npos) << quitter.err();
  ASSERT_TRUE(WaitForSaid(node0, " left")) << node0.err();
  Background& node2 = nodes.Start(2, script);
  Background& node3 = nodes.Start(3, script);
  for (Background* b : {&node0, &node2, &node3}) {
    EXPECT_EQ(b->WaitAtMost(std::chrono::seconds(120)).value_or(-1), 0) << b->err();
    EXPECT_NE(b->out().find("] round 0 of 3\n"), std::string::npos) << b->out() << b->err();
  }
  EXPECT_EQ(quitter.out(), "");
  fs::remove_all(dir);
}

// Two nodes of --nnodes 3:3 wait in round 0; the coordinator node's launcher, which serves the
// rendezvous, is stopped (SIGSTOP). The other ends after --rdzv-timeout-seconds (8) of silence
// (75, naming the silent rendezvous) instead of waiting for ever; the coordinator node,
// continued, finds round 0 below MIN past the timeout and ends (75) too.
TEST(LaunchElasticTest, AStoppedCoordinatorEndsTheNodesWaitingForARoundAfterItsSilence) {
  const std::string dir = ScratchDir("launch_elastic_stopped_coordinator");
  Nodes nodes(dir, {"--nnodes", "3:3", "--rdzv-timeout-seconds", "8"});
  const std::string script = "touch " + dir + "/started";
  Background& node0 = nodes.Start(0, script);
  Background& node1 = nodes.Start(1, script);
  for (int i = 0; i < 3000; ++i) {  // both have joined: node 0 said so twice
    const std::string err = node0.err();
    const size_t first = err.find(" joined round 0");
    if (first != std::string::npos && err.find(" joined round 0", first + 1) != std::string::npos)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  node0.Signal(SIGSTOP);
  EXPECT_EQ(node1.WaitAtMost(std::chrono::seconds(120)).value_or(-1), 75) << node1.err();
  EXPECT_NE(node1.err().find("reel launch: UNAVAILABLE: the rendezvous at " + nodes.coordinator() +
                             " has said nothing for 8 s while this node waits for a round"),
            std::string::npos)
      << node1.err();
  node0.Signal(SIGCONT);
  EXPECT_EQ(node0.WaitAtMost(std::chrono::seconds(120)).value_or(-1), 75) << node0.err();
  EXPECT_FALSE(fs::exists(dir + "/started"));
  fs::remove_all(dir);
}

// `reel train --config run.pbtxt` for a round after the first, through one epoch.
std::string EpochCommand(const TrainRun& run) {
  return std::string("exec '") + REEL_EXE + "' train --config '" + run.config() +
         "' --set trainer.checkpoint_every_steps=2 --set trainer.keep_checkpoints=0 --set "
         "trainer.epochs=1";
}

// Round 0 trains 4 steps on `first` nodes, then `after` (a shell command); later rounds train to
// the end of the epoch. Each rank writes its launcher's pid to dir/launcher.NODE_RANK.
std::string ElasticScript(const TrainRun& run, const std::string& after) {
  const std::string d = "'" + run.dir() + "'";
  return "if [ $REEL_RESTART_COUNT != 0 ]; then " + EpochCommand(run) + "; fi; echo $PPID > " + d +
         "/launcher.$REEL_NODE_RANK; echo $$ > " + d + "/pid.$REEL_NODE_RANK; '" + REEL_EXE +
         "' train --config '" + run.config() +
         "' --set trainer.checkpoint_every_steps=2 --set trainer.keep_checkpoints=0 --set "
         "trainer.steps=4 || exit $?; touch " +
         d + "/trained.$REEL_NODE_RANK; " + after;
}

// The trained-steps line every rank of the last round printed: "trained N steps (120 examples,
// epoch 1)" (each of the epoch's 120 videos once), N the newest checkpoint's step.
void ExpectTheEpochOnce(const TrainRun& run, const std::string& out, int rank) {
  ASSERT_FALSE(run.Checkpoints().empty());
  const long last = CheckpointStep(run.Checkpoints().back());
  std::cout << "rank " << rank << " of the last round, newest checkpoint at step " << last << "\n";
  EXPECT_NE(out.find("[rank " + std::to_string(rank) + "] trained " + std::to_string(last) +
                     " steps (120 examples, epoch 1)"),
            std::string::npos)
      << out;
}

// Three nodes of --nnodes 2:3 train 4 steps (3 ranks, 48 of the epoch's 120 videos); node rank
// 2's launcher is SIGKILLed with its rank; the others' ranks exit 75 as ranks that lost a peer
// do; their launchers join round 1 (one restart of --max-restarts 1), which forms with the 2 left,
// resumes from step 4 and ends the epoch with every video trained once.
TEST(LaunchElasticTrainTest, ANodeLostLeavesTheOthersToFinishAtTheSizeLeft) {
  std::string why;
  auto run = TrainRun::Make("launch_elastic_lost", kQuickFaultTransport, &why);
  if (!run) GTEST_SKIP() << why;
  const std::string d = "'" + run->dir() + "'";
  Nodes nodes(run->dir(), {"--nnodes", "2:3", "--max-restarts", "1", "--grace-seconds", "10",
                           "--rdzv-last-call-seconds", "5", "--rdzv-timeout-seconds", "120"});
  const std::string script =
      ElasticScript(*run, "if [ $REEL_NODE_RANK = 2 ]; then exec sleep 600; fi; while [ ! -e " + d +
                              "/lost ]; do sleep 0.05; done; exit 75");
  std::vector<Background*> launches;
  for (int k = 0; k < 3; ++k) launches.push_back(&nodes.Start(k, script));
  for (int k = 0; k < 3; ++k)
    ASSERT_TRUE(WaitForPath(run->dir() + "/trained." + std::to_string(k))) << launches[0]->err();
  const pid_t lost_launcher = std::stoi(ReadFile(run->dir() + "/launcher.2"));
  ASSERT_EQ(::kill(lost_launcher, SIGKILL), 0);
  ::kill(std::stoi(ReadFile(run->dir() + "/pid.2")), SIGKILL);
  WriteFile(run->dir() + "/lost", "");
  int ended = 0;
  for (Background* b : launches) {
    const std::optional<int> code = b->WaitAtMost(std::chrono::seconds(180));
    ASSERT_TRUE(code.has_value()) << b->err();
    if (*code == 128 + SIGKILL) continue;  // the lost node's
    ++ended;
    EXPECT_EQ(*code, 0) << b->err();
    EXPECT_NE(b->err().find("reel launch: round 1 (1 restart(s)): node rank "), std::string::npos)
        << b->err();
    EXPECT_NE(b->err().find(" of 2 ("), std::string::npos) << b->err();
  }
  EXPECT_EQ(ended, 2);
  EXPECT_NE(launches[0]->err().find("reel launch: rendezvous: round 1 formed with 2 node(s)"),
            std::string::npos)
      << launches[0]->err();
  std::string out;
  for (Background* b : launches) out += b->out();
  for (int rank : {0, 1}) ExpectTheEpochOnce(*run, out, rank);
  EXPECT_EQ(
      out.find("[rank 2] trained " + std::to_string(CheckpointStep(run->Checkpoints().back()))),
      std::string::npos)
      << out;
}

// Two nodes of --nnodes 2:3 train 4 steps and wait; a third node starts: round 1 opens (no
// restart: --max-restarts 0), the two stop their ranks, and the three resume from step 4 and end
// the epoch with every video trained once.
TEST(LaunchElasticTrainTest, ANodeStartedLaterJoinsAtTheNextRound) {
  std::string why;
  auto run = TrainRun::Make("launch_elastic_join", kQuickFaultTransport, &why);
  if (!run) GTEST_SKIP() << why;
  Nodes nodes(run->dir(), {"--nnodes", "2:3", "--grace-seconds", "10", "--rdzv-last-call-seconds",
                           "1", "--rdzv-timeout-seconds", "120"});
  const std::string script = ElasticScript(*run, "exec sleep 600");
  std::vector<Background*> launches;
  for (int k = 0; k < 2; ++k) launches.push_back(&nodes.Start(k, script));
  for (int k = 0; k < 2; ++k)
    ASSERT_TRUE(WaitForPath(run->dir() + "/trained." + std::to_string(k))) << launches[0]->err();
  launches.push_back(&nodes.Start(2, script));
  std::string out;
  for (Background* b : launches) {
    EXPECT_EQ(b->WaitAtMost(std::chrono::seconds(180)).value_or(-1), 0) << b->err();
    EXPECT_NE(b->err().find("reel launch: round 1 (0 restart(s)): node rank "), std::string::npos)
        << b->err();
    out += b->out();
  }
  EXPECT_NE(launches[0]->err().find("reel launch: rendezvous: round 1 opens: node "),
            std::string::npos)
      << launches[0]->err();
  EXPECT_NE(launches[2]->err().find(" of 3 ("), std::string::npos) << launches[2]->err();
  for (int rank : {0, 1, 2}) ExpectTheEpochOnce(*run, out, rank);
}

}  // namespace
}  // namespace reel::e2e
