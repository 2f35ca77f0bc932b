// Rank, world size and coordinator from the environment (see reel/core/rank_environment.h).
#include "reel/core/rank_environment.h"

#include <charconv>
#include <cstdlib>
#include <cstring>

namespace reel::core {

GetEnv ProcessEnvironment() {
  return [](const char* name) -> const char* { return std::getenv(name); };
}

Result<int> ParseEnvInt(const char* name, const char* value) {
  const char* end = value + std::strlen(value);
  int out = 0;
  auto [ptr, ec] = std::from_chars(value, end, out);
  if (ec != std::errc() || ptr != end || ptr == value)
    return InvalidArgumentError(std::string(name) + "=\"" + value + "\" is not a whole number");
  return out;
}

Result<TransportContext> TransportContextFromEnvironment(const GetEnv& getenv) {
  const char* rank = getenv("REEL_RANK");
  const char* world = getenv("REEL_WORLD_SIZE");
  const char* coordinator = getenv("REEL_COORDINATOR");
  TransportContext ctx{kDiscover, kDiscover, coordinator ? coordinator : ""};
  if (rank == nullptr && world == nullptr) return ctx;
  if (rank == nullptr)
    return InvalidArgumentError(std::string("REEL_WORLD_SIZE=") + world +
                                " is set but REEL_RANK is not: set both or neither");
  if (world == nullptr)
    return InvalidArgumentError(std::string("REEL_RANK=") + rank +
                                " is set but REEL_WORLD_SIZE is not: set both or neither");
  REEL_ASSIGN_OR_RETURN(ctx.rank, ParseEnvInt("REEL_RANK", rank));
  REEL_ASSIGN_OR_RETURN(ctx.world_size, ParseEnvInt("REEL_WORLD_SIZE", world));
  if (ctx.world_size < 1)
    return InvalidArgumentError("REEL_WORLD_SIZE=" + std::to_string(ctx.world_size) +
                                " must be at least 1");
  if (ctx.rank < 0 || ctx.rank >= ctx.world_size)
    return InvalidArgumentError("REEL_RANK=" + std::to_string(ctx.rank) + " is outside [0, " +
                                "REEL_WORLD_SIZE=" + std::to_string(ctx.world_size) + ")");
  return ctx;
}

std::string MpiLauncherVariable(const GetEnv& getenv) {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char* v = getenv(name); v != nullptr && *v != '\0') return name;
  return "";
}

}  // namespace reel::core
