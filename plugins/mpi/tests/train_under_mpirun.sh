#!/usr/bin/env bash
# `reel train` as 2 processes under mpirun, against the same job in one process. The config names
# no transport: under mpirun the host picks `mpi` and says so, and MPI gives each process its
# rank. Synchronous data parallelism must not depend on the transport nor on how the batch is
# split, with a gradient clip that binds on every step (it acts on the averaged gradient):
#   * 2 ranks as threads (inproc), batch B: with 2 ranks every reduction is a single float
#     addition, so the mpi run prints the same final loss to the digits printed;
#   * 1 rank with batch 2B: the same parameters to float tolerance, compared through the
#     probabilities `reel predict` gives every label of every video with each final checkpoint.
# Rank 0 alone writes the checkpoint.
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

# One file: ranks split it by record index (k % 2 == rank), unshuffled, so the two ranks' k-th
# batches together are the single rank's k-th batch.
"$reel" synth --out "$work/data" --videos 192 --classes 8 --level video --shards 1 --seed 3 >/dev/null

clip=0.2  # below every step's gradient norm (checked below)
config() {  # config NAME LOCAL_RANKS BATCH_SIZE
  cat > "$work/$1.pbtxt" <<CONFIG
data {
  name: "tfrecord"
  options { key: "files" value: "$work/data/*.tfrecord" }
  options { key: "level" value: "video" }
}
model { name: "logistic" }
optimizer { name: "sync" options { key: "rule" value: "sgd" } }
trainer {
  steps: 12
  batch_size: $3
  seed: 5
  num_classes: 8
  local_ranks: $2
  clip_norm: $clip
  log_every_steps: 1
  learning_rate { base: 1.0 }
  checkpoint_dir: "$work/$1/checkpoints"
  metrics_log: "$work/$1/metrics.jsonl"
}
CONFIG
}
config threads 2 16
config single 1 32
config mpi 0 16

"$reel" train --config "$work/threads.pbtxt" > "$work/threads.out"
"$reel" train --config "$work/single.pbtxt" > "$work/single.out"
fail() {
  echo "FAIL: $*"
  for f in threads.out single.out mpi.out mpi.err; do echo "-- $f:"; cat "$work/$f" 2>/dev/null || true; done
  exit 1
}
# stdout and stderr apart: mpirun forwards each in chunks, and a progress line on stderr whose
# newline had not come yet once took rank 1's "trained ..." line onto its end.
"${mpirun[@]}" -n 2 "$reel" train --config "$work/mpi.pbtxt" > "$work/mpi.tagged" 2> "$work/mpi.err" ||
  { sed 's/^\[[0-9,]*\]<std[a-z]*>://' "$work/mpi.tagged" > "$work/mpi.out"
    fail "mpirun -n 2 reel train failed"; }
sed 's/^\[[0-9,]*\]<std[a-z]*>://' "$work/mpi.tagged" > "$work/mpi.out"  # without --tag-output's prefixes

want=$(grep -o 'trained 12 steps.*' "$work/threads.out") || fail "the inproc run did not finish"
[ "$(grep -c "^trained 12 steps" "$work/mpi.out")" = 2 ] || fail "not both mpi ranks finished 12 steps"
grep -q "^$want\$" "$work/mpi.out" || fail "the mpi run differs from the inproc run: want '$want'"
grep -q "using transport 'mpi'" "$work/mpi.err" || fail "the host did not say it picked mpi"
ls "$work/mpi/checkpoints/"* >/dev/null 2>&1 || fail "rank 0 wrote no checkpoint"

# The clip binds: every step's gradient norm (before clipping) is above it.
awk -v clip=$clip 'match($0, /"grad_norm": *[0-9.eE+-]+/) {
    n++; v = substr($0, RSTART, RLENGTH); sub(/.*: */, "", v); if (v + 0 <= clip) low++ }
  END { exit !(n == 12 && low == 0) }' "$work/single/metrics.jsonl" ||
  fail "the clip $clip does not bind on every step: $(grep -o '"grad_norm": *[0-9.eE+-]*' "$work/single/metrics.jsonl" | tr '\n' ' ')"

for run in single mpi; do
  "$reel" predict --checkpoint "$work/$run/checkpoints" --data "$work/data/*.tfrecord" --top-k 8 \
    --out "$work/$run.csv" > /dev/null
