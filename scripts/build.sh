#!/usr/bin/env bash
# Configures and builds reel into build/ (or $REEL_BUILD_DIR) with the machine's cores.
# Extra arguments go to cmake's configure step, e.g. -DREEL_BUILD_BENCH=OFF. REEL_BUILD_TARGETS
# (space-separated) builds only those targets and what they need, instead of everything.
# Compiles through ccache when it is installed (scripts/ccache.sh; REEL_CCACHE=0: without).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ccache.sh
build_dir=${REEL_BUILD_DIR:-build}
jobs=${REEL_JOBS:-$(nproc)}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${ccache_args[@]}" "$@" >/dev/null
# shellcheck disable=SC2086 # a list of target names
cmake --build "$build_dir" -j"$jobs" ${REEL_BUILD_TARGETS:+--target $REEL_BUILD_TARGETS}
