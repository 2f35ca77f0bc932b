#!/usr/bin/env bash
# usage: command_blocks_test.sh SOURCE_DIR BUILD_DIR PYTHON [DOCUMENT ...]
# Every ```sh and ```python block of README.md, docs/ and the plugins' READMEs, run as written by
# command_blocks.py (which says in what order, and how a block is marked as not run). They run
# where the documents say, a repository root after the build: a scratch folder holding the
# repository's configs/, plugins/ and data/yt8m/ and the build as build/, with build/bin first on
# PATH and build/python on PYTHONPATH (README.md's tour), so what they write stays out of the tree.
set -euo pipefail
src=$1 build=$2 python=$3
shift 3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ln -s "$src/configs" "$work/configs"
ln -s "$src/plugins" "$work/plugins"
ln -s "$build" "$work/build"
mkdir "$work/data"
ln -s "$src/data/yt8m" "$work/data/yt8m"
cd "$work"
# Open MPI refuses root without these (a user's account is not root).
if ((EUID == 0)); then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
export PATH="$PWD/build/bin:$PATH" PYTHONPATH="$PWD/build/python${PYTHONPATH:+:$PYTHONPATH}"
"$python" "$src/tests/docs/command_blocks.py" "$src" "$PWD/build/lib/reel/plugins" "$@"
