#!/usr/bin/env bash
# Where the parameter server's CPU goes: runs ps_push_pull (one server, one worker, tcp on
# loopback, 10M floats) under `reel launch -n 2` from BUILD (a directory with bin/ and lib/, as for
# bench/async_sgd/ab_push_pull.sh) and samples rank 0's threads with `perf record` for SECONDS,
# DELAY seconds after the ranks started: a window inside the push+pull phase, or (a later one)
# inside the allreduce phase. Writes OUT.data (perf report -i OUT.data) and OUT.txt (the program's output, with each
# phase's rates and CPU per round trip or call).
#
#   bench/experiments/profile_push_pull.sh BUILD DELAY SECONDS OUT [ITERS (default 400)]
#   e.g. BUILD 2 6 $TMPDIR/pp (push+pull), BUILD 17.5 3 $TMPDIR/ar (allreduce, at about 26 round trips /s)
# Add PERF_FLAGS="--call-graph dwarf,16384 -F 500" for user-space call stacks (the release build
# keeps no frame pointers).
set -euo pipefail
build=$1 delay=$2 seconds=$3 out=$4 iters=${5:-400}
"$build/bin/reel" launch -n 2 -- "$build/bin/ps_push_pull" --transport tcp --iters "$iters" \
  >"$out.txt" 2>&1 &
launch=$!
server=
for ((i = 0; i < 50; ++i)); do
  [[ -z "$server" ]] || break
  sleep 0.1
  for p in $(pgrep -f "$build/bin/ps_push_pull --transport" || true); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'REEL_RANK=0'; then server=$p; fi
  done
done
[[ -n "$server" ]] || { echo "profile_push_pull: rank 0 never started" >&2; kill "$launch"; exit 1; }
sleep "$delay"
# shellcheck disable=SC2086 # PERF_FLAGS is a list of flags
perf record -q ${PERF_FLAGS:--g -F 2000} -p "$server" -o "$out.data" -- sleep "$seconds"
wait "$launch"
grep -o 'round_trips_per_second=[0-9.]*\|calls_per_second=[0-9.]*' "$out.txt"
