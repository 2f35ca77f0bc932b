// Two builds of this file (REEL_TEST_PLUGIN_NAME differs) register the same model name.
#include "reel/plugin.h"

namespace {

reel::Status Register(reel::Registrar& r) {
  REEL_RETURN_IF_ERROR(
      r.Add<reel::Command>({REEL_TEST_PLUGIN_NAME "_only", "a component unique to this plugin", {}},
                           []() -> reel::Result<std::unique_ptr<reel::Command>> {
                             return reel::UnimplementedError("test");
                           }));
  return r.Add<reel::Model>(
      {"shared_name", "registered by both duplicate plugins", {}},
      [](const reel::Options&,
         const reel::ModelContext&) -> reel::Result<std::unique_ptr<reel::Model>> {
        return reel::UnimplementedError("test");
      });
}

}  // namespace

REEL_PLUGIN(REEL_TEST_PLUGIN_NAME, "1.0", "duplicate-name test plugin", Register)
