// How AllReduce waits when nothing moves: by polling its sockets for a while (busy waiting,
// which takes a peer's chunk the moment it arrives) or by sleeping in poll() at once (which
// leaves the core to whoever needs it). Polling pays by default only when every rank on the host
// has a core of its own. Where ranks share cores, a polling rank yields its core between polls:
// polling without yielding it takes the time its peer needs to make the progress it polls for
// (3 ranks on 2 cores ran 2-100x slower); polling and yielding made 3 ranks' bare allreduces
// 1.2-1.8x faster than sleeping, but their training 10% slower (the yields share the cores with
// the ranks still computing), so there it is the option's choice, not the default. Figures and
// how they were measured: bench/RESULTS.md.
//
// The automatic choice follows Open MPI's rule for when to poll: its launcher marks a node
// oversubscribed when it runs more processes than the node has slots (cores), and then its
// processes stop busy polling (they yield when idle, `mpi_yield_when_idle`,
// ompi/instance/instance.c); reel's sleep instead.
#ifndef REEL_PLUGINS_TCP_SRC_ALLREDUCE_WAITING_H_
#define REEL_PLUGINS_TCP_SRC_ALLREDUCE_WAITING_H_

#include <chrono>
#include <optional>
#include <string>

#include "reel/host_cores.h"

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
// on this machine, this one included; `cores`: the cores this rank may run on. Automatically a
// rank polls for kAutomaticSpin where the host's ranks fit its cores and sleeps where they do
// not; a given spin polls for that long, yielding where they do not.
AllReduceWaiting ChooseAllReduceWaiting(std::optional<std::chrono::microseconds> option,
                                        int ranks_on_host, int cores);

// How long an AllReduce polls when nothing moves, given the choice above: `chosen.spin`, but 0
// while the rank's own compute runs beside the call (Communicator::SetComputeAlongside: a
// polling wait would take a core that compute needs) unless the option asked for the polling
// (`option_given`).
std::chrono::microseconds SpinNow(const AllReduceWaiting& chosen, bool option_given,
                                  bool compute_alongside);

// The cores this process may run on: reel/host_cores.h.
using reel::CoresAvailable;

// An id that every process under this kernel shares and no other machine has: the kernel's boot
// id (network namespaces and containers on one host share it, and their cores), else the host
// name. Printable, without spaces, at most 255 characters.
std::string MachineId();
// The host this process runs on, for AllReduce's layout: MachineId(), "/", and `host_id` if given
// (as "id:" + host_id), else the network namespace ("net:" + its inode), so that simulated hosts
// in namespaces of one kernel are hosts of their own. Printable, without spaces.
std::string HostId(const std::string& host_id);
// The machine of a HostId(): its part before the "/".
std::string MachineOf(const std::string& host);

}  // namespace reel::tcp

#endif  // REEL_PLUGINS_TCP_SRC_ALLREDUCE_WAITING_H_
