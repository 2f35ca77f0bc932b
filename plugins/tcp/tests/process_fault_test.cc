// Ranks as processes: one is killed (kill -9) or stopped (SIGSTOP) in the middle of a stream of
// allreduces, and every other rank must return Unavailable naming it — not hang, not time out —
// whether the ranks share one host's memory, or two hosts' with a ring of their leaders across
// (host_allreduce.cc), and nothing is left in /dev/shm.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "reel/core/collectives.h"
#include "tcp_test_util.h"

namespace reel::tcp::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

// Far beyond what detecting the failure takes: a rank that reports DeadlineExceeded has missed it.
constexpr auto kCollectiveDeadline = 120s;

struct Rank {
  pid_t pid = -1;
  int from = -1;  // the rank's report pipe: "ready\n", then its final status
};

// In a forked child: joins the group, says "ready", then runs allreduces of `floats` floats until
// one fails (or `calls` of them, if not 0), and reports that status. Never returns.
[[noreturn]] void RunRank(int rank, int world, const std::string& coordinator, int to_parent,
                          std::chrono::microseconds spin,
                          std::chrono::milliseconds heartbeat_timeout = 1000ms, int calls = 0,
                          size_t floats = 1 << 20, const std::string& host_id = "",
                          bool doubling = false) {
  TcpOptions options = TestOptions();
  options.host_id = host_id;
  if (doubling) {  // every call by recursive doubling over TCP (allreduce_doubling.cc)
    options.allreduce_layout = TcpOptions::Layout::kFlat;
    options.allreduce_small_bytes = 0;
    options.allreduce_doubling_bytes = floats * sizeof(float);
  }
  options.allreduce_spin = spin;
  options.heartbeat = 100ms;
  options.heartbeat_timeout = heartbeat_timeout;
  auto report = [&](const std::string& s) { (void)!write(to_parent, s.data(), s.size()); };
  auto joined = MakeTcpTransport(options)->Connect({rank, world, coordinator}, DeadlineIn(60s));
  if (!joined.ok()) {
    report("connect: " + joined.status().ToString());
    _exit(1);
  }
  auto comm = core::WithRingCollectives(std::move(*joined));
  report("ready\n");
  std::vector<float> data(floats, 1.0f);
  Status s;
  for (int done = 0; s.ok() && (calls == 0 || done < calls); ++done)
    s = comm->AllReduce(data, ReduceOp::kSum, DeadlineIn(kCollectiveDeadline));
  report(s.ToString());
  _exit(0);
}

// Reads what `fd` has until EOF (or, with `line`, the first newline) or the deadline.
std::string ReadReport(int fd, bool line, Deadline deadline) {
  std::string text;
  char buf[4096];
  while (!line || text.find('\n') == std::string::npos) {
    pollfd p{fd, POLLIN, 0};
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  return text;
}

// Forked ranks, killed by TearDown if they are still there.
class ProcessRanks : public ::testing::Test {
 protected:
  // Forks rank `r`, which runs `run(report_fd)`.
  void Start(const std::function<void(int)>& run) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      run(fds[1]);
      _exit(1);
    }
    close(fds[1]);
    ranks_.push_back({pid, fds[0]});
  }
  void TearDown() override {
    for (Rank& r : ranks_) {
      if (r.pid > 0) {
        kill(r.pid, SIGKILL);
        waitpid(r.pid, nullptr, 0);
      }
      if (r.from >= 0) close(r.from);
    }
  }
  std::vector<Rank> ranks_;
};

// What /dev/shm holds of reel's (other programs' tests may run meanwhile).
std::set<std::string> SharedMemoryFiles() {
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec))
    if (e.path().filename().string().find("reel") != std::string::npos)
      names.insert(e.path().filename().string());
  return names;
}

// The signal, the microseconds AllReduce busy-waits before it sleeps, and each rank's host
// (option host_id; "" the one detected).
class ProcessFault : public ProcessRanks,
                     public ::testing::WithParamInterface<std::tuple<int, int, const char*>> {};

