#!/usr/bin/env bash
# Fails, naming file and line, when a tracked file refers to a path outside the repository, so a
# clone with nothing beside it builds, tests and runs its configs. Flagged:
#  - an absolute path into the checkout itself (it names where this clone happens to be);
#  - a relative path whose parent-directory steps climb above the repository root, taken from the
#    file's own directory, or from the anchor a known variable names ("${CMAKE_SOURCE_DIR}/" is the
#    root; "${CMAKE_CURRENT_SOURCE_DIR}/" and "$(dirname "$0")/" are the file's directory);
#  - a plain relative path that names nothing in the tree from the file's directory but, taken
#    from the root (configs are run from there), climbs out to something that exists.
# Paths from anchors the tree does not define ("$ORIGIN/", "<exe>/", "$HOME/") are not judged, nor
# absolute paths elsewhere: the outcome depends on the tree and where it is, never on what else
# exists beside it (a home's .cache, made by a build, is not the tree's business).
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
# The checkout's own absolute path, alone or followed by a path inside it (not "<root>-other").
# Unless the checkout is / (nothing to tell apart from a system path).
own_re = re.compile(re.escape(root) + r"(?=$|[/\s'\"`<>(),;=|&])") if root != "/" else None
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


def names_outside(components):
    """True when components, taken from the root, leave the tree and then name a folder or file
    that exists there. A bare climb to an ancestor names nothing; a variable or glob ends what can
    be checked."""
    depth = 0
    for i, c in enumerate(components):
        if dynamic_re.search(c):
            return False
        if c == "..":
            depth -= 1
        elif c not in ("", "."):
            if depth < 0:
                return os.path.exists(os.path.normpath(os.path.join(root, *components[: i + 1])))
            depth += 1
    return False


def resolves_inside(start, components):
    literal = []
    for c in components:
        if dynamic_re.search(c):
            break
        literal.append(c)
    return os.path.exists(os.path.normpath(os.path.join(root, *start, *literal)))


# Variables (and commands) that name the root or the file's own directory, last one wins.
root_anchor_re = re.compile(r"CMAKE_SOURCE_DIR|PROJECT_SOURCE_DIR|REEL_SOURCE_DIR|show-toplevel")
file_anchor_re = re.compile(r"CMAKE_CURRENT_SOURCE_DIR|CMAKE_CURRENT_LIST_DIR|dirname|BASH_SOURCE|__file__")


def problem(token, context, file_dir):
    """context: the line up to the token, for the anchor of a path that starts with a variable."""
    if "://" in token:
        return None
    parts = token.split("/")
    if ".." not in parts:
        return None
    first = parts.index("..")
    if token.startswith("/") and first != 1:
        return None  # an absolute path elsewhere on the system: not judged (see above)
    if token.startswith("/") or any(dynamic_re.search(p) for p in parts[:first]):
        anchored = context + "/".join(parts[:first])
        anchors = [(m.start(), []) for m in root_anchor_re.finditer(anchored)]
        anchors += [(m.start(), file_dir) for m in file_anchor_re.finditer(anchored)]
        if not anchors:
            return None  # an anchor outside the tree's meaning: $ORIGIN, <exe>, $HOME
        start = max(anchors)[1]
        if leaves_tree(start, parts[first:]):
            return "climbs above the repository root from where it is anchored"
        return None
    if leaves_tree(file_dir, parts):
        return "climbs above the repository root from the file's directory"
    if not resolves_inside(file_dir, parts) and names_outside(parts):
        return "names a path outside the repository when taken from the root"
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
        if own_re and own_re.search(line):
            print(f"{rel}:{number}: absolute path to this checkout ({root}): use a path relative to "
                  "the tree", file=sys.stderr)
            bad += 1
            continue
        for m in token_re.finditer(line):
            token = m.group(0)
            why = problem(token, line[: m.start()], file_dir)
            if why:
                print(f"{rel}:{number}: '{token}' {why}", file=sys.stderr)
                bad += 1
if bad:
    print(f"check-paths: {bad} reference(s) to paths outside the repository", file=sys.stderr)
    sys.exit(1)
print(f"check-paths: {sum(1 for n in names if n)} tracked files, no path outside the repository")
EOF
