// Plugins whose descriptors must be refused before any of their code runs. Which one is built is
// chosen by REEL_TEST_VARIANT; each variant's register function would abort if it were called.
#include <cstdlib>

#include "reel/plugin.h"

namespace {

reel::Status MustNotRun(reel::Registrar&) noexcept { std::abort(); }

#if REEL_TEST_VARIANT == 1  // another plugin ABI
const reel::PluginDescriptor kDescriptor{999, REEL_SDK_VERSION, REEL_BUILD_TAG, "wrong_abi", "1.0",
                                         "",  &MustNotRun};
#elif REEL_TEST_VARIANT == 2  // a newer SDK major version
const reel::PluginDescriptor kDescriptor{
    reel::kPluginAbiVersion, "7.0.0", REEL_BUILD_TAG, "new_sdk", "1.0", "", &MustNotRun};
#elif REEL_TEST_VARIANT == 3  // another C++ runtime
const reel::PluginDescriptor kDescriptor{reel::kPluginAbiVersion,
                                         REEL_SDK_VERSION,
                                         "runtime=libc++/abi=1;compiler=clang-17",
                                         "other_runtime",
                                         "1.0",
                                         "",
                                         &MustNotRun};
#endif

const reel::PluginDescriptor* Entry() noexcept { return &kDescriptor; }

}  // namespace

BOOST_DLL_ALIAS(Entry, reel_plugin_entry)
