#!/usr/bin/env python3
"""`reel plan` against whole jobs measured on simulated hosts (docs/capacity.md, "How good the
model is"): the predictions of the multi-host exchange (overlapped, after backward, sharded).

Reads raw files of bench/ddp/run.py --hosts N (reel's whole-job examples/s of each reel program,
its settings, the data, epochs, link rate), measures this machine's profile for each file's model
(`reel plan --measure` on bench/ddp/MODEL.pbtxt and the same data, one compute thread as each
simulated host runs), plans each program's job (N nodes, one rank each, the cores a rank gets
here, the file's link, 100 us latency as bench/plan/validate.sh gives its links) and writes one
JSONL record per rep and program to OUT: predicted and measured whole-job examples/s (the
measured min/median/max read from the raw file), their ratio, the plan's parts, the runs' own
time breakdowns, CPU family/model, load average before and after the profile, commit. Reps
alternate the models' profiles. At the end it prints min/median/max of the ratio per program.

  bench/plan/two_hosts.py --reel BUILD/bin/reel --out OUT.jsonl [--reps 3] [--quick]
                          [--cores-per-node C] RAW.json [RAW.json ...]
  bench/plan/two_hosts.py --summarize OUT.jsonl

The predicted whole job is epochs x the plan's training time of one epoch + its startup, as the
raw files time the whole command; evaluation and checkpoints are off in bench/ddp's configs.
"""
import argparse
import glob
import importlib.util
import json
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from one_node import commit, cpu, parse_breakdown, run  # noqa: E402

PARTS = ["reading_seconds", "decoding_seconds", "step_seconds", "update_seconds",
         "exchange_seconds", "fill_seconds", "startup_seconds"]


