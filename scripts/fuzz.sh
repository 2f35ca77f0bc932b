#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/, clang with ASan + UBSan) into build-fuzz/ and runs
# each on its seed corpus.
#
#   scripts/fuzz.sh [--seconds S] [--runs N] [--jobs J] [--timeout T] [--build-only | --no-build]
#                   [target ...]
#
# Default: every target for 30 seconds; given both limits, a target stops at the first reached.
# --jobs J runs up to J targets at once (default 1: a long campaign gives each target a core).
# Targets are the names before _fuzz (tfrecord_framing, yt8m_decode, config, checkpoint, s3_xml,
# ...). Inputs a run finds go to build-fuzz/work/<target>/
# (the seed folders are only read), crashing inputs to build-fuzz/crashes/<target>/, the log to
# build-fuzz/logs/<target>.log. Exits non-zero when a target crashes, leaks, times out (one input
# over T s of wall time, default 10: a campaign at nice 19 on a busy machine needs more, since a
# starved fuzzer can wait that long on one input) or runs out of memory (2 GB); a line per
# target gives executions and coverage.
set -euo pipefail
cd "$(dirname "$0")/.."

limit=()
build_only=0
no_build=0
parallel=1
timeout=10
targets=()
while (($#)); do
  case "$1" in
    --seconds) limit+=(-max_total_time="$2"); shift 2 ;;
    --runs) limit+=(-runs="$2"); shift 2 ;;
    --build-only) build_only=1; shift ;;
    --no-build) no_build=1; shift ;;  # e.g. several targets run at once on one build
    --jobs) parallel="$2"; shift 2 ;;
    --timeout) timeout="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    -*) echo "fuzz.sh: unknown flag $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done

((${#limit[@]})) || limit=(-max_total_time=30)
build=${REEL_FUZZ_BUILD_DIR:-build-fuzz}
jobs=${REEL_JOBS:-$(nproc)}
# Only the plugins that parse outside bytes; the models are not fuzzed.
plugins="tfrecord;s3"
[[ -d plugins/tcp ]] && plugins+=";tcp"
if ((!no_build)); then
  source scripts/ccache.sh
  # CMakePresets.json's fuzz preset: clang, line tables only (-g1: a crash's stack still names
  # file and line, at a fraction of the compile time of full debug info), unity batches.
  cmake --preset fuzz -B "$build" "${ccache_args[@]}" -DREEL_PLUGINS="$plugins" >/dev/null
  cmake --build "$build" -j"$jobs" --target reel_fuzzers
fi
((build_only)) && exit 0

if ((${#targets[@]} == 0)); then
  for bin in "$build"/bin/*_fuzz; do
    name=$(basename "$bin")
    targets+=("${name%_fuzz}")
  done
fi

# One target: its summary line (and, on failure, the sanitizer's first lines) to
# $build/logs/T.result, which the summary below reads.
run_target() {
  local t=$1 bin="$build/bin/${1}_fuzz" work="$build/work/$1" crashes="$build/crashes/$1"
  local log="$build/logs/$1.log" result="$build/logs/$1.result" status=0 seeds=() d runs speed cov
  mkdir -p "$work" "$crashes" "$(dirname "$log")"
  rm -f "$result"
  for d in "tests/fuzz/corpus/$t" "$build/fuzz-corpus/$t"; do [[ -d "$d" ]] && seeds+=("$d"); done
  "$bin" "${limit[@]}" -timeout="$timeout" -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$crashes/" "$work" "${seeds[@]}" >"$log" 2>&1 || status=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -1 || true)
  if ((status)); then
    { echo "== $t: FAILED (exit $status) after ${runs:-?} runs; see $log, input in $crashes/"
      grep -m3 -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:' "$log" || true
    } >"$result"
    return
  fi
  echo "== $t: ok, ${runs:-?} runs, ${speed:-?} exec/s, $cov" >"$result"
}

for t in "${targets[@]}"; do
  [[ -x "$build/bin/${t}_fuzz" ]] || { echo "fuzz.sh: no target $t ($build/bin/${t}_fuzz)" >&2; exit 2; }
done
# Up to --jobs targets at once (each fuzzer is one process on one core).
running=0
for t in "${targets[@]}"; do
  if ((running >= parallel)); then wait -n || true; running=$((running - 1)); fi
  run_target "$t" &
  running=$((running + 1))
done
wait || true
failed=()
for t in "${targets[@]}"; do
  cat "$build/logs/$t.result" 2>/dev/null || echo "== $t: FAILED (no result; see $build/logs/$t.log)"
  grep -qs '^== [^ ]*: ok,' "$build/logs/$t.result" || failed+=("$t")
done
if ((${#failed[@]})); then
  echo "fuzz.sh: failed: ${failed[*]}" >&2
  exit 1
fi
