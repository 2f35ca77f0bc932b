#!/usr/bin/env bash
# The whole test suite, from a fresh Debian bookworm machine (as root): installs what is needed,
# builds, runs every test with CTest, then rebuilds the core and the tfrecord plugin (the code that
# parses untrusted input) under AddressSanitizer + UndefinedBehaviorSanitizer and runs their tests
# again. `.ci/run` runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
scripts/check-paths.sh  # a clone with nothing beside it must be enough: no path outside the tree
# s3rver (npm) for the S3 tests; the tests read the same variable, whatever HOME is.
export REEL_S3RVER_DIR="${REEL_S3RVER_DIR:-${HOME:-/root}/.cache/reel/s3rver}"
scripts/install-s3rver.sh

jobs=${REEL_JOBS:-$(nproc)}
echo "== build (RelWithDebInfo)"
REEL_BUILD_DIR=build scripts/build.sh -DREEL_BUILD_TESTS=ON -DREEL_BUILD_PLUGINS=ON -DREEL_PLUGINS= \
  -DREEL_BUILD_BENCH=ON -DREEL_SANITIZE=OFF
echo "== tests"
ctest --test-dir build -j"$jobs" --output-on-failure --timeout 600

echo "== core and tfrecord tests under AddressSanitizer + UndefinedBehaviorSanitizer"
REEL_BUILD_DIR=build-asan scripts/build.sh -DREEL_SANITIZE=ON -DREEL_BUILD_TESTS=ON \
  -DREEL_BUILD_PLUGINS=ON -DREEL_PLUGINS=tfrecord -DREEL_BUILD_BENCH=OFF
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan -j"$jobs" --output-on-failure --timeout 600 -L 'core|tfrecord'
