// Task-parallel overhead of `reel tune`: a grid of N tiny trials (each busy for --trial-ms of CPU),
// run through the real scheduler (journal, trial folders, results) on one of three executors:
//   threads  — `parallel` trials at once in this process;
//   inproc   — rank 0 schedules, `parallel` worker ranks (threads) over the inproc transport;
//   tcp      — the same over the tcp plugin on loopback (ranks are threads of this process).
// Prints one JSON line: wall seconds, the ideal (N * trial / parallel) and the overhead per trial.
// bench/tune/run_bench.py runs it beside scikit-learn's GridSearchCV (sklearn_gridsearch.py).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "bench_timing.h"
#include "reel/core/collectives.h"
#include "reel/core/connect.h"
#include "reel/core/host.h"
#include "reel/core/inproc.h"
#include "reel/core/tune.h"

namespace {

using reel::core::TrialRequest;
using reel::core::TrialRun;

// Spins (so the trial holds a core, as a real fit does) for `ms` of wall time.
TrialRun Spin(double ms) {
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::microseconds(static_cast<int64_t>(ms * 1000));
  volatile double x = 0;
  while (std::chrono::steady_clock::now() < until) x = x + 1;
  TrialRun run;
  run.eval.gap = static_cast<double>(x) > 0 ? 0.5 : 0.0;
  run.steps = 1;
  return run;
}

std::string GridConfig(int trials) {
  std::string values;
  for (int i = 0; i < trials; ++i) values += (i ? ", \"" : "\"") + std::to_string(i + 1) + "\"";
  return "base { data { name: \"none\" } eval_data { name: \"none\" } model { name: \"none\" }\n"
         "       trainer { steps: 1 } }\n"
         "dimension { field: \"trainer.seed\" values: [" +
         values + "] }\n";
}

int Fail(const reel::Status& s) {
  std::fprintf(stderr, "tune_overhead: %s\n", s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string executor = "threads";
  int trials = 200, parallel = 2;
  double trial_ms = 5;
  std::string workdir = std::filesystem::temp_directory_path() / "reel_tune_overhead";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--executor")
      executor = value;
    else if (flag == "--trials")
      trials = std::atoi(value.c_str());
    else if (flag == "--parallel")
      parallel = std::atoi(value.c_str());
    else if (flag == "--trial-ms")
      trial_ms = std::atof(value.c_str());
    else if (flag == "--workdir")
      workdir = value;
    else {
      std::fprintf(stderr,
                   "usage: tune_overhead [--executor threads|inproc|tcp] [--trials N] "
                   "[--parallel P] [--trial-ms MS] [--workdir DIR]\n");
      return 2;
    }
  }
  auto cfg = reel::core::ParseTuneConfig(GridConfig(trials), "overhead search");
  if (!cfg.ok()) return Fail(cfg.status());
  std::filesystem::remove_all(workdir);
  reel::core::TrialRunner runner = [trial_ms](const TrialRequest&) -> reel::Result<TrialRun> {
    return Spin(trial_ms);
  };

  std::vector<std::unique_ptr<reel::Communicator>> comms;
  std::unique_ptr<reel::core::Host> host;
  if (executor == "inproc") {
    auto group = reel::core::CreateInprocGroup(parallel + 1);
    if (!group.ok()) return Fail(group.status());
    comms = std::move(*group);
  } else if (executor == "tcp") {
    auto h = reel::core::Host::Create({});
    if (!h.ok()) return Fail(h.status());
    host = std::move(*h);
    auto transport = host->registry().CreateTransport("tcp", {});
    if (!transport.ok()) return Fail(transport.status());
    std::vector<reel::TransportContext> ranks;
    for (int r = 0; r <= parallel; ++r) ranks.push_back({r, parallel + 1, "127.0.0.1:29531"});
    auto joined = reel::core::ConnectConcurrently(**transport, ranks,
                                                  reel::DeadlineIn(std::chrono::seconds(60)));
    if (!joined.ok()) return Fail(joined.status());
    comms = std::move(*joined);
  } else if (executor != "threads") {
    std::fprintf(stderr, "tune_overhead: unknown executor '%s'\n", executor.c_str());
    return 2;
  }

  const auto t0 = reel::bench::Clock::now();
  reel::Result<reel::core::TuneResult> result = reel::InternalError("not run");
  if (comms.empty()) {
    reel::core::TuneOptions o;
    o.workdir = workdir;
    o.parallel = parallel;
    o.verbosity = 0;
    result = reel::core::RunTune(*cfg, o, runner);
  } else {
    std::vector<std::thread> workers;
    for (size_t r = 1; r < comms.size(); ++r)
      workers.emplace_back([&, r] {
        reel::core::TuneOptions o;
        o.workdir = workdir;
        o.comm = comms[r].get();
        o.verbosity = 0;
        (void)reel::core::RunTune(*cfg, o, runner);
      });
    reel::core::TuneOptions o;
    o.workdir = workdir;
    o.comm = comms[0].get();
    o.verbosity = 0;
    result = reel::core::RunTune(*cfg, o, runner);
    for (auto& w : workers) w.join();
  }
  const double wall = reel::bench::Seconds(t0, reel::bench::Clock::now());
  if (!result.ok()) return Fail(result.status());
  if (static_cast<int>(result->rows.size()) != trials) {
    std::fprintf(stderr, "tune_overhead: %zu results for %d trials\n", result->rows.size(), trials);
    return 1;
  }
  const double ideal = trials * trial_ms / 1000.0 / parallel;
  std::printf(
      "{\"program\": \"reel_%s\", \"trials\": %d, \"parallel\": %d, \"trial_ms\": %g, "
      "\"wall_s\": %.4f, \"ideal_s\": %.4f, \"overhead_ms_per_trial\": %.4f}\n",
      executor.c_str(), trials, parallel, trial_ms, wall, ideal,
      (wall - ideal) * 1000.0 / trials * parallel);
  return 0;
}
