#include "train.h"

#include <pthread.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>
#include <signal.h>

#include <atomic>
#include <csignal>
#include <exception>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>

#include "host.h"
#include "reel/core/evaluator.h"
#include "reel/core/train_job.h"
#include "reel/core/tune.h"

namespace py = pybind11;

namespace reel::python {

py::dict MetricsDict(const core::EvalMetrics& m) {
  py::dict d;
  d["gap"] = m.gap;
  d["hit_at_1"] = m.hit_at_1;
  d["perr"] = m.perr;
  d["map"] = m.map;
  d["videos"] = m.videos;
  d["top_k"] = m.top_k;
  return d;
}

namespace {

// SIGINT while a call runs: the first asks the run to finish its step and write its checkpoint
// (as `reel train` does, reel/core/cli's InterruptScope); a second ends the process at once.
// Python's own handler is put back afterwards. Main thread only, as Python's signals are.
std::atomic<bool> g_interrupted{false};
extern "C" void OnSigint(int) {
  g_interrupted.store(true);
  std::signal(SIGINT, SIG_DFL);
}
class SigintScope {
 public:
  explicit SigintScope(bool install) : installed_(install) {
    g_interrupted.store(false);
    if (!installed_) return;
    struct sigaction sa = {};
    sa.sa_handler = OnSigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &previous_);
  }
  ~SigintScope() {
    if (installed_) sigaction(SIGINT, &previous_, nullptr);
  }
  SigintScope(const SigintScope&) = delete;
  SigintScope& operator=(const SigintScope&) = delete;

 private:
  bool installed_;
  struct sigaction previous_ = {};
};

// Runs `work` on a thread of its own with SIGINT and SIGTERM blocked, and waits for it: the
// threads that compute (that one, and the OpenMP pool it starts) never run a signal handler, only
// the calling thread, which waits. oneDNN 2.6's JIT GEMM kernels point the stack pointer into the
// heap, and a handler's frame written there corrupted it (core/cli/interrupt.h).
template <typename F>
auto AwayFromSignals(F&& work) -> decltype(work()) {
  sigset_t stop, previous;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, &previous);
  std::optional<decltype(work())> result;
  std::exception_ptr error;
  std::thread worker([&] {
    try {
      result.emplace(work());
    } catch (...) {
      error = std::current_exception();
    }
  });
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  worker.join();
  if (error) std::rethrow_exception(error);
  return std::move(*result);
}

// A run config from a path (any storage's URI) or text, with "section.field=value" overrides and
// what it asks of the host (plugin_dirs, storage sections), as `reel train --set` applies them.
core::ConfigFile LoadConfig(core::Host& host, const std::string& config, bool is_path,
                            const std::vector<std::string>& overrides) {
  core::ConfigFile cfg = is_path ? ValueOrThrow(core::LoadConfigFile(host.storage(), config))
                                 : ValueOrThrow(core::ParseConfig(config, "<config>"));
  for (const std::string& o : overrides) ThrowIfError(core::ApplyOverride(cfg, o));
  ThrowIfError(host.ApplyRunConfig(cfg));
  return cfg;
}

// The data source "numpy" over table `table` in place of section `from` (docs/python.md,
// "Training from memory"): what the arrays cannot say (max_frames, fixed_length, batch_size,
// shuffling: shuffle, else shuffle_buffer > 0) is kept from it.
config::Component InMemory(const config::Component& from, int64_t table, bool may_shuffle) {
  config::Component c;
  c.set_name("numpy");
  auto& o = *c.mutable_options();
  for (const char* key : {"max_frames", "fixed_length", "batch_size", "num_classes", "shuffle"})
    if (auto it = from.options().find(key); it != from.options().end()) o[key] = it->second;
  if (!o.count("shuffle")) {
    auto it = from.options().find("shuffle_buffer");
    o["shuffle"] = it != from.options().end() && it->second != "0" ? "true" : "false";
  }
  if (!may_shuffle) o["shuffle"] = "false";
  o["table"] = std::to_string(table);
  return c;
}

