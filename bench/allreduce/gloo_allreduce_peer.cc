// Gloo's ring allreduce over its TCP transport, one rank per process: the peer of reel's tcp
// transport in run_allreduce.py. Ranks meet through a directory both can see (Gloo's FileStore).
//
//   REEL_RANK=r REEL_WORLD_SIZE=n gloo_allreduce_peer --store DIR [--host ADDR] [sweep flags]
//
// ADDR (default 127.0.0.1) is the address this rank listens on.
#include <gloo/allreduce_ring.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <cstdlib>
#include <exception>
#include <memory>

#include "allreduce_sweep.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  reel::bench::Sweep sweep;
  std::string store_dir, host = "127.0.0.1";
  bool ok = sweep.ParseFlags(args);
  for (size_t i = 0; ok && i < args.size(); i += 2) {
    if (i + 1 >= args.size())
      ok = false;
    else if (args[i] == "--store")
      store_dir = args[i + 1];
    else if (args[i] == "--host")
      host = args[i + 1];
    else
      ok = false;
  }
  const char* rank_env = std::getenv("REEL_RANK");
  const char* size_env = std::getenv("REEL_WORLD_SIZE");
  if (!ok || store_dir.empty() || !rank_env || !size_env) {
    std::fprintf(
        stderr,
        "usage: REEL_RANK=r REEL_WORLD_SIZE=n gloo_allreduce_peer --store DIR "
        "[--host ADDR] [--min-bytes B] [--max-bytes B] [--budget-bytes B] [--max-calls N]\n");
    return 2;
  }
  const int rank = std::atoi(rank_env), size = std::atoi(size_env);
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = host;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(store_dir);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->connectFullMesh(store, device);
    return sweep.Run(
        rank,
        [&](float* data, size_t n) -> reel::bench::Sweep::Call {
          auto ring = std::make_shared<gloo::AllreduceRing<float>>(
              context, std::vector<float*>{data}, static_cast<int>(n));
          return [ring] {
            ring->run();
            return true;
          };
        },
        [barrier = std::make_shared<gloo::BarrierAllToAll>(context)] {
          barrier->run();
          return true;
        });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo rank %d: %s\n", rank, e.what());
    return 1;
  }
}
