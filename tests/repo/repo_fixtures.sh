# Sourced by the tests of the repository checks (check_paths_test.sh, check_headers_test.sh): small
# git repositories made on the spot, and the two outcomes a check can have on one. Expects $work
# (a temporary folder), $check (the check script, run with bash on a repository) and
# failures=0 from the caller.
# new_repo NAME: an empty git repository in $work/NAME, printed.
new_repo() {
  rm -rf "${work:?}/$1"
  mkdir -p "$work/$1"
  git -C "$work/$1" init -q
  echo "$work/$1"
}
# put REPO FILE CONTENT: writes FILE (creating its folder) and adds it to the index.
put() {
  mkdir -p "$(dirname "$1/$2")"
  printf '%s\n' "$3" >"$1/$2"
  git -C "$1" add -- "$2"
}
expect_flagged() {  # expect_flagged REPO WHERE (file:line the message must name)
  local out
  if out=$(bash "$check" "$1" 2>&1); then
    echo "FAIL: check passed, expected it to flag $2"; failures=$((failures + 1))
  elif ! grep -qF "$2: " <<<"$out"; then
    echo "FAIL: expected a message naming $2, got:"; echo "$out"; failures=$((failures + 1))
  else
    echo "ok: flagged $(grep -F "$2: " <<<"$out")"
  fi
}
expect_clean() {  # expect_clean REPO WHAT
  local out
  if ! out=$(bash "$check" "$1" 2>&1); then
    echo "FAIL: $2 was flagged:"; echo "$out"; failures=$((failures + 1))
  else
    echo "ok: clean: $2"
  fi
}

