// The capacity model (see capacity_model.h for the formulas).
#include "plan/capacity_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <utility>
#include <vector>

namespace reel::core::plan {
namespace {

Status Positive(double value, const std::string& what) {
  if (!(value > 0) || !std::isfinite(value))
    return InvalidArgumentError(fmt::format("{} must be a positive number, not {}", what, value));
  return Status::Ok();
}

// Per-example costs and the node's rates that every plan needs.
struct Costs {
  double frame_scale = 1;  // the dataset's frames over the profile's
  double bytes_per_example = 0;
  double decode_cs = 0;  // core-seconds to read and parse one example
  double step_cs = 0;    // core-seconds of one example's training step
  double forward_cs = 0;
  double io_rate = 0;     // bytes/s one node reads its data at
  double write_rate = 0;  // bytes/s one rank writes a checkpoint at
};

// The busiest of `ranks` training ranks' share of the epoch (capacity_model.h, "share").
struct Share {
  double examples = 0;    // its videos
  double read_bytes = 0;  // the bytes it reads for them
  int64_t files = 0;      // its files (0: unknown, or fewer files than ranks)
};

Share ShareOf(const Dataset& d, int ranks, double bytes_per_example) {
  const double V = static_cast<double>(d.videos), R = ranks;
  Share s;
  if (d.files >= ranks) {  // whole files: file i to rank i mod R
    s.files = (d.files + ranks - 1) / ranks;
    s.examples = std::ceil(static_cast<double>(s.files) * V / static_cast<double>(d.files));
    s.read_bytes = s.examples * bytes_per_example;
  } else {
    s.examples = std::ceil(V / R);
    // Fewer files than ranks: every rank reads every record, and keeps its own.
    s.read_bytes = d.files > 0 ? d.bytes : s.examples * bytes_per_example;
  }
  return s;
}

// Each worker's steps in an epoch: whole files (file i to worker i mod W), or an even share when
// the files are unknown or fewer than the workers.
std::vector<double> WorkerSteps(const Dataset& d, int workers, double batch) {
  const double V = static_cast<double>(d.videos);
  std::vector<double> steps(static_cast<size_t>(workers), V / workers / batch);
  if (d.files < workers) return steps;
  for (int w = 0; w < workers; ++w) {
    const int64_t files = d.files / workers + (w < d.files % workers ? 1 : 0);
    steps[static_cast<size_t>(w)] = std::ceil(std::ceil(files * V / d.files) / batch);
  }
  return steps;
}

// The seconds until every worker has taken its steps, when one alone takes `alone` steps a second
// and the servers at most `cap` for all: while k workers are left each gets min(alone, cap / k),
// so a worker with more files than the others finishes alone, at its own rate.
double SharedServersSeconds(std::vector<double> steps, double alone, double cap) {
  std::sort(steps.begin(), steps.end());
  double seconds = 0, done = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const double left = static_cast<double>(steps.size() - i);
    seconds += (steps[i] - done) / std::min(alone, cap / left);
    done = steps[i];
  }
  return seconds;
}

Result<Costs> CostsOf(const Dataset& d, const Cluster& c, const Rates& r) {
  Costs k;
  if (d.mean_frames > 0 && r.frames > 0) k.frame_scale = d.mean_frames / r.frames;
  k.bytes_per_example = d.bytes / static_cast<double>(d.videos);
  k.decode_cs = k.bytes_per_example / r.decode_bytes_per_core;
  k.step_cs = k.frame_scale / r.step_examples_per_core;
  if (d.eval_videos > 0) k.forward_cs = k.frame_scale / r.forward_examples_per_core;
  if (d.storage == Storage::kLocal) {
    k.io_rate = r.disk_read_bytes;
    k.write_rate = r.disk_write_bytes;
  } else {
    k.io_rate = std::min(c.s3_bytes_per_s, c.s3_connections * r.s3_bytes_per_connection);
    k.write_rate = c.s3_bytes_per_s;
    if (c.link_bytes_per_s > 0) {  // S3 traffic crosses the node's link
      k.io_rate = std::min(k.io_rate, c.link_bytes_per_s * c.link_payload);
      k.write_rate = std::min(k.write_rate, c.link_bytes_per_s * c.link_payload);
    }
  }
  return k;
}

Status Validate(const Dataset& d, const Cluster& c, const Training& t, const Rates& r) {
  if (c.nodes < 1) return InvalidArgumentError("a cluster needs at least 1 node");
  REEL_RETURN_IF_ERROR(Positive(c.cores_per_node, "cores per node"));
  if (t.batch_per_rank < 1) return InvalidArgumentError("the batch per rank must be at least 1");
  if (d.videos < 1) return InvalidArgumentError("the dataset needs at least 1 video");
  REEL_RETURN_IF_ERROR(Positive(d.bytes, "the dataset's bytes"));
  REEL_RETURN_IF_ERROR(Positive(t.params, "the model's parameter count"));
  if (d.mean_frames < 0) return InvalidArgumentError("mean frames cannot be negative");
  if (d.eval_videos < 0) return InvalidArgumentError("eval videos cannot be negative");
  if (d.files < 0) return InvalidArgumentError("the dataset's file count cannot be negative");
  if (d.files > d.videos)
    return InvalidArgumentError(fmt::format(
        "{} files cannot hold {} videos: a file holds at least one", d.files, d.videos));
  if (t.checkpoints_per_epoch < 0)
    return InvalidArgumentError("checkpoints per epoch cannot be negative");
  int ranks = c.nodes;
  if (t.async) {
    if (t.servers < 1) return InvalidArgumentError("async_sgd needs at least 1 server");
    ranks = c.nodes - t.servers;
    if (ranks < 1)
      return InvalidArgumentError(fmt::format(
          "async_sgd with {} server(s) on {} node(s) leaves no worker: give more nodes than "
          "servers",
          t.servers, c.nodes));
  }
  if (c.nodes > 1 || t.async) {
    REEL_RETURN_IF_ERROR(Positive(c.link_bytes_per_s, "the link rate per node"));
    if (!(c.link_payload > 0 && c.link_payload <= 1))
      return InvalidArgumentError(
          fmt::format("the link's payload share must be in (0, 1], not {} (an MTU above 52 bytes)",
                      c.link_payload));
    if (c.link_latency_s < 0) return InvalidArgumentError("the link latency cannot be negative");
  }
  if (d.videos < static_cast<int64_t>(ranks) * t.batch_per_rank)
    return InvalidArgumentError(fmt::format(
        "a dataset of {} videos is smaller than one batch of every training rank ({} x {})",
        d.videos, ranks, t.batch_per_rank));
  if (d.storage == Storage::kS3) {
    REEL_RETURN_IF_ERROR(Positive(c.s3_bytes_per_s, "the S3 bandwidth per node"));
    if (c.s3_connections < 1) return InvalidArgumentError("S3 needs at least 1 connection");
    REEL_RETURN_IF_ERROR(Positive(r.s3_bytes_per_connection,
                                  "the profile's S3 rate per connection (measure it with "
                                  "--s3-endpoint, or give --s3-rate-per-connection)"));
  } else {
    REEL_RETURN_IF_ERROR(Positive(r.disk_read_bytes, "the profile's disk read rate"));
    if (t.checkpoints_per_epoch > 0)
      REEL_RETURN_IF_ERROR(Positive(r.disk_write_bytes, "the profile's disk write rate"));
  }
  REEL_RETURN_IF_ERROR(Positive(r.cores, "the profile's core count"));
  if (!(r.startup_seconds >= 0) || !std::isfinite(r.startup_seconds))
    return InvalidArgumentError(
        fmt::format("the profile's startup must be 0 or more seconds, not {}", r.startup_seconds));
  if (!(r.fill_seconds_per_record >= 0) || !std::isfinite(r.fill_seconds_per_record))
    return InvalidArgumentError(
        fmt::format("the profile's fill must be 0 or more seconds a record, not {}",
                    r.fill_seconds_per_record));
  if (t.shuffle_buffer < 0)
    return InvalidArgumentError(
        fmt::format("the shuffle buffer cannot be negative ({})", t.shuffle_buffer));
  REEL_RETURN_IF_ERROR(Positive(r.decode_bytes_per_core, "the profile's decode rate"));
  REEL_RETURN_IF_ERROR(Positive(r.step_examples_per_core, "the profile's step rate"));
  if (d.eval_videos > 0)
    REEL_RETURN_IF_ERROR(Positive(r.forward_examples_per_core, "the profile's forward rate"));
  if (c.nodes > 1 && !t.async)
    REEL_RETURN_IF_ERROR(Positive(r.reduce_bytes, "the profile's allreduce rate"));
  if (!(t.bucket_bytes >= 0)) return InvalidArgumentError("the bucket size cannot be negative");
  const bool split = r.backward_fraction >= 0 && r.update_fraction >= 0;
  if (split && !(r.backward_fraction + r.update_fraction <= 1))
    return InvalidArgumentError(
        fmt::format("the step's backward ({}) and update ({}) shares add up to more than 1",
                    r.backward_fraction, r.update_fraction));
  if (c.nodes > 1 && !t.async && (t.sharded_update || t.bucket_bytes > 0) && !split)
    return InvalidArgumentError(fmt::format(
        "the profile's measurement of the model does not split its step into forward, backward "
        "and update (an older reel measured it), which {} needs: measure again with `reel plan "
        "--measure`",
        t.sharded_update ? "the sharded update (zero_stage 1)"
                         : "the exchange overlapped with backward (bucket_mb > 0)"));
  if (c.nodes > 1 && !t.async && t.compressed)
    REEL_RETURN_IF_ERROR(Positive(r.memory_bytes,
                                  "the profile's memory copy rate, which compression's conversion "
                                  "pass needs (measure again with `reel plan --measure`)"));
  if (t.async) {
    REEL_RETURN_IF_ERROR(Positive(r.transfer_bytes, "the profile's transfer rate"));
    REEL_RETURN_IF_ERROR(Positive(r.apply_params_per_core, "the profile's update-rule rate"));
  }
  return Status::Ok();
}

// One step's exchange of the gradient on c.nodes > 1 ranks that the step waits for
// (capacity_model.h, "sync"), given the step's backward seconds.
double ExposedExchange(const Cluster& c, const Training& t, const Rates& r, double grad_bytes,
                       double backward) {
  const double n = c.nodes, bw = std::min(c.link_bytes_per_s * c.link_payload, r.reduce_bytes);
  const double latency = 2 * (n - 1) * (c.link_latency_s + r.message_latency_s);
  // The bytes each rank sends, and 16-bit gradients' conversion to and from fp32 (read 4 write 2,
  // read 2 write 4 bytes a gradient) at one thread's copy rate.
  const double wire = 2 * (n - 1) / n * grad_bytes * (t.compressed ? 0.5 : 1) / bw;
  const double convert = t.compressed ? 3 * grad_bytes / r.memory_bytes : 0;
  if (t.sharded_update || t.bucket_bytes <= 0) return wire + convert + latency;
  const double buckets = std::ceil(grad_bytes / t.bucket_bytes);
  const double whole = wire + convert + buckets * latency;
  const double last =
      std::min(t.bucket_bytes, grad_bytes) / grad_bytes * (wire + convert) + latency;
  return std::max(whole - backward, last);
}

// The part that sets the time among `candidates` (the largest).
std::string Largest(std::initializer_list<std::pair<const char*, double>> candidates) {
  auto it = std::max_element(candidates.begin(), candidates.end(),
                             [](const auto& a, const auto& b) { return a.second < b.second; });
  return it->first;
}

std::string Rate(double bytes_per_s) {
  return bytes_per_s >= 1e9 ? fmt::format("{:.2f} GB/s", bytes_per_s / 1e9)
                            : fmt::format("{:.1f} MB/s", bytes_per_s / 1e6);
}

void Assume(Plan& p, const Dataset& d, const Cluster& c, const Training& t, const Rates& r,
            const Costs& k) {
  auto& a = p.assumptions;
  const double scale = c.cores_per_node / r.cores;
  a.push_back(fmt::format(
      "one training rank per node using its {} cores; the profile was measured on {} cores, so "
      "every per-core rate is scaled by {:.2f}x (linear in cores)",
      c.cores_per_node, r.cores, scale));
  a.push_back(fmt::format(
      "step: {:.1f} examples/s per core {}{}", r.step_examples_per_core,
      r.frames > 1 ? fmt::format("at {} frames", r.frames) : std::string("(video level)"),
      k.frame_scale != 1 ? fmt::format(", cost scaled by the dataset's {:.0f} frames "
                                       "({:.2f}x, linear in frames)",
                                       d.mean_frames, k.frame_scale)
                         : std::string()));
  const int ranks = t.async ? c.nodes - t.servers : c.nodes;
  const Share share = ShareOf(d, ranks, k.bytes_per_example);
  if (d.files == 0)
    a.push_back(
        fmt::format("each of the {} training rank(s) reads an even share of the videos "
                    "(the files were not given: --files)",
                    ranks));
  else if (share.files > 0)
    a.push_back(fmt::format(
        "each training rank reads whole files: the busiest {} of the {} files, {:.0f} videos "
        "({:.3f}x an even share), and sets the epoch{}",
        share.files, d.files, share.examples,
        share.examples / (static_cast<double>(d.videos) / ranks),
        t.async ? "" : " (ranks that run out join its steps)"));
  else
    a.push_back(
        fmt::format("{} files for {} training ranks: every rank reads every record and "
                    "keeps every {}th",
                    d.files, ranks, ranks));
  a.push_back(
      fmt::format("decoding: {} per core; the data source's prefetch shares the node's "
                  "cores with the step and reading overlaps it",
                  Rate(r.decode_bytes_per_core)));
  if (d.storage == Storage::kLocal)
    a.push_back(
        fmt::format("reading local disk at {} per node (the profile's)", Rate(r.disk_read_bytes)));
  else
    a.push_back(fmt::format("reading S3 at min({} per node, {} connections x {}) = {} per node",
                            Rate(c.s3_bytes_per_s), c.s3_connections,
                            Rate(r.s3_bytes_per_connection), Rate(k.io_rate)));
  if (c.nodes > 1 || t.async)
    a.push_back(fmt::format("the link's TCP payload: {:.1f}% of its {} (MTU overheads)",
                            100 * c.link_payload, Rate(c.link_bytes_per_s)));
  const bool split = r.backward_fraction >= 0 && r.update_fraction >= 0;
  if (!t.async && split)
    a.push_back(fmt::format(
        "the step's split as measured: forward {:.0f}%, backward {:.0f}%, update {:.0f}%{}",
        100 * (1 - r.backward_fraction - r.update_fraction), 100 * r.backward_fraction,
        100 * r.update_fraction,
        t.sharded_update && c.nodes > 1
            ? fmt::format("; the sharded update (zero_stage 1) divides the update by {}", c.nodes)
            : std::string()));
  else if (!t.async)
    a.push_back(
        "the profile does not split the step (an older reel measured it): the update is counted "
        "in the step");
  if (!t.async && c.nodes > 1) {
    const bool overlapped = t.bucket_bytes > 0 && !t.sharded_update;
    a.push_back(fmt::format(
        "{} of {:.1f} MB per step{} over min(link payload {}, transport {}), latency {:.0f} us + "
        "{:.0f} us per message{}; {}",
        t.sharded_update ? "ring reduce-scatter and all-gather" : "ring allreduce",
        t.params * 4 / 1e6 * (t.compressed ? 0.5 : 1),
        t.compressed ? " (16 bits a gradient on the wire)" : "",
        Rate(c.link_bytes_per_s * c.link_payload), Rate(r.reduce_bytes), c.link_latency_s * 1e6,
        r.message_latency_s * 1e6,
        t.compressed ? fmt::format(", a conversion pass of {:.1f} MB at {} (one thread's copy)",
                                   t.params * 12 / 1e6, Rate(r.memory_bytes))
                     : std::string(),
        overlapped ? fmt::format("in buckets of {:.1f} MiB overlapped with backward: exposed is "
                                 "what backward does not hide, at least the last bucket's",
                                 t.bucket_bytes / 1048576)
                   : "after backward, not overlapped with the step"));
  }
  if (t.async)
    a.push_back(fmt::format(
        "async_sgd: {} server node(s), {} worker(s); a step pushes and pulls {:.1f} MB over "
        "min(link payload {}, transport {}){}; servers apply {:.0f} M parameters/s per core",
        t.servers, c.nodes - t.servers, t.params * 4 / 1e6,
        Rate(c.link_bytes_per_s * c.link_payload), Rate(r.transfer_bytes),
        t.overlap ? ", overlapped with the next step" : "", r.apply_params_per_core / 1e6));
  if (r.fill_seconds_per_record > 0)
    a.push_back(fmt::format(
        "fill: before an epoch's first batch a rank reads min(shuffle buffer {} + batch, its "
        "share) records at {:.3g} ms each (the profile's wait for the first batch), nothing beside",
        t.shuffle_buffer, r.fill_seconds_per_record * 1e3));
  if (r.startup_seconds > 0)
    a.push_back(fmt::format(
        "startup: {:.2f} s once per run (model and optimizer setup, the cold first step), "
        "counted in this epoch as in a run's first",
        r.startup_seconds));
  if (t.checkpoints_per_epoch > 0)
    a.push_back(
        fmt::format("{} checkpoint(s) per epoch of {:.1f} MB (parameters and {} state "
                    "floats each) at {}",
                    t.checkpoints_per_epoch, t.params * 4 * (1 + t.state_floats_per_param) / 1e6,
                    t.state_floats_per_param, Rate(k.write_rate)));
}

}  // namespace

