#!/usr/bin/env bash
# usage: check_format_test.sh SOURCE_DIR
# Every tracked C++ file follows .clang-format (docs/style.md): `clang-format --dry-run -Werror`
# names each file and line that `clang-format -i` would change. Fix with
#   git ls-files -z '*.cc' '*.h' | xargs -0 clang-format -i
set -euo pipefail
src=$1
command -v clang-format >/dev/null || { echo "clang-format is not installed (scripts/install-deps.sh installs it)"; exit 1; }
mapfile -d '' files < <(git -C "$src" ls-files -z -- '*.cc' '*.h' '*.cpp' '*.hpp' '*.c')
((${#files[@]})) || { echo "no tracked C++ files in $src"; exit 1; }
cd "$src"
if ! out=$(clang-format --dry-run -Werror "${files[@]}" 2>&1); then
  grep -oE '^[^ :]+:[0-9]+:[0-9]+: error' <<<"$out" | cut -d: -f1 | uniq -c |
    awk '{ print "drifts from .clang-format: " $2 " (" $1 " place(s))" }'
  head -n 40 <<<"$out"
  exit 1
fi
echo "clang-format: ${#files[@]} tracked C++ files follow .clang-format"
