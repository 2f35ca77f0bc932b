#!/usr/bin/env bash
# `reel plan` against real runs on simulated hosts (docs/capacity.md, "How good the model is").
# For each case HOSTSxRATE:OPTIMIZER:MODEL, one epoch of `reel train` on HOSTS network namespaces
# (tests/netns/netns.sh: a bridge, every link limited by tc tbf at RATE, its bucket 10 ms of RATE
# within [128 KiB, 1 MiB]: netns.sh's default 1 MiB let each step's first MiB through a
# 100 Mbit/s link at the veth's speed after the step's compute), then the plan's predicted
# epoch for the same data, config and cluster, from a profile this script measures first on this
# machine (`reel plan --measure`). Every rank runs one compute thread (OMP_NUM_THREADS=1), and the
# hosts share this machine's cores, so the plan is given the cores a training rank gets here:
# min(1 thread, cores / training ranks), the training ranks being the HOSTS (sync) or the workers
# (async: a server's update of a push is a small share of a core, and on hosts of their own its
# cores would be its own). The plan is also given the data's file count (each rank reads whole
# files, so with 4 files on 3 ranks one rank reads 2 and sets the epoch).
# The measured epoch is the trainer's `elapsed` at its last step (metrics.jsonl, logged every
# step): training only, after group formation. Beside the plan's bottleneck, the run's own: the
# largest part of the lead training rank's time breakdown (docs/training.md, "Where the time
# goes"), and whether they agree (the plan's reading or decoding is the run's data, its step
# compute, its exchange or servers update). REEL_VALIDATE_BURST (bytes) sets another tbf bucket,
# to see what the simulated link decides; each raw line counts the packets tbf dropped. Prints
# one Markdown row per case and run; raw lines (JSON of the plan and the run) go to OUT.
#
# A case ending in :s3=RATE reads its data from S3 instead: an s3rver (scripts/s3rver.sh) on a
# host of its own, one more namespace, whose link is limited to RATE and shared by the ranks; the
# plan is given the data in S3, RATE over the training ranks as each node's S3 bandwidth, and the
# per-connection rate the profile measured from a rank's namespace.
#
#   bench/plan/validate.sh BUILD OUT [REPS] [CASE...]   (as root)
#   CASE: HOSTSxRATE:sync|async:moe|bilstm[:s3=RATE], e.g. 2x1gbit:sync:moe (default: below)
set -euo pipefail
build=$(realpath "$1")
out=$(realpath -m "$2")
reps=${3:-3}
shift $(($# < 3 ? $# : 3))
cases=("$@")
((${#cases[@]})) || cases=(2x1gbit:sync:moe 2x100mbit:sync:moe 3x1gbit:sync:moe
  4x1gbit:sync:moe 2x1gbit:async:moe 3x1gbit:async:moe 4x1gbit:async:moe 2x1gbit:sync:bilstm
  2x100mbit:sync:bilstm 3x1gbit:sync:bilstm 3x1gbit:async:bilstm 2x1gbit:sync:bilstm:s3=100mbit
  3x1gbit:async:bilstm:s3=100mbit)
reel=$build/bin/reel
# The build's own libreel.so, not the one its RUNPATH names (a copied build's binaries keep it).
export LD_LIBRARY_PATH=$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
here=$(cd "$(dirname "$0")" && pwd)
netns=$here/../../tests/netns/netns.sh
s3rver=$here/../../scripts/s3rver.sh
work=$(mktemp -d)
name=reelplan$$
cleanup() { "$s3rver" stop "$work/s3" 2>/dev/null || true; "$netns" down "$name"; rm -rf "$work"; }
trap cleanup EXIT
cores=$(nproc)

# The data: video-level for moe, frame-level for the BiLSTM, each sized for 10-100 s an epoch
# here.
frame_videos=3072
"$reel" synth --out "$work/video" --videos 6144 --classes 500 --level video --shards 4 --seed 1 >/dev/null
"$reel" synth --out "$work/frame" --videos $frame_videos --classes 500 --level frame --shards 4 \
  --min-frames 100 --max-frames 300 --seed 1 >/dev/null

config() {  # config MODEL OPTIMIZER HOSTS [DATA_DIR]
  local model=$1 optimizer=$2 hosts=$3 level=video block data=${4:-$work}
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
  options { key: "files" value: "$data/$level/*.tfrecord" }
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

# S3 (cases with :s3=RATE): s3rver on host HOST of namespaces up, its objects kept in $work/s3
# between runs; prints the endpoint. The credentials are s3rver's.
export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER
s3_start() {  # HOST
  REEL_S3RVER_ADDRESS=$("$netns" addr "$1") ip netns exec "$name-r$1" "$s3rver" start "$work/s3" reel
}
s3_cases=$(printf '%s\n' "${cases[@]}" | grep -c ':s3=' || true)

# The profile: this machine, each model's config (one thread per rank, as the runs have); with S3
# cases, from a namespace beside an s3rver holding the frame-level data, its per-connection rate
# measured too.
on_host=()
if ((s3_cases)); then
  "$netns" up "$name" 2 >/dev/null
  endpoint=$(s3_start 1)
  export REEL_STORAGE_S3_ENDPOINT=$endpoint
  ip netns exec "$name-r0" "$reel" synth --out s3://reel/frame --videos $frame_videos --classes 500 \
    --level frame --shards 4 --min-frames 100 --max-frames 300 --seed 1 >/dev/null
  on_host=(ip netns exec "$name-r0")
fi
for model in moe bilstm; do
  config $model sync 1 >"$work/$model.pbtxt"
  s3=()
  ((s3_cases)) && [[ $model == bilstm ]] && s3=(--s3 s3://reel/measure)
  OMP_NUM_THREADS=1 "${on_host[@]}" "$reel" plan --measure --config "$work/$model.pbtxt" \
    --profile "$work/profile.txt" "${s3[@]}" >/dev/null 2>>"$work/measure.log"
done
if ((s3_cases)); then
  "$s3rver" stop "$work/s3" keep
  "$netns" down "$name"
  unset REEL_STORAGE_S3_ENDPOINT
fi
cp "$work/profile.txt" "$out.profile.txt"

mean_frames() {  # the frames the model sees per video: the synth range's mean
  [[ $1 == bilstm ]] && echo 200 || echo 0
}

part_of() {  # the part of a run's time breakdown that a plan's bottleneck names
  case $1 in
    reading | decoding*) echo data ;;
    step) echo compute ;;
    exchange | servers*) echo update ;;
    *) echo "$1" ;;
  esac
}

echo "| case | run | predicted s | measured s | predicted / measured | plan's bottleneck | run's largest part | same |"
echo "|---|---|---|---|---|---|---|---|"
: >"$out"
for c in "${cases[@]}"; do
  IFS=':' read -r shape optimizer model s3rate <<<"$c"
  hosts=${shape%x*} rate=${shape#*x} s3rate=${s3rate#s3=}
  level=video; [[ $model == bilstm ]] && level=frame
  training=$hosts
  [[ $optimizer == async ]] && training=$((hosts - 1))  # one server
  data=$work s3plan=()
  if [[ -n $s3rate ]]; then
    data=s3://reel
    s3plan=(--data-in s3 --s3-connections 4 --s3-bandwidth "$(awk -v r="${s3rate%bit}" -v n="$training" \
      'BEGIN { u = substr(r, length(r)); v = r + 0; m = u == "g" ? 1e9 : u == "m" ? 1e6 : 1e3
               printf "%.0fbit/s", v * m / n }')")
  fi
  config "$model" "$optimizer" "$hosts" "$data" >"$work/run.pbtxt"
  bytes=$(cat "$work/$level"/*.tfrecord | wc -c)
  videos=$([[ $level == video ]] && echo 6144 || echo $frame_videos)
  files=$(find "$work/$level" -name '*.tfrecord' | wc -l)
  tbf_rate=$(awk -v r="$rate" 'BEGIN { sub(/bit$/, "", r); print r }')
  REEL_NETNS_BURST=$(awk -v r="$tbf_rate" 'BEGIN { u = substr(r, length(r)); v = r + 0;
    b = v * (u == "g" ? 1e9 : (u == "m" ? 1e6 : 1e3)) / 8 / 100;
    printf "%.0f", (b < 131072 ? 131072 : (b > 1048576 ? 1048576 : b)) }')
  REEL_NETNS_BURST=${REEL_VALIDATE_BURST:-$REEL_NETNS_BURST}  # another bucket, to compare
  export REEL_NETNS_BURST
  plan=$("$reel" plan --config "$work/run.pbtxt" --profile "$work/profile.txt" --videos "$videos" \
    --bytes "$bytes" --files "$files" --frames "$(mean_frames "$model")" --nodes "$hosts" \
    --cores-per-node "$(awk -v c="$cores" -v t="$training" 'BEGIN { print (c / t < 1 ? c / t : 1) }')" \
    --link "${tbf_rate}bit/s" --link-latency-us 100 --checkpoints-per-epoch 0 "${s3plan[@]}" --json)
  predicted=$(grep -o '"epoch_seconds": [0-9.e+-]*' <<<"$plan" | awk '{print $2}')
  bottleneck=$(grep -o '"bottleneck": "[^"]*"' <<<"$plan" | cut -d'"' -f4)
  for ((run = 1; run <= reps; run++)); do
    run_env=()
    if [[ -n $s3rate ]]; then  # one more host: the s3rver's, behind its own link
      "$netns" up "$name" $((hosts + 1)) "$rate" >/dev/null
      "$netns" rate "$name" "$hosts" "$s3rate"
      run_env=(REEL_STORAGE_S3_ENDPOINT="$(s3_start "$hosts")")
    else
      "$netns" up "$name" "$hosts" "$rate" >/dev/null
    fi
    rm -rf "$work/run"
    mkdir -p "$work/run"
    coordinator=$("$netns" addr 0):29500
    pids=()
    for ((r = 0; r < hosts; r++)); do
      (cd "$work" && REEL_SECRET="plan-$$" REEL_RANK=$r REEL_WORLD_SIZE=$hosts \
        REEL_COORDINATOR=$coordinator OMP_NUM_THREADS=1 env "${run_env[@]}" \
        timeout 900 ip netns exec "$name-r$r" "$reel" train --config "$work/run.pbtxt" \
        >"$work/run/rank$r.log" 2>&1) &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || { cat "$work"/run/rank*.log >&2; exit 1; }; done
    [[ -z $s3rate ]] || "$s3rver" stop "$work/s3" keep
    # Packets the links' tbf queues dropped, every host's and switch port's (TCP resent them).
    drops=$(for ns in $(ip netns list | awk -v n="$name-" 'index($1, n) == 1 {print $1}'); do
      tc -n "$ns" -s qdisc show | awk '/dropped/ {sub(",", "", $7); print $7}'; done |
      awk '{d += $1} END {print d + 0}')
    "$netns" down "$name"
    measured=$(tail -n 1 "$work/run/metrics.jsonl" | grep -o '"elapsed": [0-9.e+-]*' | awk '{print $2}')
    ratio=$(awk -v p="$predicted" -v m="$measured" 'BEGIN { printf "%.2f", p / m }')
    # The lead training rank's (async_sgd's servers are the first ranks).
    time_line=$(grep '^time of this rank:' "$work/run/rank$((hosts - training)).log")
    largest=${time_line##*the most: }
    same=no; [[ $(part_of "$bottleneck") == "$largest" ]] && same=yes
    printf '| %s | %d | %.1f | %.1f | %s | %s | %s | %s |\n' "$c" "$run" "$predicted" "$measured" \
      "$ratio" "$bottleneck" "$largest" "$same"
    printf '{"case": "%s", "run": %d, "measured_seconds": %s, "load": "%s", "time": "%s", "tbf_drops": %d, "plan": %s}\n' \
      "$c" "$run" "$measured" "$(cut -d' ' -f1-3 /proc/loadavg)" "$time_line" "$drops" "$plan" >>"$out"
  done
done
