# shellcheck shell=bash
# Sourced by the shell benchmarks that train two_stream on synthetic frame-level data
# (bench/train/thread_budget.sh, bench/eval/eval_ranks.sh, bench/allreduce/train_wait_modes.sh),
# after they set `reel`.
#
#   two_stream_workdir SHARDS BATCH [SECTION]
#       makes a scratch folder the current one (removed on exit) with 600 synthetic videos of 16
#       classes in SHARDS shards (seed 1) and run.pbtxt: two_stream (hidden 128 / 64, moe head),
#       sync with adam at 0.001, BATCH examples per rank, and SECTION (e.g. a transport) if given

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

