// `reel plan`: how long an epoch of a dataset takes on N nodes, its parts and bottleneck, from the
// rates of a machine profile (`reel plan --measure` writes it on one node of the cluster). The
// model is plan/capacity_model.h; docs/capacity.md is the user's guide and the plan at YouTube-8M's
// scale.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <map>
#include <sstream>

#include "args.h"
#include "cli.h"
#include "plan/capacity_model.h"
#include "plan/machine_profile.h"
#include "plan_measure.h"
#include "reel/core/config.h"
#include "reel/core/trainer_options.h"
#include "reel/version.h"
#include "train/precision.h"
#include "train_cli.h"

namespace reel::cli {
namespace {

using plan::Plan;

// YouTube-8M 2018 (formats.md of the project's documents): 6.1M videos; frame level about
// 1.53 TB, which at 1152 bytes of features per second and the records' framing is about 210
// frames per video; video level: 1152 floats per video, about 4.7 KB a record. Each level comes
// in 3,844 files (the dataset's download page).
struct Preset {
  const char* name;
  int64_t videos;
  double bytes, frames;
  int64_t files;
};
constexpr Preset kPresets[] = {{"yt8m-frame", 6'100'000, 1.53e12, 210, 3844},
                               {"yt8m-video", 6'100'000, 6'100'000 * 4.7e3, 0, 3844}};

std::string Duration(double s) {
  const auto t = static_cast<int64_t>(std::llround(s));
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, t % 3600 / 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{:.1f}s", s);
}

Result<double> DoubleFlag(const Args& args, const std::string& name, double fallback) {
  if (!args.Has(name)) return fallback;
  const std::string v = args.Get(name);
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !std::isfinite(d))
    return InvalidArgumentError("flag '--" + name + "': '" + v + "' is not a number");
  return d;
}

// A size or rate flag through `parse` (plan::ParseBytes, plan::ParseRate), naming the flag.
Result<double> Parsed(const Args& args, const std::string& name, double fallback,
                      Result<double> (*parse)(const std::string&)) {
  if (!args.Has(name)) return fallback;
  Result<double> v = parse(args.Get(name));
  if (!v.ok()) return v.status().WithContext("--" + name);
  return v;
}

Result<std::vector<int>> NodeCounts(const std::string& list) {
  std::vector<int> out;
  std::istringstream in(list);
  std::string word;
  while (std::getline(in, word, ',')) {
    char* end = nullptr;
    const long n = std::strtol(word.c_str(), &end, 10);
    if (word.empty() || *end != '\0')
      return InvalidArgumentError("--nodes " + list + ": expected N or N,N,... (whole numbers)");
    out.push_back(static_cast<int>(n));
  }
  if (out.empty()) return InvalidArgumentError("--nodes needs at least one count");
  return out;
}

// A whole-number option of a config component, or `fallback` when it is not set.
Result<int64_t> IntOption(const std::map<std::string, std::string>& options, const std::string& key,
                          int64_t fallback, const std::string& component) {
  auto it = options.find(key);
  if (it == options.end()) return fallback;
  char* end = nullptr;
  const long long v = std::strtoll(it->second.c_str(), &end, 10);
  if (it->second.empty() || *end != '\0')
    return InvalidArgumentError(component + ".options." + key + ": '" + it->second +
                                "' is not a whole number");
  return static_cast<int64_t>(v);
}

// How the sync optimizer exchanges the gradient (docs/distributed.md): bucket_mb (default 4,
// as the optimizer's), zero_stage, and compression ("none"; "bf16" and "fp16" put 16 bits a
// gradient on the wire), each refused naming it when the optimizer would refuse it.
Status ReadExchange(const std::map<std::string, std::string>& opt, plan::Training& t) {
  if (auto it = opt.find("bucket_mb"); it != opt.end()) {
    char* end = nullptr;
    const double mb = std::strtod(it->second.c_str(), &end);
    if (it->second.empty() || *end != '\0' || !(mb >= 0 && mb <= 2048))
      return InvalidArgumentError("optimizer.options.bucket_mb: '" + it->second +
                                  "' is not a size in MiB in [0, 2048]");
    t.bucket_bytes = mb * 1048576;
  }
  REEL_ASSIGN_OR_RETURN(const int64_t zero, IntOption(opt, "zero_stage", 0, "optimizer"));
  if (zero != 0 && zero != 1)
    return InvalidArgumentError(
        fmt::format("optimizer.options.zero_stage: {} is not 0 or 1", zero));
  t.sharded_update = zero == 1;
  const auto compression = opt.find("compression");
  const std::string word = compression == opt.end() ? "none" : compression->second;
  if (word != "none" && word != "bf16" && word != "fp16")
    return InvalidArgumentError("optimizer.options.compression: '" + word +
                                "' is not none, bf16 or fp16");
  t.compressed = word != "none";
  return Status::Ok();
}

// The model, its shape and the optimizer from a training config.
struct FromConfig {
  ModelSpec model;
  plan::Training training;
  bool checkpoints = false;
};

Result<FromConfig> ReadConfig(const core::ConfigFile& cfg, const Args& args,
                              const core::Registry& registry) {
  const config::RunConfig& c = cfg.config;
  FromConfig f;
  f.model.name = c.model().name();
  if (f.model.name.empty()) return InvalidArgumentError(cfg.path + ": names no model");
  f.model.options = core::OptionMap(c.model());
  const auto data = core::OptionMap(c.data());
  REEL_ASSIGN_OR_RETURN(f.model.batch, IntOption(data, "batch_size", 32, "data"));
  if (c.trainer().has_batch_size()) f.model.batch = c.trainer().batch_size();
  f.model.classes = c.trainer().has_num_classes() ? c.trainer().num_classes() : 3862;
  REEL_ASSIGN_OR_RETURN(f.model.frames, IntOption(data, "max_frames", 300, "data"));
  REEL_ASSIGN_OR_RETURN(f.model.frames, args.GetInt("measure-frames", f.model.frames));
  const auto opt = core::OptionMap(c.optimizer());
  const std::string optimizer = c.optimizer().name().empty() ? "sync" : c.optimizer().name();
  if (optimizer != "sync" && optimizer != "async_sgd")
    return InvalidArgumentError("reel plan models the sync and async_sgd optimizers, not '" +
                                optimizer + "'");
  f.model.rule = opt.count("rule") ? opt.at("rule") : "adam";
  f.training.async = optimizer == "async_sgd";
  if (f.training.async) {
    if (opt.count("colocated") && opt.at("colocated") == "true")
      return InvalidArgumentError(
          "reel plan does not model colocated servers (async_sgd colocated: true)");
    REEL_ASSIGN_OR_RETURN(const int64_t servers, IntOption(opt, "servers", 1, "optimizer"));
    f.training.servers = static_cast<int>(servers);
    f.training.overlap = opt.count("overlap") && opt.at("overlap") == "true";
  }
  if (!f.training.async) REEL_RETURN_IF_ERROR(ReadExchange(opt, f.training));
  const std::string& rule = f.model.rule;
  f.training.state_floats_per_param = rule == "adam" ? 2 : rule == "sgd" ? 0 : 1;
  f.training.batch_per_rank = f.model.batch;
  if (c.trainer().has_clip_norm()) f.model.clip_norm = c.trainer().clip_norm();
  if (c.trainer().has_stop_on_nonfinite())
    f.model.stop_on_nonfinite = c.trainer().stop_on_nonfinite();
  REEL_ASSIGN_OR_RETURN(core::PrecisionChoice precision,
                        core::ResolvePrecision(c.trainer().precision(),
                                               core::DetectCpuBf16(core::ProcessEnvironment())));
  f.model.precision = precision.precision;
  f.model.seed = c.trainer().seed();
  if (!c.data().name().empty()) {
    f.model.data = c.data().name();
    f.model.data_options =
        core::ComponentOptions(registry, ComponentKind::kDataSource, c.data(), c);
    // The records read before an epoch's first batch (docs/capacity.md, "fill").
    REEL_ASSIGN_OR_RETURN(f.training.shuffle_buffer,
                          IntOption(f.model.data_options, "shuffle_buffer", 0, "data"));
  }
  f.checkpoints = !c.trainer().checkpoint_dir().empty();
  return f;
}

std::string UtcNow() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

Result<plan::MachineProfile> ReadProfile(CliEnv& env, const std::string& path, bool may_be_new) {
  if (may_be_new && !std::filesystem::exists(path)) return plan::MachineProfile{};
  if (!std::filesystem::exists(path))
    return NotFoundError("no machine profile at " + path +
                         ": measure this machine first with `reel plan --measure --config FILE` "
                         "(or give --profile FILE)");
  REEL_ASSIGN_OR_RETURN(Storage * storage, env.host.storage().ForUri(path));
  REEL_ASSIGN_OR_RETURN(std::string text, ReadAll(*storage, path));
  return plan::ParseProfile(text, path);
}

// Measures this machine into the profile at `path`; prints it unless a plan follows.
Status Measure(CliEnv& env, const Args& args, const FromConfig& f, const std::string& path) {
  REEL_ASSIGN_OR_RETURN(plan::MachineProfile profile, ReadProfile(env, path, true));
  REEL_ASSIGN_OR_RETURN(const int64_t reps, args.GetInt("reps", 3));
  if (reps < 1) return InvalidArgumentError("--reps must be at least 1");
  const std::string scratch =
      (std::filesystem::temp_directory_path() / fmt::format("reel-plan-{}", ::getpid())).string();
  std::filesystem::create_directories(scratch);
  env.err << "reel plan: measuring this machine (" << reps << " repetitions each)\n";
  Result<plan::Rates> node = MeasureNode(
      env, scratch, args.Get("s3"), f.model.rule,
      args.Has("quick") ? MeasureSizes::Quick() : MeasureSizes::Full(), static_cast<int>(reps));
  std::filesystem::remove_all(scratch);
  REEL_RETURN_IF_ERROR(node.status());
  env.err << "reel plan: measuring " << f.model.name << " at batch " << f.model.batch << ", "
          << f.model.frames << " frames, " << f.model.classes << " classes\n";
  REEL_ASSIGN_OR_RETURN(
      plan::ModelRates model,
      MeasureModel(
          env, f.model, static_cast<int>(reps),
          (args.Has("quick") ? MeasureSizes::Quick() : MeasureSizes::Full()).step_batches));
  const double s3 = profile.node.s3_bytes_per_connection;
  profile.node = *node;
  if (args.Get("s3").empty()) profile.node.s3_bytes_per_connection = s3;  // keep an earlier one
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  profile.host = host;
  profile.measured = UtcNow();
  profile.reel_version = REEL_SDK_VERSION;
  profile.Put(model);
  REEL_ASSIGN_OR_RETURN(Storage * storage, env.host.storage().ForUri(path));
  REEL_RETURN_IF_ERROR(WriteAll(*storage, path, plan::FormatProfile(profile)));
  if (!args.Has("nodes")) env.out << plan::FormatProfile(profile);
  env.err << "reel plan: wrote " << path << "\n";
  return Status::Ok();
}

void PrintJson(CliEnv& env, const std::vector<std::pair<int, Plan>>& plans, const plan::Dataset& d,
               const plan::Cluster& c, const plan::Training& t, const std::string& model) {
  std::ostringstream o;
  o << fmt::format(
      "{{\"model\": \"{}\", \"optimizer\": \"{}\", \"videos\": {}, \"bytes\": {:.6g}, "
      "\"mean_frames\": {}, \"files\": {}, \"storage\": \"{}\", \"cores_per_node\": {}, "
      "\"link_bytes_per_s\": {:.6g}, ",
      model, t.async ? "async_sgd" : "sync", d.videos, d.bytes, d.mean_frames, d.files,
      d.storage == plan::Storage::kS3 ? "s3" : "local", c.cores_per_node, c.link_bytes_per_s);
  if (!t.async)
    o << fmt::format("\"bucket_mb\": {:.6g}, \"zero_stage\": {}, \"compressed\": {}, ",
                     t.bucket_bytes / 1048576, t.sharded_update ? 1 : 0, t.compressed);
  o << "\"plans\": [";
  for (size_t i = 0; i < plans.size(); ++i) {
    const auto& [nodes, p] = plans[i];
    o << (i ? ", " : "")
      << fmt::format("{{\"nodes\": {}, \"epoch_seconds\": {:.6g}, ", nodes, p.epoch_seconds);
    for (const plan::Part& part : p.parts)
      o << fmt::format("\"{}_seconds\": {:.6g}, ", part.name, part.seconds);
    o << fmt::format(
        "\"bottleneck\": \"{}\", \"steps\": {}, \"examples_per_s\": {:.6g}, \"node_hours\": "
        "{:.6g}, \"scaling_efficiency\": {:.4f}, \"assumptions\": [",
        p.bottleneck, p.steps, p.examples_per_s, p.node_hours, p.scaling_efficiency);
    for (size_t a = 0; a < p.assumptions.size(); ++a) {
      std::string s = p.assumptions[a];
      for (size_t q = s.find('"'); q != std::string::npos; q = s.find('"', q + 2))
        s.insert(q, "\\");
      o << (a ? ", " : "") << '"' << s << '"';
    }
    o << "]}";
  }
  o << "]}\n";
  env.out << o.str();
}

void PrintTable(CliEnv& env, const std::vector<std::pair<int, Plan>>& plans,
                const plan::MachineProfile& profile, const std::string& path) {
  env.out << fmt::format("profile: {} (host {}, measured {}, reel {})\n\n", path, profile.host,
                         profile.measured, profile.reel_version);
  env.out << "| nodes | epoch | ";
  for (const plan::Part& part : plans.front().second.parts) env.out << part.name << " | ";
  env.out << "bottleneck | examples/s | node-hours | scaling |\n|---|---|";
  for (size_t i = 0; i < plans.front().second.parts.size(); ++i) env.out << "---|";
  env.out << "---|---|---|---|\n";
  for (const auto& [nodes, p] : plans) {
    env.out << "| " << nodes << " | " << Duration(p.epoch_seconds) << " | ";
    for (const plan::Part& part : p.parts) env.out << Duration(part.seconds) << " | ";
    env.out << fmt::format("{} | {:.0f} | {:.2f} | {:.0f}% |\n", p.bottleneck, p.examples_per_s,
                           p.node_hours, 100 * p.scaling_efficiency);
  }
  env.out << "\nParts are per node and overlap as docs/capacity.md says. Assumptions ("
          << plans.back().first << " nodes):\n";
  for (const std::string& a : plans.back().second.assumptions) env.out << "- " << a << "\n";
}

Status PlanCommand(CliEnv& env, const std::vector<std::string>& words) {
  Args args;
  args.Value("config")
      .Value("set", true)
      .Value("profile")
      .Switch("measure")
      .Switch("quick")
      .Value("reps")
      .Value("s3")
      .Value("measure-frames")
      .Value("dataset")
      .Value("videos")
      .Value("bytes")
      .Value("files")
      .Value("frames")
      .Value("data-in")
      .Value("eval-videos")
      .Value("nodes")
      .Value("cores-per-node")
      .Value("link")
      .Value("link-latency-us")
      .Value("mtu")
      .Value("s3-bandwidth")
      .Value("s3-connections")
      .Value("s3-rate-per-connection")
      .Value("servers")
      .Value("checkpoints-per-epoch")
      .Switch("json");
  REEL_RETURN_IF_ERROR(args.Parse(words));
  if (!args.positional().empty())
    return InvalidArgumentError("unexpected argument '" + args.positional()[0] + "'");
  if (!args.Has("config"))
    return InvalidArgumentError("--config FILE: the training config to plan (or measure) for");
  REEL_ASSIGN_OR_RETURN(core::ConfigFile cfg,
                        LoadConfigWithOverrides(env, args.Get("config"), args.GetAll("set")));
  REEL_ASSIGN_OR_RETURN(FromConfig f, ReadConfig(cfg, args, env.host.registry()));
  const std::string path = args.Get("profile", "reel-machine-profile.txt");
  if (args.Has("measure")) {  // with --nodes, one command measures and then plans
    REEL_RETURN_IF_ERROR(Measure(env, args, f, path));
    if (!args.Has("nodes")) return Status::Ok();
  }

  REEL_ASSIGN_OR_RETURN(plan::MachineProfile profile, ReadProfile(env, path, false));
  const plan::ModelRates* model =
      profile.Find(f.model.name, ModelKey(f.model), f.model.batch, f.model.classes);
  if (model == nullptr)
    return NotFoundError(fmt::format(
        "{} has no measurement of model {} (options '{}') at batch {} and {} classes: add it with "
        "`reel plan --measure --config {}`",
        path, f.model.name, ModelKey(f.model), f.model.batch, f.model.classes, args.Get("config")));
  plan::Rates rates = plan::RatesFor(profile, *model);
  f.training.params = model->params;

  plan::Dataset d;
  if (args.Has("dataset")) {
    const Preset* preset = nullptr;
    for (const Preset& p : kPresets)
      if (args.Get("dataset") == p.name) preset = &p;
    if (preset == nullptr)
      return InvalidArgumentError("--dataset " + args.Get("dataset") +
                                  ": known are yt8m-frame and yt8m-video");
    d.videos = preset->videos;
    d.bytes = preset->bytes;
    d.mean_frames = preset->frames;
    d.files = preset->files;
  } else if (!args.Has("videos") || !args.Has("bytes")) {
    return InvalidArgumentError(
        "give the dataset: --videos N --bytes SIZE, or --dataset yt8m-frame");
  }
  REEL_ASSIGN_OR_RETURN(d.videos, args.GetInt("videos", d.videos));
  REEL_ASSIGN_OR_RETURN(d.bytes, Parsed(args, "bytes", d.bytes, plan::ParseBytes));
  REEL_ASSIGN_OR_RETURN(d.files, args.GetInt("files", d.files));
  REEL_ASSIGN_OR_RETURN(d.mean_frames, DoubleFlag(args, "frames",
                                                  d.mean_frames > 0   ? d.mean_frames
                                                  : model->frames > 1 ? model->frames
                                                                      : 0));
  const std::string storage = args.Get("data-in", "local");
  if (storage != "local" && storage != "s3")
    return InvalidArgumentError("--data-in " + storage + ": local or s3");
  d.storage = storage == "s3" ? plan::Storage::kS3 : plan::Storage::kLocal;
  REEL_ASSIGN_OR_RETURN(d.eval_videos, args.GetInt("eval-videos", 0));

  plan::Cluster c;
  REEL_ASSIGN_OR_RETURN(std::vector<int> nodes, NodeCounts(args.Get("nodes", "1")));
  REEL_ASSIGN_OR_RETURN(c.cores_per_node, DoubleFlag(args, "cores-per-node", rates.cores));
  REEL_ASSIGN_OR_RETURN(c.link_bytes_per_s, Parsed(args, "link", 0, plan::ParseRate));
  REEL_ASSIGN_OR_RETURN(const double mtu, DoubleFlag(args, "mtu", 1500));
  c.link_payload = plan::PayloadFraction(mtu);
  REEL_ASSIGN_OR_RETURN(const double latency_us, DoubleFlag(args, "link-latency-us", 50));
  c.link_latency_s = latency_us * 1e-6;
  REEL_ASSIGN_OR_RETURN(c.s3_bytes_per_s, Parsed(args, "s3-bandwidth", 0, plan::ParseRate));
  REEL_ASSIGN_OR_RETURN(const int64_t connections, args.GetInt("s3-connections", 8));
  c.s3_connections = static_cast<int>(connections);
  REEL_ASSIGN_OR_RETURN(
      rates.s3_bytes_per_connection,
      Parsed(args, "s3-rate-per-connection", rates.s3_bytes_per_connection, plan::ParseRate));
  REEL_ASSIGN_OR_RETURN(const int64_t servers, args.GetInt("servers", f.training.servers));
  f.training.servers = static_cast<int>(servers);
  REEL_ASSIGN_OR_RETURN(f.training.checkpoints_per_epoch,
                        args.GetInt("checkpoints-per-epoch", f.checkpoints ? 1 : 0));

  std::vector<std::pair<int, Plan>> plans;
  for (int n : nodes) {
    c.nodes = n;
    Result<Plan> p = plan::PlanEpoch(d, c, f.training, rates);
    if (!p.ok()) return p.status().WithContext(fmt::format("{} node(s)", n));
    plans.emplace_back(n, std::move(*p));
  }
  env.arguments_accepted = true;
  if (args.Has("json")) {
    PrintJson(env, plans, d, c, f.training, f.model.name);
    return Status::Ok();
  }
  env.out << fmt::format(
      "reel plan: {} ({:.2f} M parameters) with {} over {} videos, {:.3g} GB{}, {}; {} cores and "
      "a {:.0f} Mbit/s link per node\n",
      f.model.name, model->params / 1e6, f.training.async ? "async_sgd" : "sync", d.videos,
      d.bytes / 1e9, d.mean_frames > 0 ? fmt::format(", {:.0f} frames", d.mean_frames) : "",
      storage == "s3" ? "in S3" : "on local disk", c.cores_per_node, c.link_bytes_per_s * 8 / 1e6);
  PrintTable(env, plans, profile, path);
  return Status::Ok();
}

}  // namespace

CliCommand PlanCliCommand() {
  return {"plan",
          "how long an epoch takes on N nodes, and what limits it, from this machine's measured "
          "rates",
          "reel plan --config FILE [--set F=V]... [--profile FILE] [--measure [--reps N] [--quick] "
          "[--s3 s3://BUCKET/PREFIX]] [(--dataset yt8m-frame|yt8m-video | --videos N --bytes SIZE) "
          "[--files COUNT] [--frames F] [--data-in local|s3] [--eval-videos N] --nodes N[,N...] "
          "[--cores-per-node C] [--link RATE] [--mtu BYTES] [--link-latency-us U] "
          "[--s3-bandwidth RATE] [--s3-connections K] [--s3-rate-per-connection RATE] "
          "[--servers S] [--checkpoints-per-epoch K] [--json]] (--measure with --nodes: measure, "
          "then plan)",
          PlanCommand};
}

}  // namespace reel::cli
