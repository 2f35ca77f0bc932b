#include "mpi_leave.h"

#include <mpi.h>

#include <memory>
#include <mutex>
#include <vector>

#include "mpi_runtime.h"
#include "mpi_wait.h"

namespace reel::mpi {
namespace {

constexpr int kLeaveTag = 0;

struct Board {
  std::mutex mu;
  MPI_Comm channel = MPI_COMM_NULL;                 // set once, never freed
  std::map<int64_t, std::map<int, LeftRank>> left;  // by generation, rank; guarded by mu
};

Board& TheBoard() {
  static auto* board = new Board;  // never destroyed: communicators may outlive static teardown
  return *board;
}

// REQUIRES: board.mu held.
void ReceiveArrivedNotices(Board& board) {
  if (board.channel == MPI_COMM_NULL) return;
  while (true) {
    int flag = 0;
    MPI_Message message;
    MPI_Status status;
    int count = 0;
    std::vector<int64_t> notice;
    {
      // One notice per hold: other threads' MPI calls may come in between.
      MpiLock lock;
      if (MPI_Improbe(MPI_ANY_SOURCE, kLeaveTag, board.channel, &flag, &message, &status) !=
              MPI_SUCCESS ||
          !flag)
        return;
      MPI_Get_count(&status, MPI_INT64_T, &count);
      notice.resize(static_cast<size_t>(count));
      if (MPI_Mrecv(notice.data(), count, MPI_INT64_T, &message, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        continue;
    }
    if (notice.size() < 2) continue;
    LeftRank& left = board.left[notice[0]][status.MPI_SOURCE];
    left.collectives_completed = notice[1];
    for (size_t i = 2; i + 1 < notice.size(); i += 2)
      left.sent[static_cast<int>(notice[i])] = notice[i + 1];
  }
}

}  // namespace

Status EnsureLeaveChannel(int rank, Deadline deadline) {
  Board& board = TheBoard();
  {
    std::lock_guard<std::mutex> lock(board.mu);
    if (board.channel != MPI_COMM_NULL) return Status::Ok();
  }
  REEL_ASSIGN_OR_RETURN(MPI_Comm channel,
                        DuplicateWorld("mpi rank " + std::to_string(rank) + ": Connect", deadline));
  std::lock_guard<std::mutex> lock(board.mu);
  board.channel = channel;
  return Status::Ok();
}

void SendLeaveNotices(int64_t generation, int rank, int size, int64_t collectives_completed,
                      const std::map<std::pair<int, int>, int64_t>& sent) {
  Board& board = TheBoard();
  MPI_Comm channel;
  {
    std::lock_guard<std::mutex> lock(board.mu);
    channel = board.channel;
  }
  // A notice: the generation, the collectives completed, then (tag, messages sent) pairs.
  auto notices = std::make_shared<std::vector<std::vector<int64_t>>>(
      static_cast<size_t>(size), std::vector<int64_t>{generation, collectives_completed});
  for (const auto& [key, count] : sent) {
    (*notices)[key.first].push_back(key.second);
    (*notices)[key.first].push_back(count);
  }
  std::vector<MPI_Request> requests;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    requests.emplace_back(MPI_REQUEST_NULL);
    Locked([&] {
      return MPI_Isend((*notices)[peer].data(), static_cast<int>((*notices)[peer].size()),
                       MPI_INT64_T, peer, kLeaveTag, channel, &requests.back());
    });
  }
  // Small messages go out eagerly; a peer that never receives them must not hold us up long.
  const Deadline give_up = DeadlineIn(std::chrono::seconds(2));
  Backoff backoff;
  int done = 0;
  while (!done && Clock::now() < give_up) {
    if (Locked([&] {
          return MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done,
                             MPI_STATUSES_IGNORE);
        }) != MPI_SUCCESS)
      break;
    backoff.Pause();
  }
  if (done) return;
  // MPI may still read the notices (a peer that left or stopped never took them): they stay.
  KeepForTheProcess(notices);
  MpiLock lock;
  for (MPI_Request& r : requests)
    if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
}

std::map<int, LeftRank> LeftRanks(int64_t generation) {
  Board& board = TheBoard();
  std::lock_guard<std::mutex> lock(board.mu);
  ReceiveArrivedNotices(board);
  auto it = board.left.find(generation);
  return it == board.left.end() ? std::map<int, LeftRank>{} : it->second;
}

void ForgetLeftRanks(int64_t generation) {
  Board& board = TheBoard();
  std::lock_guard<std::mutex> lock(board.mu);
  board.left.erase(generation);
}

}  // namespace reel::mpi
