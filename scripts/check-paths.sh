#!/usr/bin/env bash
# Fails, naming file and line, when a tracked file refers to a path outside the repository, so a
# clone with nothing beside it builds, tests and runs its configs. Flagged:
#  - an absolute path into the checkout's parent directory (the checkout itself or a sibling);
#  - a relative path whose parent-directory steps climb above the repository root from the file's
#    own directory;
#  - a path that, from an unknown anchor such as "${CMAKE_SOURCE_DIR}/" or "$(dirname "$0")/", or
#    from the root (configs are run from there), steps out of the tree and names something that
#    exists outside it (a sibling checkout or folder).
# Binary files are skipped. Usage: scripts/check-paths.sh [REPO]  (default: this repository).
# Needs git (tracked files only: build trees and other untracked files are never read) and python3.
set -euo pipefail
repo=${1:-"$(dirname "$0")/.."}
if ! top=$(git -C "$repo" rev-parse --show-toplevel 2>/dev/null); then
  echo "check-paths: $repo is not a git checkout (the check reads the tracked files)" >&2
  exit 2
fi
python3 - "$top" <<'EOF'
import os, re, subprocess, sys

root = os.path.realpath(sys.argv[1])
parent = os.path.dirname(root)
parent_prefix = parent + "/" if parent != "/" else None
# Path-like tokens: everything up to whitespace, quotes, brackets and separators of the
# languages in the tree; '$', '{' and '}' stay so "${VAR}/x" is one token.
token_re = re.compile(r"[^\s'\"`<>(),;=|&]+")
dynamic_re = re.compile(r"[$}{*?\[]")


def leaves_tree(start, components):
    """True when components, taken from start (names below the root), step above the root."""
    depth = len(start)
    for c in components:
        if c == "..":
            depth -= 1
            if depth < 0:
                return True
        elif c not in ("", "."):
            depth += 1
    return False


def names_outside(start, components):
    """True when components, taken from start, leave the tree and then name a folder or file that
    exists there (a sibling checkout, a shared data folder). A bare climb to an ancestor of the
    root names nothing; a variable or glob ends what can be checked."""
    depth = len(start)
    for i, c in enumerate(components):
        if dynamic_re.search(c):
            return False
        if c == "..":
            depth -= 1
        elif c not in ("", "."):
            if depth < 0:
                target = os.path.normpath(os.path.join(root, *start, *components[: i + 1]))
                return os.path.exists(target)
            depth += 1
    return False


def problem(token, file_dir):
    if "://" in token:
        return None
    parts = token.split("/")
    if ".." not in parts:
        return None
    first = parts.index("..")
    if token.startswith("/") and first != 1:
        return None  # an absolute path elsewhere on the system; the parent rule covers siblings
    if token.startswith("/") or any(dynamic_re.search(p) for p in parts[:first]):
        # "$(dirname "$0")/.." and "${VAR}/..": the anchor is unknown, evaluate the steps only.
        rest = parts[first:]
    else:
        rest = parts
        if leaves_tree(file_dir, rest):
            return "climbs above the repository root from the file's directory"
    if names_outside(file_dir, rest) or names_outside([], rest):
        return "names a path outside the repository"
    return None


bad = 0
names = subprocess.run(["git", "-C", root, "ls-files", "-z"], check=True,
                       stdout=subprocess.PIPE).stdout.split(b"\0")
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
print(f"check-paths: {sum(1 for n in names if n)} tracked files, no path outside the repository")
EOF
