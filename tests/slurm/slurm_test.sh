#!/usr/bin/env bash
# reel under a real Slurm: Debian's slurmctld and two slurmd, each node a simulated host with its
# own network namespace, address and host name (tests/slurm/cluster.sh), started here and stopped
# on exit, also on failure. Small synthetic video-level data and the logistic model.
#
#   1. `srun -N2 -n4 reel train` trains over tcp and checkpoints; every rank says where srun put it,
#      meeting rank 0 on a port Slurm reserved for the step (MpiParams=ports);
#      tasks that Slurm bound to cores of their own (task/affinity) keep them, tasks it did not
#      bind (--cpu-bind=none) divide their node's.
#   1c. `srun -N2 -n2 python3 train.py` (reel.train): the same placement, one group, one checkpoint.
#   2. A bad srun environment is refused naming the variable, and a step over two nodes without
#      REEL_SECRET is refused with the line that sets one, before anything trains; so is rank 0
#      placed off the node list's first host (srun -m arbitrary -w node02,node01).
#   3. A task killed with SIGKILL is named, by srun and by the ranks that lost it; under async_sgd
#      it is dropped and the others train to the end.
#   3c. `srun --mpi=pmix` trains over the mpi transport, and so does `mpirun` inside sbatch (when
#      the mpi plugin is built).
#   4. examples/slurm/train.sbatch, interrupted by `scancel --signal=TERM`: rank 0 checkpoints,
#      the job requeues itself and resumes, and ends where an uninterrupted run ends.
#   4b. The same from the time limit: `--signal=B:TERM@75` reaches the script, which passes it on.
#   5. examples/slurm/eval.sbatch, train_async.sbatch and tune.sbatch complete; a search whose
#      worker task is killed fails that trial only, naming the rank. Every example's rank computes
#      on the --cpus-per-task CPUs it was given (half a node's: on a 2-CPU node 1, and srun's
#      dropping of --cpus-per-task is then not seen).
#   6. Two train.sbatch jobs at once, both with rank 0 on node01: each meets it on a port of its
#      own, and both train to the end.
#   7. Two TERMs 0.3 s apart to train.sbatch's step: rank 0 still finishes the checkpoint of the
#      step it stopped at, and the job requeues itself.
#
#   tests/slurm/slurm_test.sh BUILD/bin/reel
# Exit 77 (skip): not root, no namespaces, or Slurm and munge not installed.
set -euo pipefail
reel=$(realpath "$1")
export REEL_SLURM_BUILD=${reel%/bin/reel}  # the build tree, carried into every host (cluster.sh)
here=$(cd "$(dirname "$0")" && pwd)
examples=$(cd "$here/../../examples/slurm" && pwd)
name=reelslurm$$
work=$(mktemp -d /var/tmp/reel-slurm.XXXXXX)  # not /tmp: every simulated host has its own
chmod 755 "$work"
cluster=$work/cluster
keep=1  # the files stay for a look after a failure (and with REEL_SLURM_KEEP=1)
cleanup() {
  "$here/cluster.sh" down "$name" "$cluster" || true
  if ((keep)); then echo "slurm_test: files kept in $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

status=0
"$here/cluster.sh" up "$name" "$cluster" 2 || status=$?
if ((status == 77)); then
  echo "SKIP: Slurm cannot run here (see the message above)"
  keep=0
  exit 77
fi
((status == 0)) || exit "$status"

run() { (cd "$work" && "$here/cluster.sh" run "$name" "$cluster" "$@"); }
fail() {
  echo "FAIL: $*"
  # Newest first and whole (the failing step's), the earlier steps' ends after it: CI keeps only
  # a part of a long output.
  local f first=1 logs
  mapfile -t logs < <(find "$work" -maxdepth 1 \( -name '*.out' -o -name '*.log' \) -printf '%T@ %p\n' |
    sort -rn | cut -d' ' -f2)
  for f in "${logs[@]}"; do
    echo "---- $f"
    if ((first)); then cat "$f"; else tail -n 20 "$f"; fi
    first=0
  done
  exit 1
}
expect() {  # FILE TEXT: FILE holds TEXT
  grep -qF -- "$2" "$1" || fail "$1 does not say '$2'"
}
# Waits for batch job ID to end (timeout in seconds); prints its final state.
wait_job() {
  local id=$1 limit=$2 state
  for ((t = 0; t < limit; t++)); do
    state=$(run scontrol show job "$id" -o | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
    case "$state" in
      COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY) echo "$state"; return ;;
    esac
    sleep 1
  done
  echo "TIMEOUT_WAITING($state)"
}

has_files() { compgen -G "$1/*" >/dev/null; }

# Kills task RANK of a reel command (on node02, namespace NAME-r2); prints its pid, or nothing.
kill_rank() {  # RANK
  local pid
  for pid in $(ip netns pids "$name-r2"); do
    if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "SLURM_PROCID=$1" &&
      grep -qa reel "/proc/$pid/cmdline" 2>/dev/null; then
      kill -9 "$pid"
      echo "$pid"
      return
    fi
  done
}
# Kills task RANK once DIR holds a checkpoint; prints its pid.
kill_rank_at_checkpoint() {  # DIR RANK
  for ((t = 0; t < 600; t++)); do
    sleep 0.2
    has_files "$1" && { kill_rank "$2"; return; }
  done
}
async_optimizer='s/optimizer { name: "sync" options { key: "rule" value: "adam" } }/optimizer { name: "async_sgd" options { key: "rule" value: "adagrad" } }/'

"$reel" synth --out "$work/data/train" --videos 384 --classes 8 --level video --shards 4 --seed 1 >/dev/null
config() {  # STEPS CHECKPOINT_DIR
  cat <<CONFIG
data {
  name: "tfrecord"
  options { key: "files" value: "$work/data/train/*.tfrecord" }
  options { key: "level" value: "video" }
}
model { name: "logistic" }
optimizer { name: "sync" options { key: "rule" value: "adam" } }
trainer {
  steps: $1
  batch_size: 16
  seed: 1
  num_classes: 8
  learning_rate { base: 0.0005 }
  log_every_steps: 50
  checkpoint_every_steps: 50
  checkpoint_dir: "$2"
}
CONFIG
}
export REEL_SECRET="slurm-test-$$-$RANDOM"

# 1. srun -N2 -n4 reel train.
config 30 "$work/ckpt_srun" >"$work/srun.pbtxt"
run timeout 180 srun -N2 -n4 --label "$reel" train --config "$work/srun.pbtxt" \
  >"$work/srun_train.log" 2>&1 || fail "srun -N2 -n4 reel train failed"
for r in 0 1 2 3; do
  grep -qE "^$r: reel: started by srun \(job [0-9]+, step 0\): rank $r of 4, transport tcp, coordinator node01:12[0-9]{3}, [0-9]+ CPUs?$" \
    "$work/srun_train.log" || fail "rank $r did not say where srun put it, on a port Slurm reserved"
done
expect "$work/srun_train.log" "0: trained 30 steps"
has_files "$work/ckpt_srun" || fail "no checkpoint from srun -N2 -n4"
# task/affinity bound each task to a core of its own: no rank shares it.
if grep -q "share this process's" "$work/srun_train.log"; then fail "ranks bound apart shared cores"; fi
echo "ok 1: srun -N2 -n4 reel train trained over tcp across node01 and node02 and checkpointed"

# 1c. srun -N2 -n2 python3 train.py: reel.train's processes form one group as `reel train`'s do.
# The Python module of this build, else of REEL_SLURM_PYTHON_BUILD (CMakeLists.txt: the release
# build beside a sanitizer build, which has none: no interpreter loads a sanitizer runtime).
python_build=""
for b in "$REEL_SLURM_BUILD" "${REEL_SLURM_PYTHON_BUILD:-}"; do
  if [[ -n "$b" ]] && compgen -G "$b/python/reel/_reel*.so" >/dev/null; then python_build=$b; break; fi
done
if [[ -n "$python_build" ]]; then
  cat >"$work/train.py" <<PY
import reel
r = reel.train("$work/srun.pbtxt", {"trainer.steps": 10, "trainer.checkpoint_dir": "$work/ckpt_py"},
               verbose=True)
print("trained", r.steps, "steps, checkpoint", repr(r.checkpoint), flush=True)
PY
  run timeout 180 srun -N2 -n2 --label env PYTHONPATH="$python_build/python" /usr/bin/python3 \
    "$work/train.py" >"$work/srun_python.log" 2>&1 || fail "srun -N2 -n2 python3 train.py failed"
  for r in 0 1; do
    grep -qE "^$r: reel: started by srun \(job [0-9]+, step [0-9]+\): rank $r of 2, transport tcp, coordinator node01:12[0-9]{3}, [0-9]+ CPUs?$" \
      "$work/srun_python.log" || fail "python rank $r did not say where srun put it"
  done
  expect "$work/srun_python.log" "0: trained 10 steps, checkpoint '$work/ckpt_py/ckpt-0000000010.reelckpt'"
  expect "$work/srun_python.log" "1: trained 10 steps, checkpoint ''"
  [[ $(ls "$work/ckpt_py") == ckpt-0000000010.reelckpt ]] || fail "not one checkpoint from python"
  echo "ok 1c: srun -N2 -n2 python3 train.py trained as one 2-rank group and checkpointed once"
else
  echo "skipped 1c: no Python module in $REEL_SLURM_BUILD or REEL_SLURM_PYTHON_BUILD"
fi

# 1b. Not bound (--cpu-bind=none): the two tasks of a node divide its cores.
run timeout 180 srun -N2 -n4 --cpu-bind=none --label "$reel" train --config "$work/srun.pbtxt" \
  --set trainer.checkpoint_dir="$work/ckpt_unbound" >"$work/srun_unbound.log" 2>&1 ||
  fail "srun --cpu-bind=none reel train failed"
for r in 0 1 2 3; do
  expect "$work/srun_unbound.log" "$r: reel: 2 ranks share this process's $(nproc) core(s) (REEL_LOCAL_WORLD_SIZE=2"
done
echo "ok 1b: unbound, the two tasks of each node divided its $(nproc) cores"

# 2. Bad environments, refused before training.
config 30 "$work/ckpt_bad" >"$work/bad.pbtxt"
if run timeout 60 srun -N1 -n2 bash -c "SLURM_PROCID=7 exec '$reel' train --config '$work/bad.pbtxt'" \
  >"$work/bad_procid.log" 2>&1; then fail "SLURM_PROCID=7 of 2 tasks was accepted"; fi
expect "$work/bad_procid.log" "SLURM_PROCID=7 is outside the step's SLURM_STEP_NUM_TASKS=2"
if run timeout 60 srun -N2 -n2 env -u REEL_SECRET "$reel" train --config "$work/bad.pbtxt" \
  >"$work/bad_secret.log" 2>&1; then fail "a step over two nodes ran without REEL_SECRET"; fi
# shellcheck disable=SC2016 # the very line reel prints
expect "$work/bad_secret.log" 'export REEL_SECRET=$(openssl rand -hex 32)'
[[ ! -e "$work/ckpt_bad" ]] || fail "a refused step wrote a checkpoint"
# Rank 0 on node02, the ranks of node01 (the first host) waiting for it there: refused on both.
if run timeout 60 srun -N2 -n2 -m arbitrary -w node02,node01 --label "$reel" train \
  --config "$work/bad.pbtxt" >"$work/bad_rank0.log" 2>&1; then fail "rank 0 off node01 was accepted"; fi
grep -q "^0: .*SLURM_DISTRIBUTION=arbitrary placed it on node02 (SLURM_NODEID=1" "$work/bad_rank0.log" ||
  fail "rank 0 did not say it is off the first host"
grep -q "^1: .*the ranks of this step meet rank 0 on node01, .* placed it elsewhere" \
  "$work/bad_rank0.log" || fail "rank 1 did not say rank 0 is not on node01"
[[ ! -e "$work/ckpt_bad" ]] || fail "a refused step wrote a checkpoint"
echo "ok 2: SLURM_PROCID outside the step, a missing REEL_SECRET and rank 0 off the first host" \
  "are refused, nothing trained"

# 3. A task killed: srun and the surviving ranks name it.
config 100000000 "$work/ckpt_kill" >"$work/kill.pbtxt"
(run timeout 180 srun -N2 -n4 --label "$reel" train --config "$work/kill.pbtxt" \
  >"$work/kill.log" 2>&1 || true) &
step=$!
victim=$(kill_rank_at_checkpoint "$work/ckpt_kill" 2)
[[ -n "$victim" ]] || fail "rank 2 never ran"
wait "$step"
expect "$work/kill.log" "task 2: Killed"
grep -E "^[013]: .*rank 2" "$work/kill.log" >/dev/null || fail "no surviving rank named rank 2"
echo "ok 3: rank 2 killed: srun and the surviving ranks named it"

# 3b. async_sgd: a worker task killed is dropped; the others finish and rank 0 names it.
if "$reel" plugins show async_sgd >/dev/null 2>&1; then
  config 8000 "$work/ckpt_async_kill" | sed "$async_optimizer" >"$work/async_kill.pbtxt"
  (run timeout 180 srun -N2 -n4 --kill-on-bad-exit=0 --label "$reel" train \
    --config "$work/async_kill.pbtxt" >"$work/async_kill.log" 2>&1 || true) &
  step=$!
  victim=$(kill_rank_at_checkpoint "$work/ckpt_async_kill" 3)
  [[ -n "$victim" ]] || fail "async rank 3 never ran"
  wait "$step"
  expect "$work/async_kill.log" "task 3: Killed"
  expect "$work/async_kill.log" "0: served parameters until every worker finished"
  grep -q "^0: .*worker rank 3 was lost" "$work/async_kill.log" || fail "rank 0 did not name rank 3"
  [[ -e "$work/ckpt_async_kill/ckpt-0000008000.reelckpt" ]] || fail "the async run did not finish"
  echo "ok 3b: async_sgd worker rank 3 killed: dropped and named, the others trained to the end"
fi

# 3c. srun --mpi=pmix: Open MPI finds rank and size through Slurm's PMIx; transport mpi.
if "$reel" plugins show mpi >/dev/null 2>&1; then
  config 30 "$work/ckpt_pmix" >"$work/pmix.pbtxt"
  run timeout 180 srun --mpi=pmix -N2 -n2 --label "$reel" train --config "$work/pmix.pbtxt" \
    >"$work/pmix.log" 2>&1 || fail "srun --mpi=pmix reel train failed"
  for r in 0 1; do
    grep -qE "^$r: reel: started by srun \(job [0-9]+, step [0-9]+\): rank $r of 2, transport mpi, [0-9]+ CPUs?$" \
      "$work/pmix.log" || fail "rank $r did not say it runs over mpi"
  done
  expect "$work/pmix.log" "0: trained 30 steps"
  has_files "$work/ckpt_pmix" || fail "no checkpoint from srun --mpi=pmix"
  echo "ok 3c: srun --mpi=pmix -N2 -n2 reel train trained over the mpi transport"

  # 3d. mpirun inside sbatch: Open MPI starts its daemons with srun and places the ranks itself;
  # reel leaves Slurm's variables (the daemons') alone. btl self,tcp: only tcp between the nodes.
  config 30 "$work/ckpt_mpirun" >"$work/mpirun.pbtxt"
  mpirun_job=$(run sbatch --parsable -N2 -n4 --chdir="$work" --output="$work/mpirun.out" \
    --wrap "mpirun --allow-run-as-root -n 4 --mca btl self,tcp '$reel' train --config '$work/mpirun.pbtxt'")
  [[ $(wait_job "$mpirun_job" 300) == COMPLETED ]] || fail "mpirun inside sbatch failed"
  [[ $(grep -c "using transport 'mpi'" "$work/mpirun.out") == 4 ]] || fail "mpirun's ranks did not use mpi"
  expect "$work/mpirun.out" "(OMPI_COMM_WORLD_LOCAL_SIZE=2, 1 in this process)"
  if grep -q "started by srun" "$work/mpirun.out"; then fail "mpirun's ranks took the daemons' step"; fi
  has_files "$work/ckpt_mpirun" || fail "no checkpoint from mpirun inside sbatch"
  echo "ok 3d: mpirun -n 4 inside sbatch -N2 trained over mpi, 2 ranks a node"
else
  echo "skipped 3c, 3d: the mpi plugin is not built"
fi

# 4. examples/slurm/train.sbatch interrupted by `scancel --signal=TERM`, requeued, resumed.
steps=6000
config $steps "$work/ckpt_whole" >"$work/whole.pbtxt"
config $steps "$work/ckpt_preempted" >"$work/preempted.pbtxt"
# The examples ask for 8 CPUs a task; here each of a node's two tasks has half of it.
per_task=$(($(nproc) / 2 > 1 ? $(nproc) / 2 : 1))
submit() {  # OUTPUT SCRIPT ARGS...: submits an example, prints its job id
  local out=$1
  shift
  run sbatch --parsable --chdir="$work" --output="$out" --export="ALL,REEL=$reel" \
    --cpus-per-task="$per_task" "$@"
}
# Every rank of an example's step said it computes on its task's CPUs.
expect_cpus() {  # OUTPUT RANKS
  (($(grep -cE "reel: started by srun .*, $per_task CPUs?$" "$1") >= $2)) ||
    fail "$1: not every rank computes on the $per_task CPU(s) of its task"
}
whole=$(submit "$work/whole.out" "$examples/train.sbatch" "$work/whole.pbtxt")
[[ $(wait_job "$whole" 300) == COMPLETED ]] || fail "train.sbatch did not complete"
expect_cpus "$work/whole.out" 4
preempted=$(submit "$work/preempted.out" "$examples/train.sbatch" "$work/preempted.pbtxt")
for ((t = 0; t < 1200; t++)); do  # until rank 0 has written a checkpoint
  has_files "$work/ckpt_preempted" && break
  sleep 0.1
done
run scancel --signal=TERM "$preempted"
for ((t = 0; t < 120; t++)); do
  run scontrol show job "$preempted" -o | grep -q "JobState=PENDING.*Restarts=1" && break
  sleep 1
done
# Slurm holds a requeued job back for two minutes (its BeginTime), not a test's while; but a
# restart within the second the nodes revoked the first run's credential is refused ("Job
# credential revoked"), so a few seconds pass first.
sleep 3
run scontrol update JobId="$preempted" StartTime=now
[[ $(wait_job "$preempted" 300) == COMPLETED ]] || fail "the requeued train.sbatch did not complete"
expect "$work/preempted.out" "interrupted at step"
expect "$work/preempted.out" "requeueing job $preempted to resume"
expect "$work/preempted.out" "run 2, on node[01-02]"
expect "$work/preempted.out" "trained $steps steps"
expect "$work/preempted.out" "resumed from $work/ckpt_preempted/ckpt-"
final_loss() { grep -o "trained $steps steps.*final loss [0-9.]*" "$1" | sort -u; }
[[ -n "$(final_loss "$work/whole.out")" && "$(final_loss "$work/whole.out")" == "$(final_loss "$work/preempted.out")" ]] ||
  fail "the resumed run ended elsewhere: '$(final_loss "$work/preempted.out")' vs '$(final_loss "$work/whole.out")'"
# Their final checkpoints score the same, to the 6 decimals printed.
for run_name in whole preempted; do
  "$reel" eval --checkpoint "$work/ckpt_$run_name" --data "$work/data/train/*.tfrecord" --json \
    >"$work/final_$run_name.json" 2>/dev/null || fail "reel eval of ckpt_$run_name failed"
done
[[ -s "$work/final_whole.json" ]] || fail "reel eval printed nothing"
cmp -s "$work/final_whole.json" "$work/final_preempted.json" ||
  fail "the resumed run's final checkpoint scores differently: $(cat "$work"/final_*.json)"
echo "ok 4: train.sbatch stopped by scancel --signal=TERM checkpointed, requeued itself and" \
  "resumed to the uninterrupted run's final loss ($(final_loss "$work/whole.out")) and metrics"

# 4b. The same through the time limit: --signal=B:TERM@75 of a 2-minute job signals the batch
# script 45 s after the start, or up to about 30 s sooner (slurmctld checks the limits now and
# then), when the ranks train; it passes TERM to them, they checkpoint, and it requeues the job.
config 100000000 "$work/ckpt_limit" >"$work/limit.pbtxt"
limited=$(submit "$work/limit.out" --time=2 --signal=B:TERM@75 "$examples/train.sbatch" \
  "$work/limit.pbtxt")
for ((t = 0; t < 120; t++)); do
  run scontrol show job "$limited" -o | grep -q "Restarts=1" && break
  sleep 1
done
run scancel "$limited"
expect "$work/limit.out" "interrupted at step"
expect "$work/limit.out" "requeueing job $limited to resume"
has_files "$work/ckpt_limit" || fail "no checkpoint before the time limit"
echo "ok 4b: --signal=B:TERM@75 before the time limit: checkpointed and requeued"

# 5. The other examples: eval (against one process), async training, a search.
eval_job=$(submit "$work/eval.out" "$examples/eval.sbatch" "$work/ckpt_srun" \
  "$work/data/train/*.tfrecord" --json)
"$reel" eval --checkpoint "$work/ckpt_srun" --data "$work/data/train/*.tfrecord" --json \
  >"$work/eval_alone.json" 2>/dev/null
[[ $(wait_job "$eval_job" 300) == COMPLETED ]] || fail "eval.sbatch did not complete"
field() { grep -o "\"$1\": [0-9.]*" "$2" | awk '{print $2}'; }
for f in videos gap hit_at_1 perr map; do
  awk -v a="$(field "$f" "$work/eval_alone.json")" -v b="$(field "$f" "$work/eval.out")" \
    'BEGIN { exit !(a != "" && b != "" && a - b <= 1e-6 && b - a <= 1e-6) }' ||
    fail "eval.sbatch's $f differs from one process's"
done
expect_cpus "$work/eval.out" 4
echo "ok 5a: eval.sbatch over 4 tasks of $per_task CPU(s) each printed one process's metrics"

if "$reel" plugins show async_sgd >/dev/null 2>&1; then
  config 200 "$work/ckpt_async" | sed "$async_optimizer" >"$work/async.pbtxt"
  async_job=$(submit "$work/async.out" "$examples/train_async.sbatch" "$work/async.pbtxt")
  [[ $(wait_job "$async_job" 300) == COMPLETED ]] || fail "train_async.sbatch did not complete"
  expect "$work/async.out" "served parameters until every worker finished"
  has_files "$work/ckpt_async" || fail "no checkpoint from train_async.sbatch"
  echo "ok 5b: train_async.sbatch trained with async_sgd (rank 0 serving) and checkpointed"
else
  echo "skipped 5b: the async_sgd plugin is not built"
fi

cat >"$work/search.pbtxt" <<SEARCH
base {
  data { name: "tfrecord" options { key: "files" value: "$work/data/train/*.tfrecord" }
         options { key: "level" value: "video" } }
  eval_data { name: "tfrecord" options { key: "files" value: "$work/data/train/*.tfrecord" }
              options { key: "level" value: "video" } }
  model { name: "logistic" }
  optimizer { name: "sync" options { key: "rule" value: "adam" } }
  trainer { steps: 5 batch_size: 16 seed: 4 num_classes: 8 }
}
dimension { field: "trainer.learning_rate.base" values: ["0.01", "0.03", "0.1", "0.3"] }
SEARCH
tune_job=$(submit "$work/tune.out" "$examples/tune.sbatch" "$work/search.pbtxt" "$work/tune")
[[ $(wait_job "$tune_job" 300) == COMPLETED ]] || fail "tune.sbatch did not complete"
[[ $(grep -c '"FINISHED"' "$work/tune/journal.jsonl") == 4 ]] || fail "tune.sbatch did not finish 4 trials"
[[ -s "$work/tune/best.pbtxt" ]] || fail "tune.sbatch wrote no best.pbtxt"
echo "ok 5c: tune.sbatch ran 4 trials over the allocation's 3 worker tasks"

# 5d. A search whose worker task is killed: its trial fails naming it, the others finish.
sed 's/steps: 5 /steps: 20000 /' "$work/search.pbtxt" >"$work/search_kill.pbtxt"
(run timeout 300 srun -N2 -n4 --kill-on-bad-exit=0 --label "$reel" tune \
  --config "$work/search_kill.pbtxt" --workdir "$work/tune_kill" >"$work/tune_kill.log" 2>&1 ||
  true) &
step=$!
victim=
for ((t = 0; t < 600; t++)); do
  sleep 0.2
  started=$(grep -c '"STARTED"' "$work/tune_kill/journal.jsonl" 2>/dev/null) || started=0
  ((started >= 3)) || continue
  victim=$(kill_rank 2)
  break
done
[[ -n "$victim" ]] || fail "tune rank 2 never ran a trial"
wait "$step"
expect "$work/tune_kill.log" "task 2: Killed"
expect "$work/tune_kill.log" "0: results: $work/tune_kill/results.csv"
journal=$work/tune_kill/journal.jsonl
(($(grep -c '"FINISHED"' "$journal") + $(grep -c '"FAILED"' "$journal") == 4)) ||
  fail "the search did not account for its 4 trials"
(($(grep -c '"FAILED"' "$journal") == 1 && $(grep -c 'worker rank 2 died' "$journal") == 1)) ||
  fail "the killed worker's trial was not failed naming rank 2"
echo "ok 5d: a search's worker task killed: its trial failed naming rank 2, the search finished"

# 6. Two jobs at once, one task a node each: both rank 0s on node01, each on its step's ports.
config 3000 "$work/ckpt_pair_a" >"$work/pair_a.pbtxt"
config 3000 "$work/ckpt_pair_b" >"$work/pair_b.pbtxt"
pair_a=$(submit "$work/pair_a.out" --ntasks-per-node=1 "$examples/train.sbatch" "$work/pair_a.pbtxt")
pair_b=$(submit "$work/pair_b.out" --ntasks-per-node=1 "$examples/train.sbatch" "$work/pair_b.pbtxt")
together=0
for ((t = 0; t < 600 && !together; t++)); do
  states=$(run squeue -h -j "$pair_a,$pair_b" -o %T | sort | uniq -c)
  [[ $states == *"2 RUNNING"* ]] && together=1
  [[ $states == *RUNNING* || $states == *PENDING* || $states == *CONFIGURING* ]] || break
  sleep 0.2
done
[[ $(wait_job "$pair_a" 300) == COMPLETED && $(wait_job "$pair_b" 300) == COMPLETED ]] ||
  fail "two train.sbatch jobs at once did not both complete"
((together)) || fail "the two jobs never ran at once"
coordinator() { grep -oE "rank 0 of 2, transport tcp, coordinator node01:[0-9]+" "$1" | grep -oE "[0-9]+$"; }
port_a=$(coordinator "$work/pair_a.out")
port_b=$(coordinator "$work/pair_b.out")
[[ -n $port_a && -n $port_b && $port_a != "$port_b" ]] ||
  fail "the two jobs' rank 0s did not listen on ports of their own ('$port_a', '$port_b')"
expect "$work/pair_a.out" "trained 3000 steps"
expect_cpus "$work/pair_a.out" 2
expect "$work/pair_b.out" "trained 3000 steps"
echo "ok 6: two train.sbatch jobs at once, both rank 0s on node01 (ports $port_a and $port_b)," \
  "both trained to the end"

# 7. Two TERMs 0.05 s apart to the step (a user's scancel after Slurm's, say): the first stops the
# ranks at a step, the second must not keep rank 0 from finishing that step's checkpoint. A wide
# moe (512 experts, 2048 videos a batch): steps of about a second and a checkpoint of 110 MB,
# written only at the stop, so that both TERMs land while the ranks still work. They are sent
# once step 1 has been logged.
"$reel" synth --out "$work/data/wide" --videos 2048 --classes 8 --level video --shards 2 --seed 2 >/dev/null
config 100000000 "$work/ckpt_term2" | sed -e "s|$work/data/train/|$work/data/wide/|" \
  -e 's/model { name: "logistic" }/model { name: "moe" options { key: "experts" value: "512" } }/' \
  -e 's/batch_size: 16/batch_size: 2048/' -e 's/log_every_steps: 50/log_every_steps: 1/' \
  >"$work/term2.pbtxt"
term2=$(submit "$work/term2.out" --ntasks-per-node=1 "$examples/train.sbatch" "$work/term2.pbtxt")
for ((t = 0; t < 1200; t++)); do
  grep -q " step 1/" "$work/term2.out" 2>/dev/null && break
  sleep 0.1
done
run scancel --signal=TERM "$term2.0"
sleep 0.05
# The example's trap forwards a TERM of its own, so the step may be gone by now: that the ranks
# got a TERM while stopping is their "already stopping" line, checked below.
run scancel --signal=TERM "$term2.0" || true
for ((t = 0; t < 120; t++)); do  # until requeued, or ended without
  run scontrol show job "$term2" -o | grep -qE "Restarts=1|JobState=(COMPLETED|FAILED|CANCELLED)" &&
    break
  sleep 1
done
run scancel "$term2"
stopped=$(grep -oE "interrupted at step [0-9]+; continue with --resume" "$work/term2.out" |
  grep -oE "[0-9]+" | head -1) || true
[[ -n $stopped ]] || fail "rank 0 did not finish its checkpoint after a second TERM"
[[ -e $(printf '%s/ckpt-%010d.reelckpt' "$work/ckpt_term2" "$stopped") ]] ||
  fail "no checkpoint of step $stopped, where the ranks stopped"
expect "$work/term2.out" "already stopping: finishing the step and the checkpoint"
expect "$work/term2.out" "requeueing job $term2 to resume"
echo "ok 7: two TERMs to the step: rank 0 checkpointed step $stopped and the job requeued itself"

[[ -n "${REEL_SLURM_KEEP:-}" ]] || keep=0
