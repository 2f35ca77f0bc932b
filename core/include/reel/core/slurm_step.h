// A process that `srun` started: its place among the step's tasks, read from the variables Slurm
// sets for every task, and the REEL_* variables that place it the way `reel launch` would.
//
// Started by srun means SLURM_STEP_ID (or SLURM_STEPID) is set: the batch script itself, which
// runs outside any step, is not a rank. Then
//   rank        = SLURM_PROCID of SLURM_NTASKS (SLURM_STEP_NUM_TASKS when set)
//   local rank  = SLURM_LOCALID of the SLURM_STEP_TASKS_PER_NODE (else SLURM_TASKS_PER_NODE)
//                 entry of node SLURM_NODEID
//   coordinator = the first host of SLURM_STEP_NODELIST (else SLURM_NODELIST; 127.0.0.1 when the
//                 step runs on one node, so that it needs no secret), where every distribution
//                 but `arbitrary` puts rank 0; on the first of SLURM_STEP_RESV_PORTS when Slurm
//                 reserved ports (no other step on the node has them), else on SlurmFallbackPort
//   transport   = mpi when an MPI launcher or PMIx started the task (`srun --mpi=pmix`: PMIX_RANK;
//                 MpiLauncherVariable), which then finds rank and size itself; else tcp
//   sharing     = how many of the node's tasks share this task's cores: all of them when Slurm
//                 bound none (the affinity mask holds all SLURM_CPUS_ON_NODE), one when it bound
//                 each to its own (--cpus-per-task, task/affinity); REEL_LOCAL_WORLD_SIZE, which
//                 the thread budget divides the mask by (core/src/train/thread_budget.h)
// REEL_* variables the user set win; when they or mpirun inside a batch job (OMPI_COMM_WORLD_RANK,
// or an MPI rank that is not SLURM_PROCID) placed the process, Slurm's are unread (docs/slurm.md).
// Errors are InvalidArgument naming the variable (missing, not a whole number, a rank outside the
// step, node list and task counts that disagree), or, for a tcp step over several nodes without
// REEL_SECRET (its ranks could not authenticate each other), with the line that fixes it; and for
// rank 0 off the node list's first host (`srun -m arbitrary -w node02,node01`), seen by the tasks
// of either node through SLURM_GTIDS, naming REEL_COORDINATOR (the others cannot tell where it is).
//
// Thread-safety: a pure function of what `getenv` returns.
#ifndef REEL_CORE_SLURM_STEP_H_
#define REEL_CORE_SLURM_STEP_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "reel/core/rank_environment.h"

namespace reel::core {

// The coordinator's port when Slurm reserved none: kSlurmPortsPerJob ports a job, one a step
// (step mod kSlurmPortsPerJob), the job's at (job mod kSlurmPortSpan / kSlurmPortsPerJob), below
// Linux's ephemeral ports (32768 and up). Jobs fewer than 5000 ids apart (those likeliest to run at
// once) never meet on one port; jobs a multiple of 5000 apart on one node still do, and the second
// rank 0 cannot listen ("Address already in use"): sites that run many jobs a node reserve ports
// (MpiParams=ports, docs/slurm.md).
inline constexpr int kSlurmPortBase = 10000;
inline constexpr int kSlurmPortSpan = 20000;
inline constexpr int kSlurmPortsPerJob = 4;
int SlurmFallbackPort(long long job_id, long long step_id);

// Where srun placed this task, and what to export so that the rest of reel sees it.
struct SlurmStep {
  long long job_id = 0;
  long long step_id = 0;
  int rank = 0;
  int world_size = 0;
  int local_rank = 0;
  int local_tasks = 0;  // tasks of this step on this node
  int node = 0;         // SLURM_NODEID
  int nodes = 0;        // hosts in the step's node list
  std::string transport;
  std::string coordinator;  // host:port, REEL_COORDINATOR's when set
  // What to export to place this process; variables already set are not in it.
  std::vector<std::pair<std::string, std::string>> variables;

  // "started by srun (job 12, step 0): rank 3 of 8, transport tcp, coordinator node01:PORT"
  std::string Describe() const;
};

// The step this process is a task of, or nullopt when srun did not start it (or REEL_RANK /
// REEL_WORLD_SIZE placed it). `cores` is the size of this process's affinity mask.
Result<std::optional<SlurmStep>> SlurmStepFromEnvironment(const GetEnv& getenv, int cores);

}  // namespace reel::core

#endif  // REEL_CORE_SLURM_STEP_H_
