// One worker's push+pull and a 2-rank allreduce written as plainly as they can be, on raw loopback
// TCP sockets between two processes, with nothing of reel in them (no framing, tags, deadlines,
// heartbeats or checks): what the two shapes cost on this machine by themselves, beside
// ps_push_pull's figures for reel (the async_sgd rows of bench/RESULTS.md).
//   push+pull  the worker streams its gradient while it receives the fresh values; the server
//              reads each chunk, applies sgd to it into a second buffer (as async_sgd's server did
//              until 2939df2; it now writes over the gradient) and writes the fresh chunk back at
//              once, on one thread;
//   allreduce  a 2-rank ring: each rank sends the half it does not own and receives the other's
//              contribution to its own half (summed chunk by chunk as it arrives), then sends its
//              summed half while receiving the other's.
// Both move the same bytes through each process (N floats out, N in). Blocking sockets (the worker
// and each allreduce rank with a sending thread beside the receiving one) or, with --spin 1,
// nonblocking sockets polled by one thread per process; one connection used both ways or, with
// --two 1, one per direction (as reel's tcp transport has).
//
//   raw_exchange [--floats N] [--chunk FLOATS] [--iters K] [--reps R] [--spin 0|1] [--two 0|1]
// Prints, per repetition, push+pull round trips and allreduce calls per second and their ratio.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

[[noreturn]] void Die(const char* what) {
  std::perror(what);
  std::exit(1);
}

void WriteAll(int fd, const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      Die("write");
    }
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

void ReadAll(int fd, void* data, size_t bytes) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::read(fd, p, bytes);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      Die("read");
    }
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

// A connected loopback pair: `listener` accepted in the parent, connected in the child.
int Listen(uint16_t* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) Die("bind");
  if (::listen(fd, 4) != 0) Die("listen");
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

void NoDelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int Connect(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) Die("connect");
  NoDelay(fd);
  return fd;
}

int Accept(int listener) {
  const int fd = ::accept(listener, nullptr, nullptr);
  if (fd < 0) Die("accept");
  NoDelay(fd);
  return fd;
}

struct Fds {
  int out, in;
};

struct Shape {
  size_t floats = 10'000'000, chunk = 262'144;
  int iters = 60;
};

void SgdInto(float* __restrict out, const float* __restrict p, const float* __restrict g, size_t n,
             float lr) {
  for (size_t i = 0; i < n; ++i) out[i] = p[i] - lr * g[i];
}

// dst += src over n floats.
void AddInto(float* __restrict dst, const float* __restrict src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] += src[i];
}

// The halves of a 2-rank ring allreduce of n floats: the one rank `mine` (0 or 1) owns, sums and
// sends back, and the other's.
struct Halves {
  size_t own_at, own_len, other_at, other_len;
};
Halves HalvesOf(int mine, size_t n) {
  const size_t half = n / 2;
  return mine == 0 ? Halves{0, half, half, n - half} : Halves{half, n - half, 0, half};
}

// --spin and --two (see the top of the file).
bool g_spin = false;
bool g_two = false;

