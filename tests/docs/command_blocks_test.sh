#!/usr/bin/env bash
# usage: command_blocks_test.sh SOURCE_DIR BIN_DIR PYTHON_PATH PYTHON
# Runs the command blocks of README.md's "A five-minute tour" and docs/training.md's "The demo"
# exactly as written, in order: sh blocks with bash -e, python blocks with PYTHON. They run where
# the documents say, a repository root with the build's bin/ first on PATH: a scratch folder
# holding the repository's configs/ and data/yt8m/, so what they write stays out of the tree.
set -euo pipefail
src=$1 bin=$2 pythonpath=$3 python=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ln -s "$src/configs" "$work/configs"
mkdir "$work/data"
ln -s "$src/data/yt8m" "$work/data/yt8m"
"$python" - "$src" "$work/blocks" <<'PY'
import os, re, sys
# (document, section, the blocks it must hold at least)
SECTIONS = [("README.md", "## A five-minute tour", 5), ("docs/training.md", "## The demo", 1)]
os.makedirs(sys.argv[2])
n = 0
for doc, heading, least in SECTIONS:
    text = open(os.path.join(sys.argv[1], doc), encoding="utf-8").read()
    start = text.index("\n" + heading + "\n")
    end = text.find("\n## ", start + 1)
    section = text[start:end if end >= 0 else len(text)]
    blocks = re.findall(r"^```(sh|python)\n(.*?)^```$", section, re.M | re.S)
    if len(blocks) < least:
        sys.exit(f"{doc}, '{heading}': {len(blocks)} command blocks, expected {least} or more")
    for lang, body in blocks:
        with open(os.path.join(sys.argv[2], f"{n:02d}.{lang}"), "w") as f:
            f.write(f"# {doc}, {heading[3:]}\n" + body)
        n += 1
PY
cd "$work"
export PATH="$bin:$PATH" PYTHONPATH="$pythonpath${PYTHONPATH:+:$PYTHONPATH}"
for block in blocks/*; do
  echo "== block ${block##*/}:"
  cat "$block"
  case $block in
    *.sh) bash -euo pipefail "$block" ;;
    *.python) "$python" "$block" ;;
  esac || { echo "FAILED: the block above, as its document writes it (exit $?)"; exit 1; }
done
echo "every block ran"
