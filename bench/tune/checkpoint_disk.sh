#!/usr/bin/env bash
# The disk a search's trials take (docs/tune.md, execution.keep_checkpoints): runs `reel tune` on
# SEARCH once with each setting, NEEDED then ALL, from the repository root, sampling the size of
# WORKDIR/trials every second, and prints per setting the peak and final bytes, the checkpoint
# files left, the trial runs and the wall time. The workdirs are removed after each run.
#   bench/tune/checkpoint_disk.sh [SEARCH] [REEL] [SCRATCH]
# (defaults: configs/tune_moe.pbtxt, build/bin/reel, runs/checkpoint_disk)
set -euo pipefail
cd "$(dirname "$0")/../.."
search=${1:-configs/tune_moe.pbtxt}
reel=${2:-build/bin/reel}
scratch=${3:-runs/checkpoint_disk}
echo "# bench/tune/checkpoint_disk.sh $search $reel $scratch"
echo "# $(git rev-parse --short HEAD) $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)," \
  "family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')" \
  "model $(grep -m1 '^model\s' /proc/cpuinfo | cut -d: -f2 | tr -d ' '), $(getconf _NPROCESSORS_ONLN) cores"
echo "keep_checkpoints peak_bytes final_bytes checkpoint_files trial_runs seconds"
for keep in NEEDED ALL; do
  work=$scratch/$keep
  rm -rf "$work"
  mkdir -p "$work"
  { cat "$search"; echo "execution { keep_checkpoints: $keep }"; } >"$work/search.pbtxt"
  start=$(date +%s)
  "$reel" tune --config "$work/search.pbtxt" --workdir "$work/w" --quiet >"$work/tune.log" 2>&1 &
  pid=$!
  peak=0
  while kill -0 "$pid" 2>/dev/null; do
    now=$(du -sb "$work/w/trials" 2>/dev/null | cut -f1 || true)
    [[ -n $now && $now -gt $peak ]] && peak=$now
    sleep 1
  done
  wait "$pid"
  final=$(du -sb "$work/w/trials" | cut -f1)
  [[ $final -gt $peak ]] && peak=$final
  files=$(find "$work/w/trials" -name '*.reelckpt' | wc -l)
  runs=$(grep -c '"FINISHED"' "$work/w/journal.jsonl" || true)
  echo "$keep $peak $final $files $runs $(($(date +%s) - start))"
  rm -rf "$work"
done
