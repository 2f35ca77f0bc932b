// The thread level (mpi option thread_level) at which a test process runs the mpi transport. MPI is
// initialised once per process, at one level, so each level is a CTest entry (a process) of its
// own: REEL_MPI_TEST_THREAD_LEVEL names it (`mpirun -x REEL_MPI_TEST_THREAD_LEVEL=serialized`);
// unset, the default (multiple). Every Connect of such a test passes it. With
// REEL_MPI_TEST_HOST_INIT=1 as well, the test process initialises MPI itself at that level before
// any test, as a host that runs MPI itself does (mpi_world_test.cc).
#ifndef REEL_PLUGINS_MPI_TESTS_TEST_THREAD_LEVEL_H_
#define REEL_PLUGINS_MPI_TESTS_TEST_THREAD_LEVEL_H_

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "mpi_communicator.h"
#include "mpi_runtime.h"

namespace reel::mpi {

inline ThreadLevel TestThreadLevel() {
  const char* name = std::getenv("REEL_MPI_TEST_THREAD_LEVEL");
  if (name == nullptr) return ThreadLevel::kMultiple;
  Result<ThreadLevel> level = ParseThreadLevel(name);
  if (!level.ok()) {  // a typo in the test's command must not quietly test the default
    std::fprintf(stderr, "REEL_MPI_TEST_THREAD_LEVEL: %s\n", level.status().message().c_str());
    std::exit(2);
  }
  return *level;
}

// Whether the test process initialises MPI itself (REEL_MPI_TEST_HOST_INIT=1).
inline bool HostInitialisesMpi() {
  const char* host = std::getenv("REEL_MPI_TEST_HOST_INIT");
  return host != nullptr && std::string_view(host) == "1";
}

// `options` at the test process's thread level.
inline MpiOptions AtTestThreadLevel(MpiOptions options = {}) {
  options.thread_level = TestThreadLevel();
  return options;
}

}  // namespace reel::mpi

#endif  // REEL_PLUGINS_MPI_TESTS_TEST_THREAD_LEVEL_H_
