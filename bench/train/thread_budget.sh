#!/bin/bash
# Training throughput of 2 ranks on one host, with and without the thread budget
# (core/src/train/thread_budget.h), beside mpirun's ranks (bound to a core each) as the peer.
#
#   bench/train/thread_budget.sh BUILD REPS STEPS [--set k=v ...]
#
# BUILD is a build directory (bin/reel, lib/). Cases, alternated within each repetition:
#   launch         reel launch -n 2 (tcp), the budget's default
#   launch_whole   the same with OMP_NUM_THREADS=<cores>: every rank a team as wide as the
#                  machine, what reel did before the budget
#   mpirun         mpirun -n 2 (mpi transport; Open MPI binds each rank to a core)
#   threads        trainer.local_ranks=2 in one process (inproc), the budget's default
#   threads_whole  the same with OMP_NUM_THREADS=<cores>
# Prints examples/s of each run (the trainer's rate over all STEPS), then min/median/max per case.
set -euo pipefail
build=$(cd "$1" && pwd); reps=$2; steps=$3; shift 3
reel=$build/bin/reel
cores=$(nproc)
# shellcheck source=bench/common/two_stream_runs.sh
. "$(dirname "$0")/../common/two_stream_runs.sh"
two_stream_workdir 4 64
common=(--config run.pbtxt --set "trainer.steps=$steps" --set "trainer.log_every_steps=$steps" "$@")
run() {
  local name=$1; shift
  local r
  r=$("$@" 2>&1 | final_rate "$steps")
  echo "$name ${r:-failed}" | tee -a results
}
for ((i = 1; i <= reps; i++)); do
  run launch "$reel" launch -n 2 -- "$reel" train "${common[@]}"
  run launch_whole env OMP_NUM_THREADS="$cores" "$reel" launch -n 2 -- "$reel" train "${common[@]}"
  run mpirun mpirun --allow-run-as-root -n 2 "$reel" train "${common[@]}"
  run threads "$reel" train "${common[@]}" --set trainer.local_ranks=2
  run threads_whole env OMP_NUM_THREADS="$cores" "$reel" train "${common[@]}" --set trainer.local_ranks=2
done
summarize_results examples/s "$reps"
