// Training jobs from a run configuration (see reel/core/train_job.h).
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "reel/core/checkpoint.h"
#include "reel/core/collectives.h"
#include "reel/core/inproc.h"
#include "reel/core/train_job.h"

namespace reel::core {
namespace {

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

bool SchemaHas(const Registry& registry, ComponentKind kind, const std::string& name,
               const std::string& option) {
  const ComponentEntry* e = registry.Find(kind, name);
  if (e == nullptr) return false;
  for (const auto& spec : e->info.options)
    if (spec.name == option) return true;
  return false;
}

TrainerOptions TrainerOptionsFrom(const ConfigFile& cfg, const TrainJobOptions& job) {
  const config::Trainer& t = cfg.config.trainer();
  TrainerOptions o;
  o.steps = t.steps();
  o.epochs = t.epochs() > 0 ? t.epochs() : 1;
  o.seed = t.seed();
  const config::LearningRate& lr = t.learning_rate();
  if (lr.base() > 0) o.learning_rate.base = lr.base();
  if (!lr.schedule().empty()) o.learning_rate.schedule = lr.schedule();
  o.learning_rate.decay_steps = lr.decay_steps();
  if (lr.decay_rate() > 0) o.learning_rate.decay_rate = lr.decay_rate();
  o.learning_rate.min_lr = lr.min_lr();
  o.learning_rate.warmup_steps = lr.warmup_steps();
  o.clip_norm = t.has_clip_norm() ? t.clip_norm() : 1.0;
  o.eval_every_steps = t.eval_every_steps();
  if (t.log_every_steps() > 0) o.log_every_steps = t.log_every_steps();
  o.checkpoint_every_steps = t.checkpoint_every_steps();
  if (t.keep_checkpoints() > 0) o.keep_checkpoints = static_cast<int>(t.keep_checkpoints());
  o.checkpoint_dir = t.checkpoint_dir();
  o.metrics_log = t.metrics_log();
  o.tensorboard_dir = t.tensorboard_dir();
  o.num_classes = NumClasses(cfg.config);
  o.eval_top_k = t.eval_top_k() > 0 ? static_cast<int>(t.eval_top_k()) : 20;
  o.model_name = cfg.config.model().name();
  o.config_text = ConfigToText(cfg.config);
  o.resume = job.resume;
  o.verbosity = job.verbosity;
  o.tty = job.tty;
  o.progress = job.progress;
  o.should_stop = job.should_stop;
  return o;
}

// Builds one rank's components and trains.
Result<TrainResult> RunRank(Host& host, const ConfigFile& cfg, const TrainerOptions& options,
                            std::unique_ptr<Communicator> comm, int threads) {
  const config::RunConfig& c = cfg.config;
  const Registry& reg = host.registry();
  const int rank = comm->rank(), world = comm->size();
  DataSourceContext dctx{{rank, world}, c.trainer().seed(), &host};
  REEL_ASSIGN_OR_RETURN(
      auto train,
      reg.CreateDataSource(c.data().name(),
                           ComponentOptions(reg, ComponentKind::kDataSource, c.data(), c), dctx));
  Owned<DataSource> eval;
  if (c.has_eval_data()) {
    REEL_ASSIGN_OR_RETURN(
        eval, reg.CreateDataSource(
                  c.eval_data().name(),
                  ComponentOptions(reg, ComponentKind::kDataSource, c.eval_data(), c), dctx));
  }
  ParamArena arena;  // declared first: the model keeps a pointer to it and must not outlive it
  REEL_ASSIGN_OR_RETURN(
      auto model,
      reg.CreateModel(c.model().name(), ComponentOptions(reg, ComponentKind::kModel, c.model(), c),
                      ModelContext{options.num_classes, threads}));
  REEL_RETURN_IF_ERROR(model->DeclareParams(arena).WithContext("model '" + c.model().name() + "'"));
  arena.Finalize();
  const std::string opt_name = c.optimizer().name().empty() ? "sync" : c.optimizer().name();
  REEL_ASSIGN_OR_RETURN(auto optimizer, reg.CreateOptimizer(opt_name, OptionMap(c.optimizer())));
  RankComponents rc{train.get(), eval.get(), model.get(), &arena, optimizer.get(), comm.get()};
  return RunTrainer(options, rc, host);
}

}  // namespace

int64_t NumClasses(const config::RunConfig& config) {
  if (config.trainer().num_classes() > 0) return config.trainer().num_classes();
  auto it = config.data().options().find("num_classes");
  if (it != config.data().options().end()) {
    int64_t n = std::atoll(it->second.c_str());
    if (n > 0) return n;
  }
  return 3862;
}

std::map<std::string, std::string> ComponentOptions(const Registry& registry, ComponentKind kind,
                                                    const config::Component& component,
                                                    const config::RunConfig& config) {
  std::map<std::string, std::string> out = OptionMap(component);
  auto fill = [&](const std::string& key, const std::string& value) {
    if (!out.count(key) && SchemaHas(registry, kind, component.name(), key)) out[key] = value;
  };
  if (config.trainer().batch_size() > 0)
    fill("batch_size", std::to_string(config.trainer().batch_size()));
  fill("num_classes", std::to_string(NumClasses(config)));
  return out;
}

Result<TrainResult> RunTrainJob(Host& host, const ConfigFile& cfg, const TrainJobOptions& job) {
  REEL_RETURN_IF_ERROR(ValidateComponents(cfg, host.registry(), {"data", "model"}));
  const TrainerOptions options = TrainerOptionsFrom(cfg, job);
  const config::RunConfig& c = cfg.config;
  const int local = job.single_process
                        ? 1
                        : static_cast<int>(std::max<int64_t>(1, c.trainer().local_ranks()));
  const int world = job.single_process ? 1 : local > 1 ? local : EnvInt("REEL_WORLD_SIZE", 1);
  const int first_rank = job.single_process ? 0 : local > 1 ? 0 : EnvInt("REEL_RANK", 0);
  if (world < 1 || first_rank < 0 || first_rank >= world)
    return InvalidArgumentError("REEL_RANK=" + std::to_string(first_rank) +
                                " is outside REEL_WORLD_SIZE=" + std::to_string(world));

  // One communicator per local rank.
  std::vector<std::unique_ptr<Communicator>> comms(static_cast<size_t>(local));
  Owned<Transport> transport;
  // Without a transport section, a launcher's REEL_TRANSPORT (`reel launch` sets tcp) names it.
  const char* env_transport = std::getenv("REEL_TRANSPORT");
  const std::string transport_name = c.has_transport() ? c.transport().name()
                                     : env_transport   ? env_transport
                                                       : "";
  if (!job.single_process && !transport_name.empty() &&
      (c.has_transport() || (world > 1 && local == 1))) {
    REEL_ASSIGN_OR_RETURN(
        transport, host.registry().CreateTransport(transport_name, OptionMap(c.transport())));
  } else if (world > 1 && local == 1) {
    return InvalidArgumentError("REEL_WORLD_SIZE=" + std::to_string(world) +
                                " needs a transport section (e.g. transport { name: \"tcp\" })");
  } else {
    REEL_ASSIGN_OR_RETURN(auto group, CreateInprocGroup(local));
    for (int i = 0; i < local; ++i) comms[i] = std::move(group[i]);
  }

  std::vector<Result<TrainResult>> results(static_cast<size_t>(local),
                                           Result<TrainResult>(InternalError("rank did not run")));
  auto run = [&](int i) {
    std::unique_ptr<Communicator> comm = std::move(comms[i]);
    if (!comm) {
      const char* coord = std::getenv("REEL_COORDINATOR");
      TransportContext ctx{first_rank + i, world, coord ? coord : ""};
      Result<std::unique_ptr<Communicator>> joined = transport->Connect(ctx, NoDeadline());
      if (!joined.ok()) {
        results[i] = joined.status().WithContext("rank " + std::to_string(ctx.rank) +
                                                 ": transport '" + transport_name + "'");
        return;
      }
      comm = std::move(*joined);
    }
    comm = WithRingCollectives(std::move(comm));
    results[i] = RunRank(host, cfg, options, std::move(comm), job.threads);
    // The communicator is gone now, so ranks still waiting on this one fail instead of hanging.
  };
  if (local == 1) {
    run(0);
  } else {
    std::vector<std::thread> threads;
    for (int i = 0; i < local; ++i) threads.emplace_back(run, i);
    for (auto& t : threads) t.join();
  }
  // Report the root cause: the first rank whose error is not a peer having gone away.
  for (int i = 0; i < local; ++i)
    if (!results[i].ok() && results[i].status().code() != StatusCode::kUnavailable)
      return local > 1 ? results[i].status().WithContext("rank " + std::to_string(i))
                       : results[i].status();
  for (int i = 0; i < local; ++i)
    if (!results[i].ok()) return results[i].status();
  return results[0];
}

Result<CheckpointModel> LoadModelFromCheckpoint(Host& host, const std::string& path) {
  CheckpointModel out;
  REEL_ASSIGN_OR_RETURN(CheckpointState state, LoadCheckpoint(host, path, &out.uri));
  REEL_ASSIGN_OR_RETURN(out.config, ParseConfig(state.config_text, out.uri + " (recorded config)"));
  const config::RunConfig& c = out.config.config;
  if (c.model().name() != state.model_name)
    return DataLossError(out.uri + ": checkpoint names model '" + state.model_name +
                         "' but its config says '" + c.model().name() + "'");
  out.num_classes = NumClasses(c);
  REEL_ASSIGN_OR_RETURN(
      out.model,
      host.registry().CreateModel(
          c.model().name(), ComponentOptions(host.registry(), ComponentKind::kModel, c.model(), c),
          ModelContext{out.num_classes}));
  out.arena = std::make_unique<ParamArena>();
  REEL_RETURN_IF_ERROR(out.model->DeclareParams(*out.arena));
  out.arena->Finalize();
  REEL_RETURN_IF_ERROR(RestoreParams(state, c.model().name(), *out.arena, out.uri));
  out.step = state.step;
  return out;
}

}  // namespace reel::core
