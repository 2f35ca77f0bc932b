// update_bench (docs/benchmarks.md, "update"): the machine's memory bandwidth (STREAM-like copy
// and triad on float arrays) and each update rule of reel/update_rule.h over the same number of
// parameters, on 1 and 2 OpenMP threads, in one run. Programs alternate within each repetition,
// so a shared machine's load falls on all of them alike. Every timed call is one pass over the
// arrays after an untimed one (pages touched, state sized). Prints one JSON object:
//
//   update_bench [--params N] [--reps R] [--threads 1,2] [--only copy,triad,...]
//
// "bytes" per element: copy 8 (read a, write b), triad 12 (read b, c; write a), sgd 12 (p r/w,
// g r), momentum and adagrad 20 (+ one state r/w), adam 28 (+ two), norm 4 (g r): the traffic
// the program needs, not counting write-allocate reads. GB/s = bytes x N / seconds / 1e9.
// "adam_norm" is the sync optimizer's update on one rank without a clip, the gradient's norm and
// Adam: one fused pass (UpdateRule::ApplySummingSquares) where the SDK has it, else
// ClipByGlobalNorm then Apply, as before it (so the same source measures both builds); counted
// at Adam's 28 bytes, the traffic the fused pass needs.
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench_timing.h"
#include "reel/core/schedule.h"
#include "reel/update_rule.h"

namespace {

using reel::bench::Clock;
using reel::bench::Seconds;

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

std::string ProcField(const char* file, const std::string& key) {
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key, 0) == 0) {
      const size_t colon = line.find(':');
      if (colon == std::string::npos) return line.substr(key.size());
      size_t start = line.find_first_not_of(" \t", colon + 1);
      return start == std::string::npos ? "" : line.substr(start);
    }
  return "";
}

// The sync optimizer's update without a clip: one pass where the SDK fuses the norm.
template <typename Rule>
double UpdateWithNorm(Rule& rule, std::span<float> params, std::span<const float> grads) {
  if constexpr (requires { rule.ApplySummingSquares(params, grads, 1e-6f); }) {
    return rule.ApplySummingSquares(params, grads, 1e-6f);
  } else {
    // Without a clip (max_norm 0) ClipByGlobalNorm only reads.
    std::span<float> g(const_cast<float*>(grads.data()), grads.size());
    const double norm = reel::core::ClipByGlobalNorm(g, 0.0);
    rule.Apply(params, grads, 1e-6f);
    return norm * norm;
  }
}

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

// The arrays every program works on; first touched in parallel, as STREAM does.
struct Arrays {
  explicit Arrays(size_t n)
      : a(new float[n]), b(new float[n]), c(new float[n]), d(new float[n]), n(n) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < static_cast<int64_t>(n); ++i) {
      a[i] = 1.0f;
      b[i] = 2.0f;
      c[i] = 0.5f * static_cast<float>(i % 1000) / 1000.0f - 0.25f;  // a gradient
      d[i] = 0.0f;
    }
  }
  std::unique_ptr<float[]> a, b, c, d;
  size_t n;
};

// Copy and triad in blocks of a constant trip count with __restrict pointers, as the rules are
// written (reel/update_rule.h, UpdateRule::ForBlocks): GCC's -O2 leaves the plain loops scalar.
constexpr int64_t kBlock = 64;

template <typename F>
void ForBlocks(size_t n, F&& block) {
  const int64_t blocks = static_cast<int64_t>(n) / kBlock;
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) block(b * kBlock, kBlock);
  if (n % kBlock != 0) block(blocks * kBlock, static_cast<int64_t>(n % kBlock));
}

template <int64_t N>
void CopyBlock(float* __restrict a, const float* __restrict b) {
  for (int64_t i = 0; i < N; ++i) a[i] = b[i];
}

template <int64_t N>
void TriadBlock(float* __restrict d, const float* __restrict b, const float* __restrict c,
                float s) {
  for (int64_t i = 0; i < N; ++i) d[i] = b[i] + s * c[i];
}

void Copy(Arrays& x) {
  ForBlocks(x.n, [&](int64_t i, int64_t n) {
    if (n == kBlock) {
      CopyBlock<kBlock>(x.a.get() + i, x.b.get() + i);
    } else {
      for (int64_t j = i; j < i + n; ++j) CopyBlock<1>(x.a.get() + j, x.b.get() + j);
    }
  });
}

