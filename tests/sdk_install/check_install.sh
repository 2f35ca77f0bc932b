#!/usr/bin/env bash
# usage: check_install.sh BUILD_DIR TEMPLATE_DIR
# Installs reel to a temporary prefix and builds against it as a plugin author would: the template
# plugin, and a plugin using reel::recordio (find_package) and a program using it (pkg-config).
set -euo pipefail
build=$1 template=$2
here=$(cd "$(dirname "$0")" && pwd)
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

# Record I/O is a library, installed and exported: an out-of-tree plugin links reel::recordio and
# its command writes and reads TFRecords (two 3-byte records: 2 x (8 + 4 + 3 + 4) bytes).
test -f "$work/prefix/lib/libreel_recordio.a"
cmake -S "$here/recordio_plugin" -B "$work/recordio" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/recordio" >/dev/null
out=$("$work/prefix/bin/reel" --plugin-dir "$work/recordio" recordio_probe "$work/two.tfrecord")
echo "$out"
test "$out" = "foo bar 38 bytes"
# ... and pkg-config finds it too.
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
g++ "$here/recordio_plugin/masked_crc.cc" -o "$work/masked_crc" \
  $(pkg-config --cflags reel-recordio) $(pkg-config --libs reel-recordio)
test "$("$work/masked_crc")" = "0xfebe8a61"
echo "installed reel::recordio links into a plugin (CMake) and a program (pkg-config)"
