#!/usr/bin/env bash
# The whole test suite, from a fresh Debian bookworm machine (as root): installs what is needed,
# builds, runs every test with CTest, then
#   * rebuilds the core and the plugins that parse outside bytes or talk to the network (tfrecord,
#     tcp) under AddressSanitizer + UndefinedBehaviorSanitizer and runs their tests again
#     (REEL_ASAN_PLUGINS="" REEL_ASAN_LABELS="" takes every plugin and test: the whole suite under
#     the sanitizers, which has not yet been run through here and is kept out of CI until it has);
#   * rebuilds the tests of the threaded parts (core, tcp, tfrecord) under ThreadSanitizer and
#     runs them again (REEL_TSAN_LABELS, default core|sdk|tcp|tfrecord);
#   * builds the libFuzzer targets (tests/fuzz/) and runs each briefly on its seed corpus, failing
#     on any crash, leak or timeout (REEL_FUZZ_SECONDS each, default 15: halved from 30 when the
#     ThreadSanitizer phase came, to keep the whole run within 40 minutes on 2 cores).
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
asan_labels=${REEL_ASAN_LABELS-core|sdk|tfrecord|tcp}
phase "build under AddressSanitizer + UndefinedBehaviorSanitizer (plugins: ${asan_plugins:-all})"
REEL_BUILD_DIR=build-asan scripts/build.sh -DREEL_SANITIZE=ON -DREEL_BUILD_TESTS=ON \
  -DREEL_BUILD_PLUGINS=ON "-DREEL_PLUGINS=$asan_plugins" -DREEL_BUILD_BENCH=OFF
phase "tests under AddressSanitizer + UndefinedBehaviorSanitizer (labels: ${asan_labels:-all})"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp" \
  ctest --test-dir build-asan -j"$jobs" --output-on-failure --timeout 900 ${asan_labels:+-L "$asan_labels"}

# ThreadSanitizer over the concurrent parts: the core (inproc transport, ring collectives, the
# sync optimizer, ranks as threads, the trainer's and tuner's threads, checkpoints shared by
# local ranks), the tcp transport (its io thread, mailbox, failure notices; the trainer over tcp
# in job_test) and the tfrecord source's prefetch thread. Only those test binaries are built (not
# `reel`: the tcp conformance run by `reel launch`, one rank per process, is left out).
# Any report fails its test: TSan makes the process exit 66.
tsan_labels=${REEL_TSAN_LABELS-core|sdk|tcp|tfrecord}
phase "build under ThreadSanitizer (core, tcp, tfrecord tests)"
tsan_targets="reel_core_tests reel_sdk_tests reel_tcp_tests tfrecord_tests reel_plugin_tcp"
REEL_BUILD_DIR=build-tsan REEL_BUILD_TARGETS="$tsan_targets" scripts/build.sh -DREEL_TSAN=ON \
  -DREEL_BUILD_TESTS=ON -DREEL_BUILD_PLUGINS=ON "-DREEL_PLUGINS=tcp;tfrecord" -DREEL_BUILD_BENCH=OFF
phase "tests under ThreadSanitizer (labels: $tsan_labels)"
TSAN_OPTIONS="second_deadlock_stack=1 history_size=4" \
  ctest --test-dir build-tsan -j"$jobs" --output-on-failure --timeout 900 -L "$tsan_labels" \
  -E '^tcp_conformance_world_'

phase "fuzz targets, ${REEL_FUZZ_SECONDS:-15} s each"
scripts/fuzz.sh --seconds "${REEL_FUZZ_SECONDS:-15}"
phase "done"
