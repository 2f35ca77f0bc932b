#!/usr/bin/env bash
# Runs the s3_read benchmark: starts s3rver on loopback, runs build*/bin/s3_read against it
# (reel vs the AWS CLI vs memcpy), writes bench/out/s3_read.{json,md}, stops the server.
#   bench/s3/run_s3_read.sh [BUILD_DIR] [REPS]
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
build="${1:-$repo/build}"
reps="${2:-5}"
state="$(mktemp -d /tmp/reel-s3-bench-XXXXXX)"
trap '"$repo/scripts/s3rver.sh" stop "$state"' EXIT
"$repo/scripts/install-s3rver.sh" >/dev/null
endpoint="$("$repo/scripts/s3rver.sh" start "$state" bench)"
"$build/bin/s3_read" --endpoint "$endpoint" --bucket bench --size_mib 256 --reps "$reps" \
  --out "$repo/bench/out" --command "bench/s3/run_s3_read.sh $build $reps"
