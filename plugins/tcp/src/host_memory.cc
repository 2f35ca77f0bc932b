// The shared segment of a host's ranks and its hand-over (see host_memory.h).
#include "host_memory.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <openssl/rand.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace reel::tcp {
namespace {

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

// The abstract socket address of `name`: sun_path starts with a NUL.
sockaddr_un AbstractAddress(const std::string& name, socklen_t* length) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path + 1, name.data(), name.size());
  *length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return a;
}

// Milliseconds until `deadline`, at least 0, at most `slice`.
int PollMs(Deadline deadline, std::chrono::milliseconds slice) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::clamp(left, std::chrono::milliseconds(0), slice).count());
}

// A message of one byte (SCM_RIGHTS needs some data) with room for one descriptor.
struct FdMessage {
  FdMessage() {
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = control;
    m.msg_controllen = sizeof control;
  }
  FdMessage(const FdMessage&) = delete;
  char byte = 'S';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr m{};
};

}  // namespace

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) ::close(fd_);
}

Result<std::unique_ptr<HostSegment>> HostSegment::Create(size_t bytes) {
  UniqueFd fd(memfd_create("reel-host-allreduce", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (fd.get() < 0) return UnavailableError(Errno("memfd_create"));
  if (ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0)
    return UnavailableError(
        Errno("sizing the shared segment (" + std::to_string(bytes) + " bytes)"));
  if (fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
    return UnavailableError(Errno("sealing the shared segment"));
  return Map(std::move(fd));
}

Result<std::unique_ptr<HostSegment>> HostSegment::Map(UniqueFd fd) {
  const int seals = fcntl(fd.get(), F_GET_SEALS);
  if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW))
    return PermissionDeniedError("the shared segment can still be resized (not sealed)");
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return UnavailableError(Errno("fstat of the shared segment"));
  const size_t size = static_cast<size_t>(st.st_size);
  void* at = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (at == MAP_FAILED) return UnavailableError(Errno("mapping the shared segment"));
  return std::unique_ptr<HostSegment>(
      new HostSegment(std::move(fd), static_cast<std::byte*>(at), size));
}

HostSegment::~HostSegment() { munmap(data_, size_); }

Result<std::unique_ptr<SegmentOffer>> SegmentOffer::Open() {
  unsigned char random[16];
  if (RAND_bytes(random, sizeof random) != 1)
    return UnavailableError("drawing the shared segment's socket name failed (OpenSSL RAND_bytes)");
  std::string name = "reel-host-allreduce-";
  static constexpr char kHex[] = "0123456789abcdef";
  for (unsigned char c : random) {
    name += kHex[c >> 4];
    name += kHex[c & 15];
  }
  UniqueFd listener(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (listener.get() < 0) return UnavailableError(Errno("Unix socket"));
  socklen_t length = 0;
  const sockaddr_un address = AbstractAddress(name, &length);
  if (bind(listener.get(), reinterpret_cast<const sockaddr*>(&address), length) != 0)
    return UnavailableError(Errno("binding the abstract Unix socket @" + name));
  if (listen(listener.get(), 64) != 0) return UnavailableError(Errno("listen on @" + name));
  return std::unique_ptr<SegmentOffer>(new SegmentOffer(std::move(listener), std::move(name)));
}

Status SegmentOffer::HandOut(int fd, std::vector<pid_t> pids, const std::atomic<bool>& stop,
                             Deadline deadline, int* strangers) {
  while (!pids.empty()) {
    if (stop.load()) return CancelledError("handing out the shared segment was stopped");
    if (Clock::now() >= deadline)
      return DeadlineExceededError(std::to_string(pids.size()) +
                                   " rank(s) of this host did not fetch the shared segment");
    pollfd p{listener_.get(), POLLIN, 0};
    ::poll(&p, 1, PollMs(deadline, std::chrono::milliseconds(50)));
    UniqueFd c(accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (c.get() < 0) continue;
    ucred who{};
    socklen_t length = sizeof who;
    if (getsockopt(c.get(), SOL_SOCKET, SO_PEERCRED, &who, &length) != 0) continue;
    const auto it = std::find(pids.begin(), pids.end(), who.pid);
    if (it == pids.end() || who.uid != geteuid()) {
      ++*strangers;
      continue;
    }
    FdMessage out;
    cmsghdr* c_msg = CMSG_FIRSTHDR(&out.m);
    c_msg->cmsg_level = SOL_SOCKET;
    c_msg->cmsg_type = SCM_RIGHTS;
    c_msg->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c_msg), &fd, sizeof fd);
    if (sendmsg(c.get(), &out.m, MSG_NOSIGNAL) == 1) pids.erase(it);
  }
  return Status::Ok();
}

Result<UniqueFd> FetchSegment(const std::string& name, Deadline deadline) {
  // Non-blocking: a blocking connect() to a Unix socket whose backlog is full waits for as long as
  // its owner does not accept (e.g. a stopped leader), past any deadline. Non-blocking, it
  // fails with EAGAIN instead, and is tried again until the deadline.
  UniqueFd s(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (s.get() < 0) return UnavailableError(Errno("Unix socket"));
  socklen_t length = 0;
  const sockaddr_un address = AbstractAddress(name, &length);
  const std::string where = "the host's leader at @" + name;
  int tries = 0;
  while (connect(s.get(), reinterpret_cast<const sockaddr*>(&address), length) != 0) {
    ++tries;
    if (errno == EINTR) continue;
    if (errno == EINPROGRESS) {  // not seen on Linux's Unix sockets; waited for all the same
      pollfd w{s.get(), POLLOUT, 0};
      while (::poll(&w, 1, PollMs(deadline, std::chrono::milliseconds(100))) == 0)
        if (Clock::now() >= deadline)
          return DeadlineExceededError("connecting to " + where + " did not finish in time");
      int error = 0;
      socklen_t size = sizeof error;
      if (getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &error, &size) != 0 || error != 0)
        return UnavailableError("connecting to " + where + ": " + std::strerror(error));
      break;
    }
    if (errno != EAGAIN)
      return UnavailableError(
          Errno("connecting to " + where + " (is it in another network namespace?)"));
    if (Clock::now() >= deadline)
      return DeadlineExceededError("connecting to " + where + ": its backlog stayed full (" +
                                   std::to_string(tries) +
                                   " tries; is the leader stopped?) until the deadline");
    ::poll(nullptr, 0, PollMs(deadline, std::chrono::milliseconds(20)));
  }
  pollfd p{s.get(), POLLIN, 0};
  while (::poll(&p, 1, PollMs(deadline, std::chrono::milliseconds(100))) == 0)
    if (Clock::now() >= deadline)
      return DeadlineExceededError("the host's leader did not hand over the shared segment");
  FdMessage in;
  if (recvmsg(s.get(), &in.m, MSG_CMSG_CLOEXEC) != 1)
    return UnavailableError("the host's leader closed the connection without the shared segment");
  const cmsghdr* c = CMSG_FIRSTHDR(&in.m);
  if (c == nullptr || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
      c->cmsg_len != CMSG_LEN(sizeof(int)))
    return UnavailableError("the host's leader sent no descriptor");
  int fd = -1;
  std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
  return UniqueFd(fd);
}

void Advance(HostStep& step, uint32_t to) {
  step.value.store(to);  // seq_cst: ordered before the load of sleepers (SleepOn's mirror image)
  if (step.sleepers.load() > 0) WakeAll(step);
}

void WakeAll(HostStep& step) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&step.value), FUTEX_WAKE, INT32_MAX, nullptr,
          nullptr, 0);
}

void SleepOn(HostStep& step, uint32_t seen, std::chrono::microseconds timeout) {
  step.sleepers.fetch_add(1);
  if (step.value.load() == seen) {
    const auto s = std::chrono::duration_cast<std::chrono::seconds>(timeout);
    timespec t{static_cast<time_t>(s.count()),
               static_cast<long>(std::chrono::nanoseconds(timeout - s).count())};
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&step.value), FUTEX_WAIT, seen, &t, nullptr, 0);
  }
  step.sleepers.fetch_sub(1);
}

}  // namespace reel::tcp
