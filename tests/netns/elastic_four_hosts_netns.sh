#!/usr/bin/env bash
# `reel launch --nnodes 3:4` on four hosts, simulated (tests/netns/netns.sh: one network namespace
# per host behind a bridge, 1 Gbit/s links), one rank of `reel train` per host over the tcp
# transport, host 0's address the rendezvous (docs/distributed.md, "The size that is left"):
#   1. the four form round 0 and train one epoch of video-level shards (a checkpoint every 2
#      steps); after a checkpoint and a few steps more, every process of host 3 is SIGKILLed (its
#      launcher and its rank: the host is gone).
#   2. The other three's ranks name the lost rank and exit 75; their launchers join round 1 (one
#      restart of --max-restarts 2), which forms with the 3 left and resumes from the newest
#      checkpoint. Checked: round 1 formed with 3 nodes, and it trains a step.
#   3. Host 3's launcher is started again: it asks to join, round 2 opens (not a restart), the
#      three stop their ranks and the four resume and end the epoch.
# Checked at the end: the three first launchers and the second one of host 3 exit 0; round 2
# formed with 4 nodes; every rank of the last round reports the newest checkpoint's step and
# every video of the epoch once ("trained N steps (V examples, epoch 1)"). The time from the kill
# to the first step after it is printed, not asserted. Each launch runs under `timeout 300`: only
# a hang reaches it. The namespaces (unique per run) are deleted on every exit. Exit 77 (skip)
# where namespaces cannot be made.
#
#   tests/netns/elastic_four_hosts_netns.sh BUILD/bin/reel
set -euo pipefail
reel=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
name=reel4h$$
work=$(mktemp -d)
# 1000 classes: each step's gradient (1152 x 1000 floats, 4.6 MB) takes tens of milliseconds
# over the 1 Gbit/s links, so the epoch (240 videos, batch 4 per rank: 15 steps on 4 ranks, 20
# on 3) lasts past the host's return.
videos=240
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  local ns
  for ns in 0 1 2 3; do
    for p in $(ip netns pids "$name-r$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
  done
  "$here/netns.sh" down "$name"
  rm -rf "$work"
}
trap cleanup EXIT

"$here/netns.sh" up "$name" 4 1gbit || exit $?

"$reel" synth --out "$work/data" --videos "$videos" --classes 1000 --level video --shards 4 \
  --seed 4 >/dev/null
cat >"$work/config.pbtxt" <<CONFIG
data {
  name: "tfrecord"
  options { key: "files" value: "$work/data/*.tfrecord" }
  options { key: "level" value: "video" }
}
model { name: "logistic" }
transport {
  name: "tcp"
  timeout_seconds: 20
  options { key: "heartbeat_ms" value: "100" }
  options { key: "heartbeat_timeout_ms" value: "2000" }
}
trainer {
  batch_size: 4
  seed: 1
  num_classes: 1000
  log_every_steps: 1
  checkpoint_every_steps: 2
  keep_checkpoints: 0
  checkpoint_dir: "$work/ckpt"
  metrics_log: "$work/metrics.jsonl"
}
CONFIG

# Each rank: `reel train` to the end of the epoch, but in round 1 (on the 3 left) only to step 12,
# and then waiting to be stopped: round 1 cannot end the epoch before host 3 is back, which would
# leave it no round to join (a race with the machine's load, not a behaviour to test).
train="'$reel' train --config '$work/config.pbtxt'"
rank_script="if [ \$REEL_RESTART_COUNT = 1 ]; then $train --set trainer.steps=12 || exit \$?; exec sleep 600; fi; exec $train --set trainer.epochs=1"
export REEL_SECRET="netns-4h-$$-$RANDOM" REEL_JOB_ID="netns-4h-$$-$RANDOM"
coordinator=$("$here/netns.sh" addr 0):29500
# start_host H LOG: host H's launcher, output in $work/LOG.log; its pid appended to pids.
start_host() {
  timeout 300 ip netns exec "$name-r$1" "$reel" launch -n 1 --nnodes 3:4 --max-restarts 2 \
    --coordinator "$coordinator" --grace-seconds 10 --rdzv-last-call-seconds 1 \
    --rdzv-timeout-seconds 120 -- sh -c "$rank_script" >"$work/$2.log" 2>&1 &
  pids+=($!)
}
show_logs() {
  local f
  for f in "$work"/*.log; do echo "---- $(basename "$f")"; cat "$f"; done
}
fail() { echo "FAIL: $*"; show_logs; exit 1; }
steps_logged() { wc -l <"$work/metrics.jsonl" 2>/dev/null || echo 0; }
# wait_for WHAT CONDITION...: polls (generously; not a timing assertion) until CONDITION holds
# while hosts 0..2 run.
wait_for() {
  local what=$1 i h
  shift
  for ((i = 0; i < 3000; i++)); do
    "$@" && return 0
    for h in 0 1 2; do kill -0 "${pids[$h]}" 2>/dev/null || fail "host $h ended before $what"; done
    sleep 0.1
  done
  fail "no $what"
}
has_checkpoint_and_steps() {
  compgen -G "$work/ckpt/*.reelckpt" >/dev/null && (($(steps_logged) >= 5))
}
said() { grep -q "$2" "$work/$1.log" 2>/dev/null; }

for h in 0 1 2 3; do start_host "$h" "host$h"; done
wait_for "checkpoint and 5 steps in round 0" has_checkpoint_and_steps
mapfile -t host3 < <(ip netns pids "$name-r3")
kill -9 "${host3[@]}"
wait "${pids[3]}" 2>/dev/null || true  # bash's "Killed" notice, here rather than later
killed_at=$(date +%s.%N)
steps_before=$(steps_logged)
echo "every process of host 3 ($name-r3) SIGKILLed after $steps_before steps"

wait_for "round 1 with the 3 left" said host0 'rendezvous: round 1 formed with 3 node(s)'
# Round 0's ranks had all ended when round 1 formed: a line logged since is round 1's.
formed_with=$(steps_logged)
round1_steps() { (($(steps_logged) > formed_with)); }
wait_for "step of round 1" round1_steps
first_after=$(sed -n "$((formed_with + 1))p" "$work/metrics.jsonl")
echo "first step of round 1, on the 3 left: $first_after (the kill at wall time $killed_at)"

start_host 3 host3-again
for h in 0 1 2 4; do
  code=0
  wait "${pids[$h]}" || code=$?
  log=host$h
  if ((h == 4)); then log="host3-again"; fi
  ((code == 0)) || fail "$log's launch exited $code"
done
pids=()
said host0 'rendezvous: round 2 opens: node .* asks to join' || fail "round 2 was not opened by host 3's return"
said host0 'rendezvous: round 2 formed with 4 node(s)' || fail "round 2 did not form with 4 nodes"
checkpoints=("$work"/ckpt/*.reelckpt)  # ckpt-STEP, zero-padded: the last is the newest
newest=${checkpoints[-1]}
step=$((10#$(basename "$newest" | sed 's/^ckpt-\([0-9]*\)\.reelckpt$/\1/')))
# What the ranks of round 2 printed.
round2() { local f; for f in "$work"/host*.log; do sed -n '/^reel launch: round 2 (/,$p' "$f"; done; }
for r in 0 1 2 3; do
  round2 | grep -q "^\[rank $r\] trained $step steps ($videos examples, epoch 1)" ||
    fail "rank $r of round 2 did not report step $step with every video of the epoch once"
done
echo "elastic_four_hosts_netns: host 3 lost after $steps_before steps; round 1 went on with 3; host 3 back in round 2; the epoch ended at 4 ranks, step $step, every one of the $videos videos once"
