// ps_push_pull: what one async_sgd step costs on the wire against what a sync step costs, on one
// transport, in one run. One rank per process (REEL_RANK, REEL_WORLD_SIZE, REEL_COORDINATOR as
// `reel launch` sets them): rank 0 is the parameter server, the others workers.
//   1. push+pull: every worker pushes a gradient of --floats floats and pulls the parameters
//      back, --iters times (the server applies sgd to each push as it arrives);
//   2. allreduce: every rank (the server too) allreduces --floats floats, --iters times.
// Between barriers; rank 0 prints one line per phase:
//   push_pull workers=W floats=F seconds_per_round_trip=S round_trips_per_second=R GB_per_second=G
//             all_workers_round_trips_per_second=W*R all_workers_GB_per_second=W*G
//   allreduce ranks=N floats=F seconds_per_call=S calls_per_second=C GB_per_second=G
//             all_ranks_gradients_per_second=N*C
// and every rank one line per phase with its process's CPU time and context switches per round
// trip (or call), from getrusage, to tell where a phase's time goes (e.g. waiting or copying):
//   cpu rank=K phase=push_pull|allreduce user_ms=U sys_ms=S voluntary_switches=V
//   involuntary_switches=I
// GB/s counts the parameter bytes a worker moves per round trip (push + pull: 2 x 4F) and the
// algorithm bytes per allreduce call (4F), so the figures say how fast a step's data moves.
// Whole jobs compare by gradients per second of all their processes: a round trip carries one
// worker's gradient, so the async job's rate is W x R (all_workers_*); an allreduce call carries
// one gradient of each of the N = W + 1 ranks, so the sync job of the same processes makes N x C
// (all_ranks_*). Per step of all workers (each worker one gradient) the comparison is R against
// C. Never W x R against C: that counts the async side W times (docs/benchmarks.md).
//
// --option KEY=VALUE (repeatable) sets an async_sgd option, e.g. --option pipeline=false for the
// push and the pull one after the other instead of pipelined; --transport-option KEY=VALUE one
// of the transport, e.g. --transport-option congestion_control=system.
//
//   reel launch -n 3 -- ps_push_pull --transport tcp [--floats 10000000] [--iters 10]
//       [--option KEY=VALUE]... [--transport-option KEY=VALUE]...
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>

#include "async_optimizer.h"
#include "reel/core/collectives.h"
#include "reel/core/host.h"

namespace {

int EnvInt(const char* name, int otherwise) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : otherwise;
}

double Seconds(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// The process's CPU time and context switches so far.
struct Usage {
  double user_ms = 0, sys_ms = 0, voluntary = 0, involuntary = 0;
};
Usage Now() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto ms = [](const timeval& t) {
    return 1e3 * static_cast<double>(t.tv_sec) + 1e-3 * static_cast<double>(t.tv_usec);
  };
  return {ms(u.ru_utime), ms(u.ru_stime), static_cast<double>(u.ru_nvcsw),
          static_cast<double>(u.ru_nivcsw)};
}
void PrintUsage(int rank, const char* phase, const Usage& from, int iters) {
  const Usage to = Now();
  std::printf(
      "cpu rank=%d phase=%s user_ms=%.3f sys_ms=%.3f voluntary_switches=%.1f "
      "involuntary_switches=%.1f\n",
      rank, phase, (to.user_ms - from.user_ms) / iters, (to.sys_ms - from.sys_ms) / iters,
      (to.voluntary - from.voluntary) / iters, (to.involuntary - from.involuntary) / iters);
}

