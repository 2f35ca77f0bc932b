// The MPI library's process-wide state, as the mpi transport uses it (thread levels as users see
// them: plugins/mpi/README.md, "Thread levels").
//
// MPI may be initialised once per process and never again after MPI_Finalize, so the transport
// initialises it lazily, on the first Connect(), at the level that Connect's thread_level asks
// for, and finalises it at process exit; a host that initialised MPI itself keeps that job (the
// level is then only checked). The level is the process's: a later Connect asking for more than
// was initialised is FailedPrecondition naming both.
//
// thread_level=multiple runs MPI_THREAD_MULTIPLE, which the Communicator contract (Send and Recv on
// several threads) needs. thread_level=serialized runs MPI_THREAD_SERIALIZED, which spares Open
// MPI's internal locking, and keeps MPI's rule here instead: every MPI call the transport makes
// holds MpiLock, one process-wide mutex. Polled waits hold it per call, never between calls, so
// two threads waiting for each other's messages both progress; a blocking native call holds it
// throughout.
//
// Finalising at exit is skipped when a collective was abandoned: MPI_Finalize synchronises with
// every process, and a peer may be waiting in that collective forever; without it the launcher
// notices the improper exit and ends the job. The plugin is loaded with RTLD_NODELETE, so the exit
// handler's code outlives every unload.
//
// Thread-safety: every function may be called from any thread. MpiLock is not recursive: hold it
// around MPI calls only, never around MpiStatus (which takes it) or another lock.
#ifndef REEL_PLUGINS_MPI_SRC_MPI_RUNTIME_H_
#define REEL_PLUGINS_MPI_SRC_MPI_RUNTIME_H_

#include <mpi.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "reel/status.h"
#include "reel/transport.h"

namespace reel::mpi {

// What the transport needs of MPI's thread support (mpi option thread_level, see above).
enum class ThreadLevel { kMultiple, kSerialized };
// "multiple", "serialized": the option's values.
std::string_view ThreadLevelName(ThreadLevel level);
// The value of option thread_level named `name`; InvalidArgument naming the valid values.
Result<ThreadLevel> ParseThreadLevel(std::string_view name);

// Initialises MPI once per process, at the thread level `level` needs (MPI_THREAD_MULTIPLE or
// MPI_THREAD_SERIALIZED), with MPI_ERRORS_RETURN on MPI_COMM_WORLD; later calls check `level`
// against the level MPI was initialised with. FailedPrecondition when MPI was finalised already,
// when the host initialised it below what `level` needs, or for kMultiple after MPI was initialised
// with MPI_THREAD_SERIALIZED; the error of the first attempt on every later call if it failed.
Status EnsureInitialized(ThreadLevel level);

namespace internal {
// The mutex MpiLock takes: set once, before the first communicator exists, when MPI runs below
// MPI_THREAD_MULTIPLE; null otherwise. Read through MpiLock only.
extern std::atomic<std::mutex*> serializing_mutex;
}  // namespace internal

// Held around every MPI call the transport makes (see above). Under MPI_THREAD_MULTIPLE it costs a
// relaxed load of a pointer that never changes after initialisation and a branch: no lock.
class MpiLock {
 public:
  MpiLock() : mu_(internal::serializing_mutex.load(std::memory_order_relaxed)) {
    if (mu_) mu_->lock();
  }
  ~MpiLock() {
    if (mu_) mu_->unlock();
  }
  MpiLock(const MpiLock&) = delete;
  MpiLock& operator=(const MpiLock&) = delete;

 private:
  std::mutex* const mu_;
};

// One MPI call under MpiLock, its code returned after the lock is released, so that it can go
// straight to MpiStatus: MpiStatus(Locked([&] { return MPI_Isend(...); }), what).
template <typename Call>
int Locked(const Call& call) {
  MpiLock lock;
  return call();
}

// A Status for an MPI error code: `what` (e.g. "mpi rank 1: Send to rank 0 tag 3"), then the MPI
// error class and MPI_Error_string. MPI_SUCCESS is OK. Takes MpiLock for an error.
Status MpiStatus(int code, std::string_view what);

// A duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN, formed within the deadline
// (MPI_Comm_idup, polled). Collective: every rank must call it. `what` prefixes errors.
Result<MPI_Comm> DuplicateWorld(const std::string& what, Deadline deadline);

// Which ranks of `comm` run on this rank's node (MPI_Get_processor_name, gathered with
// MPI_Iallgather, polled within the deadline). Collective over `comm`.
Result<std::vector<bool>> RanksOnThisNode(MPI_Comm comm, const std::string& what,
                                          Deadline deadline);

// The largest message Open MPI's shared-memory transport sends eagerly (its MCA parameter
// btl_vader_eager_limit, header included, read once through MPI_T); 0 when that transport is not
// in use (e.g. `--mca btl tcp,self`) or the MPI library is not Open MPI.
size_t SharedMemoryEagerLimit();

// Records that a collective was abandoned, so the exit handler leaves MPI unfinalised (MPI_Finalize
// could wait for it for ever) ...
void NoteAbandonedCollective();
// ... unless it completed after all (the late ranks arrived): one call per noted collective.
void NoteAbandonedCollectiveCompleted();

// Keeps `memory` for the rest of the process: memory of an operation given up on, which MPI may
// still read or write (an abandoned receive's buffer, a leave notice still going out). Held by a
// process-wide list rather than dropped, so that it stays reachable: a leak checker (the ASan
// phase's LeakSanitizer) reports a dropped pointer.
void KeepForTheProcess(std::shared_ptr<const void> memory);

// True once MPI_Finalize has run (in this process, by anyone): MPI may no longer be called.
// (MPI_Finalized may be called from any thread at any time: no MpiLock.)
bool Finalized();

}  // namespace reel::mpi

#endif  // REEL_PLUGINS_MPI_SRC_MPI_RUNTIME_H_
