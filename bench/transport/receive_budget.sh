#!/usr/bin/env bash
# The receiver's peak RSS under a sender far faster than it (docs/reliability.md, "Stuck peers,
# memory and signals"): 2 tcp ranks on loopback under `reel launch`, the default per-peer receive
# budget against none (a budget larger than everything sent), alternated, REPS times each
# (bench/ab.py). Prints per run the receiver's peak RSS (KiB) and the messages that arrived
# intact, then min / median / max per case. Every run's output stays in OUT (default
# bench/out/receive_budget_<UTC time>).
# Usage: [OUT=DIR] bench/transport/receive_budget.sh BUILD_DIR [REPS] [SECONDS]
set -euo pipefail
build=${1:?usage: receive_budget.sh BUILD_DIR [REPS] [SECONDS]}
reps=${2:-3}
seconds=${3:-60}
out=${OUT:-bench/out/receive_budget_$(date -u +%Y%m%dT%H%M%SZ)}
run="$(printf '%q' "$build/bin/reel") launch -n 2 -- $(printf '%q' "$build/bin/receive_budget_peer") \
--transport tcp --messages 4096 --bytes 1048576 --rate 40 --seconds $seconds"
exec python3 "$(dirname "$0")/../ab.py" --reps "$reps" --out "$out" \
  --case default "$run" \
  --case unbounded "$run --option receive_budget_bytes=4611686018427387904" \
  --metric 'peak_rss_kib=receiver: .*peak RSS ([0-9]+) KiB' \
  --metric 'intact=receiver: ([0-9]+) of [0-9]+ messages intact'
