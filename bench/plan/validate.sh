#!/usr/bin/env bash
# `reel plan` against real runs on simulated hosts (docs/capacity.md, "How good the model is").
# For each case HOSTSxRATE:OPTIMIZER:MODEL, one epoch of `reel train` on HOSTS network namespaces
# (tests/netns/netns.sh: a bridge, every link limited by tc tbf at RATE), then the plan's predicted
# epoch for the same data, config and cluster, from a profile this script measures first on this
# machine (`reel plan --measure`). Every rank runs one compute thread (OMP_NUM_THREADS=1), and the
# hosts share this machine's cores, so the plan is given the cores a training rank gets here:
# min(1 thread, cores / training ranks), the training ranks being the HOSTS (sync) or the workers
# (async: a server's update of a push is a small share of a core, and on hosts of their own its
# cores would be its own). The plan is also given the data's file count (each rank reads whole
# files, so with 4 files on 3 ranks one rank reads 2 and sets the epoch).
# The measured epoch is the trainer's `elapsed` at its last step (metrics.jsonl, logged every
# step): training only, after group formation. Prints one Markdown row per case and run; raw
# lines (JSON of the plan and the run) go to OUT.
#
#   bench/plan/validate.sh BUILD OUT [REPS] [CASE...]   (as root)
#   CASE: HOSTSxRATE:sync|async:moe|bilstm, e.g. 2x1gbit:sync:moe (default: the list below)
set -euo pipefail
build=$(realpath "$1")
out=$(realpath -m "$2")
reps=${3:-3}
shift $(($# < 3 ? $# : 3))
cases=("$@")
((${#cases[@]})) || cases=(2x1gbit:sync:moe 2x100mbit:sync:moe 3x1gbit:sync:moe
  2x1gbit:async:moe 3x1gbit:async:moe 2x1gbit:sync:bilstm 2x100mbit:sync:bilstm
  3x1gbit:async:bilstm)
reel=$build/bin/reel
here=$(cd "$(dirname "$0")" && pwd)
netns=$here/../../tests/netns/netns.sh
work=$(mktemp -d)
name=reelplan$$
cleanup() { "$netns" down "$name"; rm -rf "$work"; }
trap cleanup EXIT
cores=$(nproc)

# The data: video-level for moe, frame-level for the BiLSTM, each sized for about a minute an
# epoch here.
"$reel" synth --out "$work/video" --videos 6144 --classes 500 --level video --shards 4 --seed 1 >/dev/null
"$reel" synth --out "$work/frame" --videos 768 --classes 500 --level frame --shards 4 \
  --min-frames 100 --max-frames 300 --seed 1 >/dev/null

config() {  # config MODEL OPTIMIZER HOSTS
  local model=$1 optimizer=$2 hosts=$3 level=video block
  case $model in
    moe) block='model { name: "moe" options { key: "experts" value: "2" } }' ;;
    bilstm) level=frame
      block='model { name: "bilstm_video" options { key: "hidden" value: "64" } }' ;;
  esac
  local opt='optimizer { name: "sync" options { key: "rule" value: "adam" } }'
  [[ $optimizer == async ]] && opt='optimizer { name: "async_sgd" options { key: "rule" value: "adam" } options { key: "servers" value: "1" } }'
  cat <<CONFIG
data {
  name: "tfrecord"
  options { key: "files" value: "$work/$level/*.tfrecord" }
  options { key: "level" value: "$level" }
  options { key: "max_frames" value: "300" }
}
$block
$opt
transport { name: "tcp" }
trainer {
  epochs: 1
  batch_size: 32
  seed: 1
  num_classes: 500
  learning_rate { base: 0.001 }
  log_every_steps: 1
  metrics_log: "$work/run/metrics.jsonl"
}
CONFIG
  : "$hosts"
}

# The profile: this machine, each model's config (one thread per rank, as the runs have).
for model in moe bilstm; do
  config $model sync 1 >"$work/$model.pbtxt"
  OMP_NUM_THREADS=1 "$reel" plan --measure --config "$work/$model.pbtxt" --profile "$work/profile.txt" \
    >/dev/null 2>>"$work/measure.log"
done
cp "$work/profile.txt" "$out.profile.txt"

mean_frames() {  # the frames the model sees per video: the synth range's mean
  [[ $1 == bilstm ]] && echo 200 || echo 0
}

echo "| case | run | predicted s | measured s | predicted / measured | plan's bottleneck |"
echo "|---|---|---|---|---|---|"
: >"$out"
for c in "${cases[@]}"; do
  IFS=':' read -r shape optimizer model <<<"$c"
  hosts=${shape%x*} rate=${shape#*x}
  level=video; [[ $model == bilstm ]] && level=frame
  config "$model" "$optimizer" "$hosts" >"$work/run.pbtxt"
  bytes=$(cat "$work/$level"/*.tfrecord | wc -c)
  videos=$([[ $level == video ]] && echo 6144 || echo 768)
  files=$(find "$work/$level" -name '*.tfrecord' | wc -l)
  training=$hosts
  [[ $optimizer == async ]] && training=$((hosts - 1))  # one server
  tbf_rate=$(awk -v r="$rate" 'BEGIN { sub(/bit$/, "", r); print r }')
  plan=$("$reel" plan --config "$work/run.pbtxt" --profile "$work/profile.txt" --videos "$videos" \
    --bytes "$bytes" --files "$files" --frames "$(mean_frames "$model")" --nodes "$hosts" \
    --cores-per-node "$(awk -v c="$cores" -v t="$training" 'BEGIN { print (c / t < 1 ? c / t : 1) }')" \
    --link "${tbf_rate}bit/s" --link-latency-us 100 --checkpoints-per-epoch 0 --json)
  predicted=$(grep -o '"epoch_seconds": [0-9.e+-]*' <<<"$plan" | awk '{print $2}')
  bottleneck=$(grep -o '"bottleneck": "[^"]*"' <<<"$plan" | cut -d'"' -f4)
  for ((run = 1; run <= reps; run++)); do
    "$netns" up "$name" "$hosts" "$rate" >/dev/null
    rm -rf "$work/run"
    mkdir -p "$work/run"
    coordinator=$("$netns" addr 0):29500
    pids=()
    for ((r = 0; r < hosts; r++)); do
      (cd "$work" && REEL_SECRET="plan-$$" REEL_RANK=$r REEL_WORLD_SIZE=$hosts \
        REEL_COORDINATOR=$coordinator OMP_NUM_THREADS=1 \
        timeout 900 ip netns exec "$name-r$r" "$reel" train --config "$work/run.pbtxt" \
        >"$work/run/rank$r.log" 2>&1) &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || { cat "$work"/run/rank*.log >&2; exit 1; }; done
    "$netns" down "$name"
    measured=$(tail -n 1 "$work/run/metrics.jsonl" | grep -o '"elapsed": [0-9.e+-]*' | awk '{print $2}')
    ratio=$(awk -v p="$predicted" -v m="$measured" 'BEGIN { printf "%.2f", p / m }')
    printf '| %s | %d | %.1f | %.1f | %s | %s |\n' "$c" "$run" "$predicted" "$measured" "$ratio" "$bottleneck"
    printf '{"case": "%s", "run": %d, "measured_seconds": %s, "load": "%s", "plan": %s}\n' \
      "$c" "$run" "$measured" "$(cut -d' ' -f1-3 /proc/loadavg)" "$plan" >>"$out"
  done
done
