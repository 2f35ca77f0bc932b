// Versions a plugin and its host must agree on, and the rule the host applies when it loads a
// plugin (core/src/plugin_loader.cc; find_package(reel) applies the same rule, see
// lib/cmake/reel/reelConfigVersion.cmake):
//   1. plugin ABI: equal. kPluginAbiVersion (reel/plugin.h) is bumped whenever a contract in
//      include/reel/ changes incompatibly (a virtual function, a struct's layout, a factory).
//   2. SDK version: same MAJOR, and the plugin's MINOR not newer than the host's. A MINOR
//      release adds (a helper, a default method) without breaking plugins built before it; a
//      PATCH release changes no declaration. A host of 0.3 loads plugins of 0.1-0.3.
//   3. C++ runtime: the same standard library and string ABI (REEL_BUILD_TAG's runtime part).
// A plugin that breaks a rule is refused with a one-line reason; none of its code runs.
// The project's VERSION in CMakeLists.txt must equal REEL_SDK_VERSION (checked at configure).
#ifndef REEL_VERSION_H_
#define REEL_VERSION_H_

// This SDK's version, MAJOR.MINOR.PATCH (the rule above says what each part promises).
#define REEL_SDK_VERSION_MAJOR 0
#define REEL_SDK_VERSION_MINOR 1
#define REEL_SDK_VERSION_PATCH 0
#define REEL_SDK_VERSION "0.1.0"

// Turns a macro's value into a string literal (helpers of the tags below).
#define REEL_STRINGIFY_INNER_(x) #x
#define REEL_STRINGIFY_(x) REEL_STRINGIFY_INNER_(x)

// The C++ runtime ABI: standard library and its string/list ABI. Plugins must match the host.
#if defined(_GLIBCXX_RELEASE)
#define REEL_CXX_RUNTIME_ \
  "libstdc++" REEL_STRINGIFY_(_GLIBCXX_RELEASE) "/cxx11abi=" REEL_STRINGIFY_(_GLIBCXX_USE_CXX11_ABI)
#elif defined(_LIBCPP_VERSION)
#define REEL_CXX_RUNTIME_ "libc++/abi=" REEL_STRINGIFY_(_LIBCPP_ABI_VERSION)
#else
#define REEL_CXX_RUNTIME_ "unknown"
#endif

// The compiler and its major version, for the build tag (informative: not part of the rule).
#if defined(__clang__)
#define REEL_COMPILER_ "clang-" REEL_STRINGIFY_(__clang_major__)
#elif defined(__GNUC__)
#define REEL_COMPILER_ "gcc-" REEL_STRINGIFY_(__GNUC__)
#else
#define REEL_COMPILER_ "unknown"
#endif

// "runtime=libstdc++12/cxx11abi=1;compiler=gcc-12". The host refuses a plugin whose runtime part
// differs from its own; the compiler part is informational (clang and gcc share libstdc++'s ABI).
#define REEL_BUILD_TAG "runtime=" REEL_CXX_RUNTIME_ ";compiler=" REEL_COMPILER_

#endif  // REEL_VERSION_H_