int Fail(const reel::Status& s) {
  std::fprintf(stderr, "ps_push_pull: %s\n", s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string transport_name = "tcp";
  int64_t floats = 10'000'000;
  int iters = 10;
  std::map<std::string, std::string> given = {{"rule", "sgd"}};
  std::map<std::string, std::string> transport_options;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--transport")
      transport_name = value;
    else if (flag == "--floats")
      floats = std::atoll(value.c_str());
    else if (flag == "--iters")
      iters = std::atoi(value.c_str());
    else if (flag == "--option" && value.find('=') != std::string::npos)
      given[value.substr(0, value.find('='))] = value.substr(value.find('=') + 1);
    else if (flag == "--transport-option" && value.find('=') != std::string::npos)
      transport_options[value.substr(0, value.find('='))] = value.substr(value.find('=') + 1);
    else {
      std::fprintf(stderr,
                   "usage: ps_push_pull [--transport T] [--floats F] [--iters N] "
                   "[--option KEY=VALUE]... [--transport-option KEY=VALUE]...\n");
      return 2;
    }
  }
  auto host = reel::core::Host::Create({});
  if (!host.ok()) return Fail(host.status());
  auto transport = (*host)->registry().CreateTransport(transport_name, transport_options);
  if (!transport.ok()) return Fail(transport.status());
  const char* coordinator = std::getenv("REEL_COORDINATOR");
  const reel::TransportContext ctx{EnvInt("REEL_RANK", reel::kDiscover),
                                   EnvInt("REEL_WORLD_SIZE", reel::kDiscover),
                                   coordinator ? coordinator : ""};
  auto joined = (*transport)->Connect(ctx, reel::DeadlineIn(std::chrono::minutes(1)));
  if (!joined.ok()) return Fail(joined.status());
  auto comm = reel::core::WithRingCollectives(std::move(*joined));
  const int rank = comm->rank(), world = comm->size();
  auto far = [] { return reel::DeadlineIn(std::chrono::minutes(5)); };

  reel::ParamArena arena;
  if (auto s = arena.Declare("w", {floats}); !s.ok()) return Fail(s.status());
  arena.Finalize();
  auto options = reel::ParseOptions(reel::async_sgd::AsyncOptions(), given);
  if (!options.ok()) return Fail(options.status());
  auto opt = reel::async_sgd::AsyncOptimizer::Create(*options, {rank, world});
  if (!opt.ok()) return Fail(opt.status());
  if (auto s = (*opt)->Setup(arena, *comm); !s.ok()) return Fail(s);
  std::fill(arena.grads().begin(), arena.grads().end(), 1e-6f);

  // 1. push+pull. The server serves on a thread so that it can join the barriers too.
  reel::Status served;
  std::thread server;
  if ((*opt)->IsServerOnly()) server = std::thread([&] { served = (*opt)->Serve(); });
  if (!(*opt)->IsServerOnly())
    if (auto s = (*opt)->Step(0.01f); !s.ok()) return Fail(s);  // warm-up
  if (auto s = comm->Barrier(far()); !s.ok()) return Fail(s);
  Usage used = Now();
  auto start = std::chrono::steady_clock::now();
  if (!(*opt)->IsServerOnly()) {
    for (int i = 0; i < iters; ++i)
      if (auto s = (*opt)->Step(0.01f); !s.ok()) return Fail(s);
  }
  if (auto s = comm->Barrier(far()); !s.ok()) return Fail(s);
  const double push_pull = Seconds(start) / iters;
  PrintUsage(rank, "push_pull", used, iters);
  if (auto s = (*opt)->Finish(); !s.ok()) return Fail(s);
  if (server.joinable()) server.join();
  if (!served.ok()) return Fail(served);
  const double bytes = 4.0 * static_cast<double>(arena.total_size());
  if (rank == 0)
    std::printf(
        "push_pull workers=%d floats=%lld seconds_per_round_trip=%.6f "
        "round_trips_per_second=%.3f GB_per_second=%.4f all_workers_round_trips_per_second=%.3f "
        "all_workers_GB_per_second=%.4f\n",
        world - 1, static_cast<long long>(floats), push_pull, 1.0 / push_pull,
        2.0 * bytes / push_pull / 1e9, (world - 1) / push_pull,
        (world - 1) * 2.0 * bytes / push_pull / 1e9);

  // 2. allreduce of the same parameters on every rank.
  if (auto s = comm->AllReduce(arena.grads(), reel::ReduceOp::kSum, far()); !s.ok())
    return Fail(s);  // warm-up
  if (auto s = comm->Barrier(far()); !s.ok()) return Fail(s);
  used = Now();
  start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i)
    if (auto s = comm->AllReduce(arena.grads(), reel::ReduceOp::kSum, far()); !s.ok())
      return Fail(s);
  if (auto s = comm->Barrier(far()); !s.ok()) return Fail(s);
  const double allreduce = Seconds(start) / iters;
  PrintUsage(rank, "allreduce", used, iters);
  if (rank == 0)
    std::printf(
        "allreduce ranks=%d floats=%lld seconds_per_call=%.6f calls_per_second=%.3f "
        "GB_per_second=%.4f all_ranks_gradients_per_second=%.3f\n",
        world, static_cast<long long>(floats), allreduce, 1.0 / allreduce, bytes / allreduce / 1e9,
        world / allreduce);
  std::fflush(stdout);
  return 0;
}
