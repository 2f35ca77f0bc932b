#!/usr/bin/env bash
# tcp's small AllReduce (option allreduce_small_bytes: the data goes with the ranks' agreement on
# the arguments, each rank reduces every rank's data itself) against agreeing first and then
# running the ring (allreduce_small_bytes=0, the path every AllReduce took before), one rank per
# process under `reel launch`, 2 and 3 ranks, alternated REPS times. Each run is
# reel_allreduce_peer's sweep (4 KiB, 16 KiB, 64 KiB, 256 KiB up to MAX_BYTES; the mean of up to
# 1000 calls per size, after a warm-up). On a machine that others load, single runs vary tenfold:
# take many repetitions and read the medians, not a run. Prints every run's raw lines (`ranks mode rep bytes seconds`), the load
# average before and after, and per ranks, mode and size the median over the repetitions.
# Usage: bench/allreduce/tcp_small_allreduce.sh BUILD_DIR [REPS] [MAX_BYTES]
set -euo pipefail
build=${1:?usage: tcp_small_allreduce.sh BUILD_DIR [REPS] [MAX_BYTES]}
reps=${2:-3}
max_bytes=${3:-262144}
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
echo "# $(date -u +%FT%TZ) $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo '?'), load before: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
for ((rep = 1; rep <= reps; rep++)); do
  for ranks in 2 3; do
    for mode in ring small; do
      option=()
      if [[ $mode == ring ]]; then option=(--option allreduce_small_bytes=0); fi
      "$build/bin/reel" launch -n "$ranks" -- "$build/bin/reel_allreduce_peer" --transport tcp \
        "${option[@]}" --min-bytes 4096 --max-bytes "$max_bytes" --max-calls 1000 2>/dev/null |
        sed 's/^\[rank [0-9]*\] //' | awk -v r="$ranks" -v m="$mode" -v k="$rep" \
          'NF == 2 && $1 ~ /^[0-9]+$/ {print r, m, k, $1, $2}' | tee -a "$raw"
    done
  done
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# median over $reps runs (us per call): ranks bytes ring small small/ring"
sort -k1,1n -k4,4n -k2,2 -k5,5g "$raw" | awk '
  { key = $1 " " $4 " " $2; v[key, ++n[key]] = $5 * 1e6; keys[$1 " " $4] = 1 }
  function median(k,   c) { c = n[k]; return c % 2 ? v[k, (c + 1) / 2] : (v[k, c / 2] + v[k, c / 2 + 1]) / 2 }
  END { for (k in keys) { r = median(k " ring"); s = median(k " small");
          printf "%s %.1f %.1f %.2f\n", k, r, s, s / r } }' | sort -k1,1n -k2,2n
