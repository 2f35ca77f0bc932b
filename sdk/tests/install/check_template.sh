#!/usr/bin/env bash
# usage: check_template.sh BUILD_DIR KIND
# A plugin author's first hour with one template: install reel to a temporary prefix, copy
# share/reel/templates/KIND out of it, build it against the install alone, and run its CTest: its
# own test and `reel plugins check` with the installed reel on the module it built.
set -euo pipefail
build=$1 kind=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cp -r "$work/prefix/share/reel/templates/$kind" "$work/src"
cmake -S "$work/src" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >"$work/log" 2>&1 ||
  { cat "$work/log"; exit 1; }
cmake --build "$work/build" >"$work/log" 2>&1 || { cat "$work/log"; exit 1; }
ctest --test-dir "$work/build" --output-on-failure
# Both tests ran: the template's own and the conformance check with the installed reel.
ctest --test-dir "$work/build" -N | grep -q "Total Tests: 2"
