#!/usr/bin/env bash
# Faults a tcp run must survive without any error: three hosts, simulated (tests/netns/netns.sh:
# one network namespace per rank behind a bridge), each running `reel launch` for one rank of
# `reel train` over the tcp transport, rank 0's address as the coordinator. A fourth namespace
# holds no rank (the intruder's host in `intruders`).
#
#   tests/netns/tcp_survives_netns.sh blip BUILD/bin/reel
#     synchronous training; rank 2's link is set down for one second (`ip link set eth0 down` in
#     its namespace: no reset, no FIN; its peers only stop hearing from it, and its own sends find
#     no route), then up again. One second is far below the heartbeat timeout (15 s, the default)
#     and the collectives' (60 s): TCP retransmits what was lost and the run goes on.
#   tests/netns/tcp_survives_netns.sh intruders BUILD/bin/reel
#     async_sgd, rank 0 the parameter server; its port (the coordinator's) is reached from the
#     fourth namespace by garbage bytes, by a connection that stays silent (half-open: it never
#     sends its half of the handshake) and by a `reel train` rank holding the wrong secret. Rank 0
#     drops each and counts them by source in its line of drops ("dropped 3 connection(s) that
#     did not authenticate in the last 10 s (from 10.77.0.4: 3): ..."), and the run goes on.
# Checked, in both: every launch exits 0, every worker trains every step (the server serves until
# they finish), no rank logs an error.
# To be sure the fault lands mid-run (and not after a fast run ended), rank 2 (a worker) is paused
# with SIGSTOP while the fault starts: no rank can finish without it. The pause and the fault last
# seconds at most, far below the heartbeat timeout. The namespaces (unique per run) are deleted on
# every exit. Exit 77 (skip) where namespaces cannot be made.
set -euo pipefail
mode=$1
reel=$(realpath "$2")
here=$(cd "$(dirname "$0")" && pwd)
[[ "$mode" == blip || "$mode" == intruders ]] || { echo "usage: $0 blip|intruders REEL" >&2; exit 2; }
name=reelsv$$
work=$(mktemp -d)
pids=()
cleanup() {
  # A paused rank would outlive the test: wake it before killing.
  ip netns pids "$name-r2" 2>/dev/null | xargs -r kill -CONT 2>/dev/null || true
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  "$here/netns.sh" down "$name"
  rm -rf "$work"
}
trap cleanup EXIT

# Exit 77 (CTest: skipped) when namespaces cannot be made here; netns.sh has said why.
"$here/netns.sh" up "$name" 4 || exit $?

steps=300
"$reel" synth --out "$work/data" --videos 120 --classes 16 --level video --shards 3 --seed 4 >/dev/null
optimizer=""
[[ "$mode" == intruders ]] &&
  optimizer='optimizer { name: "async_sgd" options { key: "rule" value: "adagrad" } }'
cat >"$work/config.pbtxt" <<CONFIG
data {
  name: "tfrecord"
  options { key: "files" value: "$work/data/*.tfrecord" }
  options { key: "level" value: "video" }
}
model { name: "logistic" }
$optimizer
transport {
  name: "tcp"
  timeout_seconds: 60
  options { key: "heartbeat_ms" value: "100" }
  options { key: "handshake_timeout_ms" value: "1000" }
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
export REEL_SECRET="netns-survives-$$-$RANDOM"
# shellcheck source=tests/netns/three_nodes.sh
source "$here/three_nodes.sh"
start_nodes node

# Training is under way: a few steps are in the metrics log (waits generously; not a timing
# assertion). Then rank 2 pauses: from here no rank can finish before it continues.
for ((i = 0; i < 1500; i++)); do
  (($( (wc -l <"$work/metrics.jsonl") 2>/dev/null || echo 0) >= 5)) && break
  nodes_alive "the fault"
  sleep 0.1
done
ip netns pids "$name-r2" | xargs -r kill -STOP
nodes_alive "the fault"
# Rank 2 (a worker in both modes) has not finished: the run (under async_sgd, the server) cannot.
! grep -q "^\[rank 2\] trained" "$work/node2.log" || fail "rank 2 finished before the fault"
done_steps=$(wc -l <"$work/metrics.jsonl")

intruder() { ip netns exec "$name-r3" "$@"; }
if [[ "$mode" == blip ]]; then
  ip -n "$name-r2" link set eth0 down
  ip netns pids "$name-r2" | xargs -r kill -CONT  # rank 2 runs, and sends, while it has no link
  sleep 1
  ip -n "$name-r2" link set eth0 up
  echo "rank 2's link was down for 1 s (rank 0 of the workers at step $done_steps of $steps)"
else
  host=$("$here/netns.sh" addr 0)
  # Garbage: bytes that are no handshake. Half-open: a connection that never says anything.
  intruder bash -c "exec 3<>/dev/tcp/$host/29500; head -c 4096 /dev/urandom >&3; sleep 0.5" ||
    fail "the garbage intruder could not reach rank 0"
  intruder bash -c "exec 3<>/dev/tcp/$host/29500; sleep 3" ||
    fail "the half-open intruder could not reach rank 0"
  # A rank of the group with the wrong secret: its handshake fails, on both sides.
  code=0
  REEL_SECRET=wrong REEL_RANK=1 REEL_WORLD_SIZE=3 REEL_COORDINATOR="$coordinator" \
    timeout 60 ip netns exec "$name-r3" "$reel" train --config "$work/config.pbtxt" \
    >"$work/wrong_secret.log" 2>&1 || code=$?
  ((code != 0 && code != 124)) || { cat "$work/wrong_secret.log"; fail "the wrong-secret rank exited $code"; }
  echo "the wrong-secret rank exited $code: $(tail -1 "$work/wrong_secret.log")"
  ip netns pids "$name-r2" | xargs -r kill -CONT
  # Rank 0 counts what it dropped by source, in one line per 10 s (wait for the three).
  intruder_addr=$("$here/netns.sh" addr 3)
  dropped_from_intruder() {
    grep -E "dropped [0-9]+ connection\(s\) that did not authenticate" "$work/node0.log" |
      grep -oE "[(, ]$intruder_addr: [0-9]+" | awk -F': ' '{n += $2} END {print n + 0}'
  }
  for ((i = 0; i < 300; i++)); do
    (($(dropped_from_intruder) >= 3)) && break
    sleep 0.1
  done
  (($(dropped_from_intruder) >= 3)) || fail "rank 0 did not drop the three intruders"
  echo "three intruders dropped by the parameter server (rank 0 of the workers at step $done_steps of $steps)"
fi

wait_nodes
for r in 0 1 2; do
  ((codes[r] == 0)) || fail "node $r exited ${codes[r]}"
  # Under async_sgd rank 0 serves and does not train.
  if [[ "$mode" == intruders && $r == 0 ]]; then
    grep -q "^\[rank 0\] served parameters until every worker finished" "$work/node0.log" ||
      fail "rank 0 did not serve until every worker finished"
  else
    grep -q "^\[rank $r\] trained $steps steps" "$work/node$r.log" ||
      fail "rank $r did not train $steps steps"
  fi
  ! grep -E "UNAVAILABLE|DEADLINE_EXCEEDED|DATA_LOSS|INTERNAL|error" "$work/node$r.log" ||
    fail "node $r logged an error"
done
echo "tcp_survives_netns $mode: every rank trained $steps steps, no error"
