#!/bin/bash
# The sharded update (sync's zero_stage 1, docs/distributed.md) against the plain one: moe
# (configs/moe.pbtxt) on N ranks of one node under `reel launch` (tcp over loopback), one epoch of
# 6,000 synthetic videos made as bench/update/run.sh makes them, no checkpoint written, the two
# alternated (bench/ab.py), each run's own time breakdown (rank 0's, the first printed) and each
# rank's peak RSS (/usr/bin/time; the first rank to exit is read).
#
#   [OUT=DIR] bench/update/sharded.sh BUILD RANKS REPS [LAYOUT]
#
# BUILD is a build directory with bin/reel and the moe and tfrecord plugins. LAYOUT, if given,
# is the tcp transport's allreduce_layout for the plain case (plugins/tcp/README.md): `flat` puts
# its AllReduce on the same TCP ring the sharded case's ReduceScatter and AllGatherShards take
# (the core's ring over tcp's point-to-point), where by default ranks of one host reduce through
# shared memory. The machine is shared: read the ratios, and the load averages in
# OUT/train/runs.jsonl.
set -euo pipefail
build=$(cd "$1" && pwd); ranks=$2; reps=$3; layout=${4:-}
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
  if [[ $1 == 0 && -n $layout ]]; then
    printf ' --set %q' transport.name=tcp "transport.options.allreduce_layout=$layout"
  fi
  # shellcheck disable=SC2016  # expanded by bench/ab.py's bash -c, per run
  printf ' --set %s' 'trainer.metrics_log="$AB_SCRATCH/metrics.jsonl"' \
    'trainer.tensorboard_dir="$AB_SCRATCH/tb"'
}
python3 "$root/bench/ab.py" --reps "$reps" --out "$out/train" \
  --case "plain${layout:+_$layout}" "$(train 0)" --case sharded "$(train 1)" \
  --metric 'compute=compute ([0-9.]+) s' --metric 'update=update ([0-9.]+) s' \
  --metric 'wait=wait ([0-9.]+) s' --metric 'total=of ([0-9.]+) s;' --metric wall=wall \
  --metric 'maxrss_kb=maxrss_kb=([0-9]+)' --quotient update_share=update/total
echo "raw file: $out/train/runs.jsonl"
