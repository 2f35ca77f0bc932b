#!/usr/bin/env bash
# usage: check_embed.sh PREFIX EXAMPLE_DIR WORK_DIR
# examples/embed as an application developer builds it: against an install alone (PREFIX, made by
# install_prefix.sh; find_package(reel), reel::core), run with the installed plugins; it
# synthesises data, trains, evaluates and exits 0 only when training improved GAP on held-out
# videos. WORK_DIR: a fixed path, emptied first and removed when the run passed.
set -euo pipefail
prefix=$1 example=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
cmake -S "$example" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >"$work/log" 2>&1 ||
  { cat "$work/log"; exit 1; }
cmake --build "$work/build" >"$work/log" 2>&1 || { cat "$work/log"; exit 1; }
env -u REEL_PLUGIN_PATH "$work/build/reel_embed" "$work/run" "$prefix/lib/reel/plugins"
rm -rf "$work"
