#!/usr/bin/env bash
# The receiver's peak RSS under a sender far faster than it (docs/reliability.md, "Stuck peers,
# memory and signals"): 2 tcp ranks on loopback under `reel launch`, the default per-peer receive
# budget against none (a budget larger than everything sent), alternated, REPS times each.
# Usage: bench/transport/receive_budget.sh BUILD_DIR [REPS] [SECONDS]  (prints one line per run)
set -euo pipefail
build=${1:?usage: receive_budget.sh BUILD_DIR [REPS] [SECONDS]}
reps=${2:-3}
seconds=${3:-60}
for ((rep = 1; rep <= reps; rep++)); do
  for budget in default unbounded; do
    options=()
    if [[ $budget == unbounded ]]; then options=(--option receive_budget_bytes=4611686018427387904); fi
    line=$("$build/bin/reel" launch -n 2 -- "$build/bin/receive_budget_peer" --transport tcp \
      "${options[@]}" --messages 4096 --bytes 1048576 --rate 40 --seconds "$seconds" |
      grep 'receiver:')
    echo "rep $rep budget $budget: $line"
  done
done
