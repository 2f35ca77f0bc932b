#!/bin/bash
# Training with tcp's AllReduce sleeping against polling-and-yielding on a host whose ranks
# outnumber its cores (allreduce.md runs 20 and 23): `reel launch -n RANKS -- reel train` of the
# two_stream model (hidden 128 / 64, moe head, adam) on synthetic frame-level data, batch 16, no
# evaluation or checkpoints, the modes alternated run by run.
#
#   bench/allreduce/train_wait_modes.sh BUILD PAIRS STEPS RANKS [--set k=v ...]
#
#   sleep  transport option allreduce_spin_us=0 (the automatic choice there)
#   poll   allreduce_spin_us=20000 (poll, yielding the core, for up to 20 ms, then sleep)
# Prints examples/s of each run (the trainer's rate over all STEPS) and, per pair, poll / sleep.
set -euo pipefail
build=$(cd "$1" && pwd); pairs=$2; steps=$3; ranks=$4; shift 4
reel=$build/bin/reel
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
"$reel" synth --out data --videos 600 --classes 16 --level frame --shards 3 >/dev/null
cat > run.pbtxt <<'CFG'
data {
  name: "tfrecord"
  options { key: "files" value: "data/*.tfrecord" }
  options { key: "level" value: "frame" }
  options { key: "max_frames" value: "300" }
}
model {
  name: "two_stream"
  options { key: "video_hidden" value: "128" }
  options { key: "audio_hidden" value: "64" }
  options { key: "head" value: "moe" }
}
optimizer { name: "sync" options { key: "rule" value: "adam" } }
transport { name: "tcp" }
trainer { batch_size: 16 seed: 1 num_classes: 16 learning_rate { base: 0.001 } }
CFG
rate() { grep -o "step $steps/$steps *[0-9.]* ex/s" | head -1 | awk '{print $3}'; }
train() {
  "$reel" launch -n "$ranks" -- "$reel" train --config run.pbtxt --set "trainer.steps=$steps" \
    --set "trainer.log_every_steps=$steps" --set "transport.options.allreduce_spin_us=$1" "${@:2}" 2>&1 | rate
}
for ((i = 1; i <= pairs; i++)); do
  s=$(train 0 "$@"); p=$(train 20000 "$@")
  echo "pair $i: sleep $s poll $p poll/sleep $(awk -v a="$p" -v b="$s" 'BEGIN {printf "%.3f", a / b}')"
done
