#!/usr/bin/env python3
"""One way to run an A/B benchmark: two or more commands alternated, N repetitions.

Each repetition runs every case once, in turn (rotating the order is --rotate), so drift on a
shared machine falls on every case alike. From each run's output the metrics are read (a regular
expression per metric, its first group, or its groups `key` and `value` for one number per key),
and per case and metric the min / median / max over the repetitions are printed; per repetition,
each case's metrics over the first case's (or the pairs --ratio names) give the ratios.

  bench/ab.py --reps 5 --out bench/out/ab_x \\
      --case base 'BASE/bin/reel launch -n 2 -- BASE/bin/ps_push_pull --transport tcp' \\
      --case new 'NEW/bin/reel launch -n 2 -- NEW/bin/ps_push_pull --transport tcp' \\
      --metric 'async=all_workers_round_trips_per_second=([0-9.]+)' \\
      --metric 'sync=all_ranks_gradients_per_second=([0-9.]+)' --quotient whole_job=async/sync

Metrics:
  --metric NAME=REGEX      the first group of the first match in stdout + stderr, or with the
                           named groups `key` and `value` every match as NAME@KEY
  --metric NAME=wall       the run's wall seconds (start to exit), measured here
  --quotient NAME=A/B      per run, metric A over metric B (either may be a number: 600/wall)
  --ratio CASE/BASE        which cases to compare per repetition (default: each over the first)

Every run's whole output is kept in OUT/<rep>_<case>.out (never overwritten: ab.py stops before
writing over a file), and every run's metrics, exit status and 1-minute load average before and
after it, one JSON object a line, in OUT/runs.jsonl; the summary goes to stdout and
OUT/summary.txt. Commands run under `bash -c` from the current folder, with AB_SCRATCH set to an
empty folder for the run's own files, removed after it (the output files are not). A run that
fails (non-zero exit or a metric not found) is recorded and left out of the summary.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def parse_metric(spec):
    name, sep, pattern = spec.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"--metric NAME=REGEX or NAME=wall, not {spec!r}")
    return name, None if pattern == "wall" else re.compile(pattern, re.M)


def parse_quotient(spec):
    m = re.fullmatch(r"([^=]+)=([^/]+)/(.+)", spec)
    if not m:
        raise argparse.ArgumentTypeError(f"--quotient NAME=A/B, not {spec!r}")
    return m.group(1), m.group(2), m.group(3)


def file_name(case):
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", case).strip("_") or "case"


def operand(values, name):
    try:
        return float(name)
    except ValueError:
        return values.get(name)


def run_once(args, rep, name, command):
    out_path = os.path.join(args.out, f"{rep}_{file_name(name)}.out")
    if os.path.exists(out_path):
        sys.exit(f"ab.py: {out_path} exists; give --out a new folder (nothing is overwritten)")
    scratch = tempfile.mkdtemp(prefix="ab_")
    load_before = os.getloadavg()[0]
    start = time.monotonic()
    with open(out_path, "w") as out:
        out.write(f"# {name}, repetition {rep}: {command}\n")
        out.flush()
        status = subprocess.run(["bash", "-c", command], stdout=out, stderr=subprocess.STDOUT,
                                env=dict(os.environ, AB_SCRATCH=scratch)).returncode
    wall = time.monotonic() - start
    shutil.rmtree(scratch, ignore_errors=True)
    text = open(out_path, errors="replace").read().split("\n", 1)[1]  # not the header line
    values, missing = {}, []
    for metric, pattern in args.metric:
        if pattern is None:
            values[metric] = wall
            continue
        if "key" in pattern.groupindex:
            found = {m.group("key"): m.group("value") for m in pattern.finditer(text)}
            values.update({f"{metric}@{k}": float(v) for k, v in found.items()})
            if not found:
                missing.append(metric)
        else:
            m = pattern.search(text)
            if m:
                values[metric] = float(m.group(1))
            else:
                missing.append(metric)
    for metric, a, b in args.quotient:
        x, y = operand(values, a), operand(values, b)
        if x is not None and y:
            values[metric] = x / y
    record = {"rep": rep, "case": name, "status": status, "wall_s": round(wall, 6),
              "load_before": load_before, "load_after": os.getloadavg()[0],
              "metrics": values, "missing": missing, "output": os.path.basename(out_path)}
    with open(os.path.join(args.out, "runs.jsonl"), "a") as f:
        f.write(json.dumps(record) + "\n")
    ok = status == 0 and not missing
    shown = " ".join(f"{k}={v:.6g}" for k, v in values.items())
    print(f"rep {rep} {name}: {shown}" + ("" if ok else f" (failed: exit {status}"
                                          + (f", not found: {', '.join(missing)}" if missing else "")
                                          + ")"), flush=True)
    return values if ok else None


def metric_order(metric):
    """NAME@KEY sorted by name, then by KEY as a number where it is one (4096 before 16384)."""
    name, _, key = metric.partition("@")
    try:
        return name, 0, float(key), ""
    except ValueError:
        return name, 1, 0.0, key


def spread(values):
    v = sorted(values)
    return f"{v[0]:.6g} / {statistics.median(v):.6g} / {v[-1]:.6g} ({len(v)} runs)"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", nargs=2, action="append", required=True,
                    metavar=("NAME", "COMMAND"), help="a case and its shell command (2 or more)")
    ap.add_argument("--metric", type=parse_metric, action="append", required=True)
    ap.add_argument("--quotient", type=parse_quotient, action="append", default=[])
    ap.add_argument("--ratio", action="append", default=[], metavar="CASE/BASE",
                    help="compare CASE with BASE per repetition (default: every case with the "
                    "first)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", required=True, help="folder for the raw output (kept)")
    ap.add_argument("--rotate", action="store_true",
                    help="start each repetition one case later (case order rotated)")
    args = ap.parse_args()
    names = [n for n, _ in args.case]
    if len(args.case) < 2 or len(set(names)) != len(names):
        ap.error("give two or more --case, with different names")
    if len({file_name(n) for n in names}) != len(names):
        ap.error("case names must differ after mapping to file names")
    pairs_wanted = [tuple(r.split("/", 1)) for r in args.ratio] or [(n, names[0]) for n in names[1:]]
    for pair in pairs_wanted:
        if len(pair) != 2 or not set(pair) <= set(names):
            ap.error(f"--ratio CASE/BASE with two of the cases, not {'/'.join(pair)}")
    os.makedirs(args.out, exist_ok=True)
    commit = subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)), "rev-parse",
                             "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    header = (f"# {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}, commit {commit or '?'} "
              f"(of bench/ab.py's tree), {os.cpu_count()} cores, "
              f"load {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {args.reps} repetitions of "
              + ", ".join(names))
    print(header, flush=True)
    results = {n: [] for n in names}
    for rep in range(1, args.reps + 1):
        order = args.case[(rep - 1) % len(args.case):] + args.case[:(rep - 1) % len(args.case)] \
            if args.rotate else args.case
        row = {}
        for name, command in order:
            row[name] = run_once(args, rep, name, command)
        for name in names:
            results[name].append(row[name])
    lines = [header, "case metric: min / median / max"]
    for name in names:
        runs = [r for r in results[name] if r is not None]
        if not runs:
            lines.append(f"{name}: no run succeeded")
        for metric in sorted({k for r in runs for k in r}, key=metric_order):
            lines.append(f"{name} {metric}: {spread([r[metric] for r in runs if metric in r])}")
    for name, first in pairs_wanted:
        pairs = [(a, b) for a, b in zip(results[name], results[first]) if a and b]
        for metric in sorted({k for a, b in pairs for k in a if k in b}, key=metric_order):
            ratios = [a[metric] / b[metric] for a, b in pairs if metric in a and metric in b
                      and b[metric]]
            if ratios:
                lines.append(f"{name} / {first} {metric} per repetition: {spread(ratios)}")
    summary = "\n".join(lines) + "\n"
    print(summary, end="")
    with open(os.path.join(args.out, "summary.txt"), "a") as f:
        f.write(summary)


if __name__ == "__main__":
    main()
