#!/usr/bin/env bash
# Configures and builds reel into build/ (or $REEL_BUILD_DIR) with the machine's cores.
# Extra arguments go to cmake's configure step, e.g. -DREEL_BUILD_BENCH=OFF. REEL_BUILD_TARGETS
# (space-separated) builds only those targets and what they need, instead of everything.
# REEL_PRESET=NAME configures and builds a preset of CMakePresets.json instead (release, asan,
# tsan, fuzz, clang: a CI phase's folder, compiler, flags and targets); the arguments and
# REEL_BUILD_TARGETS still apply on top of it.
# Compiles through ccache when it is installed (scripts/ccache.sh; REEL_CCACHE=0: without).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ccache.sh
jobs=${REEL_JOBS:-$(nproc)}
if [[ -n ${REEL_PRESET:-} ]]; then
  [[ -z ${REEL_BUILD_DIR:-} ]] || { echo "build.sh: REEL_PRESET builds in the preset's folder; unset REEL_BUILD_DIR" >&2; exit 2; }
  cmake --preset "$REEL_PRESET" "${ccache_args[@]}" "$@" >/dev/null
  # shellcheck disable=SC2086 # a list of target names
  cmake --build --preset "$REEL_PRESET" -j"$jobs" ${REEL_BUILD_TARGETS:+--target $REEL_BUILD_TARGETS}
  exit
fi
build_dir=${REEL_BUILD_DIR:-build}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${ccache_args[@]}" "$@" >/dev/null
# shellcheck disable=SC2086 # a list of target names
cmake --build "$build_dir" -j"$jobs" ${REEL_BUILD_TARGETS:+--target $REEL_BUILD_TARGETS}
