// Slurm's compressed host lists and task counts, as srun and sbatch put them in the environment
// (SLURM_STEP_NODELIST, SLURM_TASKS_PER_NODE), expanded as `scontrol show hostnames` does.
//
//   node[01-04,07],gpu[1-2]   ->  node01 node02 node03 node04 node07 gpu1 gpu2
//   rack[1-2]-n[1-2]          ->  rack1-n1 rack1-n2 rack2-n1 rack2-n2 (brackets multiply)
//   2(x3),1                   ->  2 2 2 1
//
// A range keeps the width of its lower bound when that has a leading zero (`[08-10]`: 08 09 10),
// as Slurm's hostlist.c does. Anything else — an unclosed bracket, a range running backwards,
// an empty name, a count that is not a number — is InvalidArgument quoting the list; so is a list
// of more than kMaxSlurmHosts names, which no real allocation reaches.
//
// Thread-safety: pure functions.
#ifndef REEL_CORE_SLURM_HOST_LIST_H_
#define REEL_CORE_SLURM_HOST_LIST_H_

#include <string>
#include <string_view>
#include <vector>

#include "reel/status.h"

namespace reel::core {

// The most host names (or task counts) a list may expand to.
inline constexpr size_t kMaxSlurmHosts = 1 << 20;

// The host names of a compressed list, in its order (duplicates kept, as scontrol keeps them).
Result<std::vector<std::string>> ExpandSlurmHostList(std::string_view list);

// The per-node task counts of SLURM_TASKS_PER_NODE's syntax ("2(x3),1"), one entry per node.
Result<std::vector<int>> ExpandSlurmTaskCounts(std::string_view counts);

}  // namespace reel::core

#endif  // REEL_CORE_SLURM_HOST_LIST_H_
