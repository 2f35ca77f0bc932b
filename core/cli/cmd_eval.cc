// `reel eval` and `reel predict`: score checkpoints on data, or write Kaggle-style predictions.
// Started several times by a launcher (`reel launch -n N`, mpirun), the ranks split the data:
// each reads its shard, the metrics are merged (eval) or the rows gathered (predict), and rank 0
// alone prints or writes the result.
#include <cstdio>
#include <limits>
#include <set>
#include <sstream>

#include "args.h"
#include "cli.h"
#include "launched_ranks.h"
#include "reel/core/evaluator.h"
#include "reel/core/rank_agreement.h"
#include "train/thread_budget.h"
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
                           const std::string& pattern, int64_t batch_size, ShardSpec shard,
                           int threads) {
  Loaded out;
  REEL_RETURN_IF_ERROR(CheckPatternsMatch(env, pattern));
  for (const std::string& path : checkpoints) {
    REEL_ASSIGN_OR_RETURN(core::CheckpointModel m,
                          core::LoadModelFromCheckpoint(env.host, path, threads));
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
  DataSourceContext ctx{shard, rc.trainer().seed(), &env.host};
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

// This process's rank among those a launcher started, the shard of the data it reads, and its
// compute threads: ranks on one host divide its cores, as in training (train/thread_budget.h).
struct Ranks {
  LaunchedRanks launched;
  int threads = 0;  // 0: the default
  ShardSpec Shard() const {
    return launched.comm ? ShardSpec{launched.comm->rank(), launched.comm->size()} : ShardSpec{};
  }
  bool lead() const { return !launched.comm || launched.comm->rank() == 0; }
  // Under a launcher, on env.err: how many videos this rank `did` (e.g. "scored") and who reports
  // the whole.
  void SayShare(CliEnv& env, const std::string& command, const std::string& did, int64_t videos,
                const std::string& lead_does) const {
    if (!launched.comm) return;
    env.err << "reel " << command << ": rank " << launched.comm->rank() << " of "
            << launched.comm->size() << " " << did << " " << videos
            << (videos == 1 ? " video" : " videos") << (lead() ? "" : "; rank 0 " + lead_does)
            << "\n";
  }
};

Result<Ranks> JoinRanks(CliEnv& env) {
  Ranks ranks;
  // The transport is the launcher's (a checkpoint's transport section is the training's).
  REEL_ASSIGN_OR_RETURN(ranks.launched,
                        JoinLaunchedRanks(env, config::RunConfig(), /*isolate_failures=*/false));
  REEL_ASSIGN_OR_RETURN(
      core::ThreadBudget budget,
      core::ThreadsPerRank(core::ProcessEnvironment(), 1, CoresAvailable(), OnlineCores()));
  if (!budget.why.empty()) env.err << "reel: " << budget.why << "\n";
  ranks.threads = budget.threads;
  return ranks;
}

// InvalidArgument on every rank when a rank's `mine` differs from rank 0's, naming the first
// difference: ranks that read different checkpoints or data would merge unrelated results.
Status CheckRanksAgree(const Ranks& ranks, const core::RankSettings& mine) {
  if (!ranks.launched.comm) return Status::Ok();
  return core::CheckRanksAgree(*ranks.launched.comm, mine,
                               "the ranks split the data and merge their results. Give every "
                               "rank the same command");
}

// The checkpoints as loaded: each file and its step (a directory resolves to its newest).
std::string LoadedCheckpoints(const Loaded& l) {
  std::string out;
  for (const auto& c : l.checkpoints)
    out += (out.empty() ? "" : ", ") + c.uri + " (step " + std::to_string(c.step) + ")";
  return out;
}

std::vector<std::string> CheckpointList(const Args& args) {
  std::vector<std::string> out = args.GetAll("checkpoint");
  if (args.Has("ensemble"))
    for (const std::string& p : args.positional()) out.push_back(p);
  return out;
}

// The flags both commands require; after them, what fails is not a usage error.
Status RequireFlags(CliEnv& env, const Args& args) {
  if (CheckpointList(args).empty()) return InvalidArgumentError("flag '--checkpoint' is required");
  if (args.Get("data").empty()) return InvalidArgumentError("flag '--data' is required");
  env.arguments_accepted = true;
  return Status::Ok();
}

// What both commands do once their flags are read: join the ranks a launcher started, take this
// rank's threads and shard, load the checkpoints, and check that every rank loaded the same and
// was given the same --data, --top-k and `also`.
struct Session {
  Ranks ranks;
  std::unique_ptr<core::ScopedThreads> team;  // this thread's OpenMP team, for the session
  Loaded loaded;
};

Result<Session> Begin(CliEnv& env, const Args& args, int batch, int top_k,
                      core::RankSettings also = {}) {
  REEL_RETURN_IF_ERROR(RequireFlags(env, args));
  Session s;
  REEL_ASSIGN_OR_RETURN(s.ranks, JoinRanks(env));
  s.team = std::make_unique<core::ScopedThreads>(s.ranks.threads);
  REEL_ASSIGN_OR_RETURN(s.loaded, LoadForData(env, CheckpointList(args), args.Get("data"), batch,
                                              s.ranks.Shard(), s.ranks.threads));
  core::RankSettings shared = {{"checkpoints", LoadedCheckpoints(s.loaded)},
                               {"--data", args.Get("data")},
                               {"--top-k", std::to_string(top_k)}};
  shared.insert(also.begin(), also.end());
  REEL_RETURN_IF_ERROR(CheckRanksAgree(s.ranks, shared));
  return s;
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
  REEL_ASSIGN_OR_RETURN(Session session, Begin(env, args, batch, top_k));
  const Ranks& ranks = session.ranks;
  const Loaded& l = session.loaded;
  REEL_ASSIGN_OR_RETURN(core::EvalMetrics m, core::Evaluate(l.models, *l.source, l.num_classes,
                                                            top_k, ranks.launched.comm.get()));
  ranks.SayShare(env, "eval", "scored", m.videos_this_rank, "prints the metrics of all ranks");
  if (!ranks.lead()) return Status::Ok();
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
  REEL_ASSIGN_OR_RETURN(Session session,
                        Begin(env, args, batch, top_k, {{"--out", args.Get("out")}}));
  const Ranks& ranks = session.ranks;
  const Loaded& l = session.loaded;
  std::ostringstream csv;
  int64_t videos = 0;
  REEL_RETURN_IF_ERROR(
      core::Predict(l.models, *l.source, l.num_classes, top_k,
                    [&](const std::string& id, const std::vector<std::pair<int32_t, float>>& top) {
                      ++videos;
                      csv << id << ",";
                      char buf[32];
                      for (size_t i = 0; i < top.size(); ++i) {
                        std::snprintf(buf, sizeof buf, "%.6f", top[i].second);
                        csv << (i ? " " : "") << top[i].first << " " << buf;
                      }
                      csv << "\n";
                      return Status::Ok();
                    }));
  // Rank 0 writes every rank's rows, in rank order, after the header.
  ranks.SayShare(env, "predict", "predicted", videos, "writes every rank's rows");
  std::string rows = "VideoId,LabelConfidencePairs\n";
  if (ranks.launched.comm) {
    REEL_ASSIGN_OR_RETURN(std::vector<std::string> parts,
                          core::GatherBytes(*ranks.launched.comm, csv.str()));
    if (!ranks.lead()) return Status::Ok();
    for (const std::string& part : parts) rows += part;
  } else {
    rows += csv.view();
  }
  if (!args.Has("out")) {
    env.out << rows;
    return Status::Ok();
  }
  REEL_ASSIGN_OR_RETURN(Storage * storage, env.host.ForUri(args.Get("out")));
  return WriteAll(*storage, args.Get("out"), rows).WithContext("writing " + args.Get("out"));
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
