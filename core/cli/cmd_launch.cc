// `reel launch -n N [--nnodes M --node-rank K --coordinator HOST:PORT] -- COMMAND [ARGS...]`:
// starts N local ranks of COMMAND in the style of torchrun. Each rank gets
//   REEL_RANK = K*N + i, REEL_WORLD_SIZE = M*N, REEL_LOCAL_RANK = i, REEL_LOCAL_WORLD_SIZE = N,
//   REEL_NODE_RANK = K, REEL_COORDINATOR = HOST:PORT (default on one node: 127.0.0.1 and a port
//   that was free a moment ago), and REEL_TRANSPORT = tcp unless the environment sets it already
//   (a run config without a transport section uses the transport REEL_TRANSPORT names), and on
//   one node REEL_SECRET, random per launch unless the environment sets it (the tcp transport
//   authenticates every connection with it; several nodes must share one, so it is theirs to set),
//   and REEL_JOB_ID, the launch's job identity (reel/job_id.h) by which the tcp transport refuses
//   processes of other launches: the environment's (REEL_JOB_ID, else Slurm's job and step), else
//   on one node random per launch; several nodes must share one, so it is theirs to set.
// Supervision and exit codes: rank_supervisor.h.
// `--max-restarts N` (torchrun's): a failed run of the ranks (an attempt) whose failure a rerun may
// cure — a rank killed by a signal or exiting with kExitUnavailable (cli.h) — is stopped as
// without it and started again, up to N times, each attempt K with REEL_RESTART_COUNT=K (0 for
// the first), on one node a new coordinator port unless --coordinator was given, and the job
// identity JOB.restart-K (none added for the first), so that no rank of an earlier attempt can
// join a later one; `reel train` resumes when K > 0. Other failures end the launch at once: a
// restart would repeat them (docs/distributed.md, "Restarts").
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "args.h"
#include "cli.h"
#include "rank_supervisor.h"
#include "reel/job_id.h"