// Calls `call` once (a warm-up), then `iters` times; returns calls per second of the latter.
template <typename Call>
double Rate(int iters, Call call) {
  call();
  const auto start = std::chrono::steady_clock::now();
  for (int it = 0; it < iters; ++it) call();
  return iters / std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Nonblocking sockets, polled: one thread per process drives both directions.
size_t TrySend(int fd, const void* p, size_t n) {
  const ssize_t k = ::send(fd, p, n, MSG_DONTWAIT);
  if (k < 0) {
    if (errno == EAGAIN || errno == EINTR) return 0;
    Die("send");
  }
  return static_cast<size_t>(k);
}
size_t TryRecv(int fd, void* p, size_t n) {
  const ssize_t k = ::recv(fd, p, n, MSG_DONTWAIT);
  if (k < 0) {
    if (errno == EAGAIN || errno == EINTR) return 0;
    Die("recv");
  }
  if (k == 0) Die("recv: closed");
  return static_cast<size_t>(k);
}
void SpinRead(int fd, void* p, size_t n) {
  for (size_t d = 0; d < n;) d += TryRecv(fd, static_cast<char*>(p) + d, n - d);
}
void SpinWrite(int fd, const void* p, size_t n) {
  for (size_t d = 0; d < n;) d += TrySend(fd, static_cast<const char*>(p) + d, n - d);
}

// The server: for every round trip, read each chunk, apply, write the fresh chunk back.
void Serve(Fds fd, const Shape& s) {
  const auto read = g_spin ? SpinRead : ReadAll;
  const auto write = g_spin ? SpinWrite : WriteAll;
  std::vector<float> values(s.floats, 1.0f), fresh(s.floats), grads(s.floats);
  for (int it = 0; it < s.iters + 1; ++it) {
    for (size_t at = 0; at < s.floats; at += s.chunk) {
      const size_t len = std::min(s.chunk, s.floats - at);
      read(fd.in, grads.data() + at, len * sizeof(float));
      SgdInto(fresh.data() + at, values.data() + at, grads.data() + at, len, 1e-3f);
      write(fd.out, fresh.data() + at, len * sizeof(float));
    }
    values.swap(fresh);
  }
}

// The worker: returns round trips per second over `iters` timed round trips (one warm-up).
double PushPull(Fds fd, const Shape& s) {
  std::vector<float> grads(s.floats, 0.5f), weights(s.floats);
  const size_t bytes = s.floats * sizeof(float);
  auto round_trip = [&] {
    std::thread sender([&] { WriteAll(fd.out, grads.data(), bytes); });
    ReadAll(fd.in, weights.data(), bytes);
    sender.join();
  };
  return Rate(s.iters, round_trip);
}

double PushPullSpin(Fds fd, const Shape& s) {
  std::vector<float> grads(s.floats, 0.5f), weights(s.floats);
  const size_t bytes = s.floats * sizeof(float);
  auto round_trip = [&] {
    size_t sent = 0, got = 0;
    const char* out = reinterpret_cast<const char*>(grads.data());
    char* in = reinterpret_cast<char*>(weights.data());
    while (sent < bytes || got < bytes) {
      if (sent < bytes) sent += TrySend(fd.out, out + sent, bytes - sent);
      if (got < bytes) got += TryRecv(fd.in, in + got, bytes - got);
    }
  };
  return Rate(s.iters, round_trip);
}

// One rank of a 2-rank ring allreduce of s.floats in place; `mine` is 0 or 1 (the half it owns).
// Returns calls per second over `iters` timed calls (one warm-up).
double AllReduce(Fds fd, int mine, const Shape& s) {
  std::vector<float> x(s.floats, 0.25f), in(s.floats / 2 + 1);
  // Plain variables, not a structured binding: the lambdas below use them, and clang before 16
  // cannot capture a binding.
  const Halves h = HalvesOf(mine, s.floats);
  const size_t own_at = h.own_at, own_len = h.own_len, other_at = h.other_at,
               other_len = h.other_len;
  auto call = [&] {
    std::atomic<size_t> summed{0};
    std::thread sender([&] {
      WriteAll(fd.out, x.data() + other_at, other_len * sizeof(float));  // the other's half, to sum
      for (size_t at = 0; at < own_len; at += s.chunk) {                 // my summed half, as it is
        const size_t len = std::min(s.chunk, own_len - at);
        size_t got;
        while ((got = summed.load(std::memory_order_acquire)) < at + len)
          summed.wait(got, std::memory_order_acquire);
        WriteAll(fd.out, x.data() + own_at + at, len * sizeof(float));
      }
    });
    for (size_t at = 0; at < own_len; at += s.chunk) {
      const size_t len = std::min(s.chunk, own_len - at);
      ReadAll(fd.in, in.data(), len * sizeof(float));
      AddInto(x.data() + own_at + at, in.data(), len);
      summed.store(at + len, std::memory_order_release);
      summed.notify_one();
    }
    ReadAll(fd.in, x.data() + other_at, other_len * sizeof(float));
    sender.join();
  };
  return Rate(s.iters, call);
}

double AllReduceSpin(Fds fd, int mine, const Shape& s) {
  std::vector<float> x(s.floats, 0.25f), in(s.floats);
  // Plain variables, not a structured binding: the lambdas below use them, and clang before 16
  // cannot capture a binding.
  const Halves h = HalvesOf(mine, s.floats);
  const size_t own_at = h.own_at, own_len = h.own_len, other_at = h.other_at,
               other_len = h.other_len;
  auto call = [&] {
    // sends: other half, then own half as far as summed; receives: the other's contribution to
    // own half (summed per chunk), then the other half in place.
    size_t sent = 0, got = 0, summed = 0;
    const size_t send_total = (other_len + own_len) * sizeof(float);
    const size_t recv_total = (own_len + other_len) * sizeof(float);
    const size_t first = other_len * sizeof(float), first_in = own_len * sizeof(float);
    while (sent < send_total || got < recv_total) {
      if (sent < first) {
        sent += TrySend(fd.out, reinterpret_cast<const char*>(x.data() + other_at) + sent,
                        first - sent);
      } else if (sent < send_total) {
        const size_t limit = first + summed * sizeof(float);
        if (sent < limit)
          sent += TrySend(fd.out, reinterpret_cast<const char*>(x.data() + own_at) + (sent - first),
                          limit - sent);
      }
      if (got < first_in) {
        got += TryRecv(fd.in, reinterpret_cast<char*>(in.data()) + got, first_in - got);
        const size_t ready = std::min(got / sizeof(float), own_len);
        // sum whole chunks (or the tail) as they complete
        while (summed < ready && (ready - summed >= s.chunk || ready == own_len)) {
          const size_t len = std::min(s.chunk, ready - summed);
          AddInto(x.data() + own_at + summed, in.data() + summed, len);
          summed += len;
        }
      } else if (got < recv_total) {
        got += TryRecv(fd.in, reinterpret_cast<char*>(x.data() + other_at) + (got - first_in),
                       recv_total - got);
      }
    }
  };
  return Rate(s.iters, call);
}

// Runs `parent` here and `child` in a forked process over loopback: one connection used both
// ways, or (--two 1) one connection per direction, as reel's tcp transport does.
template <typename Parent, typename Child>
double Pair(Parent parent, Child child) {
  uint16_t port;
  const int listener = Listen(&port);
  const pid_t pid = ::fork();
  if (pid < 0) Die("fork");
  if (pid == 0) {
    ::close(listener);
    const int a = Connect(port), b = g_two ? Connect(port) : a;
    child(Fds{a, b});
    ::close(a);
    if (g_two) ::close(b);
    std::_Exit(0);
  }
  const int a = Accept(listener), b = g_two ? Accept(listener) : a;
  ::close(listener);
  const double rate = parent(Fds{b, a});
  ::close(a);
  if (g_two) ::close(b);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "raw_exchange: the second process failed\n");
    std::exit(1);
  }
  return rate;
}

}  // namespace

