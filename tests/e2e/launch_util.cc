#include "launch_util.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <thread>

#include "e2e_util.h"

namespace reel::e2e {

namespace fs = std::filesystem;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

Background::Background(const std::string& dir, const std::vector<std::string>& args)
    : out_(dir + "/launch.out"), err_(dir + "/launch.err") {
  std::vector<std::string> argv_s = {REEL_EXE};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  pid_ = ::fork();
  if (pid_ == 0) {
    std::vector<char*> argv;
    for (auto& s : argv_s) argv.push_back(s.data());
    argv.push_back(nullptr);
    if (!std::freopen(out_.c_str(), "w", stdout) || !std::freopen(err_.c_str(), "w", stderr))
      ::_exit(126);
    ::execv(REEL_EXE, argv.data());
    ::_exit(127);
  }
}

Background::~Background() {
  if (pid_ > 0 && code_ < 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

std::string Background::out() const { return ReadFile(out_); }
std::string Background::err() const { return ReadFile(err_); }

bool Background::WaitForLines(size_t lines) const {
  for (int i = 0; i < 3000; ++i) {
    if (Lines(out()).size() >= lines) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

void Background::Signal(int sig) const { ::kill(pid_, sig); }

int Background::Wait() {
  int status = 0;
  if (::waitpid(pid_, &status, 0) != pid_) return -1;
  code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return code_;
}

std::optional<int> Background::WaitAtMost(std::chrono::seconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return code_;
    }
    if (r < 0) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return std::nullopt;  // the destructor kills it (and, through PR_SET_PDEATHSIG, its ranks)
}

std::unique_ptr<TrainRun> TrainRun::Make(const std::string& name, const std::string& extra_config,
                                         std::string* why) {
  const fs::path plugins = fs::path(REEL_EXE).parent_path().parent_path() / "lib/reel/plugins";
  for (const char* p : {"tcp", "tfrecord", "moe"})
    if (!fs::exists(plugins / ("libreel_" + std::string(p) + ".so"))) {
      *why = "the " + std::string(p) + " plugin is not built (" + plugins.string() + ")";
      return nullptr;
    }
  std::unique_ptr<TrainRun> run(new TrainRun(ScratchDir(name)));
  const std::string& dir = run->dir_;
  RunResult r = Reel({"synth", "--out", dir + "/data", "--videos", "120", "--classes", "16",
                      "--level", "video", "--shards", "3", "--seed", "4"});
  if (r.code != 0) {
    *why = "reel synth failed: " + r.err;
    return nullptr;
  }
  WriteFile(run->config(), R"(
data {
  name: "tfrecord"
  options { key: "files" value: ")" +
                               dir + R"(/data/*.tfrecord" }
  options { key: "level" value: "video" }
}
model { name: "logistic" }
trainer {
  batch_size: 4
  seed: 1
  num_classes: 16
  log_every_steps: 1
  checkpoint_dir: ")" + dir + R"(/ckpt"
  metrics_log: ")" + dir + R"(/metrics.jsonl"
}
)" + extra_config);
  return run;
}

TrainRun::~TrainRun() { fs::remove_all(dir_); }

std::unique_ptr<Background> TrainRun::Start(int n, const std::vector<std::string>& extra,
                                            const std::vector<std::string>& launch_flags) const {
  std::string train = std::string("'") + REEL_EXE + "' train --config '" + config() + "'";
  for (const std::string& e : extra) train += " '" + e + "'";
  std::vector<std::string> args = {"launch", "-n", std::to_string(n)};
  args.insert(args.end(), launch_flags.begin(), launch_flags.end());
  args.insert(args.end(),
              {"--", "sh", "-c", "echo $$ > '" + dir_ + "/pid.'$REEL_RANK; exec " + train});
  return std::make_unique<Background>(dir_, args);
}

pid_t TrainRun::Pid(int rank) const {
  return std::stoi(ReadFile(dir_ + "/pid." + std::to_string(rank)));
}

bool TrainRun::WaitForSteps(size_t steps) const {
  for (int i = 0; i < 3000; ++i) {
    if (Lines(ReadFile(dir_ + "/metrics.jsonl")).size() >= steps) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

bool TrainRun::WaitForCheckpoint() const {
  for (int i = 0; i < 3000; ++i) {
    if (!Checkpoints().empty()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

std::vector<std::string> TrainRun::Checkpoints() const {
  std::vector<std::string> out;
  if (!fs::exists(dir_ + "/ckpt")) return out;
  for (const std::string& f : ListDir(dir_ + "/ckpt"))
    if (f.size() > 9 && f.compare(f.size() - 9, 9, ".reelckpt") == 0) out.push_back(f);
  return out;
}

long CheckpointStep(const std::string& path) {
  return std::stol(fs::path(path).filename().string().substr(5, 10));
}

const char kQuickFaultTransport[] = R"(
transport {
  name: "tcp"
  timeout_seconds: 20
  options { key: "heartbeat_ms" value: "100" }
  options { key: "heartbeat_timeout_ms" value: "2000" }
}
)";

int WaitForTheEndAfterFault(Background& launch, std::chrono::steady_clock::time_point fault) {
  // Far beyond the heartbeat timeout, a collective's timeout and launch's grace period together.
  std::optional<int> code = launch.WaitAtMost(std::chrono::seconds(180));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - fault).count();
  std::cout << "launch ended " << seconds << " s after the fault, status "
            << (code ? std::to_string(*code) : "none (hung)") << "\n";
  EXPECT_TRUE(code.has_value()) << "launch still runs long after the fault: a rank hangs\n"
                                << launch.err();
  return code.value_or(-1);
}

void ExpectSurvivorsNameIt(const std::string& err, int culprit, const std::vector<int>& survivors) {
  const std::string named = "rank " + std::to_string(culprit);
  for (int rank : survivors) {
    const std::string prefix = "[rank " + std::to_string(rank) + "] ";
    bool names_it = false;
    for (const std::string& line : Lines(err))
      if (line.rfind(prefix, 0) == 0 &&
          (line.find("UNAVAILABLE") != std::string::npos ||
           line.find("DEADLINE_EXCEEDED") != std::string::npos ||
           line.find(named + " is unavailable") != std::string::npos) &&
          line.find(named, prefix.size()) != std::string::npos)
        names_it = true;
    EXPECT_TRUE(names_it) << "rank " << rank << " does not name " << named << ":\n" << err;
  }
}

RunResult LaunchSh(std::vector<std::string> flags, const std::string& script) {
  std::vector<std::string> args = {"launch"};
  args.insert(args.end(), flags.begin(), flags.end());
  args.insert(args.end(), {"--", "sh", "-c", script});
  return Reel(args);
}

void ExpectEveryRankSaid(const std::string& err, int ranks, const std::string& text) {
  for (int rank = 0; rank < ranks; ++rank)
    EXPECT_NE(err.find("[rank " + std::to_string(rank) + "] " + text), std::string::npos)
        << "rank " << rank << " did not say: " << text << "\n"
        << err;
}

int FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

}  // namespace reel::e2e
