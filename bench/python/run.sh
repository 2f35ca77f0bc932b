#!/usr/bin/env bash
# The Python module against the command on the same inputs (bench/journal/python.md):
#   read  records/s of reel.read_tfrecords (one dict of NumPy views per record) against
#         `reel bench source --name tfrecord` (the same data source's batches, C++ alone), on
#         synthetic frame-level shards, batch 64, no shuffling;
#   train examples/s of reel.train against `reel train`, same config (configs/logistic.pbtxt on
#         the real shards, 2 epochs, no checkpoints), from the run's own count and wall time.
# Each pair alternates, REPS times (default 3). Run from the repository root after building:
#   bash bench/python/run.sh [OUT_DIR]     (default bench/out; raw output python_*.txt)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-bench/out}
reps=${REPS:-3}
mkdir -p "$out"
reel=build/bin/reel
py() { PYTHONPATH=build/python /usr/bin/python3 "$@"; }
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
$reel synth --out "$data" --videos 1000 --classes 16 --level frame --shards 4 --seed 1 >/dev/null
opts=(--option "files=$data/*.tfrecord" --option level=frame --option batch_size=64
      --option shuffle_buffer=0)
: >"$out/python_read.txt"
: >"$out/python_train.txt"
for ((r = 1; r <= reps; ++r)); do
  echo "== rep $r: reel bench source" >>"$out/python_read.txt"
  $reel bench source --name tfrecord "${opts[@]}" --reps 1 >>"$out/python_read.txt"
  echo "== rep $r: reel.read_tfrecords" >>"$out/python_read.txt"
  py - "$data" >>"$out/python_read.txt" <<'PY'
import sys, time, reel
t = time.perf_counter()
n = nbytes = 0
for rec in reel.read_tfrecords(sys.argv[1] + "/*.tfrecord", level="frame"):
    n += 1
    nbytes += rec["rgb"].nbytes + rec["audio"].nbytes
s = time.perf_counter() - t
print(f"read_tfrecords: {n} videos in {s:.3f} s: {n / s:.0f} videos/s, "
      f"{nbytes / s / 1e9:.3f} GB/s of float output")
PY
  sets=(--set trainer.epochs=2 --set trainer.checkpoint_dir= --set trainer.metrics_log=
        --set trainer.tensorboard_dir= --set trainer.log_every_steps=1000)
  echo "== rep $r: reel train" >>"$out/python_train.txt"
  start=$EPOCHREALTIME
  $reel train --config configs/logistic.pbtxt "${sets[@]}" >>"$out/python_train.txt" 2>/dev/null
  awk -v s="$start" -v e="$EPOCHREALTIME" 'BEGIN { printf "wall %.3f s\n", e - s }' \
    >>"$out/python_train.txt"
  echo "== rep $r: reel.train" >>"$out/python_train.txt"
  py - >>"$out/python_train.txt" <<'PY'
import time, reel
t = time.perf_counter()
r = reel.train("configs/logistic.pbtxt", overrides={
    "trainer.epochs": 2, "trainer.checkpoint_dir": "", "trainer.metrics_log": "",
    "trainer.tensorboard_dir": "", "trainer.log_every_steps": 1000})
s = time.perf_counter() - t
print(f"reel.train: {r.steps} steps, {r.examples} examples, final loss {r.final_loss:.4f}, "
      f"wall {s:.3f} s: {r.examples / s:.0f} examples/s")
PY
done
echo "wrote $out/python_read.txt $out/python_train.txt"
