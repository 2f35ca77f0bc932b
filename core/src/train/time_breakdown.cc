// TimeBreakdown (reel/core/trainer.h): naming and subtracting a training rank's time parts.
#include <algorithm>
#include <utility>
#include <vector>

#include "reel/core/trainer.h"

namespace reel::core {

std::vector<std::pair<const char*, double>> TimeBreakdown::parts() const {
  return {{"data", data}, {"compute", compute},       {"update", update},
          {"wait", wait}, {"evaluation", evaluation}, {"checkpoint", checkpoint}};
}

const char* TimeBreakdown::largest() const {
  const auto all = parts();
  return std::max_element(all.begin(), all.end(),
                          [](const auto& a, const auto& b) { return a.second < b.second; })
      ->first;
}

TimeBreakdown operator-(const TimeBreakdown& a, const TimeBreakdown& b) {
  TimeBreakdown d;
  d.data = a.data - b.data;
  d.compute = a.compute - b.compute;
  d.update = a.update - b.update;
  d.wait = a.wait - b.wait;
  d.evaluation = a.evaluation - b.evaluation;
  d.checkpoint = a.checkpoint - b.checkpoint;
  d.total = a.total - b.total;
  return d;
}

}  // namespace reel::core
