#!/usr/bin/env bash
# usage: check_install.sh PREFIX WORK_DIR
# Builds against an install of reel (PREFIX, made by install_prefix.sh) as a plugin author would:
# the version rule of find_package, the model template on its own, a plugin using reel::recordio
# (find_package) and a program using it (pkg-config), and a transport's conformance tests linking
# reel::transport_testing. Every template with its own tests: check_templates.sh. WORK_DIR is a
# fixed path (emptied first, removed when all passed) so ccache finds the previous run's objects.
set -euo pipefail
prefix=$1 work=$2
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"
mkdir -p "$work"

# The version file states the compatibility rule (same plugin ABI, same major, not older) and
# find_package applies it; every public target is exported.
abi=$(sed -n 's/.*kPluginAbiVersion = \([0-9]*\);.*/\1/p' "$prefix/include/reel/plugin.h")
mkdir -p "$work/find"
cat >"$work/find/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.25)
project(find_reel LANGUAGES CXX)
find_package(reel ${WANT} REQUIRED)
foreach(t reel::sdk reel::core reel::recordio)
  if(NOT TARGET ${t})
    message(FATAL_ERROR "find_package(reel) did not define ${t}")
  endif()
endforeach()
message(STATUS "reel ${reel_VERSION} abi ${REEL_PLUGIN_ABI_VERSION} exe ${REEL_EXECUTABLE}")
CMAKE
find_reel() {  # find_reel VERSION [-DREEL_REQUIRED_PLUGIN_ABI=N]: 0 when find_package accepts it
  # One build directory (the compiler is detected once); what the last run found is forgotten.
  cmake -S "$work/find" -B "$work/find/build" -U 'reel_*' -U REEL_REQUIRED_PLUGIN_ABI \
    -DCMAKE_PREFIX_PATH="$prefix" -DWANT="$1" "${@:2}" >"$work/find/log" 2>&1
}
version=$(sed -n 's/^Version: //p' "$prefix/lib/pkgconfig/reel.pc")
IFS=. read -r major minor patch <<<"$version"
find_reel "$version" || { cat "$work/find/log"; exit 1; }
grep -q "reel $version abi $abi exe $prefix/bin/reel" "$work/find/log"
refused() {  # refused ARGS...: find_reel must fail (`! cmd` would not stop a set -e script)
  if find_reel "$@"; then echo "find_package(reel $*) accepted what the rule refuses" >&2; exit 1; fi
}
find_reel "$major.0" -DREEL_REQUIRED_PLUGIN_ABI="$abi"   # an older minor of the same major: yes
refused "$major.$((minor + 1))"                          # a newer minor: no
grep -q "reelConfig.cmake, version: $version" "$work/find/log"  # named among those refused
refused "$((major + 1)).0"                               # another major: no
refused "$version" -DREEL_REQUIRED_PLUGIN_ABI=$((abi + 1))  # another plugin ABI: no
grep -q "plugin ABI $abi, not $((abi + 1))" "$work/find/log"
test "$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --variable=plugin_abi reel)" = "$abi"
echo "find_package(reel) applies the compatibility rule (SDK $version, plugin ABI $abi)"
template=$prefix/share/reel/templates/model
cmake -S "$template" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/build" >/dev/null
out=$("$prefix/bin/reel" --plugin-dir "$work/build" plugins show template_model)
echo "$out"
grep -q "model template_linear" <<<"$out"
# The installed reel also finds the installed plugins beside it, without any flag.
grep -q "search path:" <<<"$("$prefix/bin/reel" plugins)"
echo "installed SDK builds and loads the template plugin"

# Record I/O is a library, installed and exported: an out-of-tree plugin links reel::recordio and
# its command writes and reads TFRecords (two 3-byte records: 2 x (8 + 4 + 3 + 4) bytes).
test -f "$prefix/lib/libreel_recordio.a"
cmake -S "$here/recordio_plugin" -B "$work/recordio" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/recordio" >/dev/null
out=$("$prefix/bin/reel" --plugin-dir "$work/recordio" recordio_probe "$work/two.tfrecord")
echo "$out"
test "$out" = "foo bar 38 bytes"
# ... and pkg-config finds it too.
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
# shellcheck disable=SC2086 # flag lists (CXXFLAGS/LDFLAGS: a sanitizer build's, see CMakeLists.txt)
"${CXX:-g++}" ${CXXFLAGS:-} "$here/recordio_plugin/masked_crc.cc" -o "$work/masked_crc" \
  $(pkg-config --cflags reel-recordio) $(pkg-config --libs reel-recordio) ${LDFLAGS:-}
test "$("$work/masked_crc")" = "0xfebe8a61 0xfebe8a61"
echo "installed reel::recordio links into a plugin (CMake) and a program (pkg-config)"

# The communicator conformance suite is installed too: a transport's tests outside the tree link
# reel::transport_testing and run it (here over the installed core's inproc transport).
test -f "$prefix/lib/libreel_transport_testing.a"
test -f "$prefix/include/reel/testing/transport_conformance.h"
cmake -S "$here/transport_suite" -B "$work/suite" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/suite" >/dev/null
"$work/suite/transport_suite" --gtest_brief=1 > "$work/suite.out" 2>&1 || { cat "$work/suite.out"; exit 1; }
tail -1 "$work/suite.out"
grep -q "PASSED" "$work/suite.out"
# Every case ran (a suite that linked but registered nothing would pass with zero tests).
ran=$(sed -n 's/.*PASSED.*\] \([0-9]*\) tests\{0,1\}\./\1/p' "$work/suite.out")
test "${ran:-0}" -ge 20 || { echo "only ${ran:-0} conformance tests ran"; exit 1; }
echo "installed reel::transport_testing runs the conformance suite out of tree ($ran tests)"
rm -rf "$work"
