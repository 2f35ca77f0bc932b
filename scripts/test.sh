#!/usr/bin/env bash
# The whole test suite on a fresh Debian bookworm machine, as root (`.ci/run` runs exactly this).
# Phases (each prints its wall time and CPU seconds; `cmake --workflow --preset P` runs one alone):
# 1. install-deps, check-paths, s3rver: a fresh machine and a clone with nothing beside it suffice.
# 2. release (gcc, -g1): what users build and install, file by file, and the benches; the Debian
#    package's test (the Python module's too: no interpreter loads a sanitizer build's extension)
#    and the learning runs (label learns: what a model learns, at the speed users train).
# 3. asan (clang, unity, -O1): every other test once under ASan + UBSan, the install tests too, and
#    a second compiler.
# 4. tsan: the threaded parts' tests again (REEL_TSAN_LABELS, default
#    core|sdk|tcp|mpi|tfrecord|async_sgd) under ThreadSanitizer, for data races.
# 5. fuzz: each libFuzzer target (tests/fuzz/) REEL_FUZZ_SECONDS (default 15) on its seed corpus;
#    a crash, leak or timeout fails the run.
# REEL_ASAN_PLUGINS / REEL_ASAN_LABELS narrow phase 3 (phase 2 then runs every test).
# Timings: bench/RESULTS.md (the latest whole run), bench/journal/ci_timings.md (their history and
# the measurements behind the build flags: -g1, sanitizer builds at -O1, test sources at -O0).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
scripts/check-paths.sh  # a clone with nothing beside it must be enough: no path outside the tree
# s3rver (npm) for the S3 tests; the tests read the same variable, whatever HOME is.
export REEL_S3RVER_DIR="${REEL_S3RVER_DIR:-${HOME:-/root}/.cache/reel/s3rver}"
scripts/install-s3rver.sh

jobs=${REEL_JOBS:-$(nproc)}
# Each phase is a preset of CMakePresets.json (folder, compiler, flags, targets, test filter and
# sanitizer options): `cmake --workflow --preset asan` runs that phase alone.
phase_start=$SECONDS
phase_cpu=0
times_file=$(mktemp)
trap 'rm -f "$times_file"' EXIT
phase() {
  local cpu
  times >"$times_file"  # the builtin, in this shell (a subshell would report its own children)
  # The second line: user and system time of every finished child, e.g. "12m3.40s 1m2.00s".
  cpu=$(awk 'END { split($1, u, /[ms]/); split($2, s, /[ms]/)
                    print int(u[1] * 60 + u[2] + s[1] * 60 + s[2]) }' "$times_file")
  if ((SECONDS > phase_start)); then echo "-- $((SECONDS - phase_start)) s, $((cpu - phase_cpu)) CPU-s"; fi
  phase_start=$SECONDS phase_cpu=$cpu
  echo "== $*"
}

# Every test runs once, under the sanitizers below, which see all this build would and more: the
# install tests too (label install: `cmake --install` of the instrumented build, the templates and
# examples/embed built out of tree against it with the sanitizer flags, their own tests and the
# embed example's training run instrumented). Only the Debian package's test runs here (nobody
# packages a sanitizer build). So this build compiles what is installed and the benches, not the
# tests' binaries. With a subset under the sanitizers (REEL_ASAN_PLUGINS / REEL_ASAN_LABELS set),
# everything is built and run here too (what the move cost: bench/journal/ci_timings.md).
asan_plugins=${REEL_ASAN_PLUGINS-}
asan_labels=${REEL_ASAN_LABELS-}
if [[ -z "$asan_plugins" && -z "$asan_labels" ]]; then
  # The release preset's: the Debian package's test and the Python module's (an interpreter
  # cannot load a sanitizer build's extension, so the sanitizer builds leave the module out), and
  # the learning runs (label learns), which the asan preset leaves out.
  release_tests=() asan_tests=()
  release_targets=  # the release preset's: reel_installables reel_benches
else
  release_tests=(-R .) asan_tests=(${asan_labels:+-L "$asan_labels"}) release_targets=all
fi
phase "build (preset release, gcc${release_targets:+; targets: $release_targets})"
REEL_PRESET=release REEL_BUILD_TARGETS="$release_targets" scripts/build.sh
phase "tests${release_tests[*]:+ (${release_tests[*]})}"
ctest --preset release -j"$jobs" "${release_tests[@]}"

