#!/bin/bash
# The update at memory speed (docs/benchmarks.md, "update"): the machine's bandwidth beside each
# update rule, and the sync optimizer's update and moe's one-node training before and after.
#
#   [OUT=DIR] bench/update/run.sh BUILD BASELINE REPS
#
# BUILD is this tree's build directory (bin/update_bench, bin/reel, the moe and tfrecord
# plugins); BASELINE a build of the commit to compare with, with this folder copied into its tree
# so it has bin/update_bench too (its adam_norm then takes the norm and Adam in two passes, as
# that commit's optimizer does). Three parts, every one alternated:
#   1. BUILD/bin/update_bench --reps REPS: copy, triad, each rule, the optimizer's fused update
#      and the norm alone over 40 M floats on 1 and 2 threads, the programs alternated within
#      each repetition -> OUT/bandwidth.json
#   2. the optimizer's update alone (adam_norm, 40 M floats), BASELINE and BUILD as alternated
#      processes (bench/ab.py) -> OUT/step/runs.jsonl
#   3. moe (configs/moe.pbtxt) on one node: 6,000 synthetic videos of 3,862 classes made as
#      bench/plan/one_node.py makes them, one epoch, no checkpoint written, BASELINE and BUILD
#      alternated (bench/ab.py) -> OUT/train/runs.jsonl, each run's time breakdown
# Then OUT/update.json holds all three (bench/results.py reads it): "bandwidth" (update_bench's
# object), "step" and "train" (bench/ab.py's records, with each run's load average).
# The machine is shared, so read ratios.
set -euo pipefail
build=$(cd "$1" && pwd); base=$(cd "$2" && pwd); reps=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(realpath -m "${OUT:-$root/bench/out/update_$(date -u +%Y%m%dT%H%M%SZ)}")
ab=$root/bench/ab.py
mkdir -p "$out"

"$build/bin/update_bench" --reps "$reps" > "$out/bandwidth.json"

q() { printf '%q' "$1"; }
python3 "$ab" --reps "$reps" --out "$out/step" \
  --case baseline "$(q "$base/bin/update_bench") --reps 1 --only adam_norm" \
  --case branch "$(q "$build/bin/update_bench") --reps 1 --only adam_norm" \
  --metric 'one_thread="adam_norm/1": \[([0-9.]+)\]' \
  --metric 'two_threads="adam_norm/2": \[([0-9.]+)\]'

data=$out/data
"$build/bin/reel" synth --out "$data" --videos 6000 --test-videos 16 --classes 3862 \
  --level video --shards 4 --seed 1 > /dev/null
# A command line for bench/ab.py's bash -c: the run's logs go to its scratch folder.
train() {
  printf '%s train --config %s' "$(q "$1/bin/reel")" "$(q "$root/configs/moe.pbtxt")"
  printf ' --set %q' "data.options.files=$data/train/*.tfrecord" \
    "eval_data.options.files=$data/test/*.tfrecord" trainer.epochs=1 trainer.steps=0 \
    trainer.checkpoint_dir=
  # shellcheck disable=SC2016  # expanded by bench/ab.py's bash -c, per run
  printf ' --set %s' 'trainer.metrics_log="$AB_SCRATCH/metrics.jsonl"' \
    'trainer.tensorboard_dir="$AB_SCRATCH/tb"'
}
python3 "$ab" --reps "$reps" --out "$out/train" \
  --case baseline "$(train "$base")" --case branch "$(train "$build")" \
  --metric 'compute=compute ([0-9.]+) s' --metric 'update=update ([0-9.]+) s' \
  --metric 'total=of ([0-9.]+) s;' --metric wall=wall --quotient update_share=update/total
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
runs = {k: [json.loads(l) for l in open(f"{out}/{k}/runs.jsonl") if l.strip()]
        for k in ("step", "train")}
with open(f"{out}/update.json", "w") as f:
    json.dump({"bandwidth": json.load(open(f"{out}/bandwidth.json")), **runs}, f, indent=1)
PY
echo "raw file: $out/update.json"
