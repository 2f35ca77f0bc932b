// Placeholder until the inproc transport and the sync optimizer land: registers nothing.
// (Replaced by core/src/comm/*.cc; delete this file when they exist.)
#include "builtins.h"

namespace reel::core {
Status RegisterInprocTransport(Registrar&) { return Status::Ok(); }
Status RegisterSyncOptimizer(Registrar&) { return Status::Ok(); }
}  // namespace reel::core
