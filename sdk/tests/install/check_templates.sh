#!/usr/bin/env bash
# usage: check_templates.sh PREFIX WORK_DIR
# Every template, copied out of PREFIX/share/reel/templates/ as a plugin author copies one, builds
# against the install alone and passes its CTest: its own test and `reel plugins check` with the
# installed reel on the module it built. The templates are configured together, as subprojects of
# one generated project (one compiler detection instead of one per template; their builds and
# tests run in parallel); each still calls find_package(reel) itself, the imported targets being
# visible only in its own directory. check_install.sh builds the model template on its own.
# WORK_DIR is a fixed path (emptied first, removed when all passed) so ccache finds the objects
# of the previous run.
set -euo pipefail
prefix=$1 work=$2
rm -rf "$work"
mkdir -p "$work"
cp -r "$prefix/share/reel/templates" "$work/src"
kinds=$(cd "$work/src" && ls)
{
  echo "cmake_minimum_required(VERSION 3.25)"
  echo "project(reel_templates LANGUAGES CXX)"
  echo "enable_testing()"
  for kind in $kinds; do echo "add_subdirectory(src/$kind $kind)"; done
} >"$work/CMakeLists.txt"
cmake -S "$work" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >"$work/log" 2>&1 ||
  { cat "$work/log"; exit 1; }
cmake --build "$work/build" >"$work/log" 2>&1 || { cat "$work/log"; exit 1; }
ctest --test-dir "$work/build" --output-on-failure -j"${REEL_JOBS:-$(nproc)}"
# Every template brought both of its tests: its own and the conformance check.
n=$(wc -w <<<"$kinds")
test "$n" -eq 6 || { echo "expected 6 templates, found $n: $kinds" >&2; exit 1; }
# (The list is read whole first: grep -q stopping early would fail ctest with SIGPIPE.)
listed=$(ctest --test-dir "$work/build" -N)
grep -q "Total Tests: $((2 * n))" <<<"$listed" || { echo "$listed" >&2; exit 1; }
for kind in $kinds; do
  grep -q "template_${kind}_conformance" <<<"$listed" ||
    { echo "template $kind has no reel_add_plugin_check" >&2; exit 1; }
done
rm -rf "$work"