done
# Every (video, label) probability within 2e-5 (the CSV has 6 decimals).
awk -F, 'FNR == 1 { next }
  { n = split($2, f, " "); for (i = 1; i < n; i += 2) { k = $1 ":" f[i]
      if (FILENAME == ARGV[1]) { want[k] = f[i + 1]; total++ }
      else { seen++; d = f[i + 1] - want[k]; if (!(k in want) || d > 2e-5 || d < -2e-5) {
        print "  " k ": single " want[k] ", mpi " f[i + 1]; bad++ } } } }
  END { if (total == 0 || seen != total || bad) { print bad + 0 " of " total " differ"; exit 1 } }' \
  "$work/single.csv" "$work/mpi.csv" > "$work/compare.out" ||
  fail "2 mpi ranks with batch 16 do not predict as 1 rank with batch 32: $(cat "$work/compare.out")"
# `reel eval` and `reel predict` under mpirun: the ranks split the data, and rank 0 prints the
# metrics of all videos and writes every video's row, as one process does.
untag() { sed 's/^\[[0-9,]*\]<std[a-z]*>://' "$@"; }
"${mpirun[@]}" -n 2 "$reel" predict --checkpoint "$work/mpi/checkpoints" \
  --data "$work/data/*.tfrecord" --top-k 8 --out "$work/mpi2.csv" > /dev/null 2> "$work/predict2.err" ||
  fail "mpirun -n 2 reel predict failed: $(cat "$work/predict2.err")"
cmp -s <(sort "$work/mpi.csv") <(sort "$work/mpi2.csv") ||
  fail "reel predict under mpirun -n 2 differs from one process's"
for r in 0 1; do
  untag "$work/predict2.err" | grep -q "^reel predict: rank $r of 2 predicted [0-9]* videos" ||
    fail "rank $r did not say its share: $(cat "$work/predict2.err")"
done
alone=$("$reel" eval --checkpoint "$work/mpi/checkpoints" --data "$work/data/*.tfrecord" --json)
"${mpirun[@]}" -n 2 "$reel" eval --checkpoint "$work/mpi/checkpoints" \
  --data "$work/data/*.tfrecord" --json > "$work/eval2.out" 2> "$work/eval2.err" ||
  fail "mpirun -n 2 reel eval failed: $(cat "$work/eval2.err")"
two=$(untag "$work/eval2.out")
[ "$(printf '%s\n' "$two" | grep -c '"videos": 192')" = 1 ] ||
  fail "reel eval under mpirun -n 2 did not print one line of all 192 videos: $two"
# Each metric within 1e-6 of one process's (the ranks' predictions are merged, not averaged).
printf '%s\n%s\n' "$alone" "$two" | awk '{ gsub(/[{}",]/, ""); for (i = 1; i < NF; i += 2) v[NR, $i] = $(i + 1) }
  END { split("gap: hit_at_1: perr: map:", f, " "); for (j in f) { d = v[1, f[j]] - v[2, f[j]]
        if (v[1, f[j]] == "" || d > 1e-6 || d < -1e-6) { print f[j] " " v[1, f[j]] " " v[2, f[j]]; bad = 1 } }
        exit bad }' > "$work/eval_compare.out" ||
  fail "reel eval under mpirun -n 2 differs from one process's: $(cat "$work/eval_compare.out")"
# Ranks started with different configs (an MPMD job, one rank's learning rate changed) are refused
# on every rank before training, and the run's checkpoints stay as they were.
before=$(cd "$work/mpi/checkpoints" && ls -l --time-style=+%s.%N)
if "${mpirun[@]}" -n 1 "$reel" train --config "$work/mpi.pbtxt" --resume --set trainer.steps=14 : \
     -n 1 "$reel" train --config "$work/mpi.pbtxt" --resume --set trainer.steps=14 \
     --set trainer.learning_rate.base=0.5 > "$work/differ.out" 2> "$work/differ.err"; then
  fail "ranks with different learning rates trained: $(cat "$work/differ.err")"
fi
[ "$(untag "$work/differ.err" | grep -c "every rank must use the same trainer.learning_rate.base")" = 2 ] ||
  fail "not every rank named the differing learning rate: $(cat "$work/differ.err")"
[ "$(cd "$work/mpi/checkpoints" && ls -l --time-style=+%s.%N)" = "$before" ] ||
  fail "the refused run changed the checkpoints"
echo "PASS: $want (mpi = inproc); mpi 2 x 16 = 1 x 32 on $(($(wc -l < "$work/single.csv") - 1)) videos x 8 labels, clip $clip binding; differing configs refused"
