// A hostile process against a whole run: `reel launch -n 3` of a short `reel train` over tcp on
// loopback while an attacker process (reel_tcp_flood, plugins/tcp/tests/flood_main.cc) holds
// hundreds of silent connections, and connections of random bytes and of a frame header that
// claims 2^62 bytes, open to the coordinator's port and to every rank's own listener, from before
// the group forms until the run ends. The run must form, train every step and exit 0. Each
// rank's listener port is fixed beforehand (option listen_port, one config per rank), so the
// flood is at them while the group forms. Mid-run rank 2 is stopped until ranks 0 and 1 have
// turned away at least 100 more of the flood's connections each, so that part of the flood
// lands during training whatever the run's speed. Prints how long the group took to form (the
// launch's start to every rank's first transport line after forming) under the flood.
// (The same between hosts in network namespaces: tests/netns/tcp_hostile_netns.sh.)
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "e2e_util.h"
#include "launch_util.h"

namespace reel::e2e::launch_hostile_test {
namespace {

using namespace std::chrono_literals;

constexpr int kRanks = 3;
constexpr int kSteps = 300;

// A port on 127.0.0.1 nobody listens on at the moment, below the kernel's range of ephemeral
// ports: the flood's hundreds of outgoing connections take ports from that range, and one of
// them holding a rank's port would keep the rank from listening there.
int FreePortBelowEphemeral(std::mt19937& random) {
  int low = 32768, high = 60999;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> low >> high;
  const int from = 10000, to = std::max(from + 1000, low);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const int port = from + static_cast<int>(random() % static_cast<unsigned>(to - from));
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    if (free) return port;
  }
  return 0;
}

// reel_tcp_flood in the background; Stop() ends it and returns what it reports per target:
// "HOST:PORT KIND" -> {opened, cut}.
class Attacker {
 public:
  using Counts = std::map<std::string, std::pair<long, long>>;
  Attacker(const std::string& dir, const std::vector<std::string>& specs)
      : status_(dir + "/flood.status"), out_(dir + "/flood.out") {
    std::vector<std::string> args = {REEL_TCP_FLOOD_EXE, "--status", status_};
    args.insert(args.end(), specs.begin(), specs.end());
    pid_ = ::fork();
    if (pid_ == 0) {
      std::vector<char*> argv;
      for (auto& s : args) argv.push_back(s.data());
      argv.push_back(nullptr);
      if (!std::freopen(out_.c_str(), "w", stdout)) ::_exit(126);
      ::execv(REEL_TCP_FLOOD_EXE, argv.data());
      ::_exit(127);
    }
  }
  ~Attacker() {
    if (pid_ > 0) Stop();
  }
  Counts Now() const { return Parse(ReadFile(status_)); }
  Counts Stop() {
    if (pid_ <= 0) return {};
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "reel_tcp_flood: " << status;
    return Parse(ReadFile(out_));
  }

 private:
  static Counts Parse(const std::string& text) {
    Counts counts;
    for (const std::string& line : Lines(text)) {
      std::istringstream in(line);
      std::string target, kind, n, opened_word, cut_word;
      long opened = 0, cut = 0;
      if (in >> target >> kind >> n >> opened_word >> opened >> cut_word >> cut)
        counts[target + " " + kind] = {opened, cut};
    }
    return counts;
  }
  std::string status_, out_;
  pid_t pid_ = -1;
};

// Every rank printed its transport's first line after the group formed (how AllReduce waits).
bool EveryRankFormed(const std::string& err) {
  for (int r = 0; r < kRanks; ++r)
    if (err.find("[rank " + std::to_string(r) + "] reel tcp: AllReduce waits by") ==
        std::string::npos)
      return false;
  return true;
}

TEST(LaunchHostileTest, AFloodAtEveryListenerFromFormationToTheEndStopsNothing) {
  std::string why;
  // The collectives' and heartbeats' timeouts are far above the stall below (a few seconds).
  auto run = TrainRun::Make("launch_hostile", R"(
transport {
  name: "tcp"
  timeout_seconds: 120
  options { key: "handshake_timeout_ms" value: "1000" }
  options { key: "heartbeat_timeout_ms" value: "120000" }
}
)",
                            &why);
  if (!run) GTEST_SKIP() << why;
  std::mt19937 random(static_cast<unsigned>(::getpid()));
  std::vector<int> ports;
  while (ports.size() < static_cast<size_t>(kRanks)) {
    const int port = FreePortBelowEphemeral(random);
    ASSERT_GT(port, 0) << "no free port below the ephemeral range";
    if (std::find(ports.begin(), ports.end(), port) == ports.end()) ports.push_back(port);
  }
  // One config per rank: the shared one with the rank's own listen_port (rank 0 listens on the
  // coordinator's).
  const std::string shared = ReadFile(run->config());
  for (int r = 1; r < kRanks; ++r) {
    std::string config = shared;
    const std::string at = "  name: \"tcp\"\n";
    config.insert(config.find(at) + at.size(), "  options { key: \"listen_port\" value: \"" +
                                                   std::to_string(ports[r]) + "\" }\n");
    WriteFile(run->dir() + "/run." + std::to_string(r) + ".pbtxt", config);
  }
  WriteFile(run->dir() + "/run.0.pbtxt", shared);
  std::vector<std::string> specs;
  for (int port : ports)
    for (const char* kind : {"silent:200", "random_bytes:50", "oversized_length:50"})
      specs.push_back("127.0.0.1:" + std::to_string(port) + ":" + kind);
  Attacker attacker(run->dir(), specs);

