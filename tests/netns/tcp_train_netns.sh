#!/usr/bin/env bash
# Several hosts, simulated: three ranks of `reel train` over the tcp transport, each in its own
# network namespace (tests/netns/netns.sh: 10.77.0.0/24 behind a bridge, every link limited by
# tbf), with rank 0's non-loopback address as the coordinator. Small synthetic video-level data
# and the logistic model, so it takes seconds. Exit 77 (skip) where namespaces cannot be made.
#
#   tests/netns/tcp_train_netns.sh BUILD/bin/reel [RATE]
set -euo pipefail
reel=$(realpath "$1")
rate=${2:-200mbit}
here=$(cd "$(dirname "$0")" && pwd)
name=reeltcp$$
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  "$here/netns.sh" down "$name"
  rm -rf "$work"
}
trap cleanup EXIT

status=0
"$here/netns.sh" up "$name" 3 "$rate" || status=$?
if ((status == 77)); then
  echo "SKIP: this machine cannot create network namespaces (see the message above)"
  exit 77
fi
((status == 0)) || exit "$status"

"$reel" synth --out "$work/data/train" --videos 384 --classes 8 --level video --shards 3 --seed 1 >/dev/null
cat >"$work/config.pbtxt" <<CONFIG
data {
  name: "tfrecord"
  options { key: "files" value: "$work/data/train/*.tfrecord" }
  options { key: "level" value: "video" }
}
model { name: "logistic" }
optimizer { name: "sync" options { key: "rule" value: "adam" } }
transport {
  name: "tcp"
  options { key: "heartbeat_timeout_ms" value: "10000" }
}
trainer {
  steps: 30
  batch_size: 16
  seed: 1
  num_classes: 8
  learning_rate { base: 0.05 }
  log_every_steps: 10
  checkpoint_dir: "$work/checkpoints"
}
CONFIG

coordinator=$("$here/netns.sh" addr 0):29500
export REEL_SECRET="netns-test-$$-$RANDOM"
for r in 0 1 2; do
  (cd "$work" && REEL_RANK=$r REEL_WORLD_SIZE=3 REEL_COORDINATOR=$coordinator \
     timeout 120 ip netns exec "$name-r$r" "$reel" train --config "$work/config.pbtxt" \
     >"$work/rank$r.log" 2>&1) &
  pids+=($!)
done
failed=0
for r in 0 1 2; do
  if ! wait "${pids[$r]}"; then
    echo "rank $r failed:"
    failed=1
  fi
done
for r in 0 1 2; do
  echo "---- rank $r (namespace $name-r$r, $("$here/netns.sh" addr "$r"))"
  cat "$work/rank$r.log"
done
((failed == 0)) || exit 1
# Rank 0 wrote the final checkpoint, so the 30 steps ran on all three ranks together.
ls "$work/checkpoints" | grep -q . || { echo "no checkpoint from rank 0"; exit 1; }
echo "tcp_train_netns: 3 ranks in 3 namespaces trained over tcp via $coordinator ($rate links)"
