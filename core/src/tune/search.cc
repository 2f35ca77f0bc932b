#include "search.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <random>

#include "draws.h"

namespace reel::core::tune {
namespace {

// Grid and random: a fixed list of configurations, each run once at the full budget.
class FixedList : public SearchAlgorithm {
 public:
  FixedList(int64_t count, int64_t budget, std::function<Assignment(int64_t)> params)
      : count_(count), budget_(budget), params_(std::move(params)) {}

  std::optional<TrialSpec> Next() override {
    while (next_ < count_ && given_.count(next_)) ++next_;
    if (next_ >= count_) return std::nullopt;
    given_.insert(next_);
    return TrialSpec{next_, 0, budget_, params_(next_)};
  }
  void Report(const TrialSpec&, std::optional<double>) override {}
  void Adopt(const TrialSpec& t) override { given_.insert(t.config); }
  int64_t PlannedTrials() const override { return count_; }

 private:
  int64_t count_, budget_;
  std::function<Assignment(int64_t)> params_;
  int64_t next_ = 0;
  std::set<int64_t> given_;
};

class Asha : public SearchAlgorithm {
 public:
  Asha(const SearchPlan& plan, std::function<Assignment(int64_t)> params)
      : plan_(plan),
        params_(std::move(params)),
        budgets_(RungBudgets(plan.min_budget, plan.max_budget, plan.eta)),
        results_(budgets_.size()),
        promoted_(budgets_.size()) {}

  std::optional<TrialSpec> Next() override {
    // Promotion first, from the highest rung down: the best 1/eta of what each rung has seen.
    for (size_t k = budgets_.size() - 1; k-- > 0;) {
      const auto& done = results_[k];
      const auto top =
          static_cast<size_t>(std::floor(static_cast<double>(done.size()) / plan_.eta));
      if (top == 0) continue;
      std::vector<std::pair<double, int64_t>> ranked(done.begin(), done.end());
      // Best metric first; ties go to the smaller configuration number, so the order is total.
      std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
        return a.first != b.first ? a.first > b.first : a.second < b.second;
      });
      for (size_t i = 0; i < top; ++i) {
        const auto& [metric, config] = ranked[i];
        if (metric == kFailed) break;
        if (promoted_[k].insert(config).second)
          return TrialSpec{config, static_cast<int>(k + 1), budgets_[k + 1], Params(config)};
      }
    }
    if (drawn_ < plan_.trials) {
      const int64_t c = drawn_++;
      return TrialSpec{c, 0, budgets_[0], Params(c)};
    }
    return std::nullopt;
  }

  void Report(const TrialSpec& t, std::optional<double> metric) override {
    if (t.rung < 0 || static_cast<size_t>(t.rung) >= results_.size()) return;
    const double m = metric && std::isfinite(*metric) ? *metric : kFailed;
    results_[static_cast<size_t>(t.rung)].emplace_back(m, t.config);
  }

  void Adopt(const TrialSpec& t) override {
    drawn_ = std::max(drawn_, t.config + 1);
    if (t.rung > 0 && static_cast<size_t>(t.rung) < promoted_.size())
      promoted_[static_cast<size_t>(t.rung - 1)].insert(t.config);
  }

  bool MayPromote(const TrialSpec& t) const override {
    const auto k = static_cast<size_t>(t.rung);
    if (t.rung < 0 || k + 1 >= budgets_.size() || promoted_[k].count(t.config)) return false;
    for (const auto& [metric, config] : results_[k])
      if (config == t.config) return Promotable(k, metric, config, MostResults(k));
    return true;  // not reported: nothing known against it
  }

  int64_t PlannedTrials() const override {
    int64_t n = 0;
    double at_rung = static_cast<double>(plan_.trials);
    for (size_t k = 0; k < budgets_.size() && at_rung >= 1; ++k, at_rung /= plan_.eta)
      n += static_cast<int64_t>(std::floor(at_rung));
    return n;
  }

 private:
  static constexpr double kFailed = -std::numeric_limits<double>::infinity();
  Assignment Params(int64_t config) const { return params_(config); }

  // Whether (metric, config) on rung k can still be in the best floor(n / eta) of the rung's n
  // results when at most `most` results arrive there: its rank only falls as results come in.
  bool Promotable(size_t k, double metric, int64_t config, int64_t most) const {
    if (metric == kFailed) return false;
    int64_t better = 0;
    for (const auto& [m, c] : results_[k]) better += m > metric || (m == metric && c < config);
    return better < static_cast<int64_t>(std::floor(static_cast<double>(most) / plan_.eta));
  }