namespace reel::cli {
namespace {

constexpr char kUsage[] =
    "reel launch -n N [--nnodes M --node-rank K] [--coordinator HOST:PORT] "
    "[--grace-seconds S] [--keep-going] [--max-restarts N] -- COMMAND [ARGS...]";

constexpr int64_t kMaxRestarts = 1000;

struct LaunchPlan {
  int64_t local_ranks = 0;
  int64_t nodes = 1;
  int64_t node_rank = 0;
  std::string coordinator;
  bool coordinator_given = false;  // else, on one node, a free loopback port for every attempt
  int64_t max_restarts = 0;
  double grace_seconds = 30;
  bool keep_going = false;  // a failing rank other than 0 stops nobody (reel tune's workers)
  std::vector<std::string> command;
};

// "HOST:PORT" (or "[IPv6]:PORT") with a port in 1..65535.
Status CheckCoordinator(const std::string& value) {
  const size_t colon = value.rfind(':');
  const std::string host = colon == std::string::npos ? "" : value.substr(0, colon);
  const std::string port = colon == std::string::npos ? "" : value.substr(colon + 1);
  char* end = nullptr;
  const long p = port.empty() ? 0 : std::strtol(port.c_str(), &end, 10);
  if (host.empty() || host == "[]" || port.empty() || *end != '\0' || p < 1 || p > 65535)
    return InvalidArgumentError("flag '--coordinator': '" + value +
                                "' is not HOST:PORT with a port in 1..65535");
  return Status::Ok();
}

// A loopback port nobody listens on right now. Another process may take it before rank 0 binds
// it; the transport's Connect then fails naming the address, and a rerun picks another.
Result<int> FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return UnavailableError("socket: " + std::string(std::strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok) return UnavailableError("no free port on 127.0.0.1: " + std::string(std::strerror(err)));
  return static_cast<int>(ntohs(addr.sin_port));
}

Result<LaunchPlan> ParsePlan(const std::vector<std::string>& words) {
  auto dashes = std::find(words.begin(), words.end(), "--");
  if (dashes == words.end())
    return InvalidArgumentError("missing '--' before the command to launch (" +
                                std::string(kUsage) + ")");
  LaunchPlan plan;
  plan.command.assign(dashes + 1, words.end());
  if (plan.command.empty()) return InvalidArgumentError("no command after '--'");
  // Args takes long flags only; `-n` is the short name of --nproc-per-node.
  std::vector<std::string> flags(words.begin(), dashes);
  for (std::string& w : flags)
    if (w == "-n") w = "--nproc-per-node";
  Args args;
  args.Value("nproc-per-node").Value("nnodes").Value("node-rank").Value("coordinator");
  args.Value("grace-seconds").Value("max-restarts").Switch("keep-going");
  REEL_RETURN_IF_ERROR(args.Parse(flags));
  plan.keep_going = args.Has("keep-going");
  if (!args.positional().empty())
    return InvalidArgumentError("unexpected argument '" + args.positional()[0] +
                                "' before '--' (flags: -n N ...)");
  if (!args.Has("nproc-per-node"))
    return InvalidArgumentError("flag '-n' (ranks on this node) is required");
  REEL_ASSIGN_OR_RETURN(plan.local_ranks, args.GetInt("nproc-per-node", 0));
  REEL_ASSIGN_OR_RETURN(plan.nodes, args.GetInt("nnodes", 1));
  REEL_ASSIGN_OR_RETURN(plan.node_rank, args.GetInt("node-rank", 0));
  REEL_ASSIGN_OR_RETURN(plan.max_restarts, args.GetInt("max-restarts", 0));
  if (plan.max_restarts < 0 || plan.max_restarts > kMaxRestarts)
    return InvalidArgumentError("flag '--max-restarts': " + std::to_string(plan.max_restarts) +
                                "; give 0 to " + std::to_string(kMaxRestarts));
  if (plan.local_ranks < 1 || plan.local_ranks > 4096)
    return InvalidArgumentError("flag '-n': " + std::to_string(plan.local_ranks) +
                                " ranks; give 1 to 4096");
  if (plan.nodes < 1 || plan.nodes > 65536)
    return InvalidArgumentError("flag '--nnodes': " + std::to_string(plan.nodes) +
                                " nodes; give 1 to 65536");
  if (plan.node_rank < 0 || plan.node_rank >= plan.nodes)
    return InvalidArgumentError("flag '--node-rank': " + std::to_string(plan.node_rank) +
                                " is not in 0.." + std::to_string(plan.nodes - 1));
  if (args.Has("grace-seconds")) {
    const std::string g = args.Get("grace-seconds");
    char* end = nullptr;
    plan.grace_seconds = std::strtod(g.c_str(), &end);
    if (g.empty() || *end != '\0' || !(plan.grace_seconds >= 0) || plan.grace_seconds > 86400)
      return InvalidArgumentError("flag '--grace-seconds': '" + g +
                                  "' is not a number of seconds in 0..86400");
  }
  if (args.Has("coordinator")) {
    plan.coordinator_given = true;
    plan.coordinator = args.Get("coordinator");
    REEL_RETURN_IF_ERROR(CheckCoordinator(plan.coordinator));
  } else if (plan.nodes > 1) {
    return InvalidArgumentError(
        "flag '--coordinator' (HOST:PORT of node 0, reachable from every "
        "node) is required with --nnodes " +
        std::to_string(plan.nodes));
  } else {
    REEL_ASSIGN_OR_RETURN(int port, FreeLoopbackPort());
    plan.coordinator = "127.0.0.1:" + std::to_string(port);
  }
  return plan;
}

// `count` random bytes from the kernel, in hex; `what` names their use in the error.
Result<std::string> RandomHex(size_t count, const std::string& what) {
  unsigned char bytes[32];
  count = std::min(count, sizeof bytes);
  const int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  const bool ok = fd >= 0 && ::read(fd, bytes, count) == static_cast<ssize_t>(count);
  if (fd >= 0) ::close(fd);
  if (!ok) return UnavailableError("cannot read /dev/urandom for " + what);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < count; ++i) out += {kHex[bytes[i] >> 4], kHex[bytes[i] & 15]};
  return out;
}

// The job identity this launch gives its ranks (reel/job_id.h): the environment's, else on one
// node a new one. Several nodes cannot share one made here; without one the tcp ranks of every
// node would start, so refuse before starting any, as for the secret.
Result<std::string> LaunchJobId(const LaunchPlan& plan, const std::string& transport) {
  REEL_ASSIGN_OR_RETURN(std::string id,
                        JobIdFromEnvironment([](const char* name) { return std::getenv(name); }));
  if (!id.empty()) return id;
  if (plan.nodes > 1 && transport == "tcp")
    return InvalidArgumentError(
        "REEL_JOB_ID is not set: ranks on " + std::to_string(plan.nodes) +
        " nodes must share one job identity (so that a process left from an earlier run is "
        "refused); export the same new value on every node, e.g. export REEL_JOB_ID=run-$(openssl "
        "rand -hex 6)");
  REEL_ASSIGN_OR_RETURN(std::string random, RandomHex(6, "a job identity"));
  return "launch-" + random;
}

// `reel` as the command means this very executable, with the global flags launch got
// (--plugin-dir, --storage), so `reel --storage s3.endpoint=URL launch -- reel train ...` trains
// every rank against that endpoint. REEL_STORAGE_* variables reach the ranks with the environment.
std::vector<std::string> ResolveCommand(const CliEnv& env, std::vector<std::string> command) {
  if (command[0] != "reel") return command;
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  command[0] = ec ? env.argv0 : self.string();
  std::vector<std::string> global;
  for (const std::string& d : env.plugin_dirs) global.insert(global.end(), {"--plugin-dir", d});
  for (const std::string& s : env.storage_flags) global.insert(global.end(), {"--storage", s});
  command.insert(command.begin() + 1, global.begin(), global.end());
  return command;
}

// What every rank of one attempt gets in its environment.
struct Attempt {
  int64_t restart = 0;
  std::string coordinator;
  std::string job_id;
  std::string transport;
  std::string own_secret;  // "" when the environment's REEL_SECRET reaches the ranks
};

std::vector<RankSpec> RankSpecs(const LaunchPlan& plan, const Attempt& a) {
  std::vector<RankSpec> ranks;
  for (int64_t i = 0; i < plan.local_ranks; ++i) {
    RankSpec spec;
    spec.rank = static_cast<int>(plan.node_rank * plan.local_ranks + i);
    spec.environment = {
        "REEL_RANK=" + std::to_string(spec.rank),
        "REEL_WORLD_SIZE=" + std::to_string(plan.nodes * plan.local_ranks),
        "REEL_LOCAL_RANK=" + std::to_string(i),
        "REEL_LOCAL_WORLD_SIZE=" + std::to_string(plan.local_ranks),
        "REEL_NODE_RANK=" + std::to_string(plan.node_rank),
        "REEL_COORDINATOR=" + a.coordinator,
        "REEL_TRANSPORT=" + a.transport,
        "REEL_JOB_ID=" + a.job_id,
        "REEL_RESTART_COUNT=" + std::to_string(a.restart),
    };
    if (!a.own_secret.empty()) spec.environment.push_back("REEL_SECRET=" + a.own_secret);
    ranks.push_back(std::move(spec));
  }
  return ranks;
}

// The first failure of one attempt.
struct AttemptFailure {
  int64_t restart = 0;
  RankExit exit;
  std::vector<RankStop> stopped;  // ranks stopped by a signal then

