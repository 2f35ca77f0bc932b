// Timing helpers shared by the benchmarks: wall-clock seconds between two steady_clock points,
// and the median of repeated measurements.
#ifndef REEL_BENCH_COMMON_BENCH_TIMING_H_
#define REEL_BENCH_COMMON_BENCH_TIMING_H_

#include <algorithm>
#include <chrono>
#include <vector>

namespace reel::bench {

using Clock = std::chrono::steady_clock;

inline double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The middle value (the mean of the two middle ones for an even count); 0 for none.
inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace reel::bench

#endif  // REEL_BENCH_COMMON_BENCH_TIMING_H_
