// Training jobs from a run configuration (see reel/core/train_job.h).
#include <cstdlib>
#include <vector>

#include "reel/core/checkpoint.h"
#include "reel/core/collectives.h"
#include "reel/core/connect.h"
#include "reel/core/rank_plan.h"
#include "reel/core/train_job.h"
#include "reel/core/trainer_options.h"
#include "reel/job_id.h"
#include "train/local_ranks.h"
#include "train/precision.h"
#include "train/thread_budget.h"

namespace reel::core {
namespace {

// Builds one rank's components and trains.
Result<TrainResult> RunRank(Host& host, const ConfigFile& cfg, const TrainerOptions& options,
                            std::unique_ptr<Communicator> comm, int threads, Precision precision) {
  // The model's kernels, and the core's loss and update rules, on this thread's team.
  ScopedThreads team(threads);
  const config::RunConfig& c = cfg.config;
  const Registry& reg = host.registry();
  const int rank = comm->rank(), world = comm->size();
  // Before anything that depends on it: the optimizer's roles, the data's split, the model.
  REEL_RETURN_IF_ERROR(CheckRanksAgree(*comm, SettingsRanksShare(reg, c, options),
                                       "the ranks train one model together (another seed splits "
                                       "the data wrongly, another model or learning rate drifts "
                                       "apart). Give every rank the same config",
                                       options.timeout));
  // The optimizer first: it decides which ranks train, and so how the data is sharded.
  config::Component opt = c.optimizer();
  if (opt.name().empty()) opt.set_name(reg.DefaultName(ComponentKind::kOptimizer));
  Result<Owned<Optimizer>> made =
      reg.CreateOptimizer(opt.name(), ComponentOptions(reg, ComponentKind::kOptimizer, opt, c),
                          OptimizerContext{rank, world});
  if (!made.ok())
    return made.status().WithContext("optimizer '" + opt.name() + "' on rank " +
                                     std::to_string(rank));
  Owned<Optimizer> optimizer = std::move(*made);
  // The training ranks, when some ranks only serve or the training ranks step independently.
  std::unique_ptr<Communicator> group;
  const RankRoles* roles = optimizer->rank_roles();
  const bool serves_only = roles != nullptr && roles->IsServerOnly();
  if (roles != nullptr && (roles->HasServerOnlyRanks() || roles->TrainsIndependently())) {
    REEL_ASSIGN_OR_RETURN(group,
                          comm->Split(serves_only ? 1 : 0, rank, DeadlineIn(options.timeout)));
  }
  const Communicator& shards = group ? *group : *comm;
  DataSourceContext dctx{{shards.rank(), shards.size()}, c.trainer().seed(), &host};
  Owned<DataSource> train, eval;
  if (!serves_only) {
    REEL_ASSIGN_OR_RETURN(
        train,
        reg.CreateDataSource(c.data().name(),
                             ComponentOptions(reg, ComponentKind::kDataSource, c.data(), c), dctx));
    // Training ranks that step independently (see reel/core/trainer.h): the lead evaluates
    // alone, on the whole evaluation set; every training rank has it, since any may take over
    // from a lost lead.
    const bool independent = group != nullptr && group->size() > 1;
    DataSourceContext ectx = dctx;
    if (independent) ectx.shard = {0, 1};
    if (c.has_eval_data()) {
      REEL_ASSIGN_OR_RETURN(
          eval, reg.CreateDataSource(
                    c.eval_data().name(),
                    ComponentOptions(reg, ComponentKind::kDataSource, c.eval_data(), c), ectx));
    }
  }
  ParamArena arena;  // declared first: the model keeps a pointer to it and must not outlive it
  REEL_ASSIGN_OR_RETURN(
      auto model,
      reg.CreateModel(c.model().name(), ComponentOptions(reg, ComponentKind::kModel, c.model(), c),
                      ModelContext{options.num_classes, threads, precision}));
  REEL_RETURN_IF_ERROR(model->DeclareParams(arena).WithContext("model '" + c.model().name() + "'"));
  arena.Finalize();
  RankComponents rc{train.get(),     eval.get(), model.get(), &arena,
                    optimizer.get(), comm.get(), group.get()};
  return RunTrainer(options, rc, host);
}

// The rank plan of this job; a single-process job (a tuning trial) is a world of one rank over
// the default transport, whatever the environment and the config's transport and local_ranks say.
Result<RankPlan> PlanFor(const config::RunConfig& c, const Registry& registry,
                         const TrainJobOptions& job) {
  const std::string default_transport = registry.DefaultName(ComponentKind::kTransport);
  if (!job.single_process) return PlanRanks(c, default_transport, job.env);
  config::RunConfig alone = c;
  alone.clear_transport();
  alone.mutable_trainer()->clear_local_ranks();
  return PlanRanks(alone, default_transport, [](const char*) -> const char* { return nullptr; });
}

// True if the optimizer of this job has server-only ranks: its training ranks then step
// independently and a lost one is dropped, so the transport must let a dead peer fail only what
// involves it (TransportContext::isolate_failures). Asked of an optimizer made for rank 0 of the
// planned world; a world the transport discovers itself (MPI, which ends the job on a lost rank
// anyway), or options the optimizer refuses (the real one reports that), say false.
bool ToleratesLostRanks(const config::RunConfig& c, const Registry& reg, const RankPlan& plan) {
  if (plan.ranks.empty() || plan.ranks.front().world_size < 2) return false;
  config::Component opt = c.optimizer();
  if (opt.name().empty()) opt.set_name(reg.DefaultName(ComponentKind::kOptimizer));
  Result<Owned<Optimizer>> probe =
      reg.CreateOptimizer(opt.name(), ComponentOptions(reg, ComponentKind::kOptimizer, opt, c),
                          OptimizerContext{0, plan.ranks.front().world_size});
  return probe.ok() && (*probe)->rank_roles() != nullptr &&
         (*probe)->rank_roles()->HasServerOnlyRanks();
}

}  // namespace

Result<TrainResult> RunTrainJob(Host& host, const ConfigFile& cfg, const TrainJobOptions& job) {
  const Registry& registry = host.registry();
  REEL_RETURN_IF_ERROR(ValidateComponents(cfg, registry, {"data", "model"}));
  const config::RunConfig& c = cfg.config;
  REEL_ASSIGN_OR_RETURN(RankPlan plan, PlanFor(c, registry, job));
  if (ToleratesLostRanks(c, registry, plan))
    for (TransportContext& ctx : plan.ranks) ctx.isolate_failures = true;
  TrainerOptions options = TrainerOptionsFrom(cfg, job);
  options.timeout = plan.timeouts.each;
  // Commits are the launch's: every attempt of it finds the ones before (train/commits.h).
  if (options.commit_every_steps > 0) {
    REEL_ASSIGN_OR_RETURN(options.commit_job, JobIdFromEnvironment(job.env));
  }

  // What the host chose for this process, said first (before it waits for its peers).
  auto say = [&](const std::string& why) {
    if (!why.empty() && job.progress != nullptr && job.verbosity > 0)
      *job.progress << "reel: " << why << "\n";
  };
  say(plan.why);  // a transport the config did not name
  REEL_ASSIGN_OR_RETURN(PrecisionChoice precision,
                        ResolvePrecision(options.precision, DetectCpuBf16(job.env)));
  say(precision.why);
  // Ranks that share this host share its cores (train/thread_budget.h).
  int threads = job.threads;
  if (threads == 0 && !job.single_process) {
    REEL_ASSIGN_OR_RETURN(ThreadBudget budget,
                          ThreadsPerRank(job.env, static_cast<int>(plan.ranks.size()),
                                         CoresAvailable(), OnlineCores()));
    threads = budget.threads;
    say(budget.why);
  }
  const std::string transport_name = "transport '" + plan.transport + "'";
  // The section's options belong to the transport it names, not to one chosen otherwise.
  Result<Owned<Transport>> transport =
      registry.CreateTransport(plan.transport, plan.transport == c.transport().name()
                                                   ? OptionMap(c.transport())
                                                   : std::map<std::string, std::string>{});
  if (!transport.ok()) return transport.status();  // the registry names the transport
  Result<std::vector<std::unique_ptr<Communicator>>> comms =
      ConnectConcurrently(**transport, plan.ranks, DeadlineIn(plan.timeouts.connect));
  if (!comms.ok()) return comms.status().WithContext(transport_name);
  std::vector<int> ranks;
  for (auto& comm : *comms) {
    comm = WithRingCollectives(std::move(comm));
    ranks.push_back(comm->rank());
  }

  std::vector<Result<TrainResult>> results =
      RunOnThreads<TrainResult>(static_cast<int>(comms->size()), [&](int i) {
        // RunRank destroys the communicator when it returns, so ranks still waiting on this one
        // fail instead of hanging.
        return RunRank(host, cfg, options, std::move((*comms)[static_cast<size_t>(i)]), threads,
                       precision.precision);
      });
  // The run's result is the first training rank's (server-only ranks did not train).
  for (size_t i = 1; i < results.size(); ++i)
    if (results.front().ok() && results.front()->served_only && results[i].ok() &&
        !results[i]->served_only)
      std::swap(results.front(), results[i]);
  return RootCause(std::move(results), ranks);
}

Result<CheckpointModel> LoadModelFromCheckpoint(Host& host, const std::string& path, int threads) {
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
          ModelContext{out.num_classes, threads}));
  out.arena = std::make_unique<ParamArena>();
  REEL_RETURN_IF_ERROR(out.model->DeclareParams(*out.arena));
  out.arena->Finalize();
  REEL_RETURN_IF_ERROR(RestoreParams(state, c.model().name(), *out.arena, out.uri));
  out.step = state.step;
  return out;
}

}  // namespace reel::core
