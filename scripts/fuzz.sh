#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/, clang with ASan + UBSan) into build-fuzz/ and runs
# each on its seed corpus.
#
#   scripts/fuzz.sh [--seconds S] [--runs N] [--build-only | --no-build] [target ...]
#
# Default: every target for 30 seconds; given both limits, a target stops at the first reached.
# Targets are the names before _fuzz (tfrecord_framing, yt8m_decode, config, checkpoint, s3_xml,
# ...). Inputs a run finds go to build-fuzz/work/<target>/
# (the seed folders are only read), crashing inputs to build-fuzz/crashes/<target>/, the log to
# build-fuzz/logs/<target>.log. Exits non-zero when a target crashes, leaks, times out (one input
# over 10 s) or runs out of memory (2 GB); a line per target gives executions and coverage.
set -euo pipefail
cd "$(dirname "$0")/.."

limit=()
build_only=0
no_build=0
targets=()
while (($#)); do
  case "$1" in
    --seconds) limit+=(-max_total_time="$2"); shift 2 ;;
    --runs) limit+=(-runs="$2"); shift 2 ;;
    --build-only) build_only=1; shift ;;
    --no-build) no_build=1; shift ;;  # e.g. several targets run at once on one build
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
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
  # Line tables only (-g1): a crash's stack still names file and line, at a fraction of the
  # compile time of full debug info.
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DREEL_FUZZ=ON \
    -DREEL_BUILD_TESTS=OFF -DREEL_BUILD_BENCH=OFF -DREEL_PLUGINS="$plugins" >/dev/null
  cmake --build "$build" -j"$jobs" --target reel_fuzzers
fi
((build_only)) && exit 0

if ((${#targets[@]} == 0)); then
  for bin in "$build"/bin/*_fuzz; do
    name=$(basename "$bin")
    targets+=("${name%_fuzz}")
  done
fi

failed=()
for t in "${targets[@]}"; do
  bin="$build/bin/${t}_fuzz"
  [[ -x "$bin" ]] || { echo "fuzz.sh: no target $t ($bin)" >&2; exit 2; }
  work="$build/work/$t" crashes="$build/crashes/$t" log="$build/logs/$t.log"
  mkdir -p "$work" "$crashes" "$(dirname "$log")"
  seeds=()
  for d in "tests/fuzz/corpus/$t" "$build/fuzz-corpus/$t"; do [[ -d "$d" ]] && seeds+=("$d"); done
  status=0
  "$bin" "${limit[@]}" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$crashes/" "$work" "${seeds[@]}" >"$log" 2>&1 || status=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -1 || true)
  if ((status)); then
    failed+=("$t")
    echo "== $t: FAILED (exit $status) after ${runs:-?} runs; see $log, input in $crashes/"
    grep -m3 -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:' "$log" || true
  else
    echo "== $t: ok, ${runs:-?} runs, ${speed:-?} exec/s, $cov"
  fi
done
if ((${#failed[@]})); then
  echo "fuzz.sh: failed: ${failed[*]}" >&2
  exit 1
fi
