// This process's ranks, transport and timeouts (see reel/core/rank_plan.h).
#include "reel/core/rank_plan.h"

#include <cmath>
#include <utility>

namespace reel::core {
namespace {

Result<std::chrono::milliseconds> Seconds(const char* field, bool has, double seconds,
                                          std::chrono::milliseconds fallback) {
  if (!has) return fallback;
  if (!(seconds > 0) || !std::isfinite(seconds) || seconds > 1e9)
    return InvalidArgumentError(std::string(field) + "=" + std::to_string(seconds) +
                                " must be a positive number of seconds");
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(seconds * 1000.0)));
}

}  // namespace

Result<Timeouts> TimeoutsFrom(const config::RunConfig& config) {
  const config::Transport& t = config.transport();
  Timeouts out;
  REEL_ASSIGN_OR_RETURN(
      out.connect, Seconds("transport.connect_timeout_seconds", t.has_connect_timeout_seconds(),
                           t.connect_timeout_seconds(), kDefaultConnectTimeout));
  REEL_ASSIGN_OR_RETURN(out.each, Seconds("transport.timeout_seconds", t.has_timeout_seconds(),
                                          t.timeout_seconds(), kDefaultTimeout));
  return out;
}

TransportChoice ChooseTransport(const config::RunConfig& config, const TransportContext& process,
                                const std::string& default_transport, const GetEnv& getenv) {
  if (!config.transport().name().empty()) return {config.transport().name(), ""};
  const char* launcher_transport = getenv("REEL_TRANSPORT");
  if (launcher_transport != nullptr && *launcher_transport != '\0')
    return {launcher_transport, std::string("REEL_TRANSPORT=") + launcher_transport +
                                    " and the config names no transport: using transport '" +
                                    launcher_transport + "'"};
  const std::string mpi_variable = MpiLauncherVariable(getenv);
  if (!mpi_variable.empty())
    return {"mpi", "started by an MPI launcher (" + mpi_variable +
                       " is set) and the config names no transport: using transport 'mpi'"};
  if (process.rank != kDiscover && process.world_size > 1)
    return {"tcp", "REEL_WORLD_SIZE=" + std::to_string(process.world_size) +
                       " and the config names no transport: using transport 'tcp'"};
  return {default_transport, ""};
}

Result<RankPlan> PlanRanks(const config::RunConfig& config, const std::string& default_transport,
                           const GetEnv& getenv) {
  RankPlan plan;
  REEL_ASSIGN_OR_RETURN(plan.timeouts, TimeoutsFrom(config));
  const int64_t configured_local = config.trainer().local_ranks();
  if (configured_local < 0 || configured_local > 4096)
    return InvalidArgumentError("trainer.local_ranks=" + std::to_string(configured_local) +
                                " must lie in [0, 4096]");
  const int local = std::max<int>(1, static_cast<int>(configured_local));
  REEL_ASSIGN_OR_RETURN(TransportContext process, TransportContextFromEnvironment(getenv));
  const std::string mpi_variable = MpiLauncherVariable(getenv);
  const bool placed = process.rank != kDiscover;

  TransportChoice transport = ChooseTransport(config, process, default_transport, getenv);
  plan.transport = std::move(transport.name);
  plan.why = std::move(transport.why);

  if (placed) {
    for (int i = 0; i < local; ++i)
      plan.ranks.push_back(
          {process.rank * local + i, process.world_size * local, process.coordinator});
  } else if (local == 1) {
    plan.ranks.push_back({kDiscover, kDiscover, process.coordinator});
  } else if (!mpi_variable.empty()) {
    return InvalidArgumentError(
        "trainer.local_ranks=" + std::to_string(local) + " under an MPI launcher (" + mpi_variable +
        " is set): the launcher places every rank, so start " + std::to_string(local) +
        "x the processes with one local rank each instead");
  } else {
    for (int i = 0; i < local; ++i) plan.ranks.push_back({i, local, process.coordinator});
  }
  return plan;
}

}  // namespace reel::core
