#!/usr/bin/env bash
# usage: check_install.sh BUILD_DIR TEMPLATE_DIR
set -euo pipefail
build=$1 template=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
test -f "$work/prefix/include/reel/plugin.h"
test -f "$work/prefix/lib/cmake/reel/reelConfig.cmake"
test -f "$work/prefix/lib/pkgconfig/reel.pc"
cmake -S "$template" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
out=$("$work/prefix/bin/reel" --plugin-dir "$work/build" plugins show template)
echo "$out"
grep -q "model template_model" <<<"$out"
# The installed reel also finds the installed plugins beside it, without any flag.
"$work/prefix/bin/reel" plugins | grep -q "search path:"
echo "installed SDK builds and loads the template plugin"
