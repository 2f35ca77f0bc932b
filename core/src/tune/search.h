// Search algorithms: which trial to run next, decided as results arrive.
//
//   - Grid: every point of the search space's grid, each at the full budget.
//   - Random: `trials` samples of the space under the seed, each at the full budget. A space of
//     value lists only is drawn without replacement (a seeded shuffle of its grid).
//   - ASHA (asynchronous successive halving, Li et al., MLSys 2020): rungs counted down from the
//     full budget R, r_k = R * eta^-k, to the smallest not below min_budget (RungBudgets). Trials
//     start on the lowest rung; whenever a rung holds a configuration in the best 1/eta of the
//     results it has so far that was not promoted yet, that configuration is promoted to the next
//     rung; otherwise a new configuration starts on the lowest rung. No decision waits for a rung
//     to fill, so no worker idles while configurations remain. A promoted trial continues from
//     its checkpoint: rung k's trial is the first r_k units of one run planned for R (tuner.cc).
//
// A trial is (configuration number, rung): the configuration number addresses the search space
// (a grid point or a sample index), so a journal that records it is enough to rebuild the
// algorithm's state on resume (Adopt + Report).
//
// Thread-safety: none; the scheduler calls an algorithm from one thread.
#ifndef REEL_CORE_SRC_TUNE_SEARCH_H_
#define REEL_CORE_SRC_TUNE_SEARCH_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "search_space.h"

namespace reel::core::tune {

struct TrialSpec {
  int64_t config = 0;  // configuration number: grid point or sample index
  int rung = 0;        // ASHA rung; 0 for grid and random
  int64_t budget = 0;  // steps or epochs (Search.budget_unit)
  Assignment params;
};

class SearchAlgorithm {
 public:
  virtual ~SearchAlgorithm() = default;
  // The next trial to start, or nullopt when none can start now: the search is complete, or
  // (ASHA) every remaining decision waits on a trial that is still running.
  virtual std::optional<TrialSpec> Next() = 0;
  // The outcome of a trial; nullopt: it failed (it then ranks below every result and is never
  // promoted).
  virtual void Report(const TrialSpec& trial, std::optional<double> metric) = 0;
  // Marks a trial found in a journal as already given out, so Next() does not propose it again.
  virtual void Adopt(const TrialSpec& trial) = 0;
  // How many trials the search runs at most (for progress and the ETA).
  virtual int64_t PlannedTrials() const = 0;
  // Whether a reported trial may still be promoted to the next rung (its checkpoint is then
  // needed): never for grid and random; for ASHA while it is not promoted yet and could still rank
  // in the best 1/eta of its rung, however the trials still to report there end.
  virtual bool MayPromote(const TrialSpec& /*trial*/) const { return false; }
};

struct SearchPlan {
  config::Search::Algorithm algorithm = config::Search::GRID;
  int64_t trials = 16;  // random and ASHA
  uint64_t seed = 0;
  int64_t max_budget = 1;
  int64_t min_budget = 1;  // ASHA
  double eta = 3;          // ASHA
};

// InvalidArgument naming the field for trials < 1, budgets < 1, min_budget > max_budget, eta <= 1,
// or a grid larger than a million trials.
Result<std::unique_ptr<SearchAlgorithm>> CreateSearch(const SearchPlan& plan,
                                                      const SearchSpace& space);

// ASHA's rung budgets, smallest first: max_budget * eta^-k (rounded) for k = 0, 1, ... while at
// least min_budget. The top rung is max_budget. REQUIRES: 1 <= min_budget <= max_budget, eta > 1.
std::vector<int64_t> RungBudgets(int64_t min_budget, int64_t max_budget, double eta);

}  // namespace reel::core::tune

#endif  // REEL_CORE_SRC_TUNE_SEARCH_H_
