#!/usr/bin/env bash
# usage: readme_tour_test.sh SOURCE_DIR BIN_DIR PYTHON_PATH PYTHON
# Runs every block of README.md's "A five-minute tour" exactly as written, in order: sh blocks
# with bash -e, python blocks with PYTHON. They run where the README says, a repository root with
# the build's bin/ first on PATH: a scratch folder holding the repository's configs/ and
# data/yt8m/, so what the tour writes (runs/) stays out of the tree.
set -euo pipefail
src=$1 bin=$2 pythonpath=$3 python=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ln -s "$src/configs" "$work/configs"
mkdir "$work/data"
ln -s "$src/data/yt8m" "$work/data/yt8m"
"$python" - "$src/README.md" "$work/blocks" <<'PY'
import os, re, sys
text = open(sys.argv[1], encoding="utf-8").read()
start = text.index("\n## A five-minute tour")
end = text.find("\n## ", start + 1)
tour = text[start:end if end >= 0 else len(text)]
blocks = re.findall(r"^```(sh|python)\n(.*?)^```$", tour, re.M | re.S)
if len(blocks) < 5:
    sys.exit(f"README.md's tour has {len(blocks)} command blocks; expected its five steps")
os.makedirs(sys.argv[2])
for i, (lang, body) in enumerate(blocks):
    with open(os.path.join(sys.argv[2], f"{i:02d}.{lang}"), "w") as f:
        f.write(body)
PY
cd "$work"
export PATH="$bin:$PATH" PYTHONPATH="$pythonpath${PYTHONPATH:+:$PYTHONPATH}"
for block in blocks/*; do
  echo "== README.md tour, block ${block##*/}:"
  cat "$block"
  case $block in
    *.sh) bash -euo pipefail "$block" ;;
    *.python) "$python" "$block" ;;
  esac || { echo "FAILED: the block above, as README.md writes it (exit $?)"; exit 1; }
done
echo "every block of README.md's tour ran"