void Triad(Arrays& x) {
  const float s = 3.0f;
  ForBlocks(x.n, [&](int64_t i, int64_t n) {
    if (n == kBlock) {
      TriadBlock<kBlock>(x.d.get() + i, x.b.get() + i, x.c.get() + i, s);
    } else {
      for (int64_t j = i; j < i + n; ++j)
        TriadBlock<1>(x.d.get() + j, x.b.get() + j, x.c.get() + j, s);
    }
  });
}

}  // namespace

int main(int argc, char** argv) {
  size_t n = 40'000'000;
  int reps = 3;
  std::vector<int> threads = {1, 2};
  std::vector<std::string> programs = {"copy",    "triad", "sgd",       "momentum",
                                       "adagrad", "adam",  "adam_norm", "norm"};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--params") {
      n = std::stoull(value);
    } else if (flag == "--reps") {
      reps = std::stoi(value);
    } else if (flag == "--threads") {
      threads.clear();
      for (const std::string& t : Split(value)) threads.push_back(std::stoi(t));
    } else if (flag == "--only") {
      programs = Split(value);
    } else {
      std::fprintf(stderr, "update_bench: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if ((argc - 1) % 2 != 0 || reps < 1 || n == 0) {
    std::fprintf(stderr,
                 "usage: update_bench [--params N] [--reps R] [--threads 1,2] [--only LIST]\n");
    return 2;
  }
  const std::map<std::string, int> bytes = {{"copy", 8},       {"triad", 12},   {"sgd", 12},
                                            {"momentum", 20},  {"adagrad", 20}, {"adam", 28},
                                            {"adam_norm", 28}, {"norm", 4}};
  for (const std::string& p : programs)
    if (!bytes.count(p)) {
      std::fprintf(stderr, "update_bench: unknown program %s\n", p.c_str());
      return 2;
    }
  const std::string load_before = LoadAverage();
  Arrays x(n);
  // One rule instance per rule and thread count: its state is sized once, as in training.
  std::map<std::string, std::unique_ptr<reel::UpdateRule>> rules;
  auto rule = [&](const std::string& name, int t) -> reel::UpdateRule& {
    auto& r = rules[name + "/" + std::to_string(t)];
    if (!r) {
      reel::UpdateRuleConfig config;
      config.rule = name;
      r = std::move(*reel::MakeUpdateRule(config));
    }
    return *r;
  };
  std::vector<float> params(x.b.get(), x.b.get() + n);
  std::span<const float> grads(x.c.get(), n);
  double sink = 0;
  auto run = [&](const std::string& p, int t) {
    if (p == "copy") {
      Copy(x);
    } else if (p == "triad") {
      Triad(x);
    } else if (p == "adam_norm") {
      sink += UpdateWithNorm(rule("adam", t), params, grads);
    } else if (p == "norm") {
      sink += reel::core::ClipByGlobalNorm(std::span<float>(x.c.get(), n), 0.0);
    } else {
      rule(p, t).Apply(params, grads, 1e-6f);
    }
  };
  std::map<std::string, std::vector<double>> seconds;
  for (int t : threads) {
    omp_set_num_threads(t);
    for (const std::string& p : programs) run(p, t);  // untimed: pages and state
  }
  for (int rep = 0; rep < reps; ++rep)
    for (int t : threads) {
      omp_set_num_threads(t);
      for (const std::string& p : programs) {
        const auto start = Clock::now();
        run(p, t);
        seconds[p + "/" + std::to_string(t)].push_back(Seconds(start, Clock::now()));
      }
    }
  std::printf("{\"bench\": \"update\", \"params\": %zu, \"reps\": %d,\n", n, reps);
  std::printf(" \"cpu_name\": \"%s\", \"cpu_family\": \"%s\", \"cpu_model\": \"%s\",\n",
              ProcField("/proc/cpuinfo", "model name").c_str(),
              ProcField("/proc/cpuinfo", "cpu family").c_str(),
              ProcField("/proc/cpuinfo", "model\t").c_str());
  std::printf(" \"load_before\": \"%s\", \"load_after\": \"%s\", \"sink\": %g,\n",
              load_before.c_str(), LoadAverage().c_str(), sink);
  std::printf(" \"bytes_per_element\": {");
  const char* sep = "";
  for (const std::string& p : programs) {
    std::printf("%s\"%s\": %d", sep, p.c_str(), bytes.at(p));
    sep = ", ";
  }
  std::printf("},\n \"seconds\": {");
  sep = "\n";
  for (const auto& [key, v] : seconds) {
    std::printf("%s  \"%s\": [", sep, key.c_str());
    for (size_t i = 0; i < v.size(); ++i) std::printf("%s%.6f", i ? ", " : "", v[i]);
    std::printf("]");
    sep = ",\n";
  }
  std::printf("\n }}\n");
  return 0;
}
