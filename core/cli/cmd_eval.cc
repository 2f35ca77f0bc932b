// `reel eval` and `reel predict`: score checkpoints on data, or write Kaggle-style predictions.
#include <cstdio>
#include <limits>
#include <set>
#include <sstream>

#include "args.h"
#include "cli.h"
#include "reel/core/evaluator.h"
#include "train_cli.h"

namespace reel::cli {
namespace {

// The models of one or more checkpoints, and a data source over `pattern` built from the first
// checkpoint's recorded config (its eval_data section, else its data section).
struct Loaded {
  std::vector<core::CheckpointModel> checkpoints;
  std::vector<Model*> models;
  core::Owned<DataSource> source;
  int64_t num_classes = 0;
};

Result<Loaded> LoadForData(CliEnv& env, const std::vector<std::string>& checkpoints,
                           const std::string& pattern, int64_t batch_size) {
  Loaded out;
  if (checkpoints.empty()) return InvalidArgumentError("flag '--checkpoint' is required");
  if (pattern.empty()) return InvalidArgumentError("flag '--data' is required");
  REEL_RETURN_IF_ERROR(CheckPatternsMatch(env, pattern));
  for (const std::string& path : checkpoints) {
    REEL_ASSIGN_OR_RETURN(core::CheckpointModel m, core::LoadModelFromCheckpoint(env.host, path));
    if (!out.checkpoints.empty() && m.num_classes != out.num_classes)
      return InvalidArgumentError(m.uri + ": " + std::to_string(m.num_classes) + " classes, but " +
                                  out.checkpoints[0].uri + " has " +
                                  std::to_string(out.num_classes));
    out.num_classes = m.num_classes;
    out.checkpoints.push_back(std::move(m));
  }
  for (auto& c : out.checkpoints) out.models.push_back(c.model.get());
  const config::RunConfig& rc = out.checkpoints[0].config.config;
  config::Component data = rc.has_eval_data() ? rc.eval_data() : rc.data();
  const core::ComponentEntry* entry =
      env.host.registry().Find(ComponentKind::kDataSource, data.name());
  if (entry == nullptr)
    return NotFoundError("the checkpoint's data source '" + data.name() +
                         "' is not registered (registered: " +
                         env.host.registry().Names(ComponentKind::kDataSource) + ")");
  auto has = [&](const std::string& key) {
    for (const auto& spec : entry->info.options)
      if (spec.name == key) return true;
    return false;
  };
  if (!has("files"))
    return InvalidArgumentError("data source '" + data.name() +
                                "' has no 'files' option to point at " + pattern);
  (*data.mutable_options())["files"] = pattern;
  if (has("shuffle_buffer")) (*data.mutable_options())["shuffle_buffer"] = "0";
  if (has("batch_size")) (*data.mutable_options())["batch_size"] = std::to_string(batch_size);
  // An ensemble may combine models reading different features (the seed's audio and video
  // models): read the source's default feature set rather than the first model's choice.
  if (checkpoints.size() > 1) data.mutable_options()->erase("features");
  DataSourceContext ctx{{0, 1}, rc.trainer().seed(), &env.host};
  REEL_ASSIGN_OR_RETURN(
      out.source,
      env.host.registry().CreateDataSource(
          data.name(),
          core::ComponentOptions(env.host.registry(), ComponentKind::kDataSource, data, rc), ctx));
  return out;
}

// --top-k and --batch-size as both commands take them: an integer from 1 to INT_MAX.
Result<int> PositiveFlag(const Args& args, const std::string& name, int fallback) {
  REEL_ASSIGN_OR_RETURN(int64_t n, args.GetInt(name, fallback));
  if (n < 1 || n > std::numeric_limits<int>::max())
    return InvalidArgumentError("flag '--" + name + "' must be >= 1, got " + std::to_string(n));
  return static_cast<int>(n);
}

std::vector<std::string> CheckpointList(const Args& args) {
  std::vector<std::string> out = args.GetAll("checkpoint");
  if (args.Has("ensemble"))
    for (const std::string& p : args.positional()) out.push_back(p);
  return out;
}

Status RunEval(CliEnv& env, const std::vector<std::string>& words) {
  Args args;
  args.Value("checkpoint", true)
      .Value("data")
      .Value("batch-size")
      .Value("top-k")
      .Switch("json")
      .Switch("ensemble");
  REEL_RETURN_IF_ERROR(args.Parse(words));
  if (!args.Has("ensemble") && !args.positional().empty())
    return InvalidArgumentError("unexpected argument '" + args.positional()[0] +
                                "' (several checkpoints: --ensemble A B ...)");
  REEL_ASSIGN_OR_RETURN(int batch, PositiveFlag(args, "batch-size", 64));
  REEL_ASSIGN_OR_RETURN(int top_k, PositiveFlag(args, "top-k", 20));
  REEL_ASSIGN_OR_RETURN(Loaded l, LoadForData(env, CheckpointList(args), args.Get("data"), batch));
  REEL_ASSIGN_OR_RETURN(core::EvalMetrics m,
                        core::Evaluate(l.models, *l.source, l.num_classes, top_k, nullptr));
  if (!args.Has("json"))
    for (const auto& c : l.checkpoints)
      env.out << "checkpoint  " << c.uri << " (model " << c.config.config.model().name()
              << ", step " << c.step << ")\n";
  PrintMetrics(env.out, m, args.Has("json"));
  return Status::Ok();
}

Status RunPredict(CliEnv& env, const std::vector<std::string>& words) {
  Args args;
  args.Value("checkpoint", true)
      .Value("data")
      .Value("top-k")
      .Value("batch-size")
      .Value("out")
      .Switch("ensemble");
  REEL_RETURN_IF_ERROR(args.Parse(words));
  if (!args.Has("ensemble") && !args.positional().empty())
    return InvalidArgumentError("unexpected argument '" + args.positional()[0] + "'");
  REEL_ASSIGN_OR_RETURN(int top_k, PositiveFlag(args, "top-k", 20));
  REEL_ASSIGN_OR_RETURN(int batch, PositiveFlag(args, "batch-size", 64));
  REEL_ASSIGN_OR_RETURN(Loaded l, LoadForData(env, CheckpointList(args), args.Get("data"), batch));
  std::ostringstream csv;
  csv << "VideoId,LabelConfidencePairs\n";
  REEL_RETURN_IF_ERROR(
      core::Predict(l.models, *l.source, l.num_classes, top_k,
                    [&](const std::string& id, const std::vector<std::pair<int32_t, float>>& top) {
                      csv << id << ",";
                      char buf[32];
                      for (size_t i = 0; i < top.size(); ++i) {
                        std::snprintf(buf, sizeof buf, "%.6f", top[i].second);
                        csv << (i ? " " : "") << top[i].first << " " << buf;
                      }
                      csv << "\n";
                      return Status::Ok();
                    }));
  if (!args.Has("out")) {
    env.out << csv.str();
    return Status::Ok();
  }
  REEL_ASSIGN_OR_RETURN(Storage * storage, env.host.ForUri(args.Get("out")));
  return WriteAll(*storage, args.Get("out"), csv.str()).WithContext("writing " + args.Get("out"));
}

}  // namespace

Status CheckPatternsMatch(CliEnv& env, const std::string& patterns) {
  std::stringstream ss(patterns);
  for (std::string p; std::getline(ss, p, ',');) {
    if (p.empty()) continue;
    REEL_ASSIGN_OR_RETURN(Storage * storage, env.host.ForUri(p));
    REEL_ASSIGN_OR_RETURN(auto found, storage->Glob(p));
    if (found.empty()) return NotFoundError("data pattern '" + p + "' matches no file");
  }
  return Status::Ok();
}

void PrintMetrics(std::ostream& out, const core::EvalMetrics& m, bool json) {
  char buf[256];
  if (json) {
    std::snprintf(
        buf, sizeof buf,
        "{\"gap\": %.6f, \"hit_at_1\": %.6f, \"perr\": %.6f, \"map\": %.6f, \"videos\": %lld, "
        "\"top_k\": %d}\n",
        m.gap, m.hit_at_1, m.perr, m.map, static_cast<long long>(m.videos), m.top_k);
  } else {
    const std::string gap = "GAP@" + std::to_string(m.top_k);
    std::snprintf(buf, sizeof buf,
                  "videos      %lld\n%-12s%.4f\nHit@1       %.4f\nPERR        %.4f\nmAP         "
                  "%.4f\n",
                  static_cast<long long>(m.videos), gap.c_str(), m.gap, m.hit_at_1, m.perr, m.map);
  }
  out << buf;
}

CliCommand EvalCliCommand() {
  return {"eval", "score checkpoints on data: GAP@k, Hit@1, PERR, mAP",
          "reel eval --checkpoint DIR|FILE --data PATTERN [--top-k 20] [--batch-size 64] [--json] "
          "[--ensemble A B ...]",
          RunEval};
}

CliCommand PredictCliCommand() {
  return {"predict", "write top-k predictions as Kaggle CSV (VideoId,LabelConfidencePairs)",
          "reel predict --checkpoint DIR|FILE --data PATTERN [--top-k 20] [--batch-size 64] "
          "[--out FILE] [--ensemble A B ...]",
          RunPredict};
}

}  // namespace reel::cli
