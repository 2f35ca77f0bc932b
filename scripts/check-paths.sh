#!/usr/bin/env bash
# Fails, naming file and line, when a tracked file refers to a path outside the repository, so a
# clone with nothing beside it builds, tests and runs its configs. Flagged:
#  - an absolute path into the checkout's parent directory (the checkout itself or a sibling);
#  - a relative path whose parent-directory steps climb above the repository root from the file's
#    own directory;
#  - a relative path that climbs above the root when taken from the root (as configs are, run from
#    the repository root) and does not name anything in the tree from the file's directory either
#    (e.g. "${CMAKE_SOURCE_DIR}/" followed by a step up and a sibling folder).
# Binary files are skipped. Usage: scripts/check-paths.sh [REPO]  (default: this repository).
# Needs git (tracked files only, so build trees and other untracked files are never read) and python3.
set -euo pipefail
repo=${1:-"$(dirname "$0")/.."}
if ! top=$(git -C "$repo" rev-parse --show-toplevel 2>/dev/null); then
  echo "check-paths: $repo is not a git checkout (the check reads the tracked files)" >&2
  exit 2
fi
git -C "$top" ls-files -z | python3 - "$top" <<'EOF'
import os, re, sys

root = os.path.realpath(sys.argv[1])
parent = os.path.dirname(root)
parent_prefix = parent + "/" if parent != "/" else None
# Path-like tokens: everything up to whitespace, quotes, brackets and separators of the
# languages in the tree; '$', '{' and '}' stay so "${VAR}/x" is one token.
token_re = re.compile(r"[^\s'\"`<>(),;=|&]+")
dynamic_re = re.compile(r"[$}{*?\[]")


def climb(start, components):
    """Resolves components from start (a list of names below the root); None if it escapes."""
    stack = list(start)
    for c in components:
        if c in ("", "."):
            continue
        if c == "..":
            if not stack:
                return None
            stack.pop()
        else:
            stack.append(c)
    return stack


def exists(stack):
    # Only the literal part: stop at the first component with a glob or a variable.
    literal = []
    for c in stack:
        if dynamic_re.search(c):
            break
        literal.append(c)
    return os.path.exists(os.path.join(root, *literal))


def problem(token, file_dir):
    if "://" in token:
        return None
    parts = token.split("/")
    if ".." not in parts:
        return None
    first = parts.index("..")
    prefix = parts[:first]
    if token.startswith("/") and first != 1:
        return None  # an absolute path elsewhere on the system; the parent rule covers siblings
    if any(dynamic_re.search(p) for p in prefix) or token.startswith("/"):
        # "$(dirname "$0")/.." and "${VAR}/..": the anchor is unknown, evaluate the steps only.
        rest = parts[first:]
    else:
        rest = parts
    from_file = climb(file_dir, rest)
    if from_file is None:
        return "climbs above the repository root from the file's directory"
    if climb([], rest) is None and not exists(from_file):
        return "climbs above the repository root and names nothing in the tree"
    return None


bad = 0
names = sys.stdin.buffer.read().split(b"\0")
for name in names:
    if not name:
        continue
    path = os.path.join(root, os.fsdecode(name))
    if not os.path.isfile(path):
        continue  # deleted in the work tree, or a submodule
    with open(path, "rb") as f:
        data = f.read()
    if b"\0" in data:
        continue
    text = data.decode("utf-8", errors="replace")
    rel = os.fsdecode(name)
    file_dir = [c for c in os.path.dirname(rel).split("/") if c]
    for number, line in enumerate(text.splitlines(), 1):
        if parent_prefix and parent_prefix in line:
            print(f"{rel}:{number}: absolute path into {parent_prefix} (outside the repository)",
                  file=sys.stderr)
            bad += 1
            continue
        for token in token_re.findall(line):
            why = problem(token, file_dir)
            if why:
                print(f"{rel}:{number}: '{token}' {why}", file=sys.stderr)
                bad += 1
if bad:
    print(f"check-paths: {bad} reference(s) to paths outside the repository", file=sys.stderr)
    sys.exit(1)
print(f"check-paths: {len([n for n in names if n])} tracked files refer only to paths inside the repository")
EOF
