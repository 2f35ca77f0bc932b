#!/usr/bin/env bash
# Raw Open MPI against reel mpi at one small size, run by run (bench/ab.py): each repetition runs
# raw MPI (MPI_THREAD_SINGLE), reel mpi, reel mpi of a baseline build if one is given, and raw MPI
# at MPI_THREAD_MULTIPLE, one after the other, and prints their seconds per call, then per case
# min / median / max and each case's time over raw MPI's per repetition (below 1, faster than
# raw MPI). For sizes where run_allreduce.py's medians of separate runs are too coarse: on a
# 2-core VM single runs of one program at 4 KiB differ by 2x, so runs taken seconds apart compare
# like with like. Every run's output stays in OUT (default bench/out/mpi_pairs_<UTC time>).
#
#   BUILD=DIR [BASELINE=DIR] [REEL_OPTIONS="..."] [MCA="..."] [OUT=DIR] bench/allreduce/mpi_pairs.sh REPS BYTES RANKS
# DIR holds bin/ (mpi_allreduce_peer, reel_allreduce_peer) and lib/ of a release build.
# REEL_OPTIONS: reel_allreduce_peer's options for reel (default: blocking_allreduce and
# thread_level=serialized; "" for the default AllReduce). MCA: more mpirun arguments for every
# program (e.g. "--mca btl self,tcp").
set -euo pipefail
reps=$1 bytes=$2 ranks=$3
b=${BUILD:?BUILD=DIR: a copy of a build tree, bin/ and lib/}
base=${BASELINE:-}
options=${REEL_OPTIONS---option blocking_allreduce=true --option thread_level=serialized}
out=${OUT:-bench/out/mpi_pairs_$(date -u +%Y%m%dT%H%M%SZ)}
mpirun="mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl_tcp_if_include lo \
--mca oob_tcp_if_include lo ${MCA:-} -n $ranks"
sweep="--min-bytes $bytes --max-bytes $bytes --max-calls 50000"
run() {  # DIR PROGRAM ARGS: the command line of one case
  printf 'LD_LIBRARY_PATH=%q %s %q %s %s' "$1/lib" "$mpirun" "$1/bin/$2" "$3" "$sweep"
}
cases=(--case mpi "$(run "$b" mpi_allreduce_peer '')"
       --case reel "$(run "$b" reel_allreduce_peer "--transport mpi $options")")
if [[ -n $base ]]; then
  cases+=(--case reel_baseline "$(run "$base" reel_allreduce_peer "--transport mpi $options")")
fi
cases+=(--case mpi_mt "$(run "$b" mpi_allreduce_peer --thread-multiple)")
exec python3 "$(dirname "$0")/../ab.py" --reps "$reps" --out "$out" "${cases[@]}" \
  --metric 's_per_call=^[0-9]+ +([0-9.eE+-]+)$'
