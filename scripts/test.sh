#!/usr/bin/env bash
# The whole test suite, from a fresh Debian bookworm machine (as root): installs what is needed,
# builds, runs every test with CTest, then
#   * rebuilds the core and the plugins that parse outside bytes or talk to the network (tfrecord,
#     tcp) under AddressSanitizer + UndefinedBehaviorSanitizer and runs their tests again
#     (REEL_ASAN_PLUGINS="" REEL_ASAN_LABELS="" takes every plugin and test: the whole suite under
#     the sanitizers, which has not yet been run through here and is kept out of CI until it has);
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

asan_plugins=${REEL_ASAN_PLUGINS-tfrecord;tcp}
asan_labels=${REEL_ASAN_LABELS-core|tfrecord|tcp}
phase "build under AddressSanitizer + UndefinedBehaviorSanitizer (plugins: ${asan_plugins:-all})"
REEL_BUILD_DIR=build-asan scripts/build.sh -DREEL_SANITIZE=ON -DREEL_BUILD_TESTS=ON \
  -DREEL_BUILD_PLUGINS=ON "-DREEL_PLUGINS=$asan_plugins" -DREEL_BUILD_BENCH=OFF
phase "tests under AddressSanitizer + UndefinedBehaviorSanitizer (labels: ${asan_labels:-all})"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp" \
  ctest --test-dir build-asan -j"$jobs" --output-on-failure --timeout 900 ${asan_labels:+-L "$asan_labels"}

phase "fuzz targets, ${REEL_FUZZ_SECONDS:-30} s each"
scripts/fuzz.sh --seconds "${REEL_FUZZ_SECONDS:-30}"
phase "done"
