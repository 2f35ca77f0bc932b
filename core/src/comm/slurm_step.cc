// A task started by srun (see reel/core/slurm_step.h).
#include "reel/core/slurm_step.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <string_view>

#include "reel/core/slurm_host_list.h"

namespace reel::core {
namespace {

const char* Set(const GetEnv& getenv, const char* name) {
  const char* v = getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

// The first of the names that is set, or InvalidArgument naming them all.
Result<std::pair<const char*, const char*>> Required(const GetEnv& getenv,
                                                     std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (const char* v = Set(getenv, n)) return std::pair{n, v};
  std::string others;
  for (const char* n : names)
    if (n != *names.begin()) others += std::string(others.empty() ? " (nor " : ", ") + n;
  return InvalidArgumentError(
      "started by srun (SLURM_STEP_ID is set) but " + std::string(*names.begin()) + " is not set" +
      (others.empty() ? "" : others + ")") + ": is this a task of an srun step?");
}

Result<long long> WholeNumber(std::pair<const char*, const char*> var) {
  const auto [name, value] = var;
  const char* end = value + std::strlen(value);
  long long out = 0;
  auto [ptr, ec] = std::from_chars(value, end, out);
  if (ec != std::errc() || ptr != end || out < 0 || out > (1LL << 40))
    return InvalidArgumentError(std::string(name) + "=\"" + value +
                                "\" is not a whole number >= 0");
  return out;
}

Result<int> SmallNumber(std::pair<const char*, const char*> var) {
  REEL_ASSIGN_OR_RETURN(long long n, WholeNumber(var));
  if (n > (1 << 24))
    return InvalidArgumentError(std::string(var.first) + "=" + var.second + " is too large");
  return static_cast<int>(n);
}

std::string Quote(std::pair<const char*, const char*> var) {
  return std::string(var.first) + "=" + var.second;
}

Result<int> CoordinatorPort(const GetEnv& getenv, long long job, long long step) {
  if (const char* ports = Set(getenv, "SLURM_STEP_RESV_PORTS")) {
    // "12000-12003" or "12000": the first port of the range Slurm reserved for this step.
    const char* end = ports + std::strlen(ports);
    int port = 0;
    auto [ptr, ec] = std::from_chars(ports, end, port);
    if (ec != std::errc() || port < 1 || port > 65535 || (ptr != end && *ptr != '-'))
      return InvalidArgumentError(std::string("SLURM_STEP_RESV_PORTS=\"") + ports +
                                  "\" does not start with a port number");
    return port;
  }
  return SlurmFallbackPort(job, step);
}

// Every distribution but `arbitrary` (a host list's order, srun -m arbitrary -w B,A) starts
// rank 0 on the step's first node. Only the tasks of that node and of rank 0's can tell
// (SLURM_GTIDS, the global ranks of this node's tasks); they refuse, rather than wait at a
// coordinator that nobody serves.
Status CheckRankZeroOnFirstNode(const GetEnv& getenv, const SlurmStep& step,
                                const std::vector<std::string>& hosts, const std::string& list) {
  const char* gtids = Set(getenv, "SLURM_GTIDS");
  if (gtids == nullptr) return Status::Ok();
  bool here = false;
  for (std::string_view rest = gtids; !rest.empty();) {
    const size_t comma = rest.find(',');
    here = here || rest.substr(0, comma) == "0";
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  if (here == (step.node == 0)) return Status::Ok();
  const char* distribution = Set(getenv, "SLURM_DISTRIBUTION");
  std::string placed = distribution ? "SLURM_DISTRIBUTION=" + std::string(distribution) : "srun";
  if (here)
    placed += " placed it on " + hosts[static_cast<size_t>(step.node)] +
              " (SLURM_NODEID=" + std::to_string(step.node) + ", SLURM_GTIDS=" + gtids + ")";
  else
    placed += " placed it elsewhere (this node's tasks are SLURM_GTIDS=" + std::string(gtids) + ")";
  return InvalidArgumentError(
      "the ranks of this step meet rank 0 on " + hosts.front() + ", the first host of " + list +
      ", but " + placed + ": start rank 0 on " + hosts.front() +
      ", or set REEL_COORDINATOR=HOST:PORT with rank 0's host for every task");
}

// Rank, world, node and local rank from Slurm's variables, checked against each other; the
// step's hosts in `hosts` and "SLURM_STEP_NODELIST=..." in `list`. Errors name the variables.
Status ReadPlacement(const GetEnv& getenv, SlurmStep& step, std::vector<std::string>& hosts,
                     std::string& list) {
  REEL_ASSIGN_OR_RETURN(auto job_var, Required(getenv, {"SLURM_JOB_ID", "SLURM_JOBID"}));
  REEL_ASSIGN_OR_RETURN(auto step_var, Required(getenv, {"SLURM_STEP_ID", "SLURM_STEPID"}));
  REEL_ASSIGN_OR_RETURN(auto rank_var, Required(getenv, {"SLURM_PROCID"}));
  REEL_ASSIGN_OR_RETURN(auto tasks_var, Required(getenv, {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"}));
  REEL_ASSIGN_OR_RETURN(auto local_var, Required(getenv, {"SLURM_LOCALID"}));
  REEL_ASSIGN_OR_RETURN(auto node_var, Required(getenv, {"SLURM_NODEID"}));
  REEL_ASSIGN_OR_RETURN(auto list_var, Required(getenv, {"SLURM_STEP_NODELIST", "SLURM_NODELIST"}));
  REEL_ASSIGN_OR_RETURN(auto counts_var,
                        Required(getenv, {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}));
  list = Quote(list_var);
  REEL_ASSIGN_OR_RETURN(step.job_id, WholeNumber(job_var));
  REEL_ASSIGN_OR_RETURN(step.step_id, WholeNumber(step_var));
  REEL_ASSIGN_OR_RETURN(step.rank, SmallNumber(rank_var));
  REEL_ASSIGN_OR_RETURN(step.world_size, SmallNumber(tasks_var));
  REEL_ASSIGN_OR_RETURN(step.local_rank, SmallNumber(local_var));
  REEL_ASSIGN_OR_RETURN(step.node, SmallNumber(node_var));
  if (step.world_size < 1) return InvalidArgumentError(Quote(tasks_var) + ": no tasks");
  if (step.rank >= step.world_size)
    return InvalidArgumentError(Quote(rank_var) + " is outside the step's " + Quote(tasks_var));

  Result<std::vector<std::string>> expanded = ExpandSlurmHostList(list_var.second);
  if (!expanded.ok())
    return InvalidArgumentError(std::string(list_var.first) + ": " + expanded.status().message());
  hosts = std::move(*expanded);
  Result<std::vector<int>> counts = ExpandSlurmTaskCounts(counts_var.second);
  if (!counts.ok())
    return InvalidArgumentError(std::string(counts_var.first) + ": " + counts.status().message());
  step.nodes = static_cast<int>(hosts.size());
  if (counts->size() != hosts.size())
    return InvalidArgumentError(Quote(counts_var) + " counts tasks on " +
                                std::to_string(counts->size()) + " node(s) but " + list +
                                " names " + std::to_string(step.nodes));
  long long total = 0;
  for (int c : *counts) total += c;
  if (total != step.world_size)
    return InvalidArgumentError(Quote(counts_var) + " adds up to " + std::to_string(total) +
                                " tasks, not " + Quote(tasks_var));
  if (step.node >= step.nodes) return InvalidArgumentError(Quote(node_var) + " is outside " + list);
  step.local_tasks = (*counts)[step.node];
  if (step.local_rank >= step.local_tasks)
    return InvalidArgumentError(Quote(local_var) + " is outside node " + std::to_string(step.node) +
                                "'s " + std::to_string(step.local_tasks) + " task(s) (" +
                                Quote(counts_var) + ")");
  return Status::Ok();
}

// The tasks sharing this task's `cores`: the node's, scaled by the part of the node's allocation
// that the task's mask holds (all of it when Slurm bound nothing, 1/tasks when it bound each).
Result<int> TasksSharingCores(const GetEnv& getenv, const SlurmStep& step, int cores) {
  const char* on_node = Set(getenv, "SLURM_CPUS_ON_NODE");
  if (on_node == nullptr) return step.local_tasks;
  REEL_ASSIGN_OR_RETURN(int allocated, SmallNumber({"SLURM_CPUS_ON_NODE", on_node}));
  if (allocated < 1 || cores >= allocated) return step.local_tasks;
  return std::clamp((step.local_tasks * cores + allocated - 1) / allocated, 1, step.local_tasks);
}

// mpirun inside a batch job starts its daemons with srun and the ranks from them: the step's
// variables are then the daemons' (SLURM_PROCID a node's index), not the ranks'. Open MPI's
// mpirun sets OMPI_COMM_WORLD_RANK, which srun never does; another launcher gives itself away by
// a rank that is not SLURM_PROCID (`srun --mpi=pmix` sets PMIX_RANK = SLURM_PROCID).
bool PlacedByMpiLauncher(const GetEnv& getenv) {
  if (Set(getenv, "OMPI_COMM_WORLD_RANK")) return true;
  const std::string mpi = MpiLauncherVariable(getenv);
  const char* procid = Set(getenv, "SLURM_PROCID");
  return !mpi.empty() && (procid == nullptr || std::string(getenv(mpi.c_str())) != procid);
}

}  // namespace

int SlurmFallbackPort(long long job_id, long long step_id) {
  constexpr int kJobs = kSlurmPortSpan / kSlurmPortsPerJob;
  return kSlurmPortBase + static_cast<int>(job_id % kJobs) * kSlurmPortsPerJob +
         static_cast<int>(step_id % kSlurmPortsPerJob);
}

std::string SlurmStep::Describe() const {
  return "started by srun (job " + std::to_string(job_id) + ", step " + std::to_string(step_id) +
         "): rank " + std::to_string(rank) + " of " + std::to_string(world_size) +
         (transport.empty() ? ", alone" : ", transport " + transport) +
         (coordinator.empty() ? "" : ", coordinator " + coordinator);
}

Result<std::optional<SlurmStep>> SlurmStepFromEnvironment(const GetEnv& getenv, int cores) {
  if (!Set(getenv, "SLURM_STEP_ID") && !Set(getenv, "SLURM_STEPID"))
    return std::optional<SlurmStep>();
  if (Set(getenv, "REEL_RANK") || Set(getenv, "REEL_WORLD_SIZE")) return std::optional<SlurmStep>();
  if (PlacedByMpiLauncher(getenv)) return std::optional<SlurmStep>();
  SlurmStep step;
  std::vector<std::string> hosts;
  std::string list;  // "SLURM_STEP_NODELIST=..." for messages
  REEL_RETURN_IF_ERROR(ReadPlacement(getenv, step, hosts, list));

  const bool several_hosts = std::any_of(hosts.begin(), hosts.end(),
                                         [&](const std::string& h) { return h != hosts.front(); });
  const auto give = [&](const char* name, std::string value) {
    if (!Set(getenv, name)) step.variables.emplace_back(name, std::move(value));
  };
  const std::string mpi = MpiLauncherVariable(getenv);
  const char* chosen = Set(getenv, "REEL_TRANSPORT");
  step.transport = chosen ? chosen : !mpi.empty() ? "mpi" : step.world_size > 1 ? "tcp" : "";
  if (step.world_size > 1 && mpi.empty()) {
    if (const char* c = Set(getenv, "REEL_COORDINATOR")) {
      step.coordinator = c;
    } else {
      REEL_RETURN_IF_ERROR(CheckRankZeroOnFirstNode(getenv, step, hosts, list));
      REEL_ASSIGN_OR_RETURN(int port, CoordinatorPort(getenv, step.job_id, step.step_id));
      // One node: loopback, which the tcp transport accepts without a shared secret.
      step.coordinator = (several_hosts ? hosts.front() : "127.0.0.1") + ":" + std::to_string(port);
    }
    give("REEL_RANK", std::to_string(step.rank));
    give("REEL_WORLD_SIZE", std::to_string(step.world_size));
    give("REEL_COORDINATOR", step.coordinator);
    give("REEL_TRANSPORT", step.transport);
  }
  give("REEL_LOCAL_RANK", std::to_string(step.local_rank));
  give("REEL_NODE_RANK", std::to_string(step.node));
  REEL_ASSIGN_OR_RETURN(int sharing, TasksSharingCores(getenv, step, cores));
  give("REEL_LOCAL_WORLD_SIZE", std::to_string(sharing));

  if (step.transport == "tcp" && several_hosts && !Set(getenv, "REEL_SECRET"))
    return InvalidArgumentError(
        "this srun step spans " + std::to_string(step.nodes) + " nodes (" + list +
        ") and REEL_SECRET is not set: its ranks could not authenticate each other over tcp; "
        "in the batch script, before srun: export REEL_SECRET=$(openssl rand -hex 32)");
  return std::optional<SlurmStep>(std::move(step));
}

}  // namespace reel::core