  const auto start = std::chrono::steady_clock::now();
  const std::string train =
      std::string("'") + REEL_EXE + "' train --config '" + run->dir() +
      "/run.'$REEL_RANK'.pbtxt' --set trainer.steps=" + std::to_string(kSteps);
  Background launch(run->dir(),
                    {"launch", "-n", std::to_string(kRanks), "--coordinator",
                     "127.0.0.1:" + std::to_string(ports[0]), "--grace-seconds", "10", "--", "sh",
                     "-c", "echo $$ > '" + run->dir() + "/pid.'$REEL_RANK; exec " + train});
  // Generous (not a timing assertion): only a group that never forms reaches the limit.
  bool formed = false;
  while (!(formed = EveryRankFormed(launch.err())) &&
         std::chrono::steady_clock::now() - start < 120s)
    std::this_thread::sleep_for(10ms);
  const double formed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(formed) << launch.err();
  std::cout << "[launch hostile] 3 ranks formed " << formed_s
            << " s after the launch started, under a flood of 300 connections at each of 3 "
               "listeners\n";

  ASSERT_TRUE(run->WaitForSteps(3)) << launch.err();
  const pid_t rank2 = run->Pid(2);
  ASSERT_EQ(::kill(rank2, SIGSTOP), 0);
  const size_t steps_at_stall = Lines(ReadFile(run->dir() + "/metrics.jsonl")).size();
  const Attacker::Counts before = attacker.Now();
  auto turned_away = [&](int rank, const Attacker::Counts& now) {
    long n = 0;
    for (const auto& [key, counts] : now)
      if (key.rfind("127.0.0.1:" + std::to_string(ports[rank]) + " ", 0) == 0)
        n += counts.second - (before.count(key) ? before.at(key).second : 0);
    return n;
  };
  bool grew = false;
  for (int i = 0; i < 600 && !grew; ++i) {  // up to 60 s; a few seconds normally
    std::this_thread::sleep_for(100ms);
    const Attacker::Counts now = attacker.Now();
    grew = turned_away(0, now) >= 100 && turned_away(1, now) >= 100;
  }
  ::kill(rank2, SIGCONT);
  EXPECT_TRUE(grew) << "ranks 0 and 1 did not turn away 100 connections each while training";
  EXPECT_LT(steps_at_stall, static_cast<size_t>(kSteps)) << "the run ended before the stall";

  const std::optional<int> code = launch.WaitAtMost(300s);
  const Attacker::Counts counts = attacker.Stop();
  const std::string out = launch.out(), err = launch.err();
  ASSERT_TRUE(code.has_value()) << "the launch hung\n" << err;
  EXPECT_EQ(*code, 0) << err;
  ExpectEveryRankSaid(out + err, kRanks, "trained " + std::to_string(kSteps) + " steps");
  for (const char* bad : {"UNAVAILABLE", "DEADLINE_EXCEEDED", "DATA_LOSS", "INTERNAL"})
    EXPECT_EQ(err.find(bad), std::string::npos) << err;
  // Every flood reached its listener and was turned away there (the test would prove nothing
  // if it had not).
  EXPECT_EQ(counts.size(), specs.size());
  for (const auto& [key, c] : counts) {
    std::cout << "[launch hostile] " << key << ": " << c.first << " accepted, " << c.second
              << " closed by the rank\n";
    EXPECT_GT(c.first, 0) << key;
    EXPECT_GT(c.second, 0) << key;
  }
}

}  // namespace
}  // namespace reel::e2e::launch_hostile_test
