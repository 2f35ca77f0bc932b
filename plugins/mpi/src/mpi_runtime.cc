#include "mpi_runtime.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "mpi_wait.h"

namespace reel::mpi {

std::atomic<std::mutex*> internal::serializing_mutex{nullptr};

namespace {

std::atomic<int> abandoned_collectives{0};  // still posted

// MPI's name of a provided thread level, for messages.
std::string MpiLevelName(int provided) {
  switch (provided) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
      return "MPI_THREAD_MULTIPLE";
  }
  return "thread level " + std::to_string(provided);
}

int MpiLevel(ThreadLevel level) {
  return level == ThreadLevel::kSerialized ? MPI_THREAD_SERIALIZED : MPI_THREAD_MULTIPLE;
}

void FinalizeAtExit() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized || abandoned_collectives.load() > 0) return;
  MpiLock lock;  // a thread still polling must be out of MPI
  MPI_Finalize();
}

// How MPI was initialised in this process: the first Connect's doing, or the host's.
struct Initialization {
  Status status;  // of the first attempt: its error is every later Connect's
  bool by_host = false;
  ThreadLevel asked = ThreadLevel::kMultiple;  // by the first Connect, when not by_host
  int provided = MPI_THREAD_SINGLE;
};

Initialization Initialize(ThreadLevel level) {
  Initialization init;
  init.asked = level;
  int initialized = 0, finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) {
    init.status = FailedPreconditionError(
        "mpi: MPI was finalised already in this process; it cannot be initialised again");
    return init;
  }
  MPI_Initialized(&initialized);
  init.by_host = initialized != 0;
  if (init.by_host) {
    MPI_Query_thread(&init.provided);
  } else {
    // Under mpirun or srun MPI finds its job in the environment; started alone, it forms a world
    // of one (a "singleton").
    int code = MPI_Init_thread(nullptr, nullptr, MpiLevel(level), &init.provided);
    if (code != MPI_SUCCESS) {
      init.status = MpiStatus(code, "mpi: MPI_Init_thread");
      return init;
    }
    std::atexit(FinalizeAtExit);
  }
  // Below MPI_THREAD_SERIALIZED every Connect is refused (CheckLevel): not one more MPI call, which
  // only the host's main thread might make. Below MPI_THREAD_MULTIPLE the transport serialises its
  // calls itself.
  if (init.provided < MPI_THREAD_SERIALIZED) return init;
  if (init.provided < MPI_THREAD_MULTIPLE)
    internal::serializing_mutex.store(new std::mutex, std::memory_order_relaxed);  // never freed
  Locked([] { return MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN); });
  return init;
}

// Whether MPI, initialised as `init` says, serves a Connect that asks for `level`.
Status CheckLevel(const Initialization& init, ThreadLevel level) {
  REEL_RETURN_IF_ERROR(init.status);
  const int needed = MpiLevel(level);
  if (init.provided >= needed) return Status::Ok();
  const std::string asked =
      "thread_level '" + std::string(ThreadLevelName(level)) + "' needs " + MpiLevelName(needed);
  if (init.by_host)
    return FailedPreconditionError("mpi: " + asked + ", but the host initialised MPI with " +
                                   MpiLevelName(init.provided));
  if (init.asked != level)  // MPI is initialised once per process, at the first Connect's level
    return FailedPreconditionError(
        "mpi: " + asked + ", but MPI was initialised in this process with " +
        MpiLevelName(init.provided) + " for an earlier Connect with thread_level '" +
        std::string(ThreadLevelName(init.asked)) +
        "' (MPI is initialised once per process: give every mpi transport of a process the same "
        "thread_level, or 'multiple' to the first)");
  return FailedPreconditionError("mpi: " + asked + ", but the MPI library provides only " +
                                 MpiLevelName(init.provided));
}

}  // namespace

std::string_view ThreadLevelName(ThreadLevel level) {
  return level == ThreadLevel::kSerialized ? "serialized" : "multiple";
}

Result<ThreadLevel> ParseThreadLevel(std::string_view name) {
  if (name == "multiple") return ThreadLevel::kMultiple;
  if (name == "serialized") return ThreadLevel::kSerialized;
  return InvalidArgumentError("mpi option 'thread_level': '" + std::string(name) +
                              "' is not a thread level (valid: multiple, serialized)");
}

Status EnsureInitialized(ThreadLevel level) {
  static std::once_flag once;
  static Initialization* init = nullptr;  // never destroyed: read by late Connects during exit
  std::call_once(once, [level] { init = new Initialization(Initialize(level)); });
  return CheckLevel(*init, level);
}

