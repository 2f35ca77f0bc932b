// reel's mpi AllReduce against raw MPI_Allreduce in the same processes, block by block: what
// reel adds to the MPI call it makes, free of what differs between separate runs on a noisy
// machine (placement, page layout: single runs at 4 KiB on 2 ranks were bimodal, 2x apart).
//
//   mpirun -n N mpi_interleaved [--option KEY=VALUE]... [--blocks K] [sweep flags]
//
// reel's mpi transport initialises MPI (at its thread level: MULTIPLE unless --option
// thread_level=... says otherwise); raw MPI_Allreduce then runs on a duplicate of
// MPI_COMM_WORLD at that same level, so both sides pay the same locks. Per size: a warm-up call of
// each, then K blocks (15 by default) that each time `calls` raw calls and `calls` reel calls
// (allreduce_sweep.h's count), the order swapped from block to block, each timed run between two
// barriers. Rank 0 prints per size: `bytes raw_us reel_us ratio ratio_min ratio_max` with the
// medians over the blocks of the microseconds per call and of raw / reel per block (above 1,
// reel is faster).
#include <mpi.h>

#include <chrono>
#include <cstdlib>

#include "allreduce_sweep.h"
#include "bench_timing.h"
#include "reel_peer.h"

namespace {

using reel::bench::Clock;

// Seconds per call of `calls` calls, between two barriers on `world`; negative on failure.
template <typename Call>
double Time(int calls, MPI_Comm world, const Call& call) {
  if (MPI_Barrier(world) != MPI_SUCCESS) return -1;
  const auto start = Clock::now();
  for (int i = 0; i < calls; ++i)
    if (!call()) return -1;
  if (MPI_Barrier(world) != MPI_SUCCESS) return -1;
  return reel::bench::Seconds(start, Clock::now()) / calls;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  reel::bench::Sweep sweep;
  reel::bench::ReelPeer peer;
  peer.transport = "mpi";
  int blocks = 15;
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == "--blocks") {
      blocks = std::atoi(args[i + 1].c_str());
      args.erase(args.begin() + static_cast<long>(i), args.begin() + static_cast<long>(i) + 2);
      break;
    }
  if (blocks < 1 || !sweep.ParseFlags(args) || !peer.ParseFlags(args) || !args.empty() ||
      peer.transport != "mpi") {
    std::fprintf(stderr,
                 "usage: mpi_interleaved [--option KEY=VALUE]... [--blocks K] [--min-bytes B] "
                 "[--max-bytes B] [--budget-bytes B] [--max-calls N]\n");
    return 2;
  }
  auto comm = peer.Connect();
  if (!comm.ok()) {
    std::fprintf(stderr, "mpi_interleaved: %s\n", comm.status().ToString().c_str());
    return 1;
  }
  MPI_Comm world;
  MPI_Comm_dup(MPI_COMM_WORLD, &world);
  reel::Status error;
  auto reel_call = [&](float* data, size_t n) {
    error = (*comm)->AllReduce({data, n}, reel::ReduceOp::kSum,
                               reel::DeadlineIn(std::chrono::minutes(5)));
    return error.ok();
  };
  auto raw_call = [&](float* data, size_t n) {
    return MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_FLOAT, MPI_SUM, world) ==
           MPI_SUCCESS;
  };
  int code = 0;
  for (size_t bytes = sweep.min_bytes; code == 0 && bytes <= sweep.max_bytes; bytes *= 4) {
    const size_t n = bytes / sizeof(float);
    std::vector<float> data(n, 1.0f);
    const int calls = sweep.Calls(bytes);
    std::vector<double> raw_us, reel_us, ratio;
    if (!raw_call(data.data(), n) || !reel_call(data.data(), n)) code = 1;  // warm-up
    for (int b = 0; code == 0 && b < blocks; ++b) {
      double t[2];
      for (int k = 0; k < 2; ++k) {
        const bool raw_turn = (k == 0) == (b % 2 == 0);
        t[raw_turn ? 0 : 1] = Time(calls, world, [&] {
          return raw_turn ? raw_call(data.data(), n) : reel_call(data.data(), n);
        });
      }
      if (t[0] < 0 || t[1] < 0) code = 1;
      raw_us.push_back(t[0] * 1e6), reel_us.push_back(t[1] * 1e6), ratio.push_back(t[0] / t[1]);
    }
    if (code == 0 && (*comm)->rank() == 0) {
      std::printf("%zu %.3f %.3f %.3f %.3f %.3f\n", bytes, reel::bench::Median(raw_us),
                  reel::bench::Median(reel_us), reel::bench::Median(ratio),
                  *std::min_element(ratio.begin(), ratio.end()),
                  *std::max_element(ratio.begin(), ratio.end()));
      std::fflush(stdout);
    }
  }
  MPI_Comm_free(&world);
  if (!error.ok()) std::fprintf(stderr, "mpi_interleaved: %s\n", error.ToString().c_str());
  return code;
}