TEST_P(ProcessFault, EveryOtherRankNamesTheLostRank) {
  constexpr int kWorld = 3, kVictim = 1;
  const std::string coordinator = FreeCoordinator();
  const std::string hosts = std::get<2>(GetParam());
  const std::set<std::string> shm_before = SharedMemoryFiles();
  for (int r = 0; r < kWorld; ++r)
    Start([&](int report) {
      RunRank(r, kWorld, coordinator, report, std::chrono::microseconds(std::get<1>(GetParam())),
              1000ms, 0, 1 << 20, hosts.empty() ? "" : hosts.substr(static_cast<size_t>(r), 1));
    });
  for (int r = 0; r < kWorld; ++r)
    ASSERT_EQ(ReadReport(ranks_[r].from, true, DeadlineIn(60s)), "ready\n") << "rank " << r;
  std::this_thread::sleep_for(200ms);  // well into the stream of allreduces
  ASSERT_EQ(kill(ranks_[kVictim].pid, std::get<0>(GetParam())), 0);
  for (int r = 0; r < kWorld; ++r) {
    if (r == kVictim) continue;
    const std::string status =
        ReadReport(ranks_[r].from, false, DeadlineIn(kCollectiveDeadline + 30s));
    EXPECT_THAT(status, AllOf(HasSubstr("UNAVAILABLE"), HasSubstr("rank 1 is unavailable")))
        << "rank " << r;
    int exit_status = 0;
    waitpid(ranks_[r].pid, &exit_status, 0);
    ranks_[r].pid = -1;
    EXPECT_TRUE(WIFEXITED(exit_status) && WEXITSTATUS(exit_status) == 0) << "rank " << r;
  }
  kill(ranks_[kVictim].pid, SIGKILL);
  waitpid(ranks_[kVictim].pid, nullptr, 0);
  ranks_[kVictim].pid = -1;
  EXPECT_EQ(SharedMemoryFiles(), shm_before) << "shared memory was left behind in /dev/shm";
}

// Recursive doubling on 3 ranks (rank 0 folds into rank 1, which doubles with rank 2) and on 5
// (ranks 0-1 and 2-3 fold, 1 and 3 double with 4): a rank killed mid-stream is named by every
// other within the heartbeat timeout, whichever part of the exchange it leaves them in.
TEST_F(ProcessRanks, DoublingNamesTheKilledRank) {
  for (const auto& world_victim : {std::pair{3, 1}, std::pair{3, 0}, std::pair{5, 3}}) {
    // Plain copies: clang 14 cannot capture a structured binding in the lambda below.
    const int world = world_victim.first, victim = world_victim.second;
    const std::string coordinator = FreeCoordinator();
    ranks_.clear();
    for (int r = 0; r < world; ++r)
      Start([&](int report) {
        RunRank(r, world, coordinator, report, 0us, 1000ms, 0, 1000, "", /*doubling=*/true);
      });
    for (int r = 0; r < world; ++r)
      ASSERT_EQ(ReadReport(ranks_[r].from, true, DeadlineIn(60s)), "ready\n") << "rank " << r;
    std::this_thread::sleep_for(200ms);  // well into the stream of allreduces
    ASSERT_EQ(kill(ranks_[victim].pid, SIGKILL), 0);
    const std::string named = "rank " + std::to_string(victim) + " is unavailable";
    for (int r = 0; r < world; ++r) {
      if (r == victim) continue;
      const std::string status =
          ReadReport(ranks_[r].from, false, DeadlineIn(kCollectiveDeadline + 30s));
      EXPECT_THAT(status, AllOf(HasSubstr("UNAVAILABLE"), HasSubstr(named)))
          << world << " ranks, rank " << victim << " killed, rank " << r;
      waitpid(ranks_[r].pid, nullptr, 0);
      ranks_[r].pid = -1;
      close(ranks_[r].from);
      ranks_[r].from = -1;
    }
    waitpid(ranks_[victim].pid, nullptr, 0);
    ranks_[victim].pid = -1;
    close(ranks_[victim].from);
    ranks_[victim].from = -1;
  }
}

