#!/usr/bin/env bash
# The main job on built-in demo data, from a fresh Debian bookworm machine (as root): installs what
# is needed, builds, and runs `reel demo`, which synthesises frame-level YouTube-8M-format data,
# trains the two-stream BiLSTM, evaluates it and prints the metrics. Extra arguments go to
# `reel demo` (e.g. --workdir DIR, --set trainer.steps=200).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --build  # what building and running reel needs; the tests add more
# The flags scripts/test.sh builds build/ with (line tables only, -g1), so that running both, as
# the README says, compiles the library and plugins once.
REEL_BUILD_DIR=build scripts/build.sh -DREEL_BUILD_TESTS=OFF -DREEL_BUILD_PLUGINS=ON -DREEL_BUILD_BENCH=OFF -DREEL_SANITIZE=OFF \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"
exec build/bin/reel demo "$@"
