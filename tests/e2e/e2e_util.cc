#include "e2e_util.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <vector>

#include "reel/core/metrics.h"

namespace reel::e2e {

namespace fs = std::filesystem;

namespace {
std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}
}  // namespace

RunResult Reel(const std::vector<std::string>& args, const std::string& cwd) {
  static int counter = 0;
  const std::string base = ::testing::TempDir() + "/reel_run_" + std::to_string(::getpid()) + "_" +
                           std::to_string(counter++);
  std::string cmd = cwd.empty() ? "" : "cd " + Quote(cwd) + " && ";
  cmd += Quote(REEL_EXE);
  for (const auto& a : args) cmd += " " + Quote(a);
  cmd += " >" + Quote(base + ".out") + " 2>" + Quote(base + ".err") + " </dev/null";
  int status = std::system(cmd.c_str());
  RunResult r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = ReadFile(base + ".out");
  r.err = ReadFile(base + ".err");
  fs::remove(base + ".out");
  fs::remove(base + ".err");
  return r;
}

namespace {

// Scratch folders are removed when the test program ends with every test passed (a search on the
// real shards writes gigabytes of checkpoints); a failure keeps them to look at.
class ScratchCleanup : public ::testing::Environment {
 public:
  static ScratchCleanup& Get() {
    static auto* env =
        static_cast<ScratchCleanup*>(::testing::AddGlobalTestEnvironment(new ScratchCleanup));
    return *env;
  }
  void Add(const std::string& dir) { dirs_.push_back(dir); }
  void TearDown() override {
    if (!::testing::UnitTest::GetInstance()->Passed()) return;
    std::error_code ignored;
    for (const std::string& dir : dirs_) fs::remove_all(dir, ignored);
  }

 private:
  std::vector<std::string> dirs_;
};

// Registered before main() runs the tests, as AddGlobalTestEnvironment requires.
[[maybe_unused]] ScratchCleanup& registered = ScratchCleanup::Get();

}  // namespace

std::string ScratchDir(const std::string& name) {
  std::string dir = ::testing::TempDir() + "/reel_e2e_" + std::to_string(::getpid()) + "_" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  ScratchCleanup::Get().Add(dir);
  return dir;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary);
  out << content;
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> out;
  if (!fs::is_directory(dir)) return out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

// (id, labels) of every record in `files`, in file order.
std::vector<std::pair<std::string, std::vector<int>>> Records(
    const std::vector<std::string>& files) {
  std::vector<std::string> args = {"inspect", "--json", "--limit", "1000000"};
  args.insert(args.end(), files.begin(), files.end());
  RunResult r = Reel(args);
  EXPECT_EQ(r.code, 0) << r.err;
  std::vector<std::pair<std::string, std::vector<int>>> out;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    size_t at = line.find("\"labels\":[");
    if (at == std::string::npos) continue;
    at += 10;
    std::vector<int> labels;
    size_t end = line.find(']', at);
    std::stringstream ls(line.substr(at, end - at));
    for (std::string n; std::getline(ls, n, ',');)
      if (!n.empty()) labels.push_back(std::stoi(n));
    std::string id;
    if (size_t i = line.find("\"id\":\""); i != std::string::npos)
      id = line.substr(i + 6, line.find('"', i + 6) - (i + 6));
    out.emplace_back(id, labels);
  }
  return out;
}

}  // namespace

std::vector<std::vector<int>> Labels(const std::vector<std::string>& files) {
  std::vector<std::vector<int>> out;
  for (auto& [id, labels] : Records(files)) out.push_back(std::move(labels));
  return out;
}

std::map<std::string, std::vector<int>> LabelsById(const std::vector<std::string>& files) {
  std::map<std::string, std::vector<int>> out;
  for (auto& [id, labels] : Records(files)) out[id] = std::move(labels);
  return out;
}

double FrequencyBaselineGap(const std::vector<std::vector<int>>& train,
                            const std::vector<std::vector<int>>& test, int classes) {
  std::vector<float> freq(classes, 0.0f);
  for (const auto& v : train)
    for (int c : v) freq[c] += 1.0f;
  core::MetricsAccumulator acc(classes, 20);
  for (const auto& v : test) {
    std::vector<int32_t> l(v.begin(), v.end());
    EXPECT_TRUE(acc.AddVideo(freq, l).ok());
  }
  return acc.Compute().gap;
}

double JsonField(const std::string& json, const std::string& key) {
  size_t at = json.find("\"" + key + "\": ");
  if (at == std::string::npos) return -1.0;
  return std::atof(json.c_str() + at + key.size() + 4);
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace reel::e2e
