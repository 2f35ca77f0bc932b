#!/usr/bin/env bash
# usage: check_embed.sh BUILD_DIR EXAMPLE_DIR
# examples/embed as an application developer builds it: against a temporary install alone
# (find_package(reel), reel::core), run with the installed plugins; it synthesises data, trains,
# evaluates and exits 0 only when training improved GAP on held-out videos.
set -euo pipefail
build=$1 example=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$example" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >"$work/log" 2>&1 ||
  { cat "$work/log"; exit 1; }
cmake --build "$work/build" >"$work/log" 2>&1 || { cat "$work/log"; exit 1; }
env -u REEL_PLUGIN_PATH "$work/build/reel_embed" "$work/run" "$work/prefix/lib/reel/plugins"