// A rank of the host that runs as another user gets no segment from the host's leader (its uid
// is not the leader's), so every rank learns at forming that this host cannot share memory: with
// allreduce_layout=auto the group falls back to the flat ring and sums right; with hierarchical
// forming fails on every rank, saying why.
TEST_F(ProcessRanks, ARankOfAnotherUserGetsNoSegmentAndTheGroupUsesTheRingOrRefuses) {
  if (geteuid() != 0) GTEST_SKIP() << "running a rank as another user needs root";
  for (const auto layout : {TcpOptions::Layout::kAuto, TcpOptions::Layout::kHierarchical}) {
    const std::string coordinator = FreeCoordinator();
    for (int r = 0; r < 2; ++r)
      Start([&, r](int report) {
        if (r == 1 && setuid(65534) != 0) _exit(3);  // nobody
        TcpOptions options = TestOptions();
        options.allreduce_layout = layout;
        auto comm = MakeTcpTransport(options)->Connect({r, 2, coordinator}, DeadlineIn(60s));
        std::string said;
        if (!comm.ok()) {
          said = comm.status().ToString();
        } else {
          std::vector<float> data(1 << 16, static_cast<float>(r + 1));  // past the small path
          const Status s = (*comm)->AllReduce(data, ReduceOp::kSum, DeadlineIn(60s));
          said = s.ok() ? "sum " + std::to_string(static_cast<int>(data.back())) : s.ToString();
        }
        (void)!write(report, said.data(), said.size());
        _exit(0);
      });
    for (int r = 0; r < 2; ++r) {
      const std::string said = ReadReport(ranks_[r].from, false, DeadlineIn(90s));
      if (layout == TcpOptions::Layout::kAuto)
        EXPECT_EQ(said, "sum 3") << "rank " << r;
      else
        EXPECT_THAT(said, AllOf(HasSubstr("FAILED_PRECONDITION"),
                                HasSubstr("some host could not share memory")))
            << "rank " << r;
      waitpid(ranks_[r].pid, nullptr, 0);
      close(ranks_[r].from);
    }
    ranks_.clear();
  }
}

// A rank stopped (SIGSTOP) for longer than its own heartbeat timeout, while its peer waits more
// patiently, carries on where it was once continued: its heartbeat thread sees that it did not run
// itself, so the peer's silence meanwhile (its bytes wait unread in this rank's socket) is not held
// against it. Before, the continued rank declared its peer failed ("rank 0 is unavailable: silent
// for more than 1000 ms") when its heartbeat thread ran before its reader. (A stopped rank whose
// peers did give up on it: ProcessFault.)
TEST_F(ProcessRanks, AStoppedRankDoesNotBlameItsPeersForItsOwnSilence) {
  constexpr int kCalls = 1000;
  const std::string coordinator = FreeCoordinator();
  constexpr size_t kFloats = 1 << 14;  // small: no call is long, even under ThreadSanitizer
  Start([&](int report) { RunRank(0, 2, coordinator, report, 0us, 600000ms, kCalls, kFloats); });
  Start([&](int report) { RunRank(1, 2, coordinator, report, 0us, 1000ms, kCalls, kFloats); });
  for (int r = 0; r < 2; ++r)
    ASSERT_EQ(ReadReport(ranks_[r].from, true, DeadlineIn(60s)), "ready\n") << "rank " << r;
  ASSERT_EQ(kill(ranks_[1].pid, SIGSTOP), 0);
  // Stopped in the middle of the stream (not after it), for longer than its heartbeat timeout.
  ASSERT_EQ(ReadReport(ranks_[1].from, false, DeadlineIn(1500ms)), "")
      << "rank 1 ended its allreduces before it was stopped: make the stream longer";
  ASSERT_EQ(kill(ranks_[1].pid, SIGCONT), 0);
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(ReadReport(ranks_[r].from, false, DeadlineIn(kCollectiveDeadline + 30s)), "OK")
        << "rank " << r;
}