// `on_event(dict) -> bool` is called at each logged window and evaluation; true stops the run.
// An exception it raises stops the run and is raised again from train().
// `data_table`, `eval_table` > 0: tables of the data source "numpy" instead of the config's data
// and eval_data sections.
py::dict Train(const std::string& config, bool is_path, const std::vector<std::string>& overrides,
               py::object on_event, bool resume, int verbosity, bool handle_sigint,
               int64_t data_table, int64_t eval_table) {
  core::Host& host = GetHost();
  core::ConfigFile cfg = LoadConfig(host, config, is_path, overrides);
  if (data_table > 0)
    *cfg.config.mutable_data() = InMemory(cfg.config.data(), data_table, /*may_shuffle=*/true);
  if (eval_table > 0)
    *cfg.config.mutable_eval_data() = InMemory(
        cfg.config.has_eval_data() ? cfg.config.eval_data() : cfg.config.data(), eval_table,
        /*may_shuffle=*/false);
  std::atomic<bool> stop_asked{false};
  // An exception a callback raised (with its traceback), raised again after the run.
  std::optional<py::error_already_set> pending;
  core::TrainJobOptions job;
  job.resume = resume;
  job.verbosity = verbosity;
  job.progress = verbosity > 0 ? &std::cerr : nullptr;
  job.should_stop = [&](int64_t) { return stop_asked.load() || g_interrupted.load(); };
  if (!on_event.is_none()) {
    job.on_event = [&](const core::TrainEvent& e) {
      py::gil_scoped_acquire gil;
      if (pending) return;
      py::dict d;
      d["step"] = e.step;
      d["epoch"] = e.epoch;
      if (e.kind == core::TrainEvent::Kind::kLog) {
        d["kind"] = "log";
        d["loss"] = e.loss;
        d["lr"] = e.lr;
        d["examples_per_sec"] = e.examples_per_sec;
        d["worker_examples_per_sec"] = e.worker_examples_per_sec;
        d["grad_norm"] = e.grad_norm;
      } else {
        d["kind"] = "eval";
        d["eval"] = MetricsDict(e.eval);
      }
      try {
        if (py::bool_(on_event(d))) stop_asked.store(true);
      } catch (py::error_already_set& err) {
        pending.emplace(std::move(err));
        stop_asked.store(true);
      }
    };
  }
  Result<core::TrainResult> r = [&] {
    SigintScope sigint(handle_sigint);
    py::gil_scoped_release release;
    return AwayFromSignals([&] { return core::RunTrainJob(host, cfg, job); });
  }();
  if (pending) {
    py::error_already_set err = std::move(*pending);
    pending.reset();
    throw err;
  }
  const core::TrainResult& t = ValueOrThrow(std::move(r));
  if (t.interrupted && g_interrupted.load()) {
    std::string where = t.last_checkpoint.empty()
                            ? std::string(" (no checkpoint: trainer.checkpoint_dir is not set)")
                            : "; checkpoint " + t.last_checkpoint + " (continue with resume=True)";
    PyErr_SetString(PyExc_KeyboardInterrupt,
                    ("interrupted at step " + std::to_string(t.steps) + where).c_str());
    throw py::error_already_set();
  }
  py::dict d;
  d["steps"] = t.steps;
  d["steps_this_run"] = t.steps_this_run;
  d["examples"] = t.examples;
  d["epoch"] = t.epoch;
  d["final_loss"] = t.last_loss;
  d["stopped"] = t.interrupted;
  d["resumed"] = t.resumed;
  d["checkpoint"] = t.last_checkpoint;
  py::list evals;
  for (const auto& [step, m] : t.evals) {
    py::dict e = MetricsDict(m);
    e["step"] = step;
    evals.append(e);
  }
  d["evals"] = evals;
  d["final_eval"] = t.final_eval ? py::object(MetricsDict(*t.final_eval)) : py::none();
  py::dict time;
  for (const auto& [name, seconds] : t.time.parts()) time[name] = seconds;
  time["total"] = t.time.total;
  d["time"] = time;
  d["config_text"] = core::ConfigToText(cfg.config);
  return d;
}

// The model of `checkpoint` and a source over `pattern` built from its recorded config (its
// eval_data section, else data), unshuffled: what `reel eval` and `reel predict` read.
struct Loaded {
  core::CheckpointModel model;
  core::Owned<DataSource> source;
};
// `table` > 0: the numpy table of that handle (reel.sklearn's arrays, `data=`) instead of files.
Loaded LoadForData(const std::string& checkpoint, const std::string& pattern, int batch_size,
                   int64_t table = 0) {
  core::Host& host = GetHost();
  Loaded out;
  out.model = ValueOrThrow(core::LoadModelFromCheckpoint(host, checkpoint));
  const config::RunConfig& rc = out.model.config.config;
  config::Component data = rc.has_eval_data() ? rc.eval_data() : rc.data();
  if (table > 0) {
    data = InMemory(data, table, /*may_shuffle=*/false);
  } else {
    (*data.mutable_options())["files"] = pattern;
    (*data.mutable_options())["shuffle_buffer"] = "0";
    Storage* storage = ValueOrThrow(host.ForUri(pattern));
    if (ValueOrThrow(storage->Glob(pattern)).empty())
      ThrowIfError(NotFoundError("data pattern '" + pattern + "' matches no file"));
  }
  (*data.mutable_options())["batch_size"] = std::to_string(batch_size);
  DataSourceContext ctx{ShardSpec{}, rc.trainer().seed(), &host};
  out.source = ValueOrThrow(host.registry().CreateDataSource(
      data.name(), core::ComponentOptions(host.registry(), ComponentKind::kDataSource, data, rc),
      ctx));
  return out;
}

py::dict Evaluate(const std::string& checkpoint, const std::string& data, int top_k, int batch_size,
                  int64_t table) {
  core::EvalMetrics m;
  {
    py::gil_scoped_release release;
    m = AwayFromSignals([&] {
      Loaded l = LoadForData(checkpoint, data, batch_size, table);
      Model* models[] = {l.model.model.get()};
      return ValueOrThrow(core::Evaluate(models, *l.source, l.model.num_classes, top_k, nullptr));
    });
  }
  return MetricsDict(m);
}

