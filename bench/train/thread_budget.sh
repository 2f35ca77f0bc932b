#!/bin/bash
# Training throughput of 2 ranks on one host, with and without the thread budget
# (core/src/train/thread_budget.h), beside mpirun's ranks (bound to a core each) as the peer.
#
#   [OUT=DIR] bench/train/thread_budget.sh BUILD REPS STEPS [--set k=v ...]
#
# BUILD is a build directory (bin/reel, lib/). Cases, alternated within each repetition
# (bench/ab.py):
#   launch         reel launch -n 2 (tcp), the budget's default
#   launch_whole   the same with OMP_NUM_THREADS=<cores>: every rank a team as wide as the
#                  machine, what reel did before the budget
#   mpirun         mpirun -n 2 (mpi transport; Open MPI binds each rank to a core)
#   threads        trainer.local_ranks=2 in one process (inproc), the budget's default
#   threads_whole  the same with OMP_NUM_THREADS=<cores>
# Prints examples/s of each run (the trainer's rate over all STEPS), then min/median/max per case
# and each case over `launch` per repetition. Every run's output stays in OUT (default
# bench/out/thread_budget_<UTC time>).
set -euo pipefail
build=$(cd "$1" && pwd); reps=$2; steps=$3; shift 3
reel=$build/bin/reel
cores=$(nproc)
out=$(realpath -m "${OUT:-bench/out/thread_budget_$(date -u +%Y%m%dT%H%M%SZ)}")
ab=$(realpath "$(dirname "$0")/../ab.py")
# shellcheck source=bench/common/two_stream_runs.sh
. "$(dirname "$0")/../common/two_stream_runs.sh"
two_stream_workdir 4 64
r=$(printf '%q' "$reel")
common="--config run.pbtxt --set trainer.steps=$steps --set trainer.log_every_steps=$steps"
if (($#)); then common+=$(printf ' %q' "$@"); fi
python3 "$ab" --reps "$reps" --out "$out" \
  --case launch "$r launch -n 2 -- $r train $common" \
  --case launch_whole "env OMP_NUM_THREADS=$cores $r launch -n 2 -- $r train $common" \
  --case mpirun "mpirun --allow-run-as-root -n 2 $r train $common" \
  --case threads "$r train $common --set trainer.local_ranks=2" \
  --case threads_whole "env OMP_NUM_THREADS=$cores $r train $common --set trainer.local_ranks=2" \
  --metric "examples_per_s=step $steps/$steps +([0-9.]+) ex/s"
