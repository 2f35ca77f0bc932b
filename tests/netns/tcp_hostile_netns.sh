#!/usr/bin/env bash
# A flood at every listener of a tcp run between simulated hosts (tests/netns/netns.sh: one
# network namespace per rank behind a bridge), from before the group forms until the run ends:
# three namespaces each run `reel launch` for one rank of `reel train`, a fourth runs the attacker
# (reel_tcp_flood, plugins/tcp/tests/flood_main.cc), which holds 200 silent connections, 50 of
# random bytes and 50 of a frame header claiming 2^62 bytes open to rank 0's coordinator port and
# to ranks 1's and 2's listeners (option listen_port, the same port in every namespace), opening
# a new one whenever a rank closes one.
#
#   tests/netns/tcp_hostile_netns.sh BUILD/bin/reel BUILD/bin/reel_tcp_flood
#
# Checked: every launch exits 0, every rank trains every step, no rank logs an error, and every
# flood reached its listener and was turned away there. To be sure part of the flood lands during
# training (not only while forming, or after a fast run ended), rank 2 is paused with SIGSTOP
# mid-run until ranks 0 and 1 have each closed at least 100 more of the flood's connections.
# Prints how long the group took to form under the flood (the launches' start to every rank's
# first transport line after forming). The namespaces (unique per run) are deleted on every exit;
# traffic goes only to them. Exit 77 (skip) where namespaces cannot be made.
set -euo pipefail
reel=$(realpath "$1")
flood=$(realpath "$2")
here=$(cd "$(dirname "$0")" && pwd)
name=reelhs$$
work=$(mktemp -d)
pids=()
flood_pid=
cleanup() {
  ip netns pids "$name-r2" 2>/dev/null | xargs -r kill -CONT 2>/dev/null || true
  for p in "${pids[@]}" $flood_pid; do kill -9 "$p" 2>/dev/null || true; done
  "$here/netns.sh" down "$name"
  rm -rf "$work"
}
trap cleanup EXIT

"$here/netns.sh" up "$name" 4 || exit $?

steps=300
listen_port=29600
"$reel" synth --out "$work/data" --videos 120 --classes 16 --level video --shards 3 --seed 4 >/dev/null
cat >"$work/config.pbtxt" <<CONFIG
data {
  name: "tfrecord"
  options { key: "files" value: "$work/data/*.tfrecord" }
  options { key: "level" value: "video" }
}
model { name: "logistic" }
transport {
  name: "tcp"
  timeout_seconds: 120
  options { key: "listen_port" value: "$listen_port" }
  options { key: "handshake_timeout_ms" value: "1000" }
  options { key: "heartbeat_timeout_ms" value: "120000" }
}
trainer {
  steps: $steps
  batch_size: 4
  seed: 1
  num_classes: 16
  log_every_steps: 1
  checkpoint_dir: "$work/ckpt"
  metrics_log: "$work/metrics.jsonl"
}
CONFIG

coordinator=$("$here/netns.sh" addr 0):29500
export REEL_SECRET="netns-hostile-$$-$RANDOM"
# shellcheck source=tests/netns/three_nodes.sh
source "$here/three_nodes.sh"

targets=("$coordinator" "$("$here/netns.sh" addr 1):$listen_port" "$("$here/netns.sh" addr 2):$listen_port")
specs=()
for t in "${targets[@]}"; do
  specs+=("$t:silent:200" "$t:random_bytes:50" "$t:oversized_length:50")
done
ip netns exec "$name-r3" "$flood" --status "$work/flood.status" "${specs[@]}" >"$work/flood.out" &
flood_pid=$!

start=$(date +%s.%N)
start_nodes node
formed() {
  local r
  for r in 0 1 2; do
    grep -q "^\[rank $r\] reel tcp: AllReduce waits by" "$work/node$r.log" 2>/dev/null || return 1
  done
}
# Generous (not a timing assertion): only a group that never forms reaches the limit.
for ((i = 0; i < 12000; i++)); do
  formed && break
  nodes_alive "the group formed"
  sleep 0.01
done
formed || fail "the group did not form in 120 s under the flood"
echo "3 ranks formed $(echo "$(date +%s.%N) - $start" | bc) s after the launches started, under a flood of 300 connections at each of 3 listeners"

for ((i = 0; i < 1500; i++)); do
  (($( (wc -l <"$work/metrics.jsonl") 2>/dev/null || echo 0) >= 3)) && break
  nodes_alive "training"
  sleep 0.1
done
ip netns pids "$name-r2" | xargs -r kill -STOP
! grep -q "^\[rank 2\] trained" "$work/node2.log" || fail "rank 2 finished before the stall"
at_stall=$(wc -l <"$work/metrics.jsonl")
# closed TARGET: connections to TARGET the rank closed so far, over every kind.
closed() { awk -v t="$1" '$1 == t {n += $7} END {print n + 0}' "$work/flood.status"; }
before0=$(closed "${targets[0]}")
before1=$(closed "${targets[1]}")
grew=0
for ((i = 0; i < 600; i++)); do  # up to 60 s; seconds normally
  sleep 0.1
  if (($(closed "${targets[0]}") - before0 >= 100 && $(closed "${targets[1]}") - before1 >= 100)); then
    grew=1
    break
  fi
done
ip netns pids "$name-r2" | xargs -r kill -CONT
((grew)) || fail "ranks 0 and 1 did not close 100 flood connections each while training"
echo "while rank 2 was paused (step $at_stall of $steps), rank 0 closed $(($(closed "${targets[0]}") - before0)) and rank 1 $(($(closed "${targets[1]}") - before1)) flood connections"

wait_nodes
kill -TERM "$flood_pid"
wait "$flood_pid" || fail "reel_tcp_flood exited $?"
flood_pid=
cat "$work/flood.out"
for r in 0 1 2; do
  ((codes[r] == 0)) || fail "node $r exited ${codes[r]}"
  grep -q "^\[rank $r\] trained $steps steps" "$work/node$r.log" ||
    fail "rank $r did not train $steps steps"
  ! grep -E "UNAVAILABLE|DEADLINE_EXCEEDED|DATA_LOSS|INTERNAL|error" "$work/node$r.log" ||
    fail "node $r logged an error"
done
(($(wc -l <"$work/flood.out") == ${#specs[@]})) || fail "the flood reported $(wc -l <"$work/flood.out") targets, not ${#specs[@]}"
while read -r target kind _ _ opened _ cut; do
  ((opened > 0 && cut > 0)) || fail "the flood at $target ($kind) was accepted $opened and closed $cut times"
done <"$work/flood.out"
echo "tcp_hostile_netns: every rank trained $steps steps under the flood, no error"
