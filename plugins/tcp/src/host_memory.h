// Memory that the ranks of one host share for their AllReduce (host_allreduce.cc), and how it
// reaches them.
//
// The segment is a memfd (memfd_create(2)): it has no name in /dev/shm or anywhere else, so a
// crash leaves nothing behind, and the kernel frees it when its last mapping goes. It is sealed
// against resizing (F_SEAL_SHRINK, F_SEAL_GROW), so no mapping can fault on a truncated file.
// It reaches the host's other ranks as a file descriptor over a Unix socket (SCM_RIGHTS) with a
// random name in the abstract namespace; the host's leader hands it only to the processes that
// the group's authenticated TCP connections named: it checks each connecting process's id
// (SO_PEERCRED) against the ids its host's ranks sent it over those connections. A process of
// another job or user that finds the socket (abstract names are listed in /proc/net/unix) gets
// nothing.
//
// Progress flags: each rank of the host has a counter (HostStep) in the segment, on a cache line
// of its own. A rank advances its counter when a stage of its work is done; the others wait for
// it by spinning and then sleeping on it with a futex (FUTEX_WAIT on the shared mapping), in
// slices, so that they also see the deadline and failures the TCP side recorded.
#ifndef REEL_PLUGINS_TCP_SRC_HOST_MEMORY_H_
#define REEL_PLUGINS_TCP_SRC_HOST_MEMORY_H_

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "reel/status.h"
#include "reel/transport.h"

namespace reel::tcp {

// A file descriptor, closed with its owner.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  ~UniqueFd();
  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

// A shared segment mapped into this process.
class HostSegment {
 public:
  // A new segment of `bytes` bytes (zeroed), mapped here.
  static Result<std::unique_ptr<HostSegment>> Create(size_t bytes);
  // The segment behind `fd`, mapped here, whole. Refuses one that could still be resized.
  static Result<std::unique_ptr<HostSegment>> Map(UniqueFd fd);
  ~HostSegment();
  HostSegment(const HostSegment&) = delete;
  HostSegment& operator=(const HostSegment&) = delete;

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  int fd() const { return fd_.get(); }

 private:
  HostSegment(UniqueFd fd, std::byte* data, size_t size)
      : fd_(std::move(fd)), data_(data), size_(size) {}
  UniqueFd fd_;
  std::byte* data_;
  size_t size_;
};

// The leader's side of handing a segment's descriptor to its host's other ranks.
class SegmentOffer {
 public:
  // Listens on a new abstract Unix socket with a random name.
  static Result<std::unique_ptr<SegmentOffer>> Open();
  // The socket's name (printable, without the abstract namespace's leading NUL).
  const std::string& name() const { return name_; }
  // Hands `fd` to one connection of each process in `pids` (a process id may be listed more than
  // once: ranks that are threads of one process) until every one has it, `stop` is set or the
  // deadline passes. Connections of any other process are closed unanswered; *strangers counts
  // them.
  Status HandOut(int fd, std::vector<pid_t> pids, const std::atomic<bool>& stop, Deadline deadline,
                 int* strangers);

 private:
  SegmentOffer(UniqueFd listener, std::string name)
      : listener_(std::move(listener)), name_(std::move(name)) {}
  UniqueFd listener_;
  std::string name_;
};

// A member's side: connects to the leader's socket `name` and receives the descriptor, both
// before `deadline` (DeadlineExceeded past it, also while the leader's backlog stays full).
Result<UniqueFd> FetchSegment(const std::string& name, Deadline deadline);

// A rank's progress counter, alone on its cache line. The counter wraps; Reached() compares
// across the wrap.
struct alignas(64) HostStep {
  std::atomic<uint32_t> value{0};
  std::atomic<uint32_t> sleepers{0};  // ranks asleep on `value` (futex), so a wake is needed
};
static_assert(std::atomic<uint32_t>::is_always_lock_free);

inline bool Reached(uint32_t value, uint32_t target) {
  return static_cast<int32_t>(value - target) >= 0;
}
// Sets the counter and wakes whoever sleeps on it.
void Advance(HostStep& step, uint32_t to);
// Wakes every sleeper of `step` (after something else they check changed).
void WakeAll(HostStep& step);
// Sleeps on `step` while its value is `seen`, for at most `timeout` (futex; returns early on a
// wake, a change or a signal).
void SleepOn(HostStep& step, uint32_t seen, std::chrono::microseconds timeout);

}  // namespace reel::tcp

#endif  // REEL_PLUGINS_TCP_SRC_HOST_MEMORY_H_
