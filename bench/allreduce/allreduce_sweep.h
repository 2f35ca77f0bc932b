// One rank's sweep over allreduce sizes, shared by the peer programs that run_allreduce.py
// alternates (reel over a transport, raw MPI, Gloo), so that every program is timed alike: per
// size, one warm-up call, a barrier, `iters` calls, a barrier; rank 0 prints `bytes seconds`, the
// seconds per call, one line per size. The closing barrier makes rank 0's time cover every rank.
//
// Flags every peer accepts: --min-bytes B (4096), --max-bytes B (64 MiB), --budget-bytes B
// (256 MiB: a size runs budget/bytes calls, clamped to [3, --max-calls N (1000)]). At 4 KiB 1000
// calls last a few milliseconds, where one scheduling hiccup moves the figure by tens of percent:
// comparisons at small sizes want --max-calls in the tens of thousands.
#ifndef REEL_BENCH_ALLREDUCE_ALLREDUCE_SWEEP_H_
#define REEL_BENCH_ALLREDUCE_ALLREDUCE_SWEEP_H_

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "bench_timing.h"

namespace reel::bench {

struct Sweep {
  size_t min_bytes = size_t{4} << 10;
  size_t max_bytes = size_t{64} << 20;
  size_t budget_bytes = size_t{256} << 20;
  size_t max_calls = 1000;

  // Takes the sweep's flags out of argv (the rest stay, in order); false on a malformed value.
  bool ParseFlags(std::vector<std::string>& args) {
    std::vector<std::string> rest;
    for (size_t i = 0; i < args.size(); ++i) {
      size_t* target = args[i] == "--min-bytes"      ? &min_bytes
                       : args[i] == "--max-bytes"    ? &max_bytes
                       : args[i] == "--budget-bytes" ? &budget_bytes
                       : args[i] == "--max-calls"    ? &max_calls
                                                     : nullptr;
      if (!target) {
        rest.push_back(args[i]);
        continue;
      }
      if (i + 1 >= args.size()) return false;
      char* end = nullptr;
      *target = std::strtoull(args[++i].c_str(), &end, 10);
      if (*end != '\0' || *target == 0) return false;
    }
    args = rest;
    return true;
  }

  // How many calls a size runs: budget/bytes, clamped to [3, max_calls].
  int Calls(size_t bytes) const {
    return static_cast<int>(
        std::clamp<size_t>(budget_bytes / bytes, 3, std::max<size_t>(3, max_calls)));
  }

  // `prepare(data, floats)` sets up an allreduce of that buffer (as a library's users would, once
  // per buffer: Gloo builds an algorithm object) and returns the call; it and `barrier()` return
  // false on failure (the sweep stops, exit 1).
  using Call = std::function<bool()>;
  int Run(int rank, const std::function<Call(float*, size_t)>& prepare, const Call& barrier) const {
    for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
      const size_t floats = bytes / sizeof(float);
      std::vector<float> data(floats, 1.0f);
      const int iters = Calls(bytes);
      const Call allreduce = prepare(data.data(), floats);
      if (!allreduce() || !barrier()) return 1;  // warm-up
      const auto start = Clock::now();
      for (int i = 0; i < iters; ++i)
        if (!allreduce()) return 1;
      if (!barrier()) return 1;
      const double seconds = Seconds(start, Clock::now()) / iters;
      if (rank == 0) std::printf("%zu %.9f\n", bytes, seconds);
      std::fflush(stdout);
    }
    return 0;
  }
};

}  // namespace reel::bench

#endif  // REEL_BENCH_ALLREDUCE_ALLREDUCE_SWEEP_H_
