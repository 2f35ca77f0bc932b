#!/usr/bin/env bash
# tcp's small AllReduce (option allreduce_small_bytes: the data goes with the ranks' agreement on
# the arguments, each rank reduces every rank's data itself) against agreeing first and then
# running the ring (allreduce_small_bytes=0, the path every AllReduce took before), one rank per
# process under `reel launch`, 2 and 3 ranks, the four cases alternated REPS times (bench/ab.py).
# Each run is reel_allreduce_peer's sweep (4 KiB, 16 KiB, 64 KiB, 256 KiB up to MAX_BYTES; the
# mean of up to 1000 calls per size, after a warm-up). On a machine that others load, single runs
# vary tenfold: take many repetitions and read the medians, not a run. Prints per run and size the
# seconds per call, then per case and size min / median / max and small / ring per repetition.
# Every run's output stays in OUT (default bench/out/tcp_small_allreduce_<UTC time>).
# Usage: [OUT=DIR] bench/allreduce/tcp_small_allreduce.sh BUILD_DIR [REPS] [MAX_BYTES]
set -euo pipefail
build=${1:?usage: tcp_small_allreduce.sh BUILD_DIR [REPS] [MAX_BYTES]}
reps=${2:-3}
max_bytes=${3:-262144}
out=${OUT:-bench/out/tcp_small_allreduce_$(date -u +%Y%m%dT%H%M%SZ)}
cases=()
for ranks in 2 3; do
  for mode in ring small; do
    option=
    if [[ $mode == ring ]]; then option=" --option allreduce_small_bytes=0"; fi
    cases+=(--case "${ranks}_$mode" "$(printf '%q' "$build/bin/reel") launch -n $ranks -- \
$(printf '%q' "$build/bin/reel_allreduce_peer") --transport tcp$option --min-bytes 4096 \
--max-bytes $max_bytes --max-calls 1000")
  done
done
exec python3 "$(dirname "$0")/../ab.py" --reps "$reps" --out "$out" "${cases[@]}" \
  --metric 's_per_call=^(?:\[rank \d+\] )?(?P<key>\d+) +(?P<value>[0-9.eE+-]+)$' \
  --ratio 2_small/2_ring --ratio 3_small/3_ring
