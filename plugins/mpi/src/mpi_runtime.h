// The MPI library's process-wide state, as the mpi transport uses it.
//
// MPI may be initialised once per process and never again after MPI_Finalize. The transport
// initialises it lazily, on the first Connect(), with MPI_THREAD_MULTIPLE (Send and Recv run on
// different threads at once, reel/transport.h), and finalises it at process exit. A host that
// initialised MPI itself keeps that job: then the transport only checks the thread level.
//
// Finalising at exit is skipped when a collective was abandoned (its deadline passed, or a peer
// left, while it waited for the other ranks): MPI_Finalize synchronises with every process, and a
// peer may then be waiting in that collective forever. Without MPI_Finalize the launcher (mpirun,
// srun) notices the improper exit and ends the whole job instead of hanging.
//
// The plugin is loaded with RTLD_NODELETE, so the exit handler's code outlives every unload.
//
// Thread-safety: every function may be called from any thread.
#ifndef REEL_PLUGINS_MPI_SRC_MPI_RUNTIME_H_
#define REEL_PLUGINS_MPI_SRC_MPI_RUNTIME_H_

#include <mpi.h>

#include <string>
#include <string_view>

#include "reel/status.h"
#include "reel/transport.h"

namespace reel::mpi {

// Initialises MPI once per process with MPI_THREAD_MULTIPLE and MPI_ERRORS_RETURN on
// MPI_COMM_WORLD. FailedPrecondition when MPI was finalised already or was initialised by the host
// without MPI_THREAD_MULTIPLE; the error of the first attempt on every later call if it failed.
Status EnsureInitialized();

// A Status for an MPI error code: `what` (e.g. "mpi rank 1: Send to rank 0 tag 3"), then the MPI
// error class and MPI_Error_string. MPI_SUCCESS is OK.
Status MpiStatus(int code, std::string_view what);

// A duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN, formed within the deadline
// (MPI_Comm_idup, polled). Collective: every rank must call it. `what` prefixes errors.
Result<MPI_Comm> DuplicateWorld(const std::string& what, Deadline deadline);

// Records that a collective was abandoned, so the exit handler leaves MPI unfinalised (MPI_Finalize
// could wait for it for ever) ...
void NoteAbandonedCollective();
// ... unless it completed after all (the late ranks arrived): one call per noted collective.
void NoteAbandonedCollectiveCompleted();

// True once MPI_Finalize has run (in this process, by anyone): MPI may no longer be called.
bool Finalized();

}  // namespace reel::mpi

#endif  // REEL_PLUGINS_MPI_SRC_MPI_RUNTIME_H_