py::tuple Predict(const std::string& checkpoint, const std::string& data, int top_k, int batch_size,
                  int64_t table) {
  std::vector<std::string> ids;
  std::vector<int32_t> classes;
  std::vector<float> scores;
  {
    py::gil_scoped_release release;
    AwayFromSignals([&] {
      Loaded l = LoadForData(checkpoint, data, batch_size, table);
      Model* models[] = {l.model.model.get()};
      ThrowIfError(core::Predict(
          models, *l.source, l.model.num_classes, top_k,
          [&](const std::string& id, const std::vector<std::pair<int32_t, float>>& top) {
            ids.push_back(id);
            for (int i = 0; i < top_k; ++i) {  // fewer classes than top_k: -1 and 0
              const bool have = i < static_cast<int>(top.size());
              classes.push_back(have ? top[static_cast<size_t>(i)].first : -1);
              scores.push_back(have ? top[static_cast<size_t>(i)].second : 0.0f);
            }
            return Status::Ok();
          }));
      return true;
    });
  }
  const auto n = static_cast<py::ssize_t>(ids.size());
  py::array_t<int32_t> c({n, static_cast<py::ssize_t>(top_k)});
  py::array_t<float> s({n, static_cast<py::ssize_t>(top_k)});
  std::copy(classes.begin(), classes.end(), c.mutable_data());
  std::copy(scores.begin(), scores.end(), s.mutable_data());
  return py::make_tuple(py::cast(ids), c, s);
}

py::dict Tune(const std::string& search, bool is_path, const std::vector<std::string>& overrides,
              const std::string& workdir, int parallel, bool resume, int verbosity,
              bool handle_sigint) {
  core::Host& host = GetHost();
  std::string text = search, name = "<search>";
  if (is_path) {
    std::ifstream in(search);
    if (!in) ThrowIfError(NotFoundError(search + ": cannot open the search config"));
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
    name = search;
  }
  core::TuneConfigFile cfg = ValueOrThrow(core::ParseTuneConfig(text, name));
  for (const std::string& o : overrides) ThrowIfError(core::ApplyOverride(cfg.base, o));
  *cfg.tune.mutable_base() = cfg.base.config;
  core::TuneOptions options;
  options.workdir = workdir;
  options.resume = resume;
  options.parallel = parallel;
  options.verbosity = verbosity;
  options.progress = verbosity > 0 ? &std::cerr : nullptr;
  options.should_stop = [] { return g_interrupted.load(); };
  Result<core::TuneResult> r = [&] {
    SigintScope sigint(handle_sigint);
    py::gil_scoped_release release;
    return AwayFromSignals(
        [&] { return core::RunTune(cfg, options, core::TrainingTrialRunner(host)); });
  }();
  const core::TuneResult& t = ValueOrThrow(std::move(r));
  if (t.interrupted && g_interrupted.load()) {
    PyErr_SetString(PyExc_KeyboardInterrupt,
                    ("search interrupted; continue with resume=True, workdir " + workdir).c_str());
    throw py::error_already_set();
  }
  py::list rows;
  for (const core::TuneRow& row : t.rows) {
    py::dict d;
    d["config"] = row.config;
    d["rung"] = row.rung;
    d["budget"] = row.budget;
    for (const auto& [field, value] : row.params) d[py::str(field)] = value;
    d["ok"] = row.ok;
    d["metric"] = row.ok ? py::object(py::float_(row.metric)) : py::none();
    d["gap"] = row.eval.gap;
    d["hit_at_1"] = row.eval.hit_at_1;
    d["perr"] = row.eval.perr;
    d["map"] = row.eval.map;
    d["steps"] = row.steps;
    d["seconds"] = row.seconds;
    d["error"] = row.error;
    d["dir"] = row.dir;
    rows.append(d);
  }
  py::dict d;
  d["rows"] = rows;
  d["best"] = t.best ? py::object(py::int_(*t.best)) : py::none();
  d["metric_name"] = t.metric_name;
  d["results_csv"] = t.results_csv;
  d["best_config"] = t.best_config;
  return d;
}

}  // namespace

void DefineTrain(py::module_& m) {
  m.def("train", &Train, py::arg("config"), py::arg("is_path"), py::arg("overrides"),
        py::arg("on_event"), py::arg("resume"), py::arg("verbosity"), py::arg("handle_sigint"),
        py::arg("data_table") = 0, py::arg("eval_table") = 0);
  m.def("evaluate", &Evaluate, py::arg("checkpoint"), py::arg("data"), py::arg("top_k"),
        py::arg("batch_size"), py::arg("table") = 0);
  m.def("predict", &Predict, py::arg("checkpoint"), py::arg("data"), py::arg("top_k"),
        py::arg("batch_size"), py::arg("table") = 0);
  m.def("tune", &Tune, py::arg("search"), py::arg("is_path"), py::arg("overrides"),
        py::arg("workdir"), py::arg("parallel"), py::arg("resume"), py::arg("verbosity"),
        py::arg("handle_sigint"));
}

}  // namespace reel::python