Status MpiStatus(int code, std::string_view what) {
  if (code == MPI_SUCCESS) return Status::Ok();
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  int error_class = code;
  {
    MpiLock lock;
    if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
    MPI_Error_class(code, &error_class);
  }
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

namespace {

// Polls a posted collective of every rank until it completes or the deadline passes (then it is
// noted as abandoned: see NoteAbandonedCollective).
Status AwaitCollective(MPI_Request* request, const std::string& what, Deadline deadline) {
  Backoff backoff;
  while (true) {
    int done = 0;
    REEL_RETURN_IF_ERROR(
        MpiStatus(Locked([&] { return MPI_Test(request, &done, MPI_STATUS_IGNORE); }), what));
    if (done) return Status::Ok();
    if (Clock::now() >= deadline) {
      NoteAbandonedCollective();
      return DeadlineExceededError(what + ": not every rank of the MPI world joined before the " +
                                   "deadline");
    }
    backoff.Pause();
  }
}

// The value of MPI_T control variable `name` if it exists and is an integer, else 0.
size_t ReadIntegerControlVariable(const char* name) {
  int index = 0, count = 0, name_length = 0, description_length = 0, verbosity = 0, bind = 0,
      scope = 0;
  MPI_Datatype type;
  MPI_T_enum enumtype;
  if (MPI_T_cvar_get_index(name, &index) != MPI_SUCCESS) return 0;
  if (MPI_T_cvar_get_info(index, nullptr, &name_length, &verbosity, &type, &enumtype, nullptr,
                          &description_length, &bind, &scope) != MPI_SUCCESS ||
      bind != MPI_T_BIND_NO_OBJECT)
    return 0;
  MPI_T_cvar_handle handle;
  if (MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) != MPI_SUCCESS) return 0;
  // Room for every integer type MPI_T may report, read as the type it says.
  alignas(8) unsigned char raw[16] = {};
  size_t result = 0;
  if (count == 1 && MPI_T_cvar_read(handle, raw) == MPI_SUCCESS) {
    if (type == MPI_INT || type == MPI_UNSIGNED) {
      unsigned v;
      std::memcpy(&v, raw, sizeof v);
      result = v;
    } else if (type == MPI_LONG || type == MPI_UNSIGNED_LONG || type == MPI_LONG_LONG ||
               type == MPI_UNSIGNED_LONG_LONG || type == MPI_COUNT) {
      unsigned long long v;
      std::memcpy(&v, raw, sizeof v);
      result = static_cast<size_t>(v);
    }
  }
  MPI_T_cvar_handle_free(&handle);
  return result;
}

}  // namespace

Result<MPI_Comm> DuplicateWorld(const std::string& what, Deadline deadline) {
  MPI_Comm comm;
  MPI_Request request;
  REEL_RETURN_IF_ERROR(
      MpiStatus(Locked([&] { return MPI_Comm_idup(MPI_COMM_WORLD, &comm, &request); }),
                what + ": MPI_Comm_idup"));
  REEL_RETURN_IF_ERROR(
      AwaitCollective(&request, what + ": MPI_Comm_idup of MPI_COMM_WORLD", deadline));
  Locked([&] { return MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN); });
  return comm;
}

Result<std::vector<bool>> RanksOnThisNode(MPI_Comm comm, const std::string& what,
                                          Deadline deadline) {
  int size = 0, length = 0;
  Locked([&] { return MPI_Comm_size(comm, &size); });
  std::vector<char> names(static_cast<size_t>(size + 1) * MPI_MAX_PROCESSOR_NAME, '\0');
  char* const mine = names.data() + static_cast<size_t>(size) * MPI_MAX_PROCESSOR_NAME;
  REEL_RETURN_IF_ERROR(MpiStatus(Locked([&] { return MPI_Get_processor_name(mine, &length); }),
                                 what + ": MPI_Get_processor_name"));
  MPI_Request request;
  REEL_RETURN_IF_ERROR(MpiStatus(Locked([&] {
                                   return MPI_Iallgather(mine, MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                                                         names.data(), MPI_MAX_PROCESSOR_NAME,
                                                         MPI_CHAR, comm, &request);
                                 }),
                                 what + ": MPI_Iallgather"));
  REEL_RETURN_IF_ERROR(
      AwaitCollective(&request, what + ": MPI_Iallgather of the processor names", deadline));
  std::vector<bool> here(size);
  for (int r = 0; r < size; ++r)
    here[r] = std::strncmp(names.data() + static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME, mine,
                           MPI_MAX_PROCESSOR_NAME) == 0;
  return here;
}

size_t SharedMemoryEagerLimit() {
  static const size_t limit = [] {
    MpiLock lock;
    // Open MPI takes MPI_T's thread level for MPI's own: ask for the one MPI runs at.
    int level = MPI_THREAD_SINGLE, provided = 0;
    MPI_Query_thread(&level);
    if (MPI_T_init_thread(level, &provided) != MPI_SUCCESS) return size_t{0};
    const size_t value = ReadIntegerControlVariable("btl_vader_eager_limit");
    MPI_T_finalize();
    return value;
  }();
  return limit;
}

void NoteAbandonedCollective() { abandoned_collectives.fetch_add(1); }

void NoteAbandonedCollectiveCompleted() { abandoned_collectives.fetch_sub(1); }

void KeepForTheProcess(std::shared_ptr<const void> memory) {
  static auto* mu = new std::mutex;
  static auto* kept = new std::vector<std::shared_ptr<const void>>;
  std::lock_guard<std::mutex> lock(*mu);
  kept->push_back(std::move(memory));
}

bool Finalized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

}  // namespace reel::mpi
