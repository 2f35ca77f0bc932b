#!/usr/bin/env bash
# The whole test suite, from a fresh Debian bookworm machine (as root): installs what is needed,
# builds what is installed and the benches, runs the Debian package's test with CTest, then
#   * rebuilds everything but the benches under AddressSanitizer + UndefinedBehaviorSanitizer and
#     runs every other test there, the install tests (label install) too: each test runs once,
#     under the sanitizers (REEL_ASAN_PLUGINS /
#     REEL_ASAN_LABELS narrow this phase to some plugins / labels; then the first CTest run takes
#     every test);
#   * rebuilds the tests of the threaded parts (core, tcp, mpi, tfrecord, async_sgd) under
#     ThreadSanitizer and runs them again (REEL_TSAN_LABELS, default
#     core|sdk|tcp|mpi|tfrecord|async_sgd);
#   * builds the libFuzzer targets (tests/fuzz/) and runs each briefly on its seed corpus, failing
#     on any crash, leak or timeout (REEL_FUZZ_SECONDS each, default 15).
# Each phase prints its wall time and the CPU seconds it used (children's user + system).
# `.ci/run` runs exactly this.
#
# Build flags (CI only; scripts/build.sh alone keeps CMake's RelWithDebInfo, -O2 -g): line tables
# only everywhere (-g1: a failing test's backtrace still has file:line; full debug info costs
# compile and link time and nothing here reads it), the sanitizer builds at -O1 (what the
# sanitizers' documentation suggests: fewer checks optimised away, cheaper to compile), and in
# them the test binaries' own sources at -O0 (REEL_TEST_COMPILE_OPTIONS: assertions and fixtures
# are not what a test measures; the code under test keeps -O1). The release build makes only
# what is installed and the benches (reel_installables, reel_benches): it runs the install tests
# alone. CTest starts the minute-long tests first (COST in reel_add_tests), and the fuzz targets
# run a core each.
# CI took 2535 s on 2026-11-30 with every test binary in the release build, the TSan build at
# -O2 and the test sources at -O1; measured since, per translation unit (CPU seconds, machine
# loaded): a test source under ASan at -O1 5.8-15.6 s, at -O0 2.8-10.5 s (-30 to -60 %), of
# which parsing is only 1.6-3 s (so precompiled headers would gain little: tried, under 10 %).
# After (2026-12-01, a fresh clone of 28758b8, no ccache, the machine otherwise idle): 1741 s in
# all: release build 202 s / 382 CPU-s (before: 379 / 723), install tests 30 / 55, ASan build
# 571 / 1103 (606 / 1204, with more code since), its 648 tests 360 / 627, TSan build 261 / 501
# (362 / 716), its 425 tests 93 / 159, fuzz targets with their build 223 / 425.
# 2026-12-01 evening, on another VM (AMD EPYC, 2 cores; it compiles and runs these tests slower
# than the Intel Xeon of the figures above), a fresh clone of e3afda1, no ccache, the machine
# otherwise idle, the install tests under ASan for the first time: 2452 s in all (over the
# 2400 s aimed at): release build 281 s / 550 CPU-s, the Debian package's test 5 / 5, ASan build
# 720 / 1423, its 701 tests 603 / 1129 (the 5 install tests about 60 s of that, started first),
# TSan build 415 / 817, its 462 tests 170 / 307, fuzz targets with their build 247 / 468.
# 2026-12-01 late, the same VM, a fresh clone of c8bdd23 with builds through ccache
# (scripts/ccache.sh) and its cache cold (11 hits of 604): 2619 s in all: release build 294 s / 576
# CPU-s, the Debian package's test 7, ASan build 812 / 1600, its 707 tests 646 / 1217, TSan build
# 444 / 874, its 468 tests 179 / 317, fuzz targets with their build 235 / 443 (the cold run is
# over the 2400 s aimed at). A second fresh clone of the same commit in another folder right
# after it, the cache warm (580 hits of 604): 1018 s in all: release build 11 s, the Debian
# package's test 6, ASan build 102 (mostly linking), its tests 603, TSan build 47, its tests 171,
# fuzz targets with their build 76. CI on a machine that built the commit before sees the latter.
# 2026-12-02, another AMD EPYC VM (2 cores, AVX-512), a fresh Debian root: a fresh clone of
# 1f89007, ccache cold: 2185 s in all with install-deps (about 80 s): release build 260 s / 508
# CPU-s, the Debian package's test 4, ASan build 686 / 1355, its 723 tests 364 / 647, TSan build
# 369 / 703, its 484 tests 171 / 260, fuzz targets with their build 253 / 467. Compiling is 62% of
# that; so the sanitizer and fuzz builds became unity builds (-DCMAKE_UNITY_BUILD=ON, batches of
# 8 files): the ASan build's compiling took about 870 CPU-s instead of 1355 (-36%; the core
# library's 36 files 118 instead of 260). The release build stays file by file: it is what users
# build, and it shows that every file of the library and plugins compiles on its own. Then a fresh
# clone of a790be2 on the same root, ccache warm for the release build only (the unity builds'
# translation units are new): 1355 s in all: release build 17 s, the Debian package's test 4,
# ASan build 439 / 861 (before: 686 / 1355), its 723 tests 388 / 702, TSan build 193 / 366
# (369 / 703), its 484 tests 150 / 243, fuzz targets with their build 163 / 303 (253 / 467). With
# the release build cold as well (about 260 s) and install-deps downloading (about 80 s), a fresh
# machine's run comes to about 1700 s (2185 - 247 - 176 - 90).
# Measured (2026-11-30, CPU seconds = user + system of the phase's processes; the machine was at
# load 9-19, which stretches wall time but not CPU time):
#   * before, a fresh Debian root (no ccache), commit 35610bc, -O2 -g: the build of the library,
#     plugins and reel 576 CPU-s, of the tests and benches 632 CPU-s (1208 for the build phase);
#     the tests phase ended at 747 s wall, 600 s of it one test that timed out (TuneE2E.AKilled
#     WorkerRankUnderReelLaunchDoesNotStopTheSearch); CTest's time by label: e2e 825 s*proc,
#     install 210, models 86, mpi 59, core 31, s3 29, async_sgd 26, launch 23, tcp 20.
#   * the flags, on the same 9 translation units (every 24th of the ASan build's, compiled alone):
#     -O2 -g 60.4 CPU-s, -O2 -g1 52.3 (-13 %); ASan + UBSan -O2 -g 124.2, -O1 -g1 68.4 (-45 %).
#   * after, the ASan + UBSan tests at -O1 -g1 (labels core|tfrecord|tcp, 387 tests, before the sdk label): 76 CPU-s,
#     99 s wall.
#   * the whole suite under ASan + UBSan (2026-11-30, this machine, ccache shared with other
#     worktrees, load 8-17, the machine paused by others' benchmarks for minutes): the build of
#     every plugin and test 701 CPU-s (with ccache hits; a fresh root compiles everything), the
#     593 tests 537 CPU-s, 1316 s wall; CTest's time by label: install 904 s*proc (the three
#     out-of-tree builds timed out at 300 s while paused: they now run in the release build only),
#     e2e 802, models 249, core 200, s3 95, mpi 91, async_sgd 82, tcp 79, launch 70. The TSan
#     phase with async_sgd: its build (with ccache) 222 CPU-s, its 400 tests 109 CPU-s, 126 s wall
#     (labels async_sgd 113 s*proc, core 77, tcp 38, tfrecord 23). Not yet measured: a whole
#     test.sh run with these phases on CI.
#   * the mpi tests joining the TSan phase (2026-12-01, this machine at load 12-20, 2 cores shared
#     with ~5 engineers): the build of the mpi plugin and its two test binaries 28 CPU-s without
#     ccache (7 translation units, 62 s wall; `reel` and the other plugins are built for async_sgd
#     already); label mpi's 5 tests and AsyncTrain.ThreeMpiProcessesBeatTheBaseline (which the mpi
#     plugin's presence no longer skips) 55 / 55 / 55 CPU-s in three runs, 234-273 s wall at that
#     load (CTest runs them one at a time: PROCESSORS 2-3 of -j2; the polling ranks mostly wait);
#     the whole TSan phase's tests 431, 227 CPU-s, 539 s wall. On CI's idle machine that is about
#     +85 CPU-s in all; the wall time there not measured.
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
# everything is built and run here too. Measured before the install tests moved (2026-12-01, this
# machine at load 15, no ccache): under ASan their 5 took 132 CPU-s and 334 s wall, against
# 55 CPU-s / 30 s for the 6 here on CI: about 70 s more on CI's 2 cores.
asan_plugins=${REEL_ASAN_PLUGINS-}
asan_labels=${REEL_ASAN_LABELS-}
if [[ -z "$asan_plugins" && -z "$asan_labels" ]]; then
  # The release preset's: the Debian package's test and the Python module's (an interpreter
  # cannot load a sanitizer build's extension, so the sanitizer builds leave the module out).
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
