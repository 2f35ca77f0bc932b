# shellcheck shell=bash
# Sourced by the shell benchmarks that train two_stream on synthetic frame-level data
# (bench/train/thread_budget.sh, bench/eval/eval_ranks.sh, bench/allreduce/train_wait_modes.sh),
# after they set `reel`.
#
#   two_stream_workdir SHARDS BATCH [SECTION]
#       makes a scratch folder the current one (removed on exit) with 600 synthetic videos of 16
#       classes in SHARDS shards (seed 1) and run.pbtxt: two_stream (hidden 128 / 64, moe head),
#       sync with adam at 0.001, BATCH examples per rank, and SECTION (e.g. a transport) if given
#   final_rate STEPS
#       a filter: the trainer's examples/s over all STEPS, from its output's last progress line
#   summarize_results UNIT REPS
#       min / median / max per case of the lines "CASE VALUE" in ./results

two_stream_workdir() {
  local shards=$1 batch=$2 section=${3:-}
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  cd "$work" || return
  # shellcheck disable=SC2154  # set by the sourcing script
  "$reel" synth --out data --videos 600 --classes 16 --level frame --shards "$shards" --seed 1 \
    >/dev/null
  cat > run.pbtxt <<CFG
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
$section
trainer { batch_size: $batch seed: 1 num_classes: 16 learning_rate { base: 0.001 } }
CFG
}

final_rate() { grep -o "step $1/$1 *[0-9.]* ex/s" | head -1 | awk '{print $3}'; }

summarize_results() {
  echo "case: $1 min / median / max over $2 runs"
  awk '{v[$1] = v[$1] " " $2} END {for (k in v) print k v[k]}' results | sort |
    while read -r name values; do
      printf '%s: %s\n' "$name" "$(echo "$values" | tr ' ' '\n' | sort -g |
        awk '{a[NR] = $1} END {m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2;
                               printf "%s / %s / %s", a[1], m, a[NR]}')"
    done
}
