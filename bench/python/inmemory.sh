#!/usr/bin/env bash
# reel.train from frame-level arrays in memory against the same videos from their TFRecords
# (issue 51; docs/python.md, "Training from memory"): examples/s of the whole reel.train call,
# start to end (reading the arrays into memory comes before and is not timed), two_stream on
# VIDEOS (default 512) synthetic frame-level videos of 60..180 frames, batch 32, one epoch, no
# shuffling, the same seed (so both report the same final loss). The two cases alternate REPS
# times (default 3) through bench/ab.py. From the repository root after building reel,
# reel_python and the tfrecord and bilstm plugins:
#   bash bench/python/inmemory.sh [OUT_DIR]   (default bench/out/python_inmemory)
# Raw runs in OUT_DIR (bench/ab.py's files); OUT_DIR/python_inmemory.txt gathers the CPU, the
# command, the summary and every run's output.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-bench/out/python_inmemory}
reps=${REPS:-3}
videos=${VIDEOS:-512}
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
build/bin/reel synth --out "$data" --videos "$videos" --classes 16 --level frame --shards 4 \
  --seed 1 >/dev/null
py="PYTHONPATH=build/python OMP_NUM_THREADS=1 /usr/bin/python3 bench/python/inmemory_train.py"
/usr/bin/python3 bench/ab.py --reps "$reps" --out "$out" \
  --case files "$py files $data" --case arrays "$py arrays $data" \
  --metric 'examples_per_sec=examples_per_sec=([0-9.]+)' --metric 'wall=wall=([0-9.]+)'
{
  echo "# bash bench/python/inmemory.sh (REPS=$reps VIDEOS=$videos), $(date -u +%FT%TZ)"
  echo "# commit $(git rev-parse --short HEAD)"
  echo "# CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' '), model $(grep -m1 '^model[[:space:]]' /proc/cpuinfo | cut -d: -f2 | tr -d ' '), $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
  cat "$out/summary.txt"
  for f in "$out"/*.out; do
    echo "== $(basename "$f")"
    cat "$f"
  done
  echo "== runs.jsonl"
  cat "$out/runs.jsonl"
} >"$out/python_inmemory.txt"
