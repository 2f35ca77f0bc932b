#!/bin/bash
# Training with tcp's AllReduce sleeping against polling-and-yielding on a host whose ranks
# outnumber its cores (the default sleeps there; bench/RESULTS.md): `reel launch -n RANKS --
# reel train` of the two_stream model (hidden 128 / 64, moe head, adam) on synthetic frame-level
# data, batch 16, no evaluation or checkpoints, the modes alternated run by run (bench/ab.py).
#
#   [OUT=DIR] bench/allreduce/train_wait_modes.sh BUILD PAIRS STEPS RANKS [--set k=v ...]
#
#   sleep  transport option allreduce_spin_us=0 (the automatic choice there)
#   poll   allreduce_spin_us=20000 (poll, yielding the core, for up to 20 ms, then sleep)
# Prints examples/s of each run (the trainer's rate over all STEPS) and poll / sleep per pair.
# Every run's output stays in OUT (default bench/out/train_wait_modes_<UTC time>).
set -euo pipefail
build=$(cd "$1" && pwd); pairs=$2; steps=$3; ranks=$4; shift 4
reel=$build/bin/reel
out=$(realpath -m "${OUT:-bench/out/train_wait_modes_$(date -u +%Y%m%dT%H%M%SZ)}")
ab=$(realpath "$(dirname "$0")/../ab.py")
# shellcheck source=bench/common/two_stream_runs.sh
. "$(dirname "$0")/../common/two_stream_runs.sh"
two_stream_workdir 3 16 'transport { name: "tcp" }'
r=$(printf '%q' "$reel")
train="$r launch -n $ranks -- $r train --config run.pbtxt --set trainer.steps=$steps \
--set trainer.log_every_steps=$steps"
extra=
if (($#)); then extra=$(printf ' %q' "$@"); fi
python3 "$ab" --reps "$pairs" --out "$out" \
  --case sleep "$train --set transport.options.allreduce_spin_us=0$extra" \
  --case poll "$train --set transport.options.allreduce_spin_us=20000$extra" \
  --metric "examples_per_s=step $steps/$steps +([0-9.]+) ex/s"
