#!/usr/bin/env bash
# `reel train` as 2 processes under mpirun, against the same job as 2 ranks in one process
# (inproc). The config names no transport: under mpirun the host picks `mpi` and says so, and MPI
# gives each process its rank. Synchronous data parallelism must not depend on the transport, and
# with 2 ranks every reduction is a single float addition, so the two runs print the same final
# loss (to the digits printed) and rank 0 alone writes the checkpoint.
#
#   train_under_mpirun.sh REEL_EXE MPIRUN [mpirun flags...]
set -euo pipefail
reel=$1
shift
mpirun=("$@")
for component in tfrecord logistic mpi; do
  if ! "$reel" plugins | grep -qw "$component"; then
    echo "SKIP: this build has no '$component' component (build the tfrecord, moe and mpi plugins)"
    exit 77
  fi
done
work=$(mktemp -d "${TMPDIR:-/tmp}/reel-mpi-train.XXXXXX")
trap 'rm -rf "$work"' EXIT

"$reel" synth --out "$work/data" --videos 192 --classes 8 --level video --shards 2 --seed 3 >/dev/null

config() {  # config NAME TRANSPORT_SECTION LOCAL_RANKS
  cat > "$work/$1.pbtxt" <<CONFIG
data {
  name: "tfrecord"
  options { key: "files" value: "$work/data/*.tfrecord" }
  options { key: "level" value: "video" }
}
model { name: "logistic" }
optimizer { name: "sync" options { key: "rule" value: "adam" } }
$2
trainer {
  steps: 12
  batch_size: 16
  seed: 5
  num_classes: 8
  local_ranks: $3
  learning_rate { base: 0.05 }
  checkpoint_dir: "$work/$1/checkpoints"
}
CONFIG
}
config threads "" 2
config mpi "" 0

"$reel" train --config "$work/threads.pbtxt" > "$work/threads.out"
fail() { echo "FAIL: $*"; echo "-- inproc:"; cat "$work/threads.out"; echo "-- mpi:"; cat "$work/mpi.out"; exit 1; }
"${mpirun[@]}" -n 2 "$reel" train --config "$work/mpi.pbtxt" 2>&1 |
  sed 's/^\[[0-9,]*\]<std[a-z]*>://' > "$work/mpi.out" ||  # without --tag-output's prefixes
  fail "mpirun -n 2 reel train failed"

want=$(grep -o 'trained 12 steps.*' "$work/threads.out") || fail "the inproc run did not finish"
[ "$(grep -c "^trained 12 steps" "$work/mpi.out")" = 2 ] || fail "not both mpi ranks finished 12 steps"
grep -q "^$want\$" "$work/mpi.out" || fail "the mpi run differs from the inproc run: want '$want'"
grep -q "using transport 'mpi'" "$work/mpi.out" || fail "the host did not say it picked mpi"
ls "$work/mpi/checkpoints/"* >/dev/null 2>&1 || fail "rank 0 wrote no checkpoint"
echo "PASS: $want (mpi = inproc)"
