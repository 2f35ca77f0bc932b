#!/bin/bash
# `reel eval` of a two_stream checkpoint split over 2 ranks on one host, against one process,
# with and without the thread budget (core/src/train/thread_budget.h), and under mpirun.
#
#   [OUT=DIR] bench/eval/eval_ranks.sh BUILD REPS
#
# BUILD is a build directory (bin/reel, lib/). Data and model as bench/train/thread_budget.sh
# (bench/common/two_stream_runs.sh: 600 frame-level videos, hidden 128 / 64), the checkpoint
# after 2 steps. Cases, alternated within each repetition (bench/ab.py):
#   alone         one process (its OpenMP team as wide as the machine)
#   launch        reel launch -n 2 (tcp): the ranks split the videos, one thread each (the budget)
#   launch_whole  the same with OMP_NUM_THREADS=<cores>: a machine-wide team per rank
#   mpirun        mpirun -n 2 (mpi transport; Open MPI binds each rank to a core)
# Prints videos/s of each run (the videos the merged metrics count over the wall time of the
# whole command: start-up, connecting, loading the checkpoint, reading and scoring; `videos`
# must be 600 in every run), then min/median/max per case and each over `alone` per repetition.
# Every run's output stays in OUT (default bench/out/eval_ranks_<UTC time>).
set -euo pipefail
build=$(cd "$1" && pwd); reps=$2
reel=$build/bin/reel
cores=$(nproc)
out=$(realpath -m "${OUT:-bench/out/eval_ranks_$(date -u +%Y%m%dT%H%M%SZ)}")
ab=$(realpath "$(dirname "$0")/../ab.py")
# shellcheck source=bench/common/two_stream_runs.sh
. "$(dirname "$0")/../common/two_stream_runs.sh"
two_stream_workdir 4 16
"$reel" train --config run.pbtxt --set trainer.steps=2 --set trainer.checkpoint_dir=ckpt --quiet \
  >/dev/null
r=$(printf '%q' "$reel")
eval_args="eval --checkpoint ckpt --data 'data/*.tfrecord' --json"
python3 "$ab" --reps "$reps" --out "$out" \
  --case alone "$r $eval_args" \
  --case launch "$r launch -n 2 -- $r $eval_args" \
  --case launch_whole "env OMP_NUM_THREADS=$cores $r launch -n 2 -- $r $eval_args" \
  --case mpirun "mpirun --allow-run-as-root -n 2 $r $eval_args" \
  --metric 'videos="videos": ([0-9]+)' --metric wall=wall --quotient videos_per_s=videos/wall
