#!/bin/bash
# Runs "$@" while every build process on this machine (compilers, linkers, ninja, make, cmake,
# fuzzers) is held with SIGSTOP, so that a benchmark shares the cores only with what cannot be
# paused safely (running tests); the held ones are continued on exit, also on failure. Newcomers
# are held too, every half second, while the command runs. Root (or the same user) only.
#
#   nice -n -20 bench/quiet.sh bench/bilstm/run_bench.py --build build --out $TMPDIR/out
names='^(ninja|cc1plus|cc1|ccache|ld|ld.bfd|ld.gold|collect2|c[+][+]|g[+][+]|gcc|cmake|make|as|lto1|.*_fuzzer|fuzz_.*)$'
stopped=$(mktemp)
# shellcheck disable=SC2317  # called by the trap
cont() { xargs -r kill -CONT < "$stopped" 2>/dev/null; rm -f "$stopped"; }
trap cont EXIT INT TERM
stop_all() {
  # By name; and libFuzzer targets (tests/fuzz: <target>_fuzz) by their program's path, since
  # the kernel cuts a process name to 15 characters (tfrecord_framing_fuzz is "tfrecord_framin").
  { ps -eo pid=,comm= | awk -v re="$names" '$2 ~ re {print $1}'
    ps -eo pid=,args= | awk '{n = split($2, p, "/"); if (p[n] ~ /_fuzz$/) print $1}'
  } | while read -r p; do
    [ "$p" = "$$" ] && continue
    kill -STOP "$p" 2>/dev/null && echo "$p" >> "$stopped"
  done
}
stop_all
( while sleep 0.5; do stop_all; done ) &
watcher=$!
"$@"
rc=$?
kill "$watcher" 2>/dev/null; wait "$watcher" 2>/dev/null
exit $rc
