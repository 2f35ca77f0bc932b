#!/bin/bash
# The sharded update (sync's zero_stage 1, docs/distributed.md) against the plain one: moe
# (configs/moe.pbtxt) on N ranks of one node under `reel launch` (tcp over loopback), one epoch of
# 6,000 synthetic videos made as bench/update/run.sh makes them, no checkpoint written, the two
# alternated (bench/ab.py), each run's own time breakdown (rank 0's, the first printed) and each
# rank's peak RSS (/usr/bin/time; the first rank to exit is read).
#
#   [OUT=DIR] bench/update/sharded.sh BUILD RANKS REPS
#
# BUILD is a build directory with bin/reel and the moe and tfrecord plugins. The machine is
# shared: read the ratios, and the load averages in OUT/runs.jsonl.
set -euo pipefail
build=$(cd "$1" && pwd); ranks=$2; reps=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(realpath -m "${OUT:-$root/bench/out/sharded_$(date -u +%Y%m%dT%H%M%SZ)}")
mkdir -p "$out"
q() { printf '%q' "$1"; }

data=$out/data
"$build/bin/reel" synth --out "$data" --videos 6000 --test-videos 16 --classes 3862 \
  --level video --shards 4 --seed 1 > /dev/null
train() {
  printf '%s launch -n %s -- /usr/bin/time -f maxrss_kb=%%M %s train --config %s' \
    "$(q "$build/bin/reel")" "$ranks" "$(q "$build/bin/reel")" "$(q "$root/configs/moe.pbtxt")"
  printf ' --set %q' "data.options.files=$data/train/*.tfrecord" \
    "eval_data.options.files=$data/test/*.tfrecord" trainer.epochs=1 trainer.steps=0 \
    trainer.checkpoint_dir= "optimizer.options.zero_stage=$1"
  # shellcheck disable=SC2016  # expanded by bench/ab.py's bash -c, per run
  printf ' --set %s' 'trainer.metrics_log="$AB_SCRATCH/metrics.jsonl"' \
    'trainer.tensorboard_dir="$AB_SCRATCH/tb"'
}
python3 "$root/bench/ab.py" --reps "$reps" --out "$out/train" \
  --case plain "$(train 0)" --case sharded "$(train 1)" \
  --metric 'compute=compute ([0-9.]+) s' --metric 'update=update ([0-9.]+) s' \
  --metric 'wait=wait ([0-9.]+) s' --metric 'total=of ([0-9.]+) s;' --metric wall=wall \
  --metric 'maxrss_kb=maxrss_kb=([0-9]+)' --quotient update_share=update/total
echo "raw file: $out/train/runs.jsonl"
