#!/usr/bin/env bash
# The main job on built-in demo data, from a fresh Debian bookworm machine (as root): installs what
# is needed, builds, and runs `reel demo`, which synthesises frame-level YouTube-8M-format data,
# trains the two-stream BiLSTM, evaluates it and prints the metrics. Extra arguments go to
# `reel demo` (e.g. --workdir DIR, --set trainer.steps=200).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --build  # what building and running reel needs; the tests add more
# CI's release build (CMakePresets.json, preset release: build/, line tables only, warnings as
# errors on the compiler CI checks), so that running both, as the README says, compiles the
# library and plugins once; the tests and benches are test.sh's to build.
REEL_PRESET=release REEL_BUILD_TARGETS=all scripts/build.sh -DREEL_BUILD_TESTS=OFF -DREEL_BUILD_BENCH=OFF
exec build/bin/reel demo "$@"
