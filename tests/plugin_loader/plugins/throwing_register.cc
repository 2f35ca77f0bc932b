// A plugin whose registration throws: the REEL_PLUGIN wrapper must turn it into an error.
#include <stdexcept>

#include "reel/plugin.h"

namespace {
reel::Status Register(reel::Registrar&) { throw std::runtime_error("registration exploded"); }
}  // namespace

REEL_PLUGIN("throwing", "1.0", "throws while registering", Register)