  std::string Describe() const {
    return "rank " + std::to_string(exit.rank) + " " + exit.Describe() + WhileStopped(stopped);
  }
};

// A failure a rerun may cure: a rank killed (by the kernel's OOM killer, a preemption, a person)
// or failing because a peer or service was unavailable. Any other status is the rank's own error
// (a config, data or checkpoint error), which every attempt would repeat.
bool RestartMayCure(const RankExit& e) { return e.signaled || e.value == kExitUnavailable; }

// "; every failure: attempt 0: rank 1 was killed ...; attempt 1: ..." when there was more than one.
std::string EveryFailure(const std::vector<AttemptFailure>& failures) {
  if (failures.size() < 2) return "";
  std::string text = "; every failure:";
  for (const AttemptFailure& f : failures)
    text += (&f == &failures.front() ? " attempt " : "; attempt ") + std::to_string(f.restart) +
            ": " + f.Describe();
  return text;
}

Status Launch(CliEnv& env, const std::vector<std::string>& words) {
  REEL_ASSIGN_OR_RETURN(LaunchPlan plan, ParsePlan(words));
  SuperviseOptions options;
  options.command = ResolveCommand(env, plan.command);
  options.grace = std::chrono::milliseconds(static_cast<int64_t>(plan.grace_seconds * 1000));
  options.keep_going = plan.keep_going;
  const char* transport = std::getenv("REEL_TRANSPORT");
  const char* secret = std::getenv("REEL_SECRET");
  const bool has_secret = secret != nullptr && *secret != '\0';
  Attempt attempt;
  attempt.transport = transport && *transport ? transport : "tcp";
  // Ranks on several nodes cannot share a secret made here; without one each would start and
  // then fail at formation, so refuse before starting any (docs/reliability.md).
  if (!has_secret && plan.nodes > 1 && attempt.transport == "tcp")
    return InvalidArgumentError("REEL_SECRET is not set: ranks on " + std::to_string(plan.nodes) +
                                " nodes must share one; export the same value on every node, e.g. "
                                "export REEL_SECRET=$(openssl rand -hex 32)");
  if (!has_secret && plan.nodes == 1) {
    REEL_ASSIGN_OR_RETURN(attempt.own_secret, RandomHex(32, "a shared secret"));
  }
  REEL_ASSIGN_OR_RETURN(const std::string job_id, LaunchJobId(plan, attempt.transport));
  const std::string last_id = JobIdOfAttempt(job_id, plan.max_restarts);
  if (last_id.size() > kMaxJobIdBytes)
    return InvalidArgumentError("job identity '" + job_id + "' is too long for --max-restarts " +
                                std::to_string(plan.max_restarts) + ": the last attempt's, '" +
                                last_id + "', would be over " + std::to_string(kMaxJobIdBytes) +
                                " bytes; give a shorter REEL_JOB_ID");
  std::vector<AttemptFailure> failures;
  for (attempt.restart = 0;; ++attempt.restart) {
    attempt.coordinator = plan.coordinator;
    if (attempt.restart > 0 && !plan.coordinator_given) {
      // The last attempt's port may still be held by a connection closing (TIME_WAIT).
      REEL_ASSIGN_OR_RETURN(int port, FreeLoopbackPort());
      attempt.coordinator = "127.0.0.1:" + std::to_string(port);
    }
    attempt.job_id = JobIdOfAttempt(job_id, attempt.restart);
    options.ranks = RankSpecs(plan, attempt);
    env.out.flush();
    env.err.flush();
    REEL_ASSIGN_OR_RETURN(SuperviseOutcome outcome, SuperviseRanks(options));
    env.exit_code = outcome.exit_code;
    if (!outcome.first_failure) {
      if (outcome.interrupted_by != 0)
        return CancelledError("interrupted; every rank has finished" + EveryFailure(failures));
      if (outcome.exit_code != 0 && !outcome.stranded.empty())
        return UnavailableError(Stranded(outcome.stranded) + EveryFailure(failures));
      return Status::Ok();
    }
    failures.push_back({attempt.restart, *outcome.first_failure, outcome.stopped_at_failure});
    const AttemptFailure& failure = failures.back();
    if (plan.max_restarts == 0) return UnavailableError(failure.Describe());
    if (outcome.interrupted_by != 0)  // failed, then interrupted: no restart
      return UnavailableError(failure.Describe() + "; interrupted, not restarted" +
                              EveryFailure(failures));
    if (!RestartMayCure(failure.exit))
      return UnavailableError(
          failure.Describe() + " in attempt " + std::to_string(attempt.restart) +
          "; not restarted: a restart would repeat it (only a rank killed by a signal or exiting " +
          "with status " + std::to_string(kExitUnavailable) +
          ", a lost peer or service, is restarted)" + EveryFailure(failures));
    if (attempt.restart == plan.max_restarts)
      return UnavailableError(failure.Describe() + " after " + std::to_string(plan.max_restarts) +
                              " restart(s), the most --max-restarts allows" +
                              EveryFailure(failures));
    env.err << "reel launch: restart " << attempt.restart + 1 << " of " << plan.max_restarts
            << ": starting the " << plan.local_ranks
            << " rank(s) again (REEL_RESTART_COUNT=" << attempt.restart + 1 << ")\n";
  }
}

}  // namespace

CliCommand LaunchCliCommand() {
  return {"launch", "start N local ranks of a command (e.g. reel train) with their environment",
          kUsage, Launch};
}

}  // namespace reel::cli
