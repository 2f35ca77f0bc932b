#include "launched_ranks.h"

#include <chrono>
#include <map>
#include <string>

#include "reel/core/collectives.h"
#include "reel/core/rank_environment.h"
#include "reel/core/rank_plan.h"

namespace reel::cli {

Result<LaunchedRanks> JoinLaunchedRanks(CliEnv& env, const config::RunConfig& config,
                                        bool isolate_failures) {
  LaunchedRanks ranks;
  REEL_ASSIGN_OR_RETURN(TransportContext ctx, core::TransportContextFromEnvironment());
  const std::string mpi = core::MpiLauncherVariable();
  if ((ctx.world_size == kDiscover && mpi.empty()) || ctx.world_size == 1) return ranks;
  const core::Registry& registry = env.host.registry();
  const core::TransportChoice choice =
      core::ChooseTransport(config, ctx, registry.DefaultName(ComponentKind::kTransport));
  const std::string& name = choice.name;
  if (!choice.why.empty()) env.err << "reel: " << choice.why << "\n";  // as `reel train` says it
  // The section's options belong to the transport it names, not to one chosen otherwise.
  REEL_ASSIGN_OR_RETURN(ranks.transport,
                        registry.CreateTransport(name, name == config.transport().name()
                                                           ? core::OptionMap(config.transport())
                                                           : std::map<std::string, std::string>{}));
  ctx.isolate_failures = isolate_failures;
  REEL_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> backend,
                        ranks.transport->Connect(ctx, DeadlineIn(std::chrono::minutes(5))));
  ranks.comm = core::WithRingCollectives(std::move(backend));
  return ranks;
}

}  // namespace reel::cli