# Under ASan + UBSan, sdk_install_debian_package is not even registered: it packages the build with
# cpack and runs the packaged reel, and nobody ships a sanitizer runtime. The out-of-tree builds of
# the other install tests get the sanitizer flags, a longer timeout and a COST that starts them
# first (sdk/tests/install/CMakeLists.txt).
# With clang (preset asan), so that the release build (gcc) and this one cover both compilers.
phase "build under AddressSanitizer + UndefinedBehaviorSanitizer (preset asan, clang; plugins: ${asan_plugins:-all})"
REEL_PRESET=asan scripts/build.sh "-DREEL_PLUGINS=$asan_plugins"
phase "tests under AddressSanitizer + UndefinedBehaviorSanitizer (${asan_tests[*]:-all})"
# The preset's ASAN_OPTIONS carry intercept_tls_get_addr=0: GCC 12's sanitizer runtime took some
# dynamic TLS blocks (of libraries loaded with dlopen: the plugins, oneDNN, the OpenMP runtime) for
# glibc 2.19's layout and LeakSanitizer's tracer crashed at exit ("Tracer caught signal 11").
# Clang 14's runtime is the same code (compiler-rt) with the same default, so the flag stays.
# LSAN_OPTIONS: scripts/lsan.supp.
ctest --preset asan -j"$jobs" "${asan_tests[@]}"

# ThreadSanitizer over the concurrent parts: the core (inproc transport, ring collectives, the
# sync optimizer, ranks as threads, the trainer's and tuner's threads (the distributed executor:
# TuneTest's ranks as threads, workers that die), checkpoints shared by local ranks), the tcp
# transport (its io thread, mailbox, failure notices; the trainer over tcp in job_test), the mpi
# transport (label mpi: its conformance suite and its own tests under `mpirun -n 2` and `-n 3`,
# `reel train` under mpirun; Send and Recv on different threads, leave notices, polled waits),
# the tfrecord source's prefetch thread and the parameter server (async_sgd: its server threads
# over inproc ranks, and `reel train` with it: ranks as threads, tcp processes under `reel
# launch`, mpi processes under mpirun, killed servers and workers). Only those tests and what they
# run are built (`reel` and the plugins tcp, mpi, tfrecord, moe for its logistic model,
# async_sgd). Left out: the tcp tests run by `reel launch` (one rank per process: the conformance
# suite, the automatic AllReduce waiting; their binaries are not built here) and the
# network-namespace runs (label netns: their heartbeat timeouts are set for uninstrumented ranks)
# and the mpi rank stopped after arrival (512 MiB a rank: too much for TSan's shadow memory).
# Any report fails its test: TSan makes the process exit 66 (under mpirun: that rank, so mpirun
# fails). scripts/tsan.supp holds the reports inside glibc (dynamic TLS blocks freed under ld.so's
# lock) and inside Open MPI (not instrumented: its lock-free lists and its lock order, by
# library; it says why that hides nothing of reel's), none in reel's code. Tests
# named *OnOpenMpThreads* are left out: libgomp is not instrumented, so TSan does not see its
# barriers and takes every result a worker thread wrote for a race. For the same reason the
# other tests run with OMP_NUM_THREADS=1: a model's own OpenMP regions (the dense layers'
# ShortGemm, in `reel eval` of AsyncTrain's logistic model) were reported as races between the
# region's threads and the caller's next use of its stack; on one thread TSan still checks
# everything else those tests do.
tsan_labels=${REEL_TSAN_LABELS-core|sdk|tcp|mpi|tfrecord|async_sgd}
phase "build under ThreadSanitizer (preset tsan: core, sdk, tcp, mpi, tfrecord, async_sgd tests)"
REEL_PRESET=tsan scripts/build.sh
phase "tests under ThreadSanitizer (labels: $tsan_labels)"
# The preset's filter leaves out what the paragraph above says, and sets OMP_NUM_THREADS=1 and
# TSAN_OPTIONS (scripts/tsan.supp).
ctest --preset tsan -j"$jobs" -L "$tsan_labels"

phase "fuzz targets, ${REEL_FUZZ_SECONDS:-15} s each"
scripts/fuzz.sh --seconds "${REEL_FUZZ_SECONDS:-15}" --jobs "$jobs"  # a target a core
phase "done"
# How much of the compiling the cache saved (scripts/ccache.sh): none on a machine's first run.
if [[ "${REEL_CCACHE:-1}" != 0 ]] && command -v ccache >/dev/null 2>&1; then ccache --show-stats; fi