int main(int argc, char** argv) {
  Shape s;
  int reps = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const long v = std::atol(argv[i + 1]);
    if (flag == "--floats")
      s.floats = static_cast<size_t>(v);
    else if (flag == "--chunk")
      s.chunk = static_cast<size_t>(v);
    else if (flag == "--iters")
      s.iters = static_cast<int>(v);
    else if (flag == "--reps")
      reps = static_cast<int>(v);
    else if (flag == "--spin")
      g_spin = v != 0;
    else if (flag == "--two")
      g_two = v != 0;
    else {
      std::fprintf(stderr, "raw_exchange: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (s.floats < 2 || s.chunk == 0 || s.iters < 1 || reps < 1) {
    std::fprintf(stderr, "raw_exchange: --floats >= 2, --chunk, --iters, --reps >= 1\n");
    return 2;
  }
  for (int rep = 1; rep <= reps; ++rep) {
    const double pp = Pair([&](Fds fd) { return g_spin ? PushPullSpin(fd, s) : PushPull(fd, s); },
                           [&](Fds fd) { Serve(fd, s); });
    auto rank = [&](Fds fd, int mine) {
      return g_spin ? AllReduceSpin(fd, mine, s) : AllReduce(fd, mine, s);
    };
    const double ar = Pair([&](Fds fd) { return rank(fd, 0); }, [&](Fds fd) { rank(fd, 1); });
    std::printf(
        "rep=%d spin=%d two=%d floats=%zu chunk=%zu push_pull_per_second=%.2f "
        "allreduce_per_second=%.2f ratio=%.3f\n",
        rep, g_spin ? 1 : 0, g_two ? 1 : 0, s.floats, s.chunk, pp, ar, pp / ar);
    std::fflush(stdout);
  }
  return 0;
}
