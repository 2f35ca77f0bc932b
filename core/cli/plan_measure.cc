#include "plan_measure.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "component_flags.h"
#include "measure.h"
#include "reel/core/collectives.h"
#include "reel/core/connect.h"
#include "reel/host_cores.h"
#include "train/thread_budget.h"

namespace reel::cli {
namespace {

double Median(const Times& t) { return Summary(t).median; }

// The cores a step or an update rule measured here keeps busy: its OpenMP team, at most this
// process's cores. A rate per core is the measured rate over these, not over the process's cores:
// under OMP_NUM_THREADS=1 on 2 cores the step runs on one, and dividing its rate by 2 halved the
// per-core rate (docs/capacity.md, "The machine profile").
double BusyCores() { return std::min<double>(CoresAvailable(), std::max(1, core::TeamSize())); }

Status RunCommand(CliEnv& env, const std::string& name, const std::vector<std::string>& args) {
  REEL_ASSIGN_OR_RETURN(auto command, env.host.registry().CreateCommand(name));
  std::ostringstream quiet;
  CommandContext ctx{&env.host.storage(), &quiet, &env.err};
  return command->Run(args, ctx).WithContext("reel " + name);
}

// Bytes per second one thread reads and parses shards of `level` (the tfrecord source, no
// prefetch thread: the decoding alone, as the prefetch thread does it).
Result<double> DecodeRate(CliEnv& env, const std::string& dir, const std::string& level,
                          const MeasureSizes& z, int reps) {
  std::filesystem::create_directories(dir);
  REEL_RETURN_IF_ERROR(RunCommand(
      env, "synth",
      {"--out", dir, "--videos", std::to_string(level == "frame" ? z.frame_videos : z.video_videos),
       "--classes", "3862", "--level", level, "--shards", "2", "--min-frames", "300",
       "--max-frames", "300", "--seed", "7"}));
  Times times;
  int64_t bytes = 0;
  for (int r = 0; r < reps + 1; ++r) {  // the first pass warms the page cache
    DataSourceContext ctx{{0, 1}, 1, &env.host.storage()};
    REEL_ASSIGN_OR_RETURN(auto source,
                          env.host.registry().CreateDataSource("tfrecord",
                                                               {{"files", dir + "/*.tfrecord"},
                                                                {"level", level},
                                                                {"prefetch", "0"},
                                                                {"batch_size", "32"}},
                                                               ctx));
    REEL_ASSIGN_OR_RETURN(double s, Time([&] { return DrainEpoch(*source); }));
    bytes = source->stats().bytes;
    if (r > 0) times.push_back(s);
  }
  return bytes / Median(times);
}

// Local disk: write z.disk_bytes, then read them back with the page cache dropped.
Result<std::pair<double, double>> DiskRates(CliEnv& env, const std::string& dir,
                                            const MeasureSizes& z, int reps) {
  const std::string path = dir + "/reel-plan-disk.bin";
  REEL_ASSIGN_OR_RETURN(Storage * storage, env.host.storage().ForUri(path));
  std::string data(static_cast<size_t>(z.disk_bytes), '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131 + (i >> 12));
  Times write, read;
  for (int r = 0; r < reps; ++r) {
    REEL_ASSIGN_OR_RETURN(double w, Time([&] { return WriteAll(*storage, path, data); }));
    write.push_back(w);
    if (int fd = ::open(path.c_str(), O_RDONLY); fd >= 0) {  // a cold read, as an epoch's is
      ::fdatasync(fd);
      ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
      ::close(fd);
    }
    REEL_ASSIGN_OR_RETURN(double s, Time([&]() -> Status {
                            REEL_ASSIGN_OR_RETURN(std::string got, ReadAll(*storage, path));
                            return got.size() == data.size() ? Status::Ok()
                                                             : DataLossError(path + ": short read");
                          }));
    read.push_back(s);
  }
  (void)storage->Delete(path);
  return std::make_pair(z.disk_bytes / Median(read), z.disk_bytes / Median(write));
}

// The tcp transport between two ranks on loopback: allreduce bus bandwidth, point-to-point rate
// and one-way latency.
Status TransportRates(CliEnv& env, const MeasureSizes& z, int reps, plan::Rates& r) {
  const core::ComponentEntry* tcp = env.host.registry().Find(ComponentKind::kTransport, "tcp");
  if (tcp == nullptr)
    return NotFoundError(
        "measuring needs the tcp transport plugin (reel plugins lists what loaded)");
  TransportMaker maker(env.host.registry(), *tcp, {});
  REEL_ASSIGN_OR_RETURN(TransportMaker::Made made, maker.Make());
  std::vector<TransportContext> ranks = {{0, 2, made.coordinator}, {1, 2, made.coordinator}};
  REEL_ASSIGN_OR_RETURN(
      auto comms,
      core::ConnectConcurrently(*made.transport, ranks, DeadlineIn(std::chrono::seconds(60))));
  for (auto& c : comms) c = core::WithRingCollectives(std::move(c));
  const auto deadline = [] { return DeadlineIn(std::chrono::seconds(120)); };
  std::vector<std::vector<float>> data(2, std::vector<float>(z.message_bytes / 4, 1.0f));
  std::vector<std::byte> in(z.message_bytes), out(z.message_bytes, std::byte{1});
  std::array<std::byte, 4> ping{};
  constexpr int kPings = 200;
  const auto allreduce = [&] {
    return OnThreads(
        2, [&](int k) { return comms[k]->AllReduce(data[k], ReduceOp::kSum, deadline()); });
  };
  const auto transfer = [&] {
    return OnThreads(2, [&](int k) {
      return k == 0 ? comms[0]->Send(1, 7, out, deadline())
                    : comms[1]->RecvInto(0, 7, in, deadline());
    });
  };
  const auto pings = [&] {
    return OnThreads(2, [&](int k) -> Status {
      for (int i = 0; i < kPings; ++i) {
        if (k == 0) {
          REEL_RETURN_IF_ERROR(comms[0]->Send(1, 8, ping, deadline()));
          REEL_RETURN_IF_ERROR(comms[0]->RecvInto(1, 9, ping, deadline()));
        } else {
          REEL_RETURN_IF_ERROR(comms[1]->RecvInto(0, 8, ping, deadline()));
          REEL_RETURN_IF_ERROR(comms[1]->Send(0, 9, ping, deadline()));
        }
      }
      return Status::Ok();
    });
  };
  REEL_RETURN_IF_ERROR(allreduce());  // warm-up
  REEL_RETURN_IF_ERROR(transfer());
  Times a, t, p;
  for (int i = 0; i < reps; ++i) {
    REEL_ASSIGN_OR_RETURN(double s, Time(allreduce));
    a.push_back(s);
    REEL_ASSIGN_OR_RETURN(s, Time(transfer));
    t.push_back(s);
    REEL_ASSIGN_OR_RETURN(s, Time(pings));
    p.push_back(s);
  }
  r.reduce_bytes = z.message_bytes / Median(a);  // busbw = algbw x 2(n-1)/n = algbw for 2 ranks
  r.transfer_bytes = z.message_bytes / Median(t);
  r.message_latency_s = Median(p) / (2 * kPings);
  return Status::Ok();
}

// One thread's copy of z.copy_bytes between two buffers: bytes read + written per second, the
// memory speed of a pass that converts a gradient (docs/capacity.md, "The machine profile").
Result<double> CopyRate(const MeasureSizes& z, int reps) {
  std::vector<char> from(static_cast<size_t>(z.copy_bytes), 1), to(from.size());
  std::memcpy(to.data(), from.data(), from.size());  // first touch
  Times t;
  for (int i = 0; i < reps; ++i) {
    REEL_ASSIGN_OR_RETURN(double s, Time([&] {
                            std::memcpy(to.data(), from.data(), from.size());
                            return to[from.size() / 2] == from[from.size() / 2]
                                       ? Status::Ok()
                                       : InternalError("the copy differs");
                          }));
    t.push_back(s);
  }
  return 2 * z.copy_bytes / Median(t);
}

// Parameters per second per core that the update rule applies (the sync optimizer on one rank).
Result<double> RuleRate(CliEnv& env, const std::string& rule, const MeasureSizes& z, int reps) {
  REEL_ASSIGN_OR_RETURN(auto comms, LocalRanks(1));
  REEL_ASSIGN_OR_RETURN(auto optimizer,
                        env.host.registry().CreateOptimizer("sync", {{"rule", rule}}));
  ParamArena arena;
  REEL_RETURN_IF_ERROR(arena.Declare("w", {z.rule_params}).status());
  arena.Finalize();
  REEL_RETURN_IF_ERROR(optimizer->Setup(arena, *comms[0]));
  std::fill(arena.grads().begin(), arena.grads().end(), 1e-3f);
  REEL_RETURN_IF_ERROR(optimizer->Step(1e-2f));  // warm-up
  Times t;
  for (int i = 0; i < reps; ++i) {
    REEL_ASSIGN_OR_RETURN(double s, Time([&] { return optimizer->Step(1e-2f); }));
    t.push_back(s);
  }
  REEL_RETURN_IF_ERROR(optimizer->Finish());
  return z.rule_params / Median(t) / BusyCores();
}

// One connection's read rate from S3: z.s3_bytes written under `prefix`, read whole, deleted.
Result<double> S3Rate(CliEnv& env, const std::string& prefix, const MeasureSizes& z, int reps) {
  const std::string uri = prefix + "/reel-plan-s3.bin";
  REEL_ASSIGN_OR_RETURN(Storage * storage, env.host.storage().ForUri(uri));
  REEL_RETURN_IF_ERROR(WriteAll(*storage, uri, std::string(static_cast<size_t>(z.s3_bytes), 'r')));
  Times t;
  for (int i = 0; i < reps; ++i) {
    REEL_ASSIGN_OR_RETURN(double s, Time([&]() -> Status {
                            REEL_ASSIGN_OR_RETURN(auto f, storage->OpenRead(uri));
                            std::string buf(static_cast<size_t>(z.s3_bytes), '\0');
                            REEL_ASSIGN_OR_RETURN(
                                size_t n, f->Read(0, std::as_writable_bytes(std::span<char>(buf))));
                            return n == buf.size() ? Status::Ok() : DataLossError(uri + ": short");
                          }));
    t.push_back(s);
  }
  (void)storage->Delete(uri);
  return z.s3_bytes / Median(t);
}

}  // namespace

std::string OptionsKey(const std::map<std::string, std::string>& options) {
  std::string key;
  for (const auto& [k, v] : options) key += (key.empty() ? "" : ";") + k + "=" + v;
  return key;
}

std::string ModelKey(const ModelSpec& spec) {
  return OptionsKey(spec.options) + (spec.precision == Precision::kBf16 ? "|precision=bf16" : "");
}

Result<plan::Rates> MeasureNode(CliEnv& env, const std::string& scratch,
                                const std::string& s3_prefix, const std::string& rule,
                                const MeasureSizes& z, int reps) {
  plan::Rates r;
  r.cores = CoresAvailable();
  REEL_ASSIGN_OR_RETURN(r.decode_bytes_per_core,
                        DecodeRate(env, scratch + "/frame", "frame", z, reps));
  REEL_ASSIGN_OR_RETURN(r.decode_video_bytes_per_core,
                        DecodeRate(env, scratch + "/video", "video", z, reps));
  REEL_ASSIGN_OR_RETURN(auto disk, DiskRates(env, scratch, z, reps));
  r.disk_read_bytes = disk.first;
  r.disk_write_bytes = disk.second;
  REEL_RETURN_IF_ERROR(TransportRates(env, z, reps, r));
  REEL_ASSIGN_OR_RETURN(r.apply_params_per_core, RuleRate(env, rule, z, reps));
  REEL_ASSIGN_OR_RETURN(r.memory_bytes, CopyRate(z, reps));
  if (!s3_prefix.empty()) {
    REEL_ASSIGN_OR_RETURN(r.s3_bytes_per_connection, S3Rate(env, s3_prefix, z, reps));
  }
  return r;
}

namespace {

// Up to `n` batches of the config's training data, as the trainer's source gives them; none
// (and why on `err`) when it names no data or yields none here. `fill_s_per_record`: the wait for
// the first batch over the records the source had read by then (0 when none came): with a
// `shuffle_buffer` of S, S + the first batch's, or every record when the data holds fewer (counted
// by taking batches on until then). Timed on a second source after a first one warmed the page
// cache, as reading is planned apart.
std::vector<Batch> DataBatches(CliEnv& env, const ModelSpec& spec, int n,
                               double* fill_s_per_record) {
  std::vector<Batch> out;
  *fill_s_per_record = 0;
  if (spec.data.empty()) return out;
  DataSourceContext ctx{{0, 1}, spec.seed, &env.host.storage()};
  auto why = [&](const Status& s) {
    env.err << "reel plan: timing the step on a synthetic batch (frame-level features of "
            << spec.frames << " frames): the config's data gave none (" << s.ToString() << ")\n";
  };
  const auto buffer = spec.data_options.find("shuffle_buffer");
  const int64_t shuffle_buffer =
      buffer == spec.data_options.end() ? 0 : std::max(0LL, std::atoll(buffer->second.c_str()));
  for (int pass = 0; pass < 2; ++pass) {
    out.clear();
    auto source = env.host.registry().CreateDataSource(spec.data, spec.data_options, ctx);
    if (!source.ok()) {
      why(source.status());
      return out;
    }
    const auto start = std::chrono::steady_clock::now();
    while (static_cast<int>(out.size()) < n) {
      Result<Batch> b = (*source)->Next();
      if (!b.ok()) {
        if (out.empty()) why(b.status());
        break;
      }
      if (out.empty()) {
        const double waited =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const int64_t fill = shuffle_buffer + b->size();
        int64_t records = b->size();
        out.push_back(std::move(*b));
        while (records < fill) {  // how many the buffer held: the data may have fewer
          Result<Batch> more = (*source)->Next();
          if (!more.ok()) break;
          records += more->size();
          if (static_cast<int>(out.size()) < n) out.push_back(std::move(*more));
        }
        *fill_s_per_record = waited / static_cast<double>(std::min(records, fill));
        continue;
      }
      out.push_back(std::move(*b));
    }
    if (out.empty()) return out;
  }
  return out;
}

}  // namespace

Result<plan::ModelRates> MeasureModel(CliEnv& env, const ModelSpec& spec, int reps,
                                      int step_batches) {
  core::ConformanceOptions shape;
  shape.num_classes = spec.classes;
  double fill_s_per_record = 0;
  StepInputs inputs{DataBatches(env, spec, step_batches, &fill_s_per_record), spec.clip_norm,
                    spec.stop_on_nonfinite, spec.precision};
  int64_t videos = 0;
  for (const Batch& b : inputs.batches) videos += b.size();
  const double per_batch = inputs.batches.empty()
                               ? static_cast<double>(spec.batch)
                               : static_cast<double>(videos) / inputs.batches.size();
  REEL_ASSIGN_OR_RETURN(ModelTimes t, TimeModel(env.host.registry(), spec.name, spec.options, shape,
                                                spec.batch, spec.frames, reps, spec.rule, inputs));
  const double cores = BusyCores();
  plan::ModelRates m;
  m.name = spec.name;
  m.options = ModelKey(spec);
  m.batch = spec.batch;
  m.classes = spec.classes;
  // The frames the step was timed at: the real batches' mean per video, or the synthetic one's.
  m.frames = t.frame_count == 0       ? 1
             : inputs.batches.empty() ? static_cast<double>(spec.frames)
                                      : t.mean_frames;
  m.params = static_cast<double>(t.params);
  m.step_examples_per_core = per_batch / Median(t.step) / cores;
  m.forward_examples_per_core = per_batch / Median(t.forward) / cores;
  m.startup_s = t.startup;
  m.fill_s_per_record = fill_s_per_record;
  m.backward_fraction = Median(t.backward_share);
  m.update_fraction = Median(t.update_share);
  return m;
}

}  // namespace reel::cli
