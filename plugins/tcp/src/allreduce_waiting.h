// How AllReduce waits when nothing moves: by polling its sockets for a while (busy waiting,
// which takes a peer's chunk the moment it arrives) or by sleeping in poll() at once (which
// leaves the core to whoever needs it). A rank that polls on a shared core must yield it between
// polls: polling without yielding, it takes the time its peer needs to make the progress it
// polls for (bench/results/allreduce.md, runs 7 and 8: 3 ranks on 2 cores ran 2-100x slower),
// while polling and yielding ran 1.1-2.0x faster than sleeping at every size (run 20).
//
// The automatic choice is Open MPI's rule: its launcher marks a node oversubscribed when it runs
// more processes than the node has slots (cores), and every process on such a node then yields
// when idle (`mpi_yield_when_idle`, ompi/instance/instance.c); otherwise it polls without yielding.
#ifndef REEL_PLUGINS_TCP_SRC_ALLREDUCE_WAITING_H_
#define REEL_PLUGINS_TCP_SRC_ALLREDUCE_WAITING_H_

#include <chrono>
#include <optional>
#include <string>

namespace reel::tcp {

// How long a rank that polls keeps polling once nothing moves, before it sleeps after all: long
// enough to cover a peer's turn of the ring, short against a rank that is late by a whole step.
constexpr std::chrono::microseconds kAutomaticSpin{20000};

struct AllReduceWaiting {
  std::chrono::microseconds spin{0};  // 0: sleeps at once
  bool yield = false;                 // while it polls, yields the core after each poll
  std::string why;                    // for the log: the mode and what decided it
};

// `option`: the option allreduce_spin_us (nullopt: automatic). `ranks_on_host`: the group's ranks
// on this machine, this one included; `cores`: the cores this rank may run on. A rank polls
// (automatically for kAutomaticSpin) unless the option is 0, and yields while it polls when the
// host's ranks outnumber its cores.
AllReduceWaiting ChooseAllReduceWaiting(std::optional<std::chrono::microseconds> option,
                                        int ranks_on_host, int cores);

// The cores this process may run on (its affinity mask, which taskset, cpusets and container
// limits on cores narrow; not a CPU quota); at least 1.
int CoresAvailable();

// An id that every process under this kernel shares and no other machine has: the kernel's boot
// id (network namespaces and containers on one host share it, and their cores), else the host
// name. Printable, without spaces, at most 255 characters.
std::string MachineId();

}  // namespace reel::tcp

#endif  // REEL_PLUGINS_TCP_SRC_ALLREDUCE_WAITING_H_