def ddp_run_module():
    """bench/ddp/run.py, for the frame-level data its BiLSTM jobs trained on."""
    spec = importlib.util.spec_from_file_location("ddp_run", os.path.join(ROOT, "bench", "ddp",
                                                                          "run.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def job_data(raw, build):
    """The files the raw file's reel jobs read: (glob, bytes, file count)."""
    if raw["model"] == "moe":  # bench/ddp/moe.pbtxt's files
        pattern = os.path.join(ROOT, "data", "yt8m", "validate000[01].tfrecord")
    else:  # run.py writes them once, as the job did
        frames = ddp_run_module().frame_data(build, raw["videos"])
        pattern = os.path.join(os.path.dirname(frames[0]), "*.tfrecord")
    files = sorted(glob.glob(pattern))
    if not files:
        sys.exit(f"no data files for {raw['model']} at {pattern}")
    return pattern, sum(os.path.getsize(f) for f in files), len(files)


def loadavg():
    return " ".join(open("/proc/loadavg").read().split()[:3])


def summarize(results):
    print("\n| model | program | runs | predicted / measured min | median | max |")
    print("|---|---|---|---|---|---|")
    for (m, p), r in results.items():
        print(f"| {m} | {p} | {len(r)} | {min(r):.2f} | {statistics.median(r):.2f} "
              f"| {max(r):.2f} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("raw", nargs="*", help="bench/ddp/run.py --hosts N raw files")
    ap.add_argument("--summarize", help="print the table of an earlier run's records")
    ap.add_argument("--reel")
    ap.add_argument("--out")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="reel plan --measure --quick")
    ap.add_argument("--cores-per-node", type=float, default=1,
                    help="the cores a simulated host's rank gets here (run.py: one thread each)")
    a = ap.parse_args()
    if a.summarize:
        results = {}
        for line in open(a.summarize):
            rec = json.loads(line)
            results.setdefault((rec["model"], rec["program"]), []).append(rec["ratio"])
        summarize(results)
        return
    if not a.reel or not a.out or not a.raw:
        sys.exit("--reel, --out and raw files are needed (or --summarize FILE)")
    reel = os.path.realpath(a.reel)
    build = os.path.dirname(os.path.dirname(reel))
    env = dict(os.environ, LD_LIBRARY_PATH=build + "/lib", OMP_NUM_THREADS="1")
    family, model, name = cpu()
    rev = commit()
    raws = []
    for path in a.raw:
        raw = json.load(open(path))
        if raw.get("hosts", 1) < 2 or not raw.get("reel_programs"):
            sys.exit(f"{path}: not a bench/ddp/run.py --hosts N file with --reel-set programs")
        raws.append((os.path.relpath(os.path.abspath(path), ROOT), raw) + job_data(raw, build))
    work = tempfile.mkdtemp(prefix="reel-two-hosts-")
    out = open(a.out, "a")
    results = {}
    try:
        for rep in range(1, a.reps + 1):
            for path, raw, files, size, nfiles in raws:
                config = os.path.join(ROOT, "bench", "ddp", raw["model"] + ".pbtxt")
                data = ["--set", f"data.options.files={files}"]
                profile = os.path.join(work, f"{raw['model']}.profile.txt")
                if os.path.exists(profile):
                    os.remove(profile)
                load_before = loadavg()
                run([reel, "plan", "--measure", "--config", config, "--profile", profile] + data
                    + (["--quick"] if a.quick else []), env=env)
                load_after = loadavg()
                profile_text = open(profile).read()
                hosts, epochs = raw["hosts"], raw["epochs"]
                for program, settings in raw["reel_programs"].items():
                    key = f"{program}/{hosts}"
                    measured = raw["examples_per_sec"][key]
                    runs = raw["runs"][key]
                    videos = round(statistics.median(r["examples"] for r in runs) / epochs)
                    sets = [x for s in settings for x in ("--set", s)]
                    plan = json.loads(run(
                        [reel, "plan", "--config", config, "--profile", profile] + data + sets +
                        ["--videos", str(videos), "--bytes", str(size), "--files", str(nfiles),
                         "--nodes", str(hosts), "--cores-per-node", str(a.cores_per_node),
                         "--link", raw["rate"] + "/s", "--link-latency-us", "100",
                         "--checkpoints-per-epoch", "0", "--json"], env=env))
                    p = plan["plans"][0]
                    # One epoch's training and its first batch's fill; the startup once.
                    train = videos / p["examples_per_s"] + p.get("fill_seconds", 0)
                    seconds = epochs * train + p["startup_seconds"]
                    predicted = epochs * videos / seconds
                    rec = {"model": raw["model"], "program": program, "settings": settings,
                           "raw": path, "raw_command": raw["command"], "hosts": hosts,
                           "rate": raw["rate"], "epochs": epochs, "videos": videos,
                           "bytes": size, "files": nfiles, "run": rep,
                           "predicted_examples_per_s": predicted,
                           "measured_examples_per_s": measured,
                           "ratio": predicted / measured["median"],
                           "predicted_seconds": seconds,
                           "plan_parts": {k: p[k] for k in PARTS},
                           "plan_bottleneck": p["bottleneck"],
                           "plan_exchange": {k: plan.get(k) for k in
                                             ("bucket_mb", "zero_stage", "compressed")},
                           "run_parts": [parse_breakdown(r["time"])[0] for r in runs],
                           "measured_load": raw.get("load_average"),
                           "cpu_family": family, "cpu_model": model, "cpu_name": name,
                           "load_before_profile": load_before, "load_after_profile": load_after,
                           "commit": rev, "quick_profile": a.quick,
                           "cores_per_node": a.cores_per_node,
                           "profile": [ln for ln in profile_text.splitlines()
                                       if not ln.startswith(("#", "host", "measured"))]}
                    out.write(json.dumps(rec) + "\n")
                    out.flush()
                    results.setdefault((raw["model"], program), []).append(rec["ratio"])
                    print(f"{raw['model']} {program} run {rep}: predicted {predicted:.1f} "
                          f"examples/s, measured {measured['median']:.1f}, ratio "
                          f"{rec['ratio']:.2f}, load {load_before} -> {load_after}", flush=True)
        summarize(results)
    finally:
        out.close()
        for f in glob.glob(os.path.join(work, "*")):
            os.remove(f)
        os.rmdir(work)


if __name__ == "__main__":
    main()
