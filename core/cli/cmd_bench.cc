// `reel bench storage|source|model|transport|optimizer --name NAME [options]`: the standard
// benchmark of one kind (the shapes of the project's benchmarks document) for any registered
// component, bundled or from a plugin, printed as the Markdown table the bundled benchmarks
// record (and written to --out), so backends can be compared side by side. Every case runs
// --reps times, the cases alternated within each repetition; min / median / max are reported,
// beside the hardware reference of the same run (memcpy of the same bytes) and the load average.
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <thread>

#include "args.h"
#include "cli.h"
#include "component_flags.h"
#include "measure.h"
#include "reel/core/collectives.h"
#include "reel/core/connect.h"
#include "train/precision.h"

namespace reel::cli {
namespace {

// The median of `reps` memcpy of `bytes` between two buffers (already touched once).
double MemcpySeconds(size_t bytes, int reps) {
  std::vector<char> a(std::max<size_t>(bytes, 1), 1), b(a.size(), 0);
  Times t;
  for (int i = 0; i < reps; ++i)
    t.push_back(*Time([&] {
      std::memcpy(b.data(), a.data(), bytes);
      return Status::Ok();
    }));
  return Summary(t).median;
}

std::string Fixed(double v, int digits = 3) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one;
  in >> one;
  return one.empty() ? "unknown" : one;
}

struct Bench {
  CliEnv& env;
  core::Registry& registry;
  const core::ComponentEntry& entry;
  std::map<std::string, std::string> options;  // the component's, from --option KEY=VALUE
  const Args& args;
  int reps = 3;
  std::ostringstream md;  // the report
};

// storage: write, read whole and read in 64 KiB pieces one object of --bytes under --root
// (default: a fresh temporary directory for "file"), beside memcpy of the same bytes.
Status StorageBench(Bench& b) {
  REEL_ASSIGN_OR_RETURN(const int64_t bytes, b.args.GetInt("bytes", int64_t{256} << 20));
  if (bytes < 1) return InvalidArgumentError("--bytes must be at least 1");
  std::string root = b.args.Get("root"), temp;
  if (root.empty() && b.entry.info.name != "file")
    return InvalidArgumentError("give --root " + b.entry.info.name + "://... (a writable place)");
  if (root.empty())
    root = temp =
        (std::filesystem::temp_directory_path() / ("reel-bench-" + std::to_string(::getpid())))
            .string();
  REEL_ASSIGN_OR_RETURN(auto storage, b.registry.CreateStorage(b.entry.info.name, b.options));
  if (!temp.empty()) std::filesystem::create_directories(temp);
  (void)storage->CreateDir(root);
  const std::string uri = root + "/reel-bench.bin";
  std::string data(static_cast<size_t>(bytes), '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131 + (i >> 12));
  std::string back(data.size(), '\0');
  const std::vector<std::pair<std::string, std::function<Status()>>> passes = {
      {"write (Append 8 MiB pieces, Close)",
       [&]() -> Status {
         REEL_ASSIGN_OR_RETURN(auto f, storage->OpenWrite(uri));
         for (size_t at = 0; at < data.size(); at += 8 << 20)
           REEL_RETURN_IF_ERROR(f->Append(std::as_bytes(std::span<const char>(
               data.data() + at, std::min<size_t>(8 << 20, data.size() - at)))));
         return f->Close();
       }},
      {"read whole (one Read)",
       [&]() -> Status {
         REEL_ASSIGN_OR_RETURN(std::string got, ReadAll(*storage, uri));
         return got.size() == data.size() ? Status::Ok() : DataLossError(uri + ": short read");
       }},
      {"read 64 KiB pieces in order",
       [&]() -> Status {
         REEL_ASSIGN_OR_RETURN(auto f, storage->OpenRead(uri));
         for (size_t at = 0; at < back.size();) {
           REEL_ASSIGN_OR_RETURN(
               size_t n,
               f->Read(at, std::as_writable_bytes(std::span<char>(
                               back.data() + at, std::min<size_t>(65536, back.size() - at)))));
           if (n == 0) return DataLossError(uri + ": ends at " + std::to_string(at));
           at += n;
         }
         return Status::Ok();
       }},
      {"memcpy of the same bytes",
       [&]() -> Status {
         std::memcpy(back.data(), data.data(), data.size());
         return Status::Ok();
       }},
  };
  std::vector<Times> times(passes.size());
  for (int r = 0; r < b.reps; ++r)
    for (size_t p = 0; p < passes.size(); ++p) {
      REEL_ASSIGN_OR_RETURN(double s, Time(passes[p].second));
      times[p].push_back(s);
    }
  (void)storage->Delete(uri);
  if (!temp.empty()) std::filesystem::remove_all(temp);
  b.md << "One object of " << bytes << " bytes at " << uri
       << ". GB/s = 1e9 bytes/s of the median.\n\n"
       << "| pass | min s | median s | max s | GB/s | its time / read whole "
          "|\n|---|---|---|---|---|---|\n";
  const double read = Summary(times[1]).median;
  for (size_t p = 0; p < passes.size(); ++p) {
    const Spread s = Summary(times[p]);
    b.md << "| " << passes[p].first << " | " << Fixed(s.min) << " | " << Fixed(s.median) << " | "
         << Fixed(s.max) << " | " << Fixed(bytes / s.median / 1e9) << " | "
         << Fixed(s.median / read, 2) << "x |\n";
  }
  return Status::Ok();
}

// source: one epoch per repetition of a fresh source (as training drives it), beside memcpy of
// the input bytes it reports.
Status SourceBench(Bench& b) {
  Times times;
  int64_t videos = 0, bytes = 0;
  for (int r = 0; r < b.reps; ++r) {
    DataSourceContext ctx{{0, 1}, 1, &b.env.host.storage()};
    REEL_ASSIGN_OR_RETURN(auto source,
                          b.registry.CreateDataSource(b.entry.info.name, b.options, ctx));
    videos = 0;
    REEL_ASSIGN_OR_RETURN(double s, Time([&] { return DrainEpoch(*source, &videos); }));
    times.push_back(s);
    bytes = source->stats().bytes;
  }
  const Spread s = Summary(times);
  const double copy = MemcpySeconds(static_cast<size_t>(bytes), b.reps);
  b.md << "One epoch of " << videos << " videos, " << bytes
       << " input bytes (as the source reports them) into batches, one thread driving it.\n\n"
       << "| pass | min s | median s | max s | videos/s | GB/s of input | source / pass |\n"
       << "|---|---|---|---|---|---|---|\n"
       << "| " << b.entry.info.name << " | " << Fixed(s.min) << " | " << Fixed(s.median) << " | "
       << Fixed(s.max) << " | " << Fixed(videos / s.median, 0) << " | "
       << Fixed(bytes / s.median / 1e9) << " | 1 |\n"
       << "| memcpy of the input bytes | | " << Fixed(copy, 4) << " | | | "
       << Fixed(copy > 0 ? bytes / copy / 1e9 : 0) << " | " << Fixed(copy / s.median, 3) << " |\n";
  return Status::Ok();
}

// model: one training step (forward, the core's loss, backward, the sync optimizer's Adam
// update) at B=--batch, T=--frames (benchmarks.md: 32, 300), --classes (3862).
Status ModelBench(Bench& b) {
  core::ConformanceOptions shape;
  REEL_ASSIGN_OR_RETURN(const int64_t batch_size, b.args.GetInt("batch", 32));
  REEL_ASSIGN_OR_RETURN(const int64_t frames, b.args.GetInt("frames", 300));
  REEL_ASSIGN_OR_RETURN(shape.num_classes, b.args.GetInt("classes", 3862));
  if (batch_size < 1 || frames < 1 || shape.num_classes < 1)
    return InvalidArgumentError("--batch, --frames and --classes must be at least 1");
  for (const std::string& f : b.args.GetAll("feature"))
    REEL_RETURN_IF_ERROR(ParseFeatureFlag(f, shape));
  REEL_ASSIGN_OR_RETURN(core::PrecisionChoice precision,
                        core::ResolvePrecision(b.args.Get("precision", "fp32"),
                                               core::DetectCpuBf16(core::ProcessEnvironment())));
  StepInputs inputs;
  inputs.precision = precision.precision;
  REEL_ASSIGN_OR_RETURN(ModelTimes t, TimeModel(b.registry, b.entry.info.name, b.options, shape,
                                                batch_size, frames, b.reps, "adam", inputs));
  const Spread s = Summary(t.step);
  b.md << "One training step (forward, loss, backward, Adam update) on synthetic input: B="
       << batch_size << ", T=" << frames << " (frame-level features), " << shape.num_classes
       << " classes, " << t.params << " parameters, "
       << (precision.why.empty()
               ? "precision " + std::string(core::PrecisionName(precision.precision))
               : precision.why)
       << ", compute threads: the machine's.\n\n"
       << "| case | min s | median s | max s | videos/s | frames/s |\n|---|---|---|---|---|---|\n"
       << "| " << b.entry.info.name << "_step | " << Fixed(s.min) << " | " << Fixed(s.median)
       << " | " << Fixed(s.max) << " | " << Fixed(batch_size / s.median, 1) << " | "
       << (t.frame_count > 0 ? Fixed(t.frame_count / s.median, 0) : "(video level)") << " |\n";
  return Status::Ok();
}

// optimizer: one step over --params float32 parameters (benchmarks.md: 10M) on 1 and 2 ranks
// (threads of this process over the core's inproc transport).
Status OptimizerBench(Bench& b) {
  REEL_ASSIGN_OR_RETURN(const int64_t params, b.args.GetInt("params", 10'000'000));
  if (params < 1) return InvalidArgumentError("--params must be at least 1");
  b.md << "One Step over " << params << " float32 parameters per rank, ranks as threads over the "
       << "inproc transport.\n\n| ranks | min s | median s | max s | parameters/s per rank |\n"
       << "|---|---|---|---|---|\n";
  for (int n : {1, 2}) {
    REEL_ASSIGN_OR_RETURN(auto comms, LocalRanks(n));
    std::vector<ParamArena> arenas(static_cast<size_t>(n));
    std::vector<core::Owned<Optimizer>> optimizers;
    for (int r = 0; r < n; ++r) {
      REEL_ASSIGN_OR_RETURN(
          auto o, b.registry.CreateOptimizer(b.entry.info.name, b.options, OptimizerContext{r, n}));
      optimizers.push_back(std::move(o));
      REEL_RETURN_IF_ERROR(arenas[static_cast<size_t>(r)].Declare("w", {params}).status());
      arenas[static_cast<size_t>(r)].Finalize();
    }
    REEL_RETURN_IF_ERROR(OnThreads(n, [&](int r) {
      return optimizers[static_cast<size_t>(r)]->Setup(arenas[static_cast<size_t>(r)],
                                                       *comms[static_cast<size_t>(r)]);
    }));
    auto step = [&] {
      return OnThreads(n, [&](int r) -> Status {
        Optimizer& o = *optimizers[static_cast<size_t>(r)];
        if (o.rank_roles() != nullptr && o.rank_roles()->IsServerOnly()) return Status::Ok();
        auto g = arenas[static_cast<size_t>(r)].grads();
        std::fill(g.begin(), g.end(), 1e-3f * static_cast<float>(r + 1));
        return o.Step(1e-2f);
      });
    };
    REEL_RETURN_IF_ERROR(step());  // warm-up
    Times times;
    for (int i = 0; i < b.reps; ++i) {
      REEL_ASSIGN_OR_RETURN(double s, Time(step));
      times.push_back(s);
    }
    REEL_RETURN_IF_ERROR(
        OnThreads(n, [&](int r) { return optimizers[static_cast<size_t>(r)]->Finish(); }));
    const Spread s = Summary(times);
    b.md << "| " << n << " | " << Fixed(s.min, 4) << " | " << Fixed(s.median, 4) << " | "
         << Fixed(s.max, 4) << " | " << Fixed(params / s.median / 1e6, 1) << "M |\n";
  }
  return Status::Ok();
}

// transport: allreduce of 4 KiB ... --max-bytes (64 MiB) float32 over 2 ranks as threads (the
// core's ring collectives unless the backend has native ones), beside memcpy of the same size.
Status TransportBench(Bench& b) {
  REEL_ASSIGN_OR_RETURN(const int64_t max_bytes, b.args.GetInt("max-bytes", int64_t{64} << 20));
  if (max_bytes < 4096) return InvalidArgumentError("--max-bytes must be at least 4096");
  constexpr int kRanks = 2;
  TransportMaker maker(b.registry, b.entry, b.options);
  REEL_ASSIGN_OR_RETURN(TransportMaker::Made made, maker.Make());
  std::vector<TransportContext> ranks;
  for (int r = 0; r < kRanks; ++r) ranks.push_back({r, kRanks, made.coordinator});
  REEL_ASSIGN_OR_RETURN(
      auto comms,
      core::ConnectConcurrently(*made.transport, ranks, DeadlineIn(std::chrono::seconds(60))));
  for (auto& c : comms) c = core::WithRingCollectives(std::move(c));
  b.md << kRanks << " ranks as threads of one process, coordinator " << made.coordinator
       << ". busbw = algbw * 2(n-1)/n.\n\n"
       << "| bytes | min us | median us | max us | algbw (GB/s) | busbw (GB/s) | memcpy same size "
          "(GB/s) | busbw / memcpy |\n|---|---|---|---|---|---|---|---|\n";
  for (int64_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
    std::vector<std::vector<float>> data(kRanks,
                                         std::vector<float>(static_cast<size_t>(bytes / 4), 1.0f));
    auto once = [&] {
      return OnThreads(kRanks, [&](int r) {
        return comms[static_cast<size_t>(r)]->AllReduce(
            data[static_cast<size_t>(r)], ReduceOp::kSum, DeadlineIn(std::chrono::seconds(120)));
      });
    };
    REEL_RETURN_IF_ERROR(once());  // warm-up
    Times times;
    for (int i = 0; i < b.reps; ++i) {
      REEL_ASSIGN_OR_RETURN(double s, Time(once));
      times.push_back(s);
    }
    const Spread s = Summary(times);
    const double algbw = bytes / s.median / 1e9, busbw = algbw * 2 * (kRanks - 1) / kRanks;
    const double copy = bytes / MemcpySeconds(static_cast<size_t>(bytes), b.reps) / 1e9;
    b.md << "| " << bytes << " | " << Fixed(s.min * 1e6, 1) << " | " << Fixed(s.median * 1e6, 1)
         << " | " << Fixed(s.max * 1e6, 1) << " | " << Fixed(algbw, 2) << " | " << Fixed(busbw, 2)
         << " | " << Fixed(copy, 2) << " | " << Fixed(busbw / copy, 2) << " |\n";
  }
  return Status::Ok();
}

Status BenchCommand(CliEnv& env, const std::vector<std::string>& words) {
  static const std::map<std::string, std::pair<ComponentKind, Status (*)(Bench&)>> kKinds = {
      {"storage", {ComponentKind::kStorage, StorageBench}},
      {"source", {ComponentKind::kDataSource, SourceBench}},
      {"model", {ComponentKind::kModel, ModelBench}},
      {"optimizer", {ComponentKind::kOptimizer, OptimizerBench}},
      {"transport", {ComponentKind::kTransport, TransportBench}}};
  Args args;
  args.Value("name")
      .Value("option", true)
      .Value("reps")
      .Value("out")
      .Value("root")
      .Value("bytes")
      .Value("batch")
      .Value("frames")
      .Value("classes")
      .Value("precision")
      .Value("feature", true)
      .Value("params")
      .Value("max-bytes");
  REEL_RETURN_IF_ERROR(args.Parse(words));
  if (args.positional().size() != 1 || !kKinds.count(args.positional()[0]))
    return InvalidArgumentError("name one kind: storage, source, model, optimizer or transport");
  const auto& [kind, run] = kKinds.at(args.positional()[0]);
  if (!args.Has("name")) return InvalidArgumentError("--name NAME: which component to benchmark");
  const core::ComponentEntry* entry = env.host.registry().Find(kind, args.Get("name"));
  if (entry == nullptr)
    return NotFoundError("no " + std::string(ComponentKindName(kind)) + " named '" +
                         args.Get("name") + "' (registered: " + env.host.registry().Names(kind) +
                         ")");
  Bench b{env, env.host.registry(), *entry, {}, args, 3, {}};
  for (const std::string& o : args.GetAll("option")) {
    const size_t eq = o.find('=');
    if (eq == 0 || eq == std::string::npos)
      return InvalidArgumentError("--option " + o + ": expected KEY=VALUE");
    b.options[o.substr(0, eq)] = o.substr(eq + 1);
  }
  REEL_ASSIGN_OR_RETURN(const int64_t reps, args.GetInt("reps", 3));
  if (reps < 1) return InvalidArgumentError("--reps must be at least 1");
  b.reps = static_cast<int>(reps);
  std::string command = "reel bench";
  for (const std::string& w : words) command += " " + w;
  b.md << "# " << args.positional()[0] << " benchmark: " << entry->info.name << " ("
       << (entry->provider_path.empty() ? "built in" : entry->provider) << ")\n\nCommand: `"
       << command << "`; " << b.reps << " repetitions, cases alternated; "
       << std::thread::hardware_concurrency() << " cores; 1-minute load average at the start "
       << LoadAverage() << ".\n\n";
  REEL_RETURN_IF_ERROR(
      run(b).WithContext(std::string(ComponentKindName(kind)) + " " + entry->info.name));
  b.md << "\n1-minute load average at the end: " << LoadAverage()
       << " (on a shared machine compare the ratio columns, not absolute rates).\n";
  env.out << b.md.str();
  if (args.Has("out")) {
    REEL_ASSIGN_OR_RETURN(Storage * storage, env.host.storage().ForUri(args.Get("out")));
    REEL_RETURN_IF_ERROR(WriteAll(*storage, args.Get("out"), b.md.str()));
  }
  return Status::Ok();
}

}  // namespace

CliCommand BenchCliCommand() {
  return {"bench",
          "the standard benchmark of a storage, data source, model, optimizer or transport",
          "reel bench storage|source|model|optimizer|transport --name NAME [--option KEY=VALUE]... "
          "[--reps N] [--out FILE.md] [storage: --root URI --bytes N] [model: --batch B --frames T "
          "--classes C --precision fp32|bf16|auto --feature NAME=WIDTH[xFRAMES]...] [optimizer: "
          "--params N] [transport: "
          "--max-bytes N]",
          BenchCommand};
}

}  // namespace reel::cli