Result<Plan> PlanEpoch(const Dataset& d, const Cluster& c, const Training& t, const Rates& r) {
  REEL_RETURN_IF_ERROR(Validate(d, c, t, r));
  REEL_ASSIGN_OR_RETURN(const Costs k, CostsOf(d, c, r));
  const double cores = c.cores_per_node;
  const int workers = t.async ? c.nodes - t.servers : c.nodes;
  const double grad_bytes = t.params * 4;
  const double V = static_cast<double>(d.videos), B = static_cast<double>(t.batch_per_rank);
  Plan p;
  double train = 0;
  double rank_examples = 0;  // the busiest training rank's (sync) or worker's (async)
  if (!t.async) {
    const Share share = ShareOf(d, c.nodes, k.bytes_per_example);
    const double examples = share.examples;
    rank_examples = examples;
    p.steps = static_cast<int64_t>(std::ceil(examples / B));
    const double decode = examples * k.decode_cs / cores, whole = examples * k.step_cs / cores;
    const bool split = r.backward_fraction >= 0 && r.update_fraction >= 0;
    double update = split ? whole * r.update_fraction : 0;
    const double step = whole - update;  // forward and backward
    if (t.sharded_update) update /= c.nodes;
    const double read = share.read_bytes / k.io_rate;
    const double exchange =
        c.nodes > 1 ? p.steps * ExposedExchange(c, t, r, grad_bytes,
                                                split ? whole * r.backward_fraction / p.steps : 0)
                    : 0;
    const double prefetch = examples * k.decode_cs;  // one prefetch thread decodes
    const double cpu = decode + step + update + exchange;
    train = std::max({read, prefetch, cpu});
    p.parts = {{"reading", read},
               {"decoding", decode},
               {"step", step},
               {"update", update},
               {"exchange", exchange}};
    if (train > cpu)
      p.bottleneck = read >= prefetch ? "reading" : "decoding (one prefetch thread)";
    else
      p.bottleneck = Largest(
          {{"decoding", decode}, {"step", step}, {"update", update}, {"exchange", exchange}});
  } else {
    const double S = t.servers;
    const Share share = ShareOf(d, workers, k.bytes_per_example);
    rank_examples = share.examples;
    const double per_step_decode = B * k.decode_cs / cores, per_step_step = B * k.step_cs / cores;
    const double per_step_read = share.read_bytes / share.examples * B / k.io_rate;
    const double worker_bw = std::min(c.link_bytes_per_s * c.link_payload, r.transfer_bytes);
    const double server_apply = r.apply_params_per_core * c.cores_per_node;  // params/s
    const double apply = t.params / S / server_apply;
    const double push_pull =
        2 * grad_bytes / worker_bw + apply + 2 * (c.link_latency_s + r.message_latency_s);
    const double cpu = per_step_decode + per_step_step;
    const double per_step_prefetch = B * k.decode_cs;  // one prefetch thread decodes
    const double compute = t.overlap ? std::max(cpu, push_pull) : cpu + push_pull;
    const double worker_step = std::max({per_step_read, per_step_prefetch, compute});
    const double by_workers = workers / worker_step;  // worker steps per second of the job
    const double by_server_links = S * worker_bw / grad_bytes;
    const double by_server_rules = S * server_apply / t.params;
    const double steps_per_s = std::min({by_workers, by_server_links, by_server_rules});
    const double total_steps = std::ceil(V / B);
    // The busiest worker's steps; with even shares (files unknown) the average, as the workers
    // then finish together.
    const double per_worker = d.files > 0 ? std::ceil(share.examples / B) : total_steps / workers;
    const double by_job = total_steps / steps_per_s, by_busiest = per_worker * worker_step;
    train = SharedServersSeconds(WorkerSteps(d, workers, B), 1 / worker_step,
                                 std::min(by_server_links, by_server_rules));
    p.steps = static_cast<int64_t>(std::ceil(per_worker));
    p.parts = {{"reading", per_worker * per_step_read},
               {"decoding", per_worker * per_step_decode},
               {"step", per_worker * per_step_step},
               {"exchange", per_worker * push_pull},
               {"servers", total_steps / std::min(by_server_links, by_server_rules)}};
    if (steps_per_s < by_workers && by_job >= by_busiest)
      p.bottleneck = by_server_links < by_server_rules ? "servers' links" : "servers' update rule";
    else if (worker_step > compute)
      p.bottleneck =
          per_step_read >= per_step_prefetch ? "reading" : "decoding (one prefetch thread)";
    else
      p.bottleneck = Largest(
          {{"decoding", per_step_decode}, {"step", per_step_step}, {"exchange", push_pull}});
  }
  // Evaluation: the eval videos shared by the training ranks; reading overlaps decoding+forward.
  double eval = 0;
  if (d.eval_videos > 0) {
    const double examples = std::ceil(static_cast<double>(d.eval_videos) / workers);
    eval = std::max(examples * k.bytes_per_example / k.io_rate,
                    examples * (k.decode_cs + k.forward_cs) / cores);
  }
  // Checkpoints: one rank writes them (async: each server its shard, in parallel).
  const double checkpoint_bytes =
      t.params * 4 * (1 + t.state_floats_per_param) / (t.async ? t.servers : 1);
  const double checkpoints =
      t.checkpoints_per_epoch > 0 ? t.checkpoints_per_epoch * checkpoint_bytes / k.write_rate : 0;
  // Startup: a run's setup and cold first step, paid once, before its first epoch's steps.
  const double startup = r.startup_seconds;
  // Fill: the records read before the epoch's first batch, with nothing beside them.
  const double fill =
      r.fill_seconds_per_record *
      std::min(static_cast<double>(t.shuffle_buffer) + B, std::max(rank_examples, B));
  p.parts.push_back({"evaluation", eval});
  p.parts.push_back({"checkpoints", checkpoints});
  p.parts.push_back({"fill", fill});
  p.parts.push_back({"startup", startup});
  if (eval > train || checkpoints > train)
    p.bottleneck = eval > checkpoints ? "evaluation" : "checkpoints";
  p.epoch_seconds = train + eval + checkpoints + fill + startup;
  p.examples_per_s = V / train;
  p.node_hours = p.epoch_seconds / 3600 * c.nodes;
  // One node alone: its cores decode and step, its storage reads, nothing is exchanged.
  const double one_node = std::min(
      {cores / (k.decode_cs + k.step_cs), k.io_rate / k.bytes_per_example, 1 / k.decode_cs});
  p.scaling_efficiency = p.examples_per_s / (c.nodes * one_node);
  Assume(p, d, c, t, r, k);
  return p;
}

