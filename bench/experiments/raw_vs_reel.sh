#!/usr/bin/env bash
# One worker's push+pull against a 2-rank allreduce on loopback: reel (ps_push_pull under
# `reel launch -n 2`, tcp) beside the same two exchanges on raw sockets (raw_exchange: one
# connection both ways, blocking; one per direction, blocking; one per direction, polled), the
# four alternated run by run. BUILD holds bin/reel, bin/ps_push_pull, bin/raw_exchange and lib/
# (a copy of a build tree's).
#
#   bench/experiments/raw_vs_reel.sh REPS ITERS BUILD
set -euo pipefail
reps=$1 iters=$2 b=$3
uptime
for ((rep = 1; rep <= reps; rep++)); do
  for v in "0 0" "0 1" "1 1"; do
    read -r spin two <<<"$v"
    "$b/bin/raw_exchange" --reps 1 --iters "$iters" --spin "$spin" --two "$two" | sed "s/^rep=1/rep=$rep raw/"
  done
  out=$("$b/bin/reel" launch -n 2 -- "$b/bin/ps_push_pull" --transport tcp --iters "$iters" 2>/dev/null)
  pp=$(grep -o ' round_trips_per_second=[0-9.]*' <<<"$out" | cut -d= -f2)
  ar=$(grep -o ' calls_per_second=[0-9.]*' <<<"$out" | cut -d= -f2)
  awk -v r="$rep" -v pp="$pp" -v ar="$ar" \
    'BEGIN { printf "rep=%d reel push_pull_per_second=%.2f allreduce_per_second=%.2f ratio=%.3f\n", r, pp, ar, pp / ar }'
  uptime
done
