#!/usr/bin/env bash
# Raw Open MPI against reel mpi at one small size, run by run: each repetition runs raw MPI
# (MPI_THREAD_SINGLE), reel mpi, reel mpi of a baseline build if one is given, and raw MPI at
# MPI_THREAD_MULTIPLE, one after the other, and prints their microseconds per call and the ratio
# raw / reel (above 1, reel is faster). For sizes where run_allreduce.py's medians of separate runs
# are too coarse: on a 2-core VM single runs of one program at 4 KiB differ by 2x, so runs taken
# seconds apart compare like with like.
#
#   BUILD=DIR [BASELINE=DIR] [REEL_OPTIONS="..."] [MCA="..."] bench/allreduce/mpi_pairs.sh REPS BYTES RANKS
# DIR holds bin/ (mpi_allreduce_peer, reel_allreduce_peer) and lib/ of a release build.
# REEL_OPTIONS: reel_allreduce_peer's options for reel (default: blocking_allreduce and
# thread_level=serialized; "" for the default AllReduce). MCA: more mpirun arguments for every
# program (e.g. "--mca btl self,tcp").
set -euo pipefail
reps=$1 bytes=$2 ranks=$3
b=${BUILD:?BUILD=DIR: a copy of a build tree, bin/ and lib/}
base=${BASELINE:-}
read -r -a options <<< "${REEL_OPTIONS---option blocking_allreduce=true --option thread_level=serialized}"
read -r -a mca <<< "${MCA:-}"
mpirun=(mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl_tcp_if_include lo
        --mca oob_tcp_if_include lo "${mca[@]}" -n "$ranks")
sweep=(--min-bytes "$bytes" --max-bytes "$bytes" --max-calls 50000)
seconds() {
  local dir=$1
  shift
  LD_LIBRARY_PATH=$dir/lib "${mpirun[@]}" "$@" "${sweep[@]}" 2>/dev/null |
    awk 'NF == 2 && $1 ~ /^[0-9]+$/ {print $2}'
}
for ((r = 1; r <= reps; r++)); do
  raw=$(seconds "$b" "$b/bin/mpi_allreduce_peer")
  reel=$(seconds "$b" "$b/bin/reel_allreduce_peer" --transport mpi "${options[@]}")
  old=0
  [[ -n $base ]] && old=$(seconds "$base" "$base/bin/reel_allreduce_peer" --transport mpi "${options[@]}")
  mt=$(seconds "$b" "$b/bin/mpi_allreduce_peer" --thread-multiple)
  awk -v r="$r" -v a="$raw" -v b="$reel" -v o="$old" -v c="$mt" 'BEGIN {
    printf "%d mpi_us=%.3f reel_us=%.3f", r, a * 1e6, b * 1e6
    if (o > 0) printf " reel_baseline_us=%.3f", o * 1e6
    printf " mpi_mt_us=%.3f mpi/reel=%.3f\n", c * 1e6, a / b }'
done
