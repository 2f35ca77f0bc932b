#include "search_space.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

#include "draws.h"

namespace reel::core::tune {
namespace {

std::string Name(size_t i, const std::string& field) {
  return "dimension " + std::to_string(i + 1) + " ('" + field + "')";
}

// A generator for sample `index` that depends on (seed, index) only: splitmix64 of both.
uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

std::string SearchSpace::Format(const Dim& d, double v) {
  if (d.integer) return std::to_string(static_cast<int64_t>(std::llround(v)));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

Result<SearchSpace> SearchSpace::Create(const config::TuneConfig& tune, const ConfigFile& base) {
  SearchSpace space;
  if (tune.dimension().empty())
    return InvalidArgumentError("the search has no dimension (add dimension { field: ... })");
  for (int i = 0; i < tune.dimension_size(); ++i) {
    const config::Dimension& in = tune.dimension(i);
    const std::string name = Name(static_cast<size_t>(i), in.field());
    if (in.field().empty()) return InvalidArgumentError(name + ": 'field' is empty");
    for (const Dim& other : space.dims_)
      if (other.field == in.field()) return InvalidArgumentError(name + ": field given twice");
    Dim d;
    d.field = in.field();
    const bool range = in.has_min() || in.has_max();
    if (range && !in.values().empty())
      return InvalidArgumentError(name + ": give either values or min/max, not both");
    if (range) {
      if (!in.has_min() || !in.has_max())
        return InvalidArgumentError(name + ": a range needs both min and max");
      if (!(in.min() <= in.max()))
        return InvalidArgumentError(name + ": min " + std::to_string(in.min()) + " > max " +
                                    std::to_string(in.max()));
      d.is_range = true;
      d.min = in.min();
      d.max = in.max();
      d.log = in.scale() == config::Dimension::LOG;
      d.integer = in.integer();
      if (d.log && d.min <= 0) return InvalidArgumentError(name + ": a LOG scale needs min > 0");
      const int64_t points = in.has_grid_points() ? in.grid_points() : 3;
      if (points < 1) return InvalidArgumentError(name + ": grid_points must be >= 1");
      for (int64_t p = 0; p < points; ++p) {
        const double t =
            points == 1 ? 0.5 : static_cast<double>(p) / static_cast<double>(points - 1);
        const double v = d.log ? std::exp(std::log(d.min) + t * (std::log(d.max) - std::log(d.min)))
                               : d.min + t * (d.max - d.min);
        std::string s = Format(d, v);
        if (d.values.empty() || d.values.back() != s) d.values.push_back(std::move(s));
      }
    } else {
      if (in.values().empty())
        return InvalidArgumentError(name + ": give a list of values or a min/max range");
      d.values.assign(in.values().begin(), in.values().end());
    }
    // Every value must be one the run config accepts, so a typo fails before any trial runs.
    std::vector<std::string> probes = d.values;
    if (d.is_range) probes = {Format(d, d.min), Format(d, d.max)};
    for (const std::string& v : probes) {
      ConfigFile probe = base;
      Status s = ApplyOverride(probe, d.field + "=" + v);
      if (!s.ok()) return InvalidArgumentError(name + ": " + s.message());
    }
    space.dims_.push_back(std::move(d));
  }
  return space;
}

int64_t SearchSpace::GridSize() const {
  int64_t n = 1;
  for (const Dim& d : dims_) {
    const auto k = static_cast<int64_t>(d.values.size());
    if (n > std::numeric_limits<int64_t>::max() / k) return std::numeric_limits<int64_t>::max();
    n *= k;
  }
  return n;
}

Assignment SearchSpace::GridPoint(int64_t index) const {
  Assignment a(dims_.size());
  for (size_t i = dims_.size(); i-- > 0;) {
    const auto k = static_cast<int64_t>(dims_[i].values.size());
    a[i] = {dims_[i].field, dims_[i].values[static_cast<size_t>(index % k)]};
    index /= k;
  }
  return a;
}

Assignment SearchSpace::Sample(uint64_t seed, int64_t index) const {
  // reel's own draws (draws.h): the same sample on every standard library.
  std::mt19937_64 gen(Mix(Mix(seed) ^ static_cast<uint64_t>(index)));
  Assignment a;
  for (const Dim& d : dims_) {
    if (!d.is_range) {
      a.push_back({d.field, d.values[UniformIndex(gen, d.values.size())]});
      continue;
    }
    // Uniform over the whole numbers of [min, max] on a linear integer scale (one draw), else a
    // real draw, rounded on a log integer scale.
    const double lo = std::ceil(d.min), hi = std::floor(d.max);
    double v;
    if (d.integer && !d.log && lo <= hi)
      v = static_cast<double>(UniformInt(gen, static_cast<int64_t>(lo), static_cast<int64_t>(hi)));
    else
      v = d.log ? LogUniform(gen, d.min, d.max) : UniformReal(gen, d.min, d.max);
    if (d.integer && (d.log || lo > hi))
      v = lo > hi ? std::round(d.min) : std::min(std::max(std::round(v), lo), hi);
    a.push_back({d.field, Format(d, v)});
  }
  return a;
}

bool SearchSpace::Finite() const {
  for (const Dim& d : dims_)
    if (d.is_range) return false;
  return true;
}

Result<ConfigFile> SearchSpace::Apply(const ConfigFile& base, const Assignment& params) const {
  ConfigFile cfg = base;
  for (const Param& p : params) REEL_RETURN_IF_ERROR(ApplyOverride(cfg, p.field + "=" + p.value));
  return cfg;
}

}  // namespace reel::core::tune