  // The most results rung k can ever hold: every configuration on rung 0; on rung j + 1 those
  // promoted from rung j, those of rung j that may still be, and rung j's results still to come.
  // (Asynchronous promotions may send a rung more than 1/eta of the one below.)
  int64_t MostResults(size_t k) const {
    int64_t most = plan_.trials;
    for (size_t j = 0; j < k; ++j) {
      int64_t next = static_cast<int64_t>(promoted_[j].size()) +
                     std::max<int64_t>(0, most - static_cast<int64_t>(results_[j].size()));
      for (const auto& [metric, config] : results_[j])
        next += !promoted_[j].count(config) && Promotable(j, metric, config, most);
      most = next;
    }
    return most;
  }

  SearchPlan plan_;
  std::function<Assignment(int64_t)> params_;
  std::vector<int64_t> budgets_;
  std::vector<std::vector<std::pair<double, int64_t>>> results_;  // per rung: (metric, config)
  std::vector<std::set<int64_t>> promoted_;                       // per rung: configs promoted out
  int64_t drawn_ = 0;
};

}  // namespace

std::vector<int64_t> RungBudgets(int64_t min_budget, int64_t max_budget, double eta) {
  // From the top, as Li et al. (ASHA; Hyperband before it): r_k = R * eta^-k for k = 0, 1, ...
  // while r_k >= min_budget, so the top rung is the full budget and every rung is reachable.
  std::vector<int64_t> b;
  const double floor_budget = static_cast<double>(min_budget) * (1 - 1e-9);
  for (double r = static_cast<double>(max_budget); r >= floor_budget; r /= eta) {
    const auto v = std::max<int64_t>(1, std::llround(r));
    if (b.empty() || v < b.back()) b.push_back(v);
  }
  std::reverse(b.begin(), b.end());
  return b;
}

Result<std::unique_ptr<SearchAlgorithm>> CreateSearch(const SearchPlan& plan,
                                                      const SearchSpace& space) {
  if (plan.max_budget < 1)
    return InvalidArgumentError("search.max_budget must be >= 1 (got " +
                                std::to_string(plan.max_budget) + ")");
  switch (plan.algorithm) {
    case config::Search::GRID: {
      const int64_t n = space.GridSize();
      if (n > 1'000'000)
        return InvalidArgumentError("the grid has " + std::to_string(n) +
                                    " points; more than 1000000 (use RANDOM or ASHA)");
      return std::unique_ptr<SearchAlgorithm>(std::make_unique<FixedList>(
          n, plan.max_budget, [&space](int64_t i) { return space.GridPoint(i); }));
    }
    case config::Search::RANDOM:
    case config::Search::ASHA: {
      if (plan.trials < 1) return InvalidArgumentError("search.trials must be >= 1");
      // A space of lists only is finite: draw its points without replacement (a seeded shuffle of
      // the grid), so no configuration is trained twice; at most every point once.
      std::function<Assignment(int64_t)> params = [&space, seed = plan.seed](int64_t i) {
        return space.Sample(seed, i);
      };
      SearchPlan p = plan;
      if (space.Finite() && space.GridSize() <= 1'000'000) {
        auto order = std::make_shared<std::vector<int64_t>>(static_cast<size_t>(space.GridSize()));
        std::iota(order->begin(), order->end(), 0);
        std::mt19937_64 gen(plan.seed);
        Shuffle(*order, gen);
        params = [&space, order](int64_t i) {
          return space.GridPoint((*order)[static_cast<size_t>(i)]);
        };
        p.trials = std::min<int64_t>(p.trials, space.GridSize());
      }
      if (plan.algorithm == config::Search::RANDOM)
        return std::unique_ptr<SearchAlgorithm>(
            std::make_unique<FixedList>(p.trials, p.max_budget, std::move(params)));
      if (!(plan.eta > 1)) return InvalidArgumentError("search.eta must be > 1");
      if (plan.min_budget < 1 || plan.min_budget > plan.max_budget)
        return InvalidArgumentError(
            "search.min_budget must lie in [1, max_budget=" + std::to_string(plan.max_budget) +
            "] (got " + std::to_string(plan.min_budget) + ")");
      return std::unique_ptr<SearchAlgorithm>(std::make_unique<Asha>(p, std::move(params)));
    }
    default:
      return InvalidArgumentError("search.algorithm: unknown value " +
                                  std::to_string(static_cast<int>(plan.algorithm)));
  }
}

}  // namespace reel::core::tune
