#!/usr/bin/env bash
# One worker's push+pull against the same run's allreduce (ps_push_pull: one server and one worker
# under `reel launch -n 2`, tcp on loopback; WORKERS=N: N workers, their round trips summed, against
# the allreduce of all N + 1 ranks), for two or more builds alternated run by run (bench/ab.py), so
# that the machine's load falls on every build alike. Each BUILD is a directory holding bin/reel,
# bin/ps_push_pull and lib/ (a copy of a build tree's, so a rebuild meanwhile cannot swap them).
# Prints per run the gradients /s of the whole async job (all workers' round trips) and of the sync
# job of the same processes (allreduce calls x ranks) and their ratio, and per step of all workers
# one worker's round trips /s against calls /s (docs/benchmarks.md, counting whole jobs), then each
# build's min / median / max and each build's over the first's per repetition. Every run's output
# (with each rank's CPU ms and context switches, if its ps_push_pull prints them) and load average
# stay in OUT (default bench/out/ab_push_pull_<UTC time>).
#
#   [WORKERS=N] [OUT=DIR] bench/async_sgd/ab_push_pull.sh REPS ITERS BUILD... [-- ps_push_pull flags]
set -euo pipefail
reps=$1 iters=$2
shift 2
builds=()
while (($#)) && [[ $1 != -- ]]; do builds+=("$1"); shift; done
(($#)) && shift
flags=
if (($#)); then flags=$(printf ' %q' "$@"); fi
out=${OUT:-bench/out/ab_push_pull_$(date -u +%Y%m%dT%H%M%SZ)}
cases=()
for b in "${builds[@]}"; do
  cases+=(--case "$b" "$(printf '%q' "$b/bin/reel") launch -n $((${WORKERS:-1} + 1)) -- \
$(printf '%q' "$b/bin/ps_push_pull") --transport tcp --iters $iters$flags")
done
exec python3 "$(dirname "$0")/../ab.py" --reps "$reps" --out "$out" "${cases[@]}" \
  --metric 'async_job=all_workers_round_trips_per_second=([0-9.]+)' \
  --metric 'sync_job=all_ranks_gradients_per_second=([0-9.]+)' \
  --metric 'worker= round_trips_per_second=([0-9.]+)' \
  --metric 'call= calls_per_second=([0-9.]+)' \
  --quotient whole_job=async_job/sync_job --quotient per_step=worker/call
