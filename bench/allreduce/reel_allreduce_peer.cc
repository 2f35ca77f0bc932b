// reel's AllReduce over a transport plugin, one rank per process, as a training job would run it
// (reel_peer.h), every call with a deadline.
//
//   reel_allreduce_peer --transport NAME [--option KEY=VALUE]... [sweep flags]
#include <chrono>

#include "allreduce_sweep.h"
#include "reel_peer.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  reel::bench::Sweep sweep;
  reel::bench::ReelPeer peer;
  if (!sweep.ParseFlags(args) || !peer.ParseFlags(args) || !args.empty()) {
    std::fprintf(stderr,
                 "usage: reel_allreduce_peer --transport NAME [--option KEY=VALUE]... "
                 "[--min-bytes B] [--max-bytes B] [--budget-bytes B] [--max-calls N]\n");
    return 2;
  }
  auto fail = [](const reel::Status& s) {
    std::fprintf(stderr, "reel_allreduce_peer: %s\n", s.ToString().c_str());
    return 1;
  };
  auto comm = peer.Connect();
  if (!comm.ok()) return fail(comm.status());
  reel::Status error;
  auto deadline = [] { return reel::DeadlineIn(std::chrono::minutes(5)); };
  const int code =
      sweep.Run((*comm)->rank(),
                [&](float* data, size_t n) -> reel::bench::Sweep::Call {
                  return [&, data, n] {
                    error = (*comm)->AllReduce({data, n}, reel::ReduceOp::kSum, deadline());
                    return error.ok();
                  };
                },
                [&] {
                  error = (*comm)->Barrier(deadline());
                  return error.ok();
                });
  if (!error.ok()) return fail(error);
  return code;
}
