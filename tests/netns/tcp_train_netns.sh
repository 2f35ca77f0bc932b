#!/usr/bin/env bash
# Several hosts, simulated: three ranks of `reel train` over the tcp transport, each in its own
# network namespace (tests/netns/netns.sh: 10.77.0.0/24 behind a bridge, every link limited by
# tbf), with rank 0's non-loopback address as the coordinator. Small synthetic video-level data
# and the logistic model, so it takes seconds. Exit 77 (skip) where namespaces cannot be made.
#
# Then `reel eval` of the checkpoint on the same three hosts, against one process.
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

# `reel eval` of that checkpoint on the same three hosts: the ranks split the videos and rank 0
# prints the metrics of all of them, as one process does (to the 6 decimals printed, 1e-6).
"$reel" eval --checkpoint "$work/checkpoints" --data "$work/data/train/*.tfrecord" --json \
  >"$work/eval_alone.out"
eval_pids=()
for r in 0 1 2; do
  (REEL_RANK=$r REEL_WORLD_SIZE=3 REEL_COORDINATOR=$("$here/netns.sh" addr 0):29501 \
     timeout 120 ip netns exec "$name-r$r" "$reel" eval --checkpoint "$work/checkpoints" \
     --data "$work/data/train/*.tfrecord" --json >"$work/eval$r.out" 2>"$work/eval$r.err") &
  eval_pids+=($!)
  pids+=($!)
done
for r in 0 1 2; do
  wait "${eval_pids[$r]}" || { echo "eval rank $r failed:"; cat "$work/eval$r.err"; exit 1; }
  grep -q "^reel eval: rank $r of 3 scored [0-9]* videos" "$work/eval$r.err" ||
    { echo "eval rank $r did not say its share:"; cat "$work/eval$r.err"; exit 1; }
done
if [ -s "$work/eval1.out" ] || [ -s "$work/eval2.out" ]; then
  echo "eval ranks 1 and 2 printed metrics"
  exit 1
fi
field() { grep -o "\"$1\": [0-9.]*" "$2" | awk '{print $2}'; }
for f in videos gap hit_at_1 perr map; do
  awk -v a="$(field "$f" "$work/eval_alone.out")" -v b="$(field "$f" "$work/eval0.out")" \
    'BEGIN { exit !(a != "" && b != "" && a - b <= 1e-6 && b - a <= 1e-6) }' ||
    { echo "eval $f over 3 hosts differs from one process's:"; cat "$work/eval_alone.out" "$work/eval0.out"; exit 1; }
done
echo "tcp_train_netns: 3 ranks in 3 namespaces trained over tcp via $coordinator ($rate links)," \
  "and evaluated its checkpoint as one process does"
