// The core's built-in components, registered by Registry::RegisterBuiltins().
#ifndef REEL_CORE_SRC_BUILTINS_H_
#define REEL_CORE_SRC_BUILTINS_H_

#include "reel/plugin.h"

namespace reel::core {

Status RegisterFileStorage(Registrar& registrar);      // storage "file" (core/src/storage/)
Status RegisterInprocTransport(Registrar& registrar);  // transport "inproc" (core/src/comm/)
Status RegisterSyncOptimizer(Registrar& registrar);    // optimizer "sync" (core/src/optim/)

}  // namespace reel::core

#endif  // REEL_CORE_SRC_BUILTINS_H_
