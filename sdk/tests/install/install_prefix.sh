#!/usr/bin/env bash
# usage: install_prefix.sh BUILD_DIR PREFIX
# The one install the SDK checks share (a CTest fixture): `cmake --install` of the build into a
# fresh PREFIX, which the checks only read, so they run in parallel.
set -euo pipefail
build=$1 prefix=$2
rm -rf "$prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
test -f "$prefix/include/reel/plugin.h"
test -f "$prefix/lib/cmake/reel/reelConfig.cmake"
test -f "$prefix/lib/pkgconfig/reel.pc"
echo "installed into $prefix"
