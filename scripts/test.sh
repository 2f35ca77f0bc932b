#!/usr/bin/env bash
# The whole test suite, from a fresh Debian bookworm machine (as root): installs what is needed,
# builds, runs every test with CTest, then rebuilds the core under AddressSanitizer +
# UndefinedBehaviorSanitizer and runs the core tests again. `.ci/run` runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
if [[ -x scripts/install-s3rver.sh ]]; then scripts/install-s3rver.sh; fi

jobs=${REEL_JOBS:-$(nproc)}
echo "== build (RelWithDebInfo)"
REEL_BUILD_DIR=build scripts/build.sh
echo "== tests"
ctest --test-dir build -j"$jobs" --output-on-failure --timeout 600

echo "== core tests under AddressSanitizer + UndefinedBehaviorSanitizer"
REEL_BUILD_DIR=build-asan scripts/build.sh -DREEL_SANITIZE=ON -DREEL_BUILD_PLUGINS=OFF -DREEL_BUILD_BENCH=OFF
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan -j"$jobs" --output-on-failure --timeout 600 -L core
