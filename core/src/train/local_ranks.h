// Running the ranks of one process: each on its own thread (inline when there is one), and the
// one error that explains a failed run.
//
// When one rank fails, the others usually fail too, because their peer went away (Unavailable)
// or stopped answering (DeadlineExceeded): the root cause is the first rank whose error is
// neither, named by its rank.
//
// Thread-safety: blocks the caller until every rank returned.
#ifndef REEL_CORE_SRC_TRAIN_LOCAL_RANKS_H_
#define REEL_CORE_SRC_TRAIN_LOCAL_RANKS_H_

#include <functional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "reel/status.h"

namespace reel::core {

// The first error that is not a consequence of another rank's, with "rank R" (from `ranks`,
// the rank ids in the order of `results`) in front when the process runs several ranks; else the
// first error; else the first result.
template <typename T>
Result<T> RootCause(std::vector<Result<T>> results, std::span<const int> ranks) {
  auto named = [&](size_t i) {
    const Status& s = results[i].status();
    return results.size() > 1 ? s.WithContext("rank " + std::to_string(ranks[i])) : s;
  };
  for (size_t i = 0; i < results.size(); ++i) {
    const StatusCode code = results[i].status().code();
    if (!results[i].ok() && code != StatusCode::kUnavailable &&
        code != StatusCode::kDeadlineExceeded)
      return named(i);
  }
  for (size_t i = 0; i < results.size(); ++i)
    if (!results[i].ok()) return named(i);
  return std::move(results.front());
}

// Runs run(i) for i in [0, n), each on its own thread (n == 1: on the caller's); results by i.
template <typename T>
std::vector<Result<T>> RunOnThreads(int n, const std::function<Result<T>(int)>& run) {
  std::vector<Result<T>> results;
  for (int i = 0; i < n; ++i) results.emplace_back(InternalError("rank did not run"));
  if (n == 1) {
    results[0] = run(0);
    return results;
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) threads.emplace_back([&, i] { results[i] = run(i); });
  for (auto& t : threads) t.join();
  return results;
}

}  // namespace reel::core

#endif  // REEL_CORE_SRC_TRAIN_LOCAL_RANKS_H_