namespace {

// Splits "1.5TB" into 1.5 and "TB"; InvalidArgument when no number leads.
Result<std::pair<double, std::string>> NumberAndUnit(const std::string& text, const char* what) {
  const char* begin = text.c_str();
  char* end = nullptr;
  const double v = std::strtod(begin, &end);
  if (end == begin || !std::isfinite(v) || v < 0)
    return InvalidArgumentError(fmt::format("'{}' is not a {}", text, what));
  std::string unit(end);
  unit.erase(0, unit.find_first_not_of(' '));
  return std::make_pair(v, unit);
}

// The multiplier of a prefix ("", "K", "M", "G", "T", "P", or "Ki"... "Pi"); 0 if unknown.
// Lower case is accepted too, as tc writes rates ("1gbit"): no one means milli-bytes.
double Prefix(const std::string& p) {
  static const std::pair<const char*, double> kPrefixes[] = {{"", 1},
                                                             {"k", 1e3},
                                                             {"K", 1e3},
                                                             {"M", 1e6},
                                                             {"m", 1e6},
                                                             {"G", 1e9},
                                                             {"g", 1e9},
                                                             {"T", 1e12},
                                                             {"t", 1e12},
                                                             {"P", 1e15},
                                                             {"Ki", 1024.0},
                                                             {"Mi", 1048576.0},
                                                             {"Gi", 1073741824.0},
                                                             {"Ti", 1099511627776.0},
                                                             {"Pi", 1125899906842624.0}};
  for (const auto& [name, m] : kPrefixes)
    if (p == name) return m;
  return 0;
}

}  // namespace

