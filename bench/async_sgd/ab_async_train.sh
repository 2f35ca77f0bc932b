#!/usr/bin/env bash
# Wall time of a short async_sgd training run for two or more builds, alternated run by run
# (bench/ab.py): configs/logistic_async.pbtxt (4.4M parameters, the real video-level shards) as
# one server and two workers under `reel launch -n 3` over tcp, 3 epochs. Each BUILD is a
# directory holding bin/reel and lib/ (a copy of a build tree's). Prints per run the wall seconds,
# examples trained by all workers and held-out GAP@20, then each build's min / median / max and
# each build's over the first's per repetition. Run from the repository root. Every run's output
# stays in OUT (default bench/out/ab_async_train_<UTC time>).
#
#   [OUT=DIR] bench/async_sgd/ab_async_train.sh REPS BUILD...
set -euo pipefail
reps=$1
shift
out=${OUT:-bench/out/ab_async_train_$(date -u +%Y%m%dT%H%M%SZ)}
cases=()
for b in "$@"; do
  cases+=(--case "$b" "$(printf '%q' "$b/bin/reel") launch -n 3 -- $(printf '%q' "$b/bin/reel") train \
--config configs/logistic_async.pbtxt --set trainer.local_ranks=1 --set trainer.epochs=3 \
--set trainer.checkpoint_dir=\$AB_SCRATCH/ck --set trainer.metrics_log=\$AB_SCRATCH/m.jsonl \
--set trainer.tensorboard_dir=\$AB_SCRATCH/tb")
done
exec python3 "$(dirname "$0")/../ab.py" --reps "$reps" --out "$out" "${cases[@]}" \
  --metric wall=wall --metric 'examples=trained [0-9]+ steps \(([0-9]+) examples by all' \
  --metric 'gap=eval: GAP@20 ([0-9.]+)'
