// reel's AllReduce over a transport plugin, one rank per process, as a training job would run it:
// the transport comes from the registry (plugins found beside the executable), the communicator
// gets the core's collectives (native ones where the transport has them), every call a deadline.
//
//   reel_allreduce_peer --transport NAME [--option KEY=VALUE]... [sweep flags]
//
// Rank, world size and coordinator come from REEL_RANK, REEL_WORLD_SIZE and REEL_COORDINATOR;
// with neither rank variable set the transport discovers them (mpi under mpirun).
#include <chrono>
#include <cstdlib>
#include <map>

#include "allreduce_sweep.h"
#include "reel/core/collectives.h"
#include "reel/core/host.h"

namespace {

int EnvInt(const char* name, int otherwise) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : otherwise;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  reel::bench::Sweep sweep;
  std::string transport_name;
  std::map<std::string, std::string> options;
  bool ok = sweep.ParseFlags(args);
  for (size_t i = 0; ok && i < args.size(); i += 2) {
    const size_t eq = i + 1 < args.size() ? args[i + 1].find('=') : std::string::npos;
    if (i + 1 >= args.size())
      ok = false;
    else if (args[i] == "--transport")
      transport_name = args[i + 1];
    else if (args[i] == "--option" && eq != std::string::npos)
      options[args[i + 1].substr(0, eq)] = args[i + 1].substr(eq + 1);
    else
      ok = false;
  }
  if (!ok || transport_name.empty()) {
    std::fprintf(stderr,
                 "usage: reel_allreduce_peer --transport NAME [--option KEY=VALUE]... "
                 "[--min-bytes B] [--max-bytes B] [--budget-bytes B] [--max-calls N]\n");
    return 2;
  }
  auto fail = [](const reel::Status& s) {
    std::fprintf(stderr, "reel_allreduce_peer: %s\n", s.ToString().c_str());
    return 1;
  };
  auto host = reel::core::Host::Create({});
  if (!host.ok()) return fail(host.status());
  auto transport = (*host)->registry().CreateTransport(transport_name, options);
  if (!transport.ok()) return fail(transport.status());
  const char* coordinator = std::getenv("REEL_COORDINATOR");
  const reel::TransportContext ctx{EnvInt("REEL_RANK", reel::kDiscover),
                                   EnvInt("REEL_WORLD_SIZE", reel::kDiscover),
                                   coordinator ? coordinator : ""};
  auto joined = (*transport)->Connect(ctx, reel::DeadlineIn(std::chrono::minutes(1)));
  if (!joined.ok()) return fail(joined.status());
  std::unique_ptr<reel::Communicator> comm = reel::core::WithRingCollectives(std::move(*joined));
  reel::Status error;
  auto deadline = [] { return reel::DeadlineIn(std::chrono::minutes(5)); };
  const int code = sweep.Run(
      comm->rank(),
      [&](float* data, size_t n) -> reel::bench::Sweep::Call {
        return [&, data, n] {
          error = comm->AllReduce({data, n}, reel::ReduceOp::kSum, deadline());
          return error.ok();
        };
      },
      [&] {
        error = comm->Barrier(deadline());
        return error.ok();
      });
  if (!error.ok()) return fail(error);
  return code;
}
