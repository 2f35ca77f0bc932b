#!/usr/bin/env bash
# A network link cut under a distributed run: three hosts, simulated (tests/netns/netns.sh: one
# network namespace per rank behind a bridge), each running `reel launch` for one rank of
# `reel train` over the tcp transport, with rank 0's address as the coordinator. Once a
# checkpoint exists and a few more steps have run, rank 2's link is set down (`ip link set eth0
# down` in its namespace: no reset, no FIN, its peers only stop hearing from it). The heartbeat
# timeout is 2 s, a collective's timeout 20 s; each launch runs under `timeout 180`, far beyond
# both: only a hang reaches it. MODE:
#   sync   the sync optimizer, a checkpoint every 2 steps, no end in sight. Expected, and
#          checked: ranks 0 and 1 fail with Unavailable or DeadlineExceeded naming rank 2, and
#          every launch exits non-zero, naming its rank and how it ended.
#   async  async_sgd under `reel launch --keep-going`: rank 0 the parameter server, rank 1 the
#          lead worker, rank 2 a worker; 200 steps per worker, a checkpoint every 10. Expected,
#          and checked: the server drops rank 2 (naming it, silent), the lead finishes the run
#          and reports rank 2's untrained share, launches 0 and 1 exit 0; rank 2 fails naming a
#          rank it lost, and its launch exits non-zero.
# Then the link comes back (`ip link set eth0 up`) and the same three launches, one per
# namespace over the same network, with `reel train --resume` continue from the newest
# checkpoint, which is intact, and train two more steps on every (training) rank.
# The namespaces (unique per run) are deleted on every exit. Exit 77 (skip) where namespaces
# cannot be made.
#
#   tests/netns/tcp_link_cut_netns.sh sync|async BUILD/bin/reel
set -euo pipefail
mode=$1
reel=$(realpath "$2")
case "$mode" in
  sync) steps=100000000 checkpoint_every=2 launch_flags=() optimizer= ;;
  async)
    steps=200 checkpoint_every=10 launch_flags=(--keep-going)
    optimizer='optimizer { name: "async_sgd" options { key: "rule" value: "adagrad" } }' ;;
  *) echo "usage: $0 sync|async REEL" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
name=reelcut$$
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  "$here/netns.sh" down "$name"
  rm -rf "$work"
}
trap cleanup EXIT

# Exit 77 (CTest: skipped) when namespaces cannot be made here; netns.sh has said why.
"$here/netns.sh" up "$name" 3 || exit $?

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
  timeout_seconds: 20
  options { key: "heartbeat_ms" value: "100" }
  options { key: "heartbeat_timeout_ms" value: "2000" }
}
$optimizer
trainer {
  steps: $steps
  batch_size: 4
  seed: 1
  num_classes: 16
  log_every_steps: 1
  checkpoint_every_steps: $checkpoint_every
  keep_checkpoints: 0
  checkpoint_dir: "$work/ckpt"
  metrics_log: "$work/metrics.jsonl"
}
CONFIG

coordinator=$("$here/netns.sh" addr 0):29500
export REEL_SECRET="netns-cut-$$-$RANDOM"
# shellcheck source=tests/netns/three_nodes.sh
source "$here/three_nodes.sh"
start_nodes node

# Mid-training: a checkpoint exists and a few steps have run (waits generously; not a timing
# assertion).
for ((i = 0; i < 1500; i++)); do
  if ls "$work/ckpt" 2>/dev/null | grep -q '\.reelckpt$' &&
     (($(wc -l <"$work/metrics.jsonl" 2>/dev/null || echo 0) >= checkpoint_every + 3)); then
    break
  fi
  nodes_alive "the cut"
  sleep 0.1
done
ls "$work/ckpt" | grep -q '\.reelckpt$' || fail "no checkpoint before the cut"

ip -n "$name-r2" link set eth0 down
cut_at=$SECONDS
echo "link of rank 2 ($name-r2 eth0) set down"
wait_nodes
echo "every launch ended $((SECONDS - cut_at)) s after the cut (exit codes ${codes[*]})"
show_logs

for r in 0 1 2; do
  ((codes[r] != 124)) || fail "node $r hung (killed by timeout 180)"
done
if [[ $mode == sync ]]; then
  for r in 0 1 2; do
    ((codes[r] != 0)) || fail "node $r exited 0 after the cut"
    grep -q "^reel launch: rank $r \(exited with status\|was killed by signal\)" "$work/node$r.log" ||
      fail "node $r's launch does not name rank $r"
  done
  for r in 0 1; do
    grep -E "^\[rank $r\] .*(UNAVAILABLE|DEADLINE_EXCEEDED).*rank 2" "$work/node$r.log" >/dev/null ||
      fail "rank $r does not name rank 2 as unavailable"
  done
else
  ((codes[0] == 0 && codes[1] == 0)) || fail "the server's or the lead's launch failed"
  grep -E "^\[rank 0\] async_sgd server rank 0 \(shard 0\): worker rank 2 was lost after its step [0-9]+ .*rank 2 is unavailable: .*silent" \
    "$work/node0.log" >/dev/null || fail "the server does not name rank 2 as lost (silent)"
  grep -q "^\[rank 1\] trained $steps steps" "$work/node1.log" || fail "the lead did not finish"
  grep -E "^\[rank 1\] +lost rank 2 after step [0-9]+: [0-9]+ steps \(about [0-9]+ examples\) of its share not trained" \
    "$work/node1.log" >/dev/null || fail "the lead does not report rank 2's untrained share"
  ((codes[2] != 0)) || fail "node 2 exited 0 after the cut"
  grep -E "^\[rank 2\] .*UNAVAILABLE.*rank [01] is unavailable" "$work/node2.log" >/dev/null ||
    fail "rank 2 does not name the rank it lost"
  grep -q "^reel launch: rank 2 exited with status" "$work/node2.log" ||
    fail "node 2's launch does not name rank 2"
fi

newest=$(ls "$work/ckpt"/*.reelckpt | sort | tail -1)
step=$((10#$(basename "$newest" | sed 's/^ckpt-\([0-9]*\)\.reelckpt$/\1/')))
ip -n "$name-r2" link set eth0 up
echo "link of rank 2 up again; resuming across the namespaces from $newest (step $step)"
start_nodes resume --resume --set "trainer.steps=$((step + 2))"
wait_nodes
show_resume_logs() {
  for r in 0 1 2; do echo "---- resume, node $r"; cat "$work/resume$r.log"; done
}
# The first training rank reports progress (and so the resume); every rank reports its end.
lead=0 trainers=(0 1 2)
[[ $mode == async ]] && lead=1 trainers=(1 2)
grep -q "^\[rank $lead\] resumed from $newest" "$work/resume$lead.log" ||
  { show_resume_logs; fail "resume did not start from $newest"; }
for r in 0 1 2; do
  ((codes[r] == 0)) || { show_resume_logs; fail "resume: node $r exited ${codes[r]}"; }
done
for r in "${trainers[@]}"; do
  grep -q "^\[rank $r\] trained $((step + 2)) steps" "$work/resume$r.log" ||
    { show_resume_logs; fail "resume: rank $r did not train to step $((step + 2))"; }
done
echo "tcp_link_cut_netns $mode: rank 2's link cut; the others named it; link back up; resumed over it from step $step to $((step + 2))"
