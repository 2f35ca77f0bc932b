// The search space of a hyperparameter search: dimensions parsed from a TuneConfig, each a field
// path into the run config (as `reel train --set` takes them) with a list of values or a range.
//
// Configurations are addressed by a number: grid point i of the product (first dimension varies
// slowest), or random sample i drawn from a generator seeded by (seed, i) alone — so sample i is
// the same whether it is drawn first, last or after a resume, and no generator state needs saving.
// The draws are reel's own (draws.h), so a seed gives the same samples on any standard library.
//
// Thread-safety: a SearchSpace is immutable after Create(); const methods from any thread.
#ifndef REEL_CORE_SRC_TUNE_SEARCH_SPACE_H_
#define REEL_CORE_SRC_TUNE_SEARCH_SPACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "reel/core/config.h"
#include "reel/status.h"
#include "tune.pb.h"

namespace reel::core::tune {

// One field set to one value, e.g. {"trainer.learning_rate.base", "0.003"}.
struct Param {
  std::string field;
  std::string value;
  bool operator==(const Param&) const = default;
};
using Assignment = std::vector<Param>;  // one Param per dimension, in dimension order

class SearchSpace {
 public:
  // InvalidArgument naming the dimension (by index and field) for: no field, neither values nor a
  // range, both, min > max, a log scale with min <= 0, a field the run config does not have or a
  // value it does not accept (each value and both range ends are tried on `base`).
  static Result<SearchSpace> Create(const config::TuneConfig& tune, const ConfigFile& base);

  // Number of grid points (product of every dimension's value count; a range counts
  // grid_points, default 3). Saturates at INT64_MAX.
  int64_t GridSize() const;
  Assignment GridPoint(int64_t index) const;  // REQUIRES: index < GridSize()
  Assignment Sample(uint64_t seed, int64_t index) const;

  // `base` with `params` applied through ApplyOverride (the same path as --set).
  Result<ConfigFile> Apply(const ConfigFile& base, const Assignment& params) const;

  size_t dimensions() const { return dims_.size(); }
  // Every dimension is a list of values (no continuous range): GridPoint enumerates the space.
  bool Finite() const;

 private:
  struct Dim {
    std::string field;
    std::vector<std::string> values;  // a list, or the grid points of a range
    bool is_range = false;
    double min = 0, max = 0;
    bool log = false, integer = false;
  };
  static std::string Format(const Dim& d, double v);
  std::vector<Dim> dims_;
};

}  // namespace reel::core::tune

#endif  // REEL_CORE_SRC_TUNE_SEARCH_SPACE_H_
