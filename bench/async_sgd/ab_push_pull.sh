#!/usr/bin/env bash
# One worker's push+pull against the same run's allreduce (ps_push_pull: one server and one worker
# under `reel launch -n 2`, tcp on loopback; WORKERS=N: N workers, their round trips summed, against
# the allreduce of all N + 1 ranks), for two or more builds alternated run by run, so that
# the machine's load falls on every build alike. Each BUILD is a directory holding bin/reel,
# bin/ps_push_pull and lib/ (a copy of a build tree's, so a rebuild meanwhile cannot swap them).
# Prints one line per run (push+pull round trips /s, allreduce calls /s, their ratio; then each
# rank's CPU ms and context switches per round trip or call, if its ps_push_pull prints them) and
# `uptime` after every repetition, then each build's min / median / max.
#
#   [WORKERS=N] bench/async_sgd/ab_push_pull.sh REPS ITERS BUILD... [-- ps_push_pull flags, e.g. --option K=V]
set -euo pipefail
reps=$1 iters=$2
shift 2
builds=()
while (($#)) && [[ $1 != -- ]]; do builds+=("$1"); shift; done
(($#)) && shift
results=$(mktemp)
trap 'rm -f "$results"' EXIT
uptime
for ((rep = 1; rep <= reps; rep++)); do
  for b in "${builds[@]}"; do
    out=$("$b/bin/reel" launch -n $((${WORKERS:-1} + 1)) -- "$b/bin/ps_push_pull" --transport tcp \
      --iters "$iters" "$@" 2>/dev/null)
    pp=$(grep -o 'all_workers_round_trips_per_second=[0-9.]*' <<<"$out" | cut -d= -f2)
    ar=$(grep -o ' calls_per_second=[0-9.]*' <<<"$out" | cut -d= -f2)
    awk -v b="$b" -v r="$rep" -v pp="$pp" -v ar="$ar" \
      'BEGIN { printf "%s run %d: push+pull %.2f /s, allreduce %.2f /s, ratio %.3f\n", b, r, pp, ar, pp / ar }' |
      tee -a "$results"
    grep -o 'cpu rank=.*' <<<"$out" | sed 's/^/    /' || true
  done
  uptime
done
for b in "${builds[@]}"; do
  for field in 5 8 11; do  # push+pull, allreduce, ratio
    grep -F "$b run " "$results" | awk -v f=$field '{ gsub(",", "", $f); print $f }' | sort -g |
      awk -v b="$b" -v f=$field '
        BEGIN { name[5] = "push+pull /s"; name[8] = "allreduce /s"; name[11] = "ratio" }
        { v[NR] = $1 }
        END { printf "%s %s: min %s median %s max %s\n", b, name[f], v[1], v[int((NR + 1) / 2)], v[NR] }'
  done
done
