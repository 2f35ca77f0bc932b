#!/usr/bin/env python3
"""`reel plan` against `reel train` on one node (docs/capacity.md, "How good the model is").

For each config of configs/ and each scale of synthetic data (`reel synth`, frame level for the
frame-level configs, the config's classes), measure this machine's profile for the config
(`reel plan --measure`), plan one epoch on one node from it, train one epoch, and write one JSONL
record per run to OUT: predicted and measured seconds, their ratio, the plan's parts, the run's
time breakdown (docs/training.md, "Where the time goes"), CPU family/model, load average, commit.
The measured epoch is the trainer's `elapsed` at its last step (metrics.jsonl): training only, as
bench/plan/validate.sh compares. Runs alternate: every rep goes once over every scale and config.
At the end it prints min/median/max of the ratio per config and scale (a Markdown table).

  bench/plan/one_node.py --reel BUILD/bin/reel --out OUT.jsonl [--reps 3] [--configs a,b]
                         [--quick] [--tiny] [--check] [--profile-each-rep]
  bench/plan/one_node.py --summarize OUT.jsonl   (the table again, from the records)

--tiny: test-sized data (seconds); --check: fail unless every record has every field and the
plan's parts add up to its epoch (the CTest plan_one_node_short; no timing verdict there).
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

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CONFIGS = ["logistic", "moe", "bilstm_video", "bilstm_audio", "two_stream"]
# Not planned here: logistic_async trains 1 server and 2 workers as threads of one process,
# which the model (one rank per node, docs/capacity.md) does not describe; the tune_* configs are
# searches, which `reel plan` does not read.
SKIPPED = {"logistic_async": "1 server + 2 workers in one process: more than one rank per node",
           "tune_moe": "a search: reel plan reads training configs only",
           "tune_bilstm_asha": "a search: reel plan reads training configs only"}
# Videos per scale: (small, large), the large 4x the small. Frame level: frames per video.
# Every scale holds 12 steps or more, bilstm_audio (a step a tenth of the video model's) twice as
# many videos: in an epoch of a few steps the first steps' own set-up, which the plan prices only
# as the profile's startup, is a large part (docs/capacity.md, "How good the model is").
SCALES = {"video": (1000, 4000), "frame": (384, 1536)}
CONFIG_SCALES = {"bilstm_audio": (768, 3072)}
TINY = {"video": (128, 256), "frame": (64, 128)}
FRAMES = (100, 300)
TINY_FRAMES = (5, 20)
FIELDS = ["config", "scale", "videos", "run", "predicted_seconds", "measured_seconds", "ratio",
          "plan_parts", "plan_bottleneck", "run_parts", "run_largest", "cpu_family", "cpu_model",
          "cpu_name", "load", "commit", "profile"]
PARTS = ["reading_seconds", "decoding_seconds", "step_seconds", "update_seconds",
         "exchange_seconds", "evaluation_seconds", "checkpoints_seconds", "fill_seconds",
         "startup_seconds"]


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{p.stdout}\n{p.stderr}")
    return p.stdout


def cpu():
    info = {}
    with open("/proc/cpuinfo") as f:
        for line in f:
            k, _, v = line.partition(":")
            info.setdefault(k.strip(), v.strip())
    return info.get("cpu family", "?"), info.get("model", "?"), info.get("model name", "?")


def commit():
    try:
        return subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def config_facts(name):
    text = open(os.path.join(ROOT, "configs", name + ".pbtxt")).read()
    level = "frame" if re.search(r'key: "level" value: "frame"', text) else "video"
    classes = int(re.search(r"num_classes: (\d+)", text).group(1))
    return level, classes


def overrides(data, work):
    return ["--set", f"data.options.files={data}/train/*.tfrecord",
            "--set", f"eval_data.options.files={data}/test/*.tfrecord",
            "--set", "trainer.epochs=1", "--set", "trainer.steps=0",
            "--set", f"trainer.checkpoint_dir={work}/run/checkpoints",
            "--set", f"trainer.metrics_log={work}/run/metrics.jsonl",
            "--set", f"trainer.tensorboard_dir={work}/run/tensorboard"]


def parse_breakdown(line):
    """'time of this rank: data 0.41 s (3%), compute ... of 12.30 s; the most: compute'."""
    parts = {k: float(v) for k, v in re.findall(r"(\w+) ([0-9.]+) s \(", line)}
    total = re.search(r"of ([0-9.]+) s;", line)
    largest = re.search(r"the most: (\w+)", line)
    parts["total"] = float(total.group(1)) if total else None
    return parts, largest.group(1) if largest else None


def check(rec):
    missing = [f for f in FIELDS if f not in rec]
    if missing:
        sys.exit(f"record of {rec.get('config')} lacks {missing}")
    p = rec["plan_parts"]
    # One node: the epoch is max(reading, prefetch, decoding + step + update + exchange) +
    # evaluation + checkpoints + fill + startup (docs/capacity.md, "The model"); when the cores
    # set it, the parts add up.
    train = max(p["reading_seconds"], p["decoding_seconds"] + p["step_seconds"]
                + p["update_seconds"] + p["exchange_seconds"])
    parts = (train + p["evaluation_seconds"] + p["checkpoints_seconds"] + p.get("fill_seconds", 0)
             + p["startup_seconds"])
    if rec["plan_bottleneck"] in ("step", "update", "decoding", "exchange") and \
            abs(parts - rec["predicted_seconds"]) > 1e-3 * rec["predicted_seconds"] + 1e-4:
        sys.exit(f"{rec['config']}: the plan's parts {p} add up to {parts}, "
                 f"not its epoch {rec['predicted_seconds']}")
    if not rec["measured_seconds"] > 0 or not rec["predicted_seconds"] > 0:
        sys.exit(f"{rec['config']}: no epoch time: {rec}")
    for k in ("compute", "update", "data"):
        if k not in rec["run_parts"]:
            sys.exit(f"{rec['config']}: the run's breakdown lacks {k}: {rec['run_parts']}")


def summarize(results):
    print("\n| config | scale | runs | predicted / measured min | median | max |")
    print("|---|---|---|---|---|---|")
    for (c, s), r in results.items():
        print(f"| {c} | {s} | {len(r)} | {min(r):.2f} | {statistics.median(r):.2f} "
              f"| {max(r):.2f} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--summarize", help="print the table of an earlier run's records")
    ap.add_argument("--reel")
    ap.add_argument("--out")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--quick", action="store_true", help="reel plan --measure --quick")
    ap.add_argument("--tiny", action="store_true", help="test-sized data")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--profile-each-rep", action="store_true",
                    help="measure the profiles again before each rep")
    a = ap.parse_args()
    if a.summarize:
        results = {}
        for line in open(a.summarize):
            rec = json.loads(line)
            results.setdefault((rec["config"], rec["scale"]), []).append(rec["ratio"])
        summarize(results)
        return
    if not a.reel or not a.out:
        sys.exit("--reel and --out are needed (or --summarize FILE)")
    reel = os.path.realpath(a.reel)
    build = os.path.dirname(os.path.dirname(reel))
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = build + "/lib" + (":" + env["LD_LIBRARY_PATH"]
                                               if env.get("LD_LIBRARY_PATH") else "")
    configs = [c for c in a.configs.split(",") if c]
    for c in configs:
        if c in SKIPPED:
            sys.exit(f"{c} is not planned on one node: {SKIPPED[c]}")
    scales = TINY if a.tiny else SCALES

    def sizes(c):
        level = scales[config_facts(c)[0]]
        return level if a.tiny else CONFIG_SCALES.get(c, level)
    frames = TINY_FRAMES if a.tiny else FRAMES
    family, model, name = cpu()
    rev = commit()
    work = tempfile.mkdtemp(prefix="reel-one-node-")
    try:
        # The data: per level and class count, a small and a large set (and a few test videos).
        data = {}
        for c in configs:
            level, classes = config_facts(c)
            for i, videos in enumerate(sizes(c)):
                key = (level, classes, videos)
                if key in data:
                    continue
                d = f"{work}/data-{level}-{classes}-{videos}"
                cmd = [reel, "synth", "--out", d, "--videos", str(videos), "--test-videos",
                       "16", "--classes", str(classes), "--level", level, "--shards", "4",
                       "--seed", "1"]
                if level == "frame":
                    cmd += ["--min-frames", str(frames[0]), "--max-frames", str(frames[1])]
                run(cmd, env=env)
                files = sorted(os.listdir(d + "/train"))
                size = sum(os.path.getsize(f"{d}/train/{f}") for f in files)
                data[key] = (d, videos, size, len(files))
        # The profiles: one per config (its model, options, batch, classes, frames); with
        # --profile-each-rep measured again before each rep, next to the runs it predicts, so a
        # shared machine's load changes both alike.
        profiles = {}

        def measure(c):
            level, classes = config_facts(c)
            d = data[(level, classes, sizes(c)[0])][0]
            prof = f"{work}/{c}.profile.txt"
            if os.path.exists(prof):
                os.remove(prof)
            cmd = [reel, "plan", "--measure", "--config", f"{ROOT}/configs/{c}.pbtxt",
                   "--profile", prof] + overrides(d, work) + (["--quick"] if a.quick else [])
            run(cmd, env=env)
            profiles[c] = open(prof).read()

        for c in configs:
            measure(c)
        out = open(a.out, "a")
        results = {}
        for rep in range(1, a.reps + 1):
            if a.profile_each_rep and rep > 1:
                for c in configs:
                    measure(c)
            for i in (0, 1):
                for c in configs:
                    level, classes = config_facts(c)
                    d, videos, size, nfiles = data[(level, classes, sizes(c)[i])]
                    cfg = [f"{ROOT}/configs/{c}.pbtxt"]
                    o = overrides(d, work)
                    mean = (frames[0] + frames[1]) / 2 if level == "frame" else 0
                    plan = json.loads(run(
                        [reel, "plan", "--config"] + cfg + o +
                        ["--profile", f"{work}/{c}.profile.txt", "--videos", str(videos),
                         "--bytes", str(size), "--files", str(nfiles), "--frames", str(mean),
                         "--nodes", "1", "--checkpoints-per-epoch", "0", "--json"], env=env))
                    p = plan["plans"][0]
                    shutil.rmtree(f"{work}/run", ignore_errors=True)
                    os.makedirs(f"{work}/run")
                    load = open("/proc/loadavg").read().split()[:3]
                    train_out = run([reel, "train", "--config"] + cfg + o, env=env, cwd=work)
                    line = next(ln for ln in train_out.splitlines()
                                if ln.startswith("time of this rank:"))
                    parts, largest = parse_breakdown(line)
                    last = [json.loads(ln) for ln in open(f"{work}/run/metrics.jsonl")
                            if '"elapsed"' in ln][-1]
                    rec = {"config": c, "scale": ["small", "large"][i], "videos": videos,
                           "frames": list(frames) if level == "frame" else None, "run": rep,
                           "predicted_seconds": p["epoch_seconds"],
                           "measured_seconds": last["elapsed"],
                           "ratio": p["epoch_seconds"] / last["elapsed"],
                           "plan_parts": {k: p[k] for k in PARTS},
                           "plan_bottleneck": p["bottleneck"], "run_parts": parts,
                           "run_largest": largest, "cpu_family": family, "cpu_model": model,
                           "cpu_name": name, "load": " ".join(load),
                           "load_after": " ".join(open("/proc/loadavg").read().split()[:3]),
                           "commit": rev, "quick_profile": a.quick,
                           "profile_each_rep": a.profile_each_rep,
                           "profile": [ln for ln in profiles[c].splitlines()
                                       if ln.startswith(("model ", "apply", "decode", "cores"))]}
                    if a.check:
                        check(rec)
                    out.write(json.dumps(rec) + "\n")
                    out.flush()
                    results.setdefault((c, rec["scale"]), []).append(rec["ratio"])
                    print(f"{c} {rec['scale']} run {rep}: predicted {p['epoch_seconds']:.2f} s, "
                          f"measured {last['elapsed']:.2f} s, ratio {rec['ratio']:.2f}, "
                          f"load {load[0]}", flush=True)
        summarize(results)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
