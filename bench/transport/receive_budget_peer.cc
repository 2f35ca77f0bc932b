// One rank of the receive-budget measurement, under `reel launch -n 2`: rank 1 sends --messages
// messages of --bytes as fast as the transport lets it; rank 0 receives --rate of them per second
// for --seconds (the sender is many times faster), then the rest at once, checks every payload,
// and prints its peak resident memory (VmHWM) and how many messages arrived intact.
//
//   reel launch -n 2 -- receive_budget_peer --transport tcp [--option receive_budget_bytes=N]
//       [--messages 4096] [--bytes 1048576] [--rate 40] [--seconds 60]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_timing.h"
#include "reel_peer.h"

namespace reel::bench {
namespace {

// VmHWM of this process in KiB (peak resident set), from /proc.
long PeakRssKiB() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

void Fill(std::vector<std::byte>& p, int i) {
  for (size_t j = 0; j < p.size(); j += 4096) p[j] = std::byte((i * 31 + j / 4096) & 0xff);
}

int Run(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  ReelPeer peer;
  if (!peer.ParseFlags(args)) {
    std::fprintf(stderr, "usage: receive_budget_peer --transport NAME [--option K=V] ...\n");
    return 2;
  }
  int messages = 4096, rate = 40;
  size_t bytes = size_t{1} << 20;
  double seconds = 60;
  for (size_t i = 0; i + 1 < args.size(); i += 2) {
    if (args[i] == "--messages")
      messages = std::stoi(args[i + 1]);
    else if (args[i] == "--bytes")
      bytes = std::stoul(args[i + 1]);
    else if (args[i] == "--rate")
      rate = std::stoi(args[i + 1]);
    else if (args[i] == "--seconds")
      seconds = std::stod(args[i + 1]);
  }
  auto comm = peer.Connect();
  if (!comm.ok()) {
    std::fprintf(stderr, "connect: %s\n", comm.status().ToString().c_str());
    return 1;
  }
  Communicator& c = **comm;
  const auto deadline = [] { return DeadlineIn(std::chrono::minutes(10)); };
  std::vector<std::byte> buf(bytes), want(bytes);
  const Clock::time_point start = Clock::now();
  if (c.rank() == 1) {
    for (int i = 0; i < messages; ++i) {
      Fill(buf, i);
      if (Status s = c.Send(0, 1, buf, deadline()); !s.ok()) {
        std::fprintf(stderr, "send %d: %s\n", i, s.ToString().c_str());
        return 1;
      }
    }
    std::printf("sender: %d messages of %zu bytes in %.1f s\n", messages, bytes,
                Seconds(start, Clock::now()));
  } else {
    int intact = 0;
    for (int i = 0; i < messages; ++i) {
      const double t = Seconds(start, Clock::now());
      if (t < seconds) {
        const double due = static_cast<double>(i) / rate;
        if (due > t) std::this_thread::sleep_for(std::chrono::duration<double>(due - t));
      }
      if (Status s = c.RecvInto(1, 1, buf, deadline()); !s.ok()) {
        std::fprintf(stderr, "receive %d: %s\n", i, s.ToString().c_str());
        return 1;
      }
      Fill(want, i);
      intact += buf == want;
    }
    std::printf("receiver: %d of %d messages intact, peak RSS %ld KiB, %.1f s\n", intact, messages,
                PeakRssKiB(), Seconds(start, Clock::now()));
    if (intact != messages) return 1;
  }
  Status s = c.Barrier(deadline());
  return s.ok() ? 0 : 1;
}

}  // namespace
}  // namespace reel::bench

int main(int argc, char** argv) { return reel::bench::Run(argc, argv); }
