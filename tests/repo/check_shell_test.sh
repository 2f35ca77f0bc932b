#!/usr/bin/env bash
# usage: check_shell_test.sh SOURCE_DIR
# No finding of shellcheck in the tracked shell scripts under scripts/ and in .ci/run: files named
# *.sh or starting with a shell's #! line (ccache.sh, sourced, says its shell in a directive).
# A finding the script means is kept with a `# shellcheck disable=SCnnnn # why` line above it.
set -euo pipefail
src=$1
command -v shellcheck >/dev/null || { echo "shellcheck is not installed (scripts/install-deps.sh installs it)"; exit 1; }
cd "$src"
scripts=()
while IFS= read -r -d '' f; do
  if [[ $f == *.sh ]] || head -n1 "$f" | grep -qE '^#!.*\b(ba|da|)sh\b'; then scripts+=("$f"); fi
done < <(git ls-files -z -- scripts .ci/run)
((${#scripts[@]})) || { echo "no tracked shell scripts under $src/scripts"; exit 1; }
shellcheck --format=gcc "${scripts[@]}"
echo "shellcheck: ${#scripts[@]} scripts clean: ${scripts[*]}"
