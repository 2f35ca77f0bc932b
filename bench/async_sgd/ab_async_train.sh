#!/usr/bin/env bash
# Wall time of a short async_sgd training run for two or more builds, alternated run by run:
# configs/logistic_async.pbtxt (4.4M parameters, the real video-level shards) as one server and two
# workers under `reel launch -n 3` over tcp, 3 epochs. Each BUILD is a directory holding bin/reel
# and lib/ (a copy of a build tree's). Prints one line per run (wall seconds, examples trained by
# all workers, held-out GAP@20), then each build's min / median / max and, for two builds, the
# first's wall time over the second's per repetition. Run from the repository root.
#
#   bench/async_sgd/ab_async_train.sh REPS BUILD...
set -euo pipefail
reps=$1
shift
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for ((i = 1; i <= reps; i++)); do
  for b in "$@"; do
    d=$(mktemp -d)
    start=$(date +%s.%N)
    "$b/bin/reel" launch -n 3 -- "$b/bin/reel" train --config configs/logistic_async.pbtxt \
      --set trainer.local_ranks=1 --set trainer.epochs=3 --set "trainer.checkpoint_dir=$d/ck" \
      --set "trainer.metrics_log=$d/m.jsonl" --set "trainer.tensorboard_dir=$d/tb" >"$d/out" 2>&1 ||
      { echo "$b run $i failed:"; tail -5 "$d/out"; rm -rf "$d"; continue; }
    end=$(date +%s.%N)
    examples=$(grep -o 'trained [0-9]* steps ([0-9]* examples by all' "$d/out" | grep -o '([0-9]*' | tr -d '(')
    gap=$(grep -o 'eval: GAP@20 [0-9.]*' "$d/out" | head -1 | awk '{print $3}')
    awk -v b="$b" -v i="$i" -v s="$start" -v e="$end" -v x="$examples" -v g="$gap" \
      'BEGIN { printf "%s run %d wall %.3f examples %s gap %s\n", b, i, e - s, x, g }' | tee -a "$results"
    rm -rf "$d"
  done
done
for b in "$@"; do
  grep -F "$b run " "$results" | awk '{ print $5 }' | sort -g |
    awk -v b="$b" '{ v[NR] = $1 } END { printf "%s wall s: min %s median %s max %s\n", b, v[1], v[int((NR + 1) / 2)], v[NR] }'
done
if (($# == 2)); then
  awk -v a="$1" -v b="$2" '$1 == a { x[$3] = $5 } $1 == b { y[$3] = $5 }
    END { for (i in x) if (i in y) printf "%.3f\n", x[i] / y[i] }' "$results" | sort -g |
    awk -v a="$1" -v b="$2" '{ v[NR] = $1 } END { printf "%s / %s wall per repetition: %s .. %s, median %s\n", a, b, v[1], v[NR], v[int((NR + 1) / 2)] }'
fi