Result<double> ParseBytes(const std::string& text) {
  REEL_ASSIGN_OR_RETURN(auto vu, NumberAndUnit(text, "size (e.g. 1.5TB, 4GiB)"));
  std::string unit = vu.second;
  double m = 0;
  if (unit.empty()) {
    m = 1;
  } else if (unit.back() == 'B') {
    unit.pop_back();
    m = Prefix(unit);
  }
  if (m == 0)
    return InvalidArgumentError(fmt::format(
        "'{}' is not a size: use B, KB, MB, GB, TB (x1000) or KiB, MiB, GiB, TiB", text));
  return vu.first * m;
}

Result<double> ParseRate(const std::string& text) {
  REEL_ASSIGN_OR_RETURN(auto vu, NumberAndUnit(text, "rate (e.g. 750Mbit/s, 10Gbit/s, 100MB/s)"));
  std::string unit = vu.second;
  const auto strip = [&unit](const std::string& suffix) {
    if (unit.size() < suffix.size() ||
        unit.compare(unit.size() - suffix.size(), suffix.size(), suffix) != 0)
      return false;
    unit.erase(unit.size() - suffix.size());
    return true;
  };
  double per = 0;
  if (strip("bit/s") || strip("bps"))
    per = 1.0 / 8;
  else if (strip("B/s"))
    per = 1;
  const double m = Prefix(unit);
  if (per == 0 || m == 0)
    return InvalidArgumentError(fmt::format(
        "'{}' is not a rate: use bit/s (Mbit/s, Gbit/s) or B/s (MB/s, GB/s, MiB/s)", text));
  return vu.first * m * per;
}

}  // namespace reel::core::plan
