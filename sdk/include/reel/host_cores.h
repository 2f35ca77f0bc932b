// The cores of this host that a process may use, for hosts and plugins that size thread pools or
// choose how to wait (the core's thread budget for ranks sharing a host, the tcp transport's
// AllReduce): the affinity mask, which taskset, cpusets and container core limits narrow; not a
// CPU quota, which does not change how many threads can run at once.
//
// Thread-safety: both functions may be called from any thread.
#ifndef REEL_HOST_CORES_H_
#define REEL_HOST_CORES_H_

#include <sched.h>
#include <unistd.h>

#include <algorithm>

namespace reel {

// The CPUs online on this host; at least 1.
inline int OnlineCores() { return static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN))); }

// The CPUs this process may run on (its affinity mask); at least 1. A mask larger than cpu_set_t
// (over 1024 CPUs) cannot be read this way: then the online CPUs.
inline int CoresAvailable() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return OnlineCores();
}

}  // namespace reel

#endif  // REEL_HOST_CORES_H_
