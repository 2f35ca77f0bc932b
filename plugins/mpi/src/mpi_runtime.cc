#include "mpi_runtime.h"

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "mpi_wait.h"

namespace reel::mpi {
namespace {

std::atomic<int> abandoned_collectives{0};  // still posted

void FinalizeAtExit() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized || abandoned_collectives.load() > 0) return;
  MPI_Finalize();
}

Status Initialize() {
  int initialized = 0, finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    return FailedPreconditionError(
        "mpi: MPI was finalised already in this process; it cannot "
        "be initialised again");
  MPI_Initialized(&initialized);
  int provided = 0;
  if (initialized) {
    MPI_Query_thread(&provided);
  } else {
    // Under mpirun or srun MPI finds its job in the environment; started alone, it forms a world
    // of one (a "singleton").
    int code = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    if (code != MPI_SUCCESS) return MpiStatus(code, "mpi: MPI_Init_thread");
    std::atexit(FinalizeAtExit);
  }
  if (provided < MPI_THREAD_MULTIPLE)
    return FailedPreconditionError(
        std::string("mpi: the MPI library provides thread level ") + std::to_string(provided) +
        (initialized ? " (the host initialised MPI without MPI_THREAD_MULTIPLE)" : "") +
        ", the transport needs MPI_THREAD_MULTIPLE: Send and Recv run on different threads");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  return Status::Ok();
}

}  // namespace

Status EnsureInitialized() {
  static std::once_flag once;
  static Status* result = nullptr;  // never destroyed: read by late Connects during exit
  std::call_once(once, [] { result = new Status(Initialize()); });
  return *result;
}

Status MpiStatus(int code, std::string_view what) {
  if (code == MPI_SUCCESS) return Status::Ok();
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
  int error_class = code;
  MPI_Error_class(code, &error_class);
  std::string message =
      std::string(what) + ": MPI error " + std::to_string(code) + " (" +
      (length > 0 ? std::string(text, static_cast<size_t>(length)) : "no description") + ")";
  switch (error_class) {
    case MPI_ERR_BUFFER:
    case MPI_ERR_COUNT:
    case MPI_ERR_TYPE:
    case MPI_ERR_TAG:
    case MPI_ERR_RANK:
    case MPI_ERR_ROOT:
    case MPI_ERR_ARG:
    case MPI_ERR_TRUNCATE:
    case MPI_ERR_OP:
      return InvalidArgumentError(std::move(message));
    case MPI_ERR_NO_MEM:
    case MPI_ERR_INTERN:
    case MPI_ERR_OTHER:
    case MPI_ERR_UNKNOWN:
      return InternalError(std::move(message));
    default:
      // Connection failures and the like: a peer or the runtime is gone.
      return UnavailableError(std::move(message));
  }
}

Result<MPI_Comm> DuplicateWorld(const std::string& what, Deadline deadline) {
  MPI_Comm comm;
  MPI_Request request;
  REEL_RETURN_IF_ERROR(
      MpiStatus(MPI_Comm_idup(MPI_COMM_WORLD, &comm, &request), what + ": MPI_Comm_idup"));
  Backoff backoff;
  while (true) {
    int done = 0;
    REEL_RETURN_IF_ERROR(
        MpiStatus(MPI_Test(&request, &done, MPI_STATUS_IGNORE), what + ": MPI_Comm_idup"));
    if (done) break;
    if (Clock::now() >= deadline) {
      NoteAbandonedCollective();
      return DeadlineExceededError(what +
                                   ": not every rank of the MPI world joined before the "
                                   "deadline (MPI_Comm_idup of MPI_COMM_WORLD)");
    }
    backoff.Pause();
  }
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  return comm;
}

void NoteAbandonedCollective() { abandoned_collectives.fetch_add(1); }

void NoteAbandonedCollectiveCompleted() { abandoned_collectives.fetch_sub(1); }

bool Finalized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

}  // namespace reel::mpi