// A peer stopped (SIGSTOP) in the middle of a message that a receive is being filled with: the
// receive ends at its own deadline, not when the heartbeat timeout (here ten minutes) gives up
// on the peer, and says how far past the deadline it returned.
TEST_F(ProcessRanks, AReceiveWhoseSenderStopsMidMessageEndsAtItsDeadline) {
  // The largest message (kMaxMessageBytes, 2 GiB): far longer to send than the 50 ms before the
  // sender is stopped.
  constexpr size_t kBytes = kMaxMessageBytes;
  constexpr auto kReceiveFor = 3s;
  const std::string coordinator = FreeCoordinator();
  auto join = [&](int rank, int report) {
    TcpOptions options = TestOptions();
    options.heartbeat_timeout = 600s;
    auto comm = MakeTcpTransport(options)->Connect({rank, 2, coordinator}, DeadlineIn(60s));
    if (!comm.ok()) {
      const std::string why = comm.status().ToString();
      (void)!write(report, why.data(), why.size());
      _exit(1);
    }
    (void)!write(report, "ready\n", 6);
    return std::move(*comm);
  };
  // Untouched anonymous memory: sending it reads the shared zero page, receiving touches only
  // what arrived.
  auto big = [] {
    void* p = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return std::span<std::byte>(static_cast<std::byte*>(p), kBytes);
  };
  Start([&](int report) {
    auto comm = join(0, report);
    const Deadline deadline = DeadlineIn(kReceiveFor);
    Status s = comm->RecvInto(kAnySource, 9, big(), deadline);
    const auto late =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - deadline);
    const std::string out = s.ToString() + " (" + std::to_string(late.count()) + " ms late)";
    (void)!write(report, out.data(), out.size());
    _exit(0);
  });
  Start([&](int report) {
    auto comm = join(1, report);
    (void)!write(report, "sending\n", 8);
    (void)comm->Send(0, 9, big(), DeadlineIn(600s));
    _exit(0);
  });
  ASSERT_EQ(ReadReport(ranks_[0].from, true, DeadlineIn(60s)), "ready\n");
  std::string said;  // "ready\n" and "sending\n" may come in one read
  while (said.find("sending\n") == std::string::npos) {
    const std::string more = ReadReport(ranks_[1].from, true, DeadlineIn(60s));
    ASSERT_FALSE(more.empty()) << "rank 1 said only: " << said;
    said += more;
  }
  ASSERT_EQ(said, "ready\nsending\n");
  std::this_thread::sleep_for(50ms);
  ASSERT_EQ(kill(ranks_[1].pid, SIGSTOP), 0);
  const std::string status = ReadReport(ranks_[0].from, false, DeadlineIn(kReceiveFor + 60s));
  EXPECT_THAT(status, AllOf(HasSubstr("DEADLINE_EXCEEDED"), HasSubstr("passed its deadline")))
      << "the receive waited for the stopped sender: " << status;
  std::cerr << "receive from a sender stopped mid-message: " << status << "\n";
}

std::string CaseName(const ::testing::TestParamInfo<std::tuple<int, int, const char*>>& info) {
  const std::string hosts = std::get<2>(info.param);
  return std::string(std::get<0>(info.param) == SIGKILL ? "Killed" : "Stopped") +
         (std::get<1>(info.param) > 0 ? "WhileSpinning" : "") +
         (hosts.empty() ? "" : "OnHosts_" + hosts);
}
INSTANTIATE_TEST_SUITE_P(Tcp, ProcessFault,
                         // Rank 1 is the one lost: in "aab" a rank of the first host, whose
                         // leader is in the ring with the other host's; in "abb" the second
                         // host's leader.
                         ::testing::Values(std::tuple{SIGKILL, 0, ""}, std::tuple{SIGSTOP, 0, ""},
                                           std::tuple{SIGKILL, 2000, ""},
                                           std::tuple{SIGKILL, 0, "aab"},
                                           std::tuple{SIGKILL, 0, "abb"},
                                           std::tuple{SIGSTOP, 0, "abb"}),
                         CaseName);

}  // namespace
}  // namespace reel::tcp::testing
