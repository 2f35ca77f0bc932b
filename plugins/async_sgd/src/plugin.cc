// The async_sgd plugin: the asynchronous parameter-server optimizer "async_sgd".
#include "reel/plugin.h"

#include "async_optimizer.h"

namespace {

reel::Status Register(reel::Registrar& r) {
  return r.Add<reel::Optimizer>(
      {"async_sgd",
       "asynchronous SGD with parameter servers (Downpour / Elephas-style per-epoch deltas)",
       reel::async_sgd::AsyncOptions()},
      [](const reel::Options& o,
         const reel::OptimizerContext& c) -> reel::Result<std::unique_ptr<reel::Optimizer>> {
        REEL_ASSIGN_OR_RETURN(auto opt, reel::async_sgd::AsyncOptimizer::Create(o, c));
        return std::unique_ptr<reel::Optimizer>(std::move(opt));
      });
}

}  // namespace

REEL_PLUGIN("async_sgd", "0.1.0",
            "Asynchronous SGD: parameter servers over any transport (inproc, tcp, mpi)", Register)
