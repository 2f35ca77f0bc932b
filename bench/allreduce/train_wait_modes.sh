#!/bin/bash
# Training with tcp's AllReduce sleeping against polling-and-yielding on a host whose ranks
# outnumber its cores (the default sleeps there; bench/RESULTS.md): `reel launch -n RANKS --
# reel train` of the two_stream model (hidden 128 / 64, moe head, adam) on synthetic frame-level
# data, batch 16, no evaluation or checkpoints, the modes alternated run by run.
#
#   bench/allreduce/train_wait_modes.sh BUILD PAIRS STEPS RANKS [--set k=v ...]
#
#   sleep  transport option allreduce_spin_us=0 (the automatic choice there)
#   poll   allreduce_spin_us=20000 (poll, yielding the core, for up to 20 ms, then sleep)
# Prints examples/s of each run (the trainer's rate over all STEPS) and, per pair, poll / sleep.
set -euo pipefail
build=$(cd "$1" && pwd); pairs=$2; steps=$3; ranks=$4; shift 4
reel=$build/bin/reel
# shellcheck source=bench/common/two_stream_runs.sh
. "$(dirname "$0")/../common/two_stream_runs.sh"
two_stream_workdir 3 16 'transport { name: "tcp" }'
train() {
  "$reel" launch -n "$ranks" -- "$reel" train --config run.pbtxt --set "trainer.steps=$steps" \
    --set "trainer.log_every_steps=$steps" --set "transport.options.allreduce_spin_us=$1" \
    "${@:2}" 2>&1 | final_rate "$steps"
}
for ((i = 1; i <= pairs; i++)); do
  s=$(train 0 "$@"); p=$(train 20000 "$@")
  echo "pair $i: sleep $s poll $p poll/sleep $(awk -v a="$p" -v b="$s" 'BEGIN {printf "%.3f", a / b}')"
done
