#!/bin/bash
# `reel eval` of a two_stream checkpoint split over 2 ranks on one host, against one process,
# with and without the thread budget (core/src/train/thread_budget.h), and under mpirun.
#
#   bench/eval/eval_ranks.sh BUILD REPS
#
# BUILD is a build directory (bin/reel, lib/). Data and model as bench/train/thread_budget.sh
# (bench/common/two_stream_runs.sh: 600 frame-level videos, hidden 128 / 64), the checkpoint
# after 2 steps. Cases, alternated within each repetition:
#   alone         one process (its OpenMP team as wide as the machine)
#   launch        reel launch -n 2 (tcp): the ranks split the videos, one thread each (the budget)
#   launch_whole  the same with OMP_NUM_THREADS=<cores>: a machine-wide team per rank
#   mpirun        mpirun -n 2 (mpi transport; Open MPI binds each rank to a core)
# Prints videos/s of each run (wall time of the whole command: start-up, connecting, loading the
# checkpoint, reading and scoring), then min/median/max per case.
set -euo pipefail
build=$(cd "$1" && pwd); reps=$2
reel=$build/bin/reel
cores=$(nproc)
# shellcheck source=bench/common/two_stream_runs.sh
. "$(dirname "$0")/../common/two_stream_runs.sh"
two_stream_workdir 4 16
"$reel" train --config run.pbtxt --set trainer.steps=2 --set trainer.checkpoint_dir=ckpt --quiet \
  >/dev/null
eval_args=(eval --checkpoint ckpt --data 'data/*.tfrecord' --json)
run() {
  local name=$1; shift
  local start end out
  start=$(date +%s.%N)
  out=$("$@" 2>/dev/null) || { echo "$name failed"; return; }
  end=$(date +%s.%N)
  grep -q '"videos": 600' <<<"$out" || { echo "$name: not 600 videos: $out"; return; }
  echo "$name $(awk -v s="$start" -v e="$end" 'BEGIN {printf "%.1f", 600 / (e - s)}')" |
    tee -a results
}
for ((i = 1; i <= reps; i++)); do
  run alone "$reel" "${eval_args[@]}"
  run launch "$reel" launch -n 2 -- "$reel" "${eval_args[@]}"
  run launch_whole env OMP_NUM_THREADS="$cores" "$reel" launch -n 2 -- "$reel" "${eval_args[@]}"
  run mpirun mpirun --allow-run-as-root -n 2 "$reel" "${eval_args[@]}"
done
summarize_results videos/s "$reps"
