#!/usr/bin/env bash
# The whole test suite, from a fresh Debian bookworm machine (as root): installs what is needed,
# builds, runs every test with CTest, then
#   * rebuilds everything (benchmarks aside) under AddressSanitizer + UndefinedBehaviorSanitizer
#     and runs every test again;
#   * builds the libFuzzer targets (tests/fuzz/) and runs each briefly on its seed corpus, failing
#     on any crash, leak or timeout (REEL_FUZZ_SECONDS each, default 30).
# Each phase prints its wall time. `.ci/run` runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
scripts/check-paths.sh  # a clone with nothing beside it must be enough: no path outside the tree
# s3rver (npm) for the S3 tests; the tests read the same variable, whatever HOME is.
export REEL_S3RVER_DIR="${REEL_S3RVER_DIR:-${HOME:-/root}/.cache/reel/s3rver}"
scripts/install-s3rver.sh

jobs=${REEL_JOBS:-$(nproc)}
phase_start=$SECONDS
phase() {
  if ((SECONDS > phase_start)); then echo "-- $((SECONDS - phase_start)) s"; fi
  phase_start=$SECONDS
  echo "== $*"
}

phase "build (RelWithDebInfo)"
REEL_BUILD_DIR=build scripts/build.sh -DREEL_BUILD_TESTS=ON -DREEL_BUILD_PLUGINS=ON -DREEL_PLUGINS= \
  -DREEL_BUILD_BENCH=ON -DREEL_SANITIZE=OFF
phase "tests"
ctest --test-dir build -j"$jobs" --output-on-failure --timeout 600

phase "build under AddressSanitizer + UndefinedBehaviorSanitizer"
REEL_BUILD_DIR=build-asan scripts/build.sh -DREEL_SANITIZE=ON -DREEL_BUILD_TESTS=ON \
  -DREEL_BUILD_PLUGINS=ON -DREEL_PLUGINS= -DREEL_BUILD_BENCH=OFF
phase "tests under AddressSanitizer + UndefinedBehaviorSanitizer"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp" \
  ctest --test-dir build-asan -j"$jobs" --output-on-failure --timeout 900

phase "fuzz targets, ${REEL_FUZZ_SECONDS:-30} s each"
scripts/fuzz.sh --seconds "${REEL_FUZZ_SECONDS:-30}"
phase "done"
