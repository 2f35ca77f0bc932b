#!/usr/bin/env bash
# usage: check_paths_test.sh SOURCE_DIR
# scripts/check-paths.sh on small git repositories, one rule per case: each bad reference fails
# the check naming file and line; references that stay inside (or are not repository paths) pass.
# The bad paths are assembled at run time so this file itself stays clean for the check.
set -euo pipefail
src=$1
check="$src/scripts/check-paths.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
up=..
# Beside the test checkouts: a folder for a bad reference to name, and one ("lib") that a path
# anchored outside the tree ($ORIGIN) happens to match and must not be blamed for.
mkdir -p "$work/sibling/data" "$work/lib"
failures=0

. "$(dirname "$0")/repo_fixtures.sh"  # new_repo, put, expect_flagged, expect_clean

# A config run from the root that reads a sibling folder.
r=$(new_repo repo); put "$r" configs/a.pbtxt "files: \"$up/sibling/data/x.tfrecord\""
expect_flagged "$r" configs/a.pbtxt:1
# A build file that anchors at the source dir and steps out to the sibling.
r=$(new_repo repo); put "$r" cmake/x.cmake "set(D \"\${CMAKE_SOURCE_DIR}/$up/sibling/data\")"
expect_flagged "$r" cmake/x.cmake:1
# A script anchored at its own directory that climbs one step too many.
r=$(new_repo repo); put "$r" bench/s3/run.sh "data=\"\$(dirname \"\$0\")/$up/$up/$up/other\""
expect_flagged "$r" bench/s3/run.sh:1
# A nested file whose steps climb above the root (line 2: the line is named, not just the file).
r=$(new_repo repo); put "$r" a/b/notes.md "$(printf 'fine\nsee %s/%s/%s/elsewhere/file' $up $up $up)"
expect_flagged "$r" a/b/notes.md:2
# An absolute path into the checkout itself (where this clone happens to be).
r=$(new_repo repo); put "$r" tests/t.cc "const char* kData = \"$work/repo/data\";"
expect_flagged "$r" tests/t.cc:1
# A folder that is not a git checkout is an error, not a pass (the check reads tracked files).
if bash "$check" "$work/sibling" >/dev/null 2>&1; then
  echo "FAIL: a folder that is not a git checkout passed"; failures=$((failures + 1))
else
  echo "ok: a folder that is not a git checkout is an error"
fi

# Clean: steps that stay inside, anchors outside the tree's meaning, absolute system paths,
# untracked and binary files.
r=$(new_repo repo)
put "$r" bench/s3/run.sh "repo=\"\$(cd \"\$(dirname \"\$0\")/$up/$up\" && pwd)\""
put "$r" plugins/x/a.h "// header"
put "$r" plugins/x/tests/a_test.cc "#include \"$up/a.h\""
put "$r" core/CMakeLists.txt "set_target_properties(reel PROPERTIES INSTALL_RPATH \"\$ORIGIN/$up/lib\")"
put "$r" docs/x.md "Installed under /usr/lib/x86_64-linux-gnu/ and found via <exe>/$up/lib/reel/plugins."
printf 'bad\0%s/sibling/data\n' "$up" >"$r/blob.bin" && git -C "$r" add blob.bin
put "$r" README.md "see docs/x.md"
printf '%s/sibling/data\n' "$up" >"$r/untracked.txt"
expect_clean "$r" "in-tree steps, \$ORIGIN and <exe> anchors, system paths, binary and untracked files"

# A clone under a home, beside the .cache a build made there (ccache's): an absolute path to
# that cache, or to any other folder beside the clone, is not the tree's business (the check once
# took whatever existed beside the checkout for a sibling it must not name).
mkdir -p "$work/home/.cache/reel/s3rver" "$work/home/other"
r=$(new_repo home/proj)
put "$r" scripts/x.sh "export REEL_S3RVER_DIR=$work/home/.cache/reel/s3rver; ls $work/home/other"
put "$r" README.md "Clone it as $work/home/proj-2 too."
expect_clean "$r" "a clone under a home with .cache beside it, naming paths beside it"
# The real tree, cloned under a home with a .cache beside it.
git -C "$src" ls-files -z | (cd "$src" && while IFS= read -r -d '' f; do
  [[ -e $f || -L $f ]] && printf '%s\0' "$f"; done) >"$work/files"
mkdir -p "$work/home/clone"
tar -C "$src" --null -T "$work/files" -cf - | tar -C "$work/home/clone" -xf -
git -C "$work/home/clone" init -q
git -C "$work/home/clone" add --pathspec-from-file="$work/files" --pathspec-file-nul
expect_clean "$work/home/clone" "this repository's tracked files, cloned under a home with .cache beside it"

# The real tree.
expect_clean "$src" "this repository"

if ((failures)); then
  echo "$failures case(s) failed"
  exit 1
fi
