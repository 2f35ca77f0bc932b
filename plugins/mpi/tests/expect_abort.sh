#!/usr/bin/env bash
# Runs a command that must fail: it passes when the command ends non-zero and its output (stdout
# and stderr) has a line matching an extended regular expression. For a job that must abort,
# where CTest's PASS_REGULAR_EXPRESSION alone would ignore the exit code.
# Usage: expect_abort.sh REGEX COMMAND [ARG...]
set -uo pipefail
regex=$1
shift
output=$("$@" 2>&1)
code=$?
printf '%s\n' "$output"
if [ "$code" -eq 0 ]; then
  echo "expect_abort.sh: the command ended with exit code 0; it should have failed" >&2
  exit 1
fi
if ! grep -Eq -- "$regex" <<<"$output"; then
  echo "expect_abort.sh: exit code $code, but no line matches: $regex" >&2
  exit 1
fi
echo "expect_abort.sh: exit code $code and a line matching: $regex"
