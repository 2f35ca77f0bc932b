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
// `--nnodes MIN:MAX` (torchrun's elastic size): the nodes meet in rounds of a rendezvous that the
// --coordinator node's launcher serves (rendezvous_server.h); each round gives this node its node
// rank, the number of nodes and the ranks' coordinator port, and its ranks the job identity
// JOB.restart-R and REEL_RESTART_COUNT=R for round R. A failure here, or a new round opened by
// another node's failure or a newcomer, stops the ranks and joins the next round.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>

#include "args.h"
#include "cli.h"
#include "rank_supervisor.h"
#include "reel/job_id.h"
#include "rendezvous_client.h"
#include "rendezvous_server.h"

namespace reel::cli {
namespace {

constexpr char kUsage[] =
    "reel launch -n N [--nnodes M --node-rank K | --nnodes MIN:MAX [--rdzv-last-call-seconds S] "
    "[--rdzv-timeout-seconds S]] [--coordinator HOST:PORT] [--grace-seconds S] [--keep-going] "
    "[--max-restarts N] -- COMMAND [ARGS...]";

constexpr int64_t kMaxRestarts = 1000;

struct LaunchPlan {
  int64_t local_ranks = 0;
  int64_t nodes = 1;
  int64_t node_rank = 0;
  // --nnodes MIN:MAX: the nodes meet at the rendezvous (--coordinator) in rounds.
  bool elastic = false;
  int64_t min_nodes = 1, max_nodes = 1;
  double last_call_seconds = 3;
  double rdzv_timeout_seconds = 600;
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

// A number of seconds in 0..86400 from flag `name`, into `*out` when the flag is given.
Status SecondsFlag(const Args& args, const std::string& name, double* out) {
  if (!args.Has(name)) return Status::Ok();
  const std::string g = args.Get(name);
  char* end = nullptr;
  *out = std::strtod(g.c_str(), &end);
  if (g.empty() || *end != '\0' || !(*out >= 0) || *out > 86400)
    return InvalidArgumentError("flag '--" + name + "': '" + g +
                                "' is not a number of seconds in 0..86400");
  return Status::Ok();
}

// `--nnodes MIN:MAX` into the plan.
Status ParseElasticSize(const Args& args, LaunchPlan& plan) {
  const std::string v = args.Get("nnodes");
  const size_t colon = v.find(':');
  const std::string lo = v.substr(0, colon), hi = v.substr(colon + 1);
  char *end_lo = nullptr, *end_hi = nullptr;
  plan.min_nodes = std::strtoll(lo.c_str(), &end_lo, 10);
  plan.max_nodes = std::strtoll(hi.c_str(), &end_hi, 10);
  if (lo.empty() || hi.empty() || *end_lo != '\0' || *end_hi != '\0' || plan.min_nodes < 1 ||
      plan.max_nodes < plan.min_nodes || plan.max_nodes > 65536)
    return InvalidArgumentError("flag '--nnodes': '" + v +
                                "' is not MIN:MAX with 1 <= MIN <= MAX <= 65536");
  if (args.Has("node-rank"))
    return InvalidArgumentError("flag '--node-rank' does not go with --nnodes " + v +
                                ": the rendezvous gives each node its node rank in every round");
  if (!args.Has("coordinator"))
    return InvalidArgumentError(
        "flag '--coordinator' (HOST:PORT of the node whose launcher "
        "serves the rendezvous) is required with --nnodes " +
        v);
  plan.elastic = true;
  plan.nodes = plan.max_nodes;
  REEL_RETURN_IF_ERROR(SecondsFlag(args, "rdzv-last-call-seconds", &plan.last_call_seconds));
  return SecondsFlag(args, "rdzv-timeout-seconds", &plan.rdzv_timeout_seconds);
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
  args.Value("rdzv-last-call-seconds").Value("rdzv-timeout-seconds");
  REEL_RETURN_IF_ERROR(args.Parse(flags));
  plan.keep_going = args.Has("keep-going");
  if (!args.positional().empty())
    return InvalidArgumentError("unexpected argument '" + args.positional()[0] +
                                "' before '--' (flags: -n N ...)");
  if (!args.Has("nproc-per-node"))
    return InvalidArgumentError("flag '-n' (ranks on this node) is required");
  REEL_ASSIGN_OR_RETURN(plan.local_ranks, args.GetInt("nproc-per-node", 0));
  if (args.Get("nnodes").find(':') != std::string::npos) {
    REEL_RETURN_IF_ERROR(ParseElasticSize(args, plan));
  } else {
    for (const char* f : {"rdzv-last-call-seconds", "rdzv-timeout-seconds"})
      if (args.Has(f))
        return InvalidArgumentError("flag '--" + std::string(f) +
                                    "' goes with --nnodes MIN:MAX only");
    REEL_ASSIGN_OR_RETURN(plan.nodes, args.GetInt("nnodes", 1));
  }
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
  REEL_RETURN_IF_ERROR(SecondsFlag(args, "grace-seconds", &plan.grace_seconds));
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
  // The rendezvous of --nnodes MIN:MAX compares it whatever the transport.
  if (plan.nodes > 1 && (transport == "tcp" || plan.elastic))
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

// The ranks of node `node_rank` of `nodes` (the plan's, or a rendezvous round's).
std::vector<RankSpec> RankSpecs(const LaunchPlan& plan, const Attempt& a, int64_t node_rank,
                                int64_t nodes) {
  std::vector<RankSpec> ranks;
  for (int64_t i = 0; i < plan.local_ranks; ++i) {
    RankSpec spec;
    spec.rank = static_cast<int>(node_rank * plan.local_ranks + i);
    spec.environment = {
        "REEL_RANK=" + std::to_string(spec.rank),
        "REEL_WORLD_SIZE=" + std::to_string(nodes * plan.local_ranks),
        "REEL_LOCAL_RANK=" + std::to_string(i),
        "REEL_LOCAL_WORLD_SIZE=" + std::to_string(plan.local_ranks),
        "REEL_NODE_RANK=" + std::to_string(node_rank),
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

// This launcher's name at the rendezvous: its host and process, unique among the nodes.
std::string NodeName() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') std::strcpy(host, "host");
  return std::string(host) + ":" + std::to_string(::getpid());
}

// How long a rendezvous that says nothing is waited for (it speaks every second while a node
// waits): --rdzv-timeout-seconds, within 5..30 s.
std::chrono::milliseconds RendezvousSilence(const LaunchPlan& plan) {
  const double s = std::clamp(plan.rdzv_timeout_seconds, 5.0, 30.0);
  return std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
}

// `--nnodes MIN:MAX`: rounds of the rendezvous, each running this node's ranks at the size it
// assigns, until the ranks end well, a failure is not one to restart, or the rendezvous ends the
// job (fewer than MIN nodes, --max-restarts spent).
Status LaunchElastic(CliEnv& env, const LaunchPlan& plan, SuperviseOptions options, Attempt attempt,
                     const std::string& job_id, const std::string& secret) {
  const size_t colon = plan.coordinator.rfind(':');
  const std::string host = plan.coordinator.substr(0, colon);
  const std::string port = plan.coordinator.substr(colon + 1);
  const std::string node = NodeName();
  std::unique_ptr<RendezvousServer> server;
  if (int fd = ListenForRendezvous(host, port); fd >= 0) {
    RendezvousOptions o;
    o.job_id = job_id;
    o.secret = secret;
    o.own_node = node;
    o.min_nodes = plan.min_nodes;
    o.max_nodes = plan.max_nodes;
    o.max_restarts = plan.max_restarts;
    o.last_call = std::chrono::milliseconds(static_cast<int64_t>(plan.last_call_seconds * 1000));
    o.join_timeout =
        std::chrono::milliseconds(static_cast<int64_t>(plan.rdzv_timeout_seconds * 1000));
    REEL_ASSIGN_OR_RETURN(server, RendezvousServer::Start(fd, std::move(o)));
    env.err << "reel launch: serving the rendezvous at " << plan.coordinator << " (node " << node
            << ")" << std::endl;
  }
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::milliseconds(static_cast<int64_t>(plan.rdzv_timeout_seconds * 1000));
  REEL_ASSIGN_OR_RETURN(std::unique_ptr<RendezvousClient> rdzv,
                        RendezvousClient::Connect(host, port, job_id, secret, node, deadline));
  std::string failure;  // what failed on this node in the last round
  int64_t round = -1;
  while (true) {
    REEL_RETURN_IF_ERROR(rdzv->Join(failure));
    env.err << "reel launch: node " << node << " joins the next round at " << plan.coordinator
            << std::endl;
    REEL_ASSIGN_OR_RETURN(std::optional<RoundAssignment> a,
                          rdzv->AwaitAssignment(round, RendezvousSilence(plan)));
    if (!a) {  // another node's ranks all ended well: the job is done
      if (!failure.empty())
        return UnavailableError(failure + " in round " + std::to_string(round) +
                                ", after another node's ranks had finished the job");
      env.err << "reel launch: the job finished on another node before this node was given a "
                 "round"
              << std::endl;
      return Status::Ok();
    }
    round = a->round;
    attempt.restart = round;
    attempt.job_id = JobIdOfAttempt(job_id, round);
    if (attempt.job_id.size() > kMaxJobIdBytes)
      return InvalidArgumentError(
          "job identity '" + attempt.job_id + "' of round " + std::to_string(round) + " is over " +
          std::to_string(kMaxJobIdBytes) + " bytes; give a shorter REEL_JOB_ID");
    attempt.coordinator = host + ":" + std::to_string(a->port);
    env.err << "reel launch: round " << round << " (" << a->restarts << " restart(s)): node rank "
            << a->node_rank << " of " << a->nodes << " (" << a->members << "), world size "
            << a->nodes * plan.local_ranks << "; starting " << plan.local_ranks
            << " rank(s) (REEL_RESTART_COUNT=" << round << ")" << std::endl;
    options.ranks = RankSpecs(plan, attempt, a->node_rank, a->nodes);
    options.watch_fd = rdzv->fd();
    options.on_watch = [&rdzv, &env, round] {
      if (rdzv->StopRequested(round)) {
        env.err << "reel launch: "
                << (rdzv->abort_reason().empty() ? "round " + std::to_string(round + 1) +
                                                       " opens (" + rdzv->new_round_reason() + ")"
                                                 : "the rendezvous ends the job")
                << ": stopping this node's ranks" << std::endl;
        return WatchVerdict::kStop;
      }
      return rdzv->lost() ? WatchVerdict::kForget : WatchVerdict::kGoOn;
    };
    env.out.flush();
    env.err.flush();
    REEL_ASSIGN_OR_RETURN(SuperviseOutcome outcome, SuperviseRanks(options));
    // A failure's exit code is the launch's, even when the rendezvous ends the job after it;
    // ranks stopped for a new round exit with none.
    env.exit_code = outcome.first_failure ? outcome.exit_code : -1;
    if (!rdzv->abort_reason().empty()) return UnavailableError(rdzv->abort_reason());
    if (outcome.stopped_on_request) {
      env.err << "reel launch: stopped the ranks of round " << round << " for the next"
              << std::endl;
      failure.clear();
      continue;
    }
    if (!outcome.first_failure) {
      if (outcome.interrupted_by != 0)
        return CancelledError("interrupted; every rank has finished");
      if (outcome.exit_code != 0 && !outcome.stranded.empty()) {
        env.exit_code = outcome.exit_code;
        return UnavailableError(Stranded(outcome.stranded));
      }
      rdzv->Done();
      return Status::Ok();
    }
    const AttemptFailure f{round, *outcome.first_failure, outcome.stopped_at_failure};
    if (outcome.interrupted_by != 0)
      return UnavailableError(f.Describe() + "; interrupted, not restarted");
    if (!RestartMayCure(f.exit))
      return UnavailableError(
          f.Describe() + " in round " + std::to_string(round) +
          "; not restarted: a restart would repeat it (only a rank killed by a signal or exiting " +
          "with status " + std::to_string(kExitUnavailable) +
          ", a lost peer or service, is restarted)");
    failure = f.Describe();
  }
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
  if (!has_secret && plan.elastic)
    return InvalidArgumentError("REEL_SECRET is not set: the rendezvous of --nnodes " +
                                std::to_string(plan.min_nodes) + ":" +
                                std::to_string(plan.max_nodes) +
                                " admits the nodes that hold it; export the same value on every "
                                "node, e.g. export REEL_SECRET=$(openssl rand -hex 32)");
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
  if (plan.elastic) return LaunchElastic(env, plan, options, attempt, job_id, secret);
  std::vector<AttemptFailure> failures;
  for (attempt.restart = 0;; ++attempt.restart) {
    attempt.coordinator = plan.coordinator;
    if (attempt.restart > 0 && !plan.coordinator_given) {
      // The last attempt's port may still be held by a connection closing (TIME_WAIT).
      REEL_ASSIGN_OR_RETURN(int port, FreeLoopbackPort());
      attempt.coordinator = "127.0.0.1:" + std::to_string(port);
    }
    attempt.job_id = JobIdOfAttempt(job_id, attempt.restart);
    options.ranks = RankSpecs(plan, attempt, plan.node_rank, plan.nodes);
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
  return {"launch",
          "start N local ranks of a command (e.g. reel train) with their environment; with "
          "--nnodes MIN:MAX the nodes meet at the --coordinator's rendezvous and go on at the size "
          "that is left (docs/distributed.md, \"Restarts\")",
          kUsage, Launch};
}

}  // namespace reel::cli
