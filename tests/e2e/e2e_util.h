// Helpers for end-to-end tests: run the `reel` binary, make scratch directories and synthetic
// data, read files, and compute the frequency baseline from `reel inspect --json`.
#ifndef REEL_TESTS_E2E_E2E_UTIL_H_
#define REEL_TESTS_E2E_E2E_UTIL_H_

#include <map>
#include <string>
#include <vector>

namespace reel::e2e {

struct RunResult {
  int code = -1;  // exit status; 128 + signal when killed
  std::string out, err;
};

// Runs `reel ARGS...` to completion, in directory `cwd` when it is not empty.
RunResult Reel(const std::vector<std::string>& args, const std::string& cwd = "");

// A fresh empty directory under the test temp dir.
std::string ScratchDir(const std::string& name);

std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& content);
std::vector<std::string> ListDir(const std::string& dir);     // sorted full paths
int Count(const std::string& text, const std::string& what);  // occurrences, overlapping too

// Label lists of every record in `files` (via `reel inspect --json`).
std::vector<std::vector<int>> Labels(const std::vector<std::string>& files);

// Label lists by video id, of every record in `files` (via `reel inspect --json`).
std::map<std::string, std::vector<int>> LabelsById(const std::vector<std::string>& files);

// GAP@20 of scoring every class by its frequency among `train` labels, on `test` labels.
double FrequencyBaselineGap(const std::vector<std::vector<int>>& train,
                            const std::vector<std::vector<int>>& test, int classes);

// The number after "\"key\": " in a JSON object line.
double JsonField(const std::string& json, const std::string& key);

}  // namespace reel::e2e

#endif  // REEL_TESTS_E2E_E2E_UTIL_H_
