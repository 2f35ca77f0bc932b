#!/usr/bin/env python3
"""reel tune's ASHA against Optuna 3.1 (TPE sampler, successive-halving pruner) on one search: the
space and trainer of configs/tune_moe.pbtxt (moe on the real YouTube-8M shards, 24 trials, 1..5
epochs), 2 trials at once in each. Optuna drives the same trainer through the Python module
(reel.train in its n_jobs threads, OMP_NUM_THREADS=1 as reel tune gives each of 2 trials one
core), reporting GAP@20 at the rungs reel uses (2 epochs, then 5; the pruner's min_resource 2,
reduction factor 3 = eta). The two searches alternate; each runs --reps times with seeds 1..reps.
Usage, from the repository root after a build with the Python module:
    python3 bench/tune/optuna_vs_asha.py --build build [--reps 3] [--out DIR]

Epochs spent: an evaluation at a trial's epoch e adds the epochs that trial trained since its last
evaluation; evaluations are taken in the order they happened (reel: its journal's FINISHED lines;
Optuna: its reports), so "epochs to reach" counts what was spent until the search could have
stopped. Wall time is the whole search, process start to exit.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from curves import print_targets, stats

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CONFIG = os.path.join(REPO, "configs", "tune_moe.pbtxt")
SPACE = {  # the dimensions of configs/tune_moe.pbtxt
    "trainer.learning_rate.base": ["0.005", "0.01", "0.02"],
    "model.options.experts": ["2", "4"],
    "trainer.batch_size": ["32", "64"],
    "trainer.clip_norm": ["0", "1"],
}
TRIALS, MAX_EPOCHS, RUNG_EPOCHS, ETA, PARALLEL = 24, 5, 2, 3, 2


def reel_search(reel, seed, workdir):
    text = open(CONFIG).read().replace("seed: 1\n  budget_unit", f"seed: {seed}\n  budget_unit")
    path = workdir + ".pbtxt"
    with open(path, "w") as f:
        f.write(text)
    start = time.monotonic()
    out = subprocess.run([reel, "tune", "--config", path, "--workdir", workdir, "--parallel",
                          str(PARALLEL), "--quiet"], capture_output=True, text=True, cwd=REPO)
    wall = time.monotonic() - start
    if out.returncode != 0:
        sys.exit(f"reel tune failed:\n{out.stdout}\n{out.stderr}")
    rows = [json.loads(line) for line in open(os.path.join(workdir, "journal.jsonl"))]
    done, curve, spent = {}, [], 0
    for r in rows:
        if r["event"] != "FINISHED":
            continue
        epochs = int(r["budget"])
        spent += epochs - done.get(r["config"], 0)
        done[r["config"]] = epochs
        curve.append((spent, r["metric"]))
    return {"curve": curve, "wall": wall, "trials": len(done)}


def optuna_search(build, seed, workdir):
    """Runs optuna_trials.py in a process of its own (as reel tune is one), timed from outside."""
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(filter(None, [python_path(build),
                                                       os.environ.get("PYTHONPATH")])))
    start = time.monotonic()
    out = subprocess.run(["/usr/bin/python3", os.path.join(HERE, "optuna_trials.py"), "--seed",
                          str(seed), "--workdir", workdir, "--config", CONFIG],
                         capture_output=True, text=True, cwd=REPO, env=env)
    wall = time.monotonic() - start
    if out.returncode != 0:
        sys.exit(f"the Optuna search failed:\n{out.stdout}\n{out.stderr}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    return {"curve": [tuple(x) for x in r["curve"]], "wall": wall, "trials": r["trials"],
            "pruned": r["pruned"]}


def python_path(build):
    for root, _, files in os.walk(os.path.join(build, "python")):
        if "__init__.py" in files and os.path.basename(root) == "reel":
            return os.path.dirname(root)
    for root, dirs, _ in os.walk(os.path.join(build, "lib")):
        if "reel" in dirs and os.path.exists(os.path.join(root, "reel", "__init__.py")):
            return root
    sys.exit(f"no reel Python module under {build}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default="build")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--tolerance", type=float, nargs="+", default=[0.01, 0.005, 0.0])
    p.add_argument("--out", help="folder for the raw results (runs.json)")
    a = p.parse_args()
    reel = os.path.abspath(os.path.join(a.build, "bin", "reel"))
    build = os.path.abspath(a.build)
    work = tempfile.mkdtemp(prefix="reel_optuna_vs_asha_")
    runs = {"reel_asha": [], "optuna_tpe_sha": []}
    for rep in range(1, a.reps + 1):
        for name in runs:  # alternate within every repetition
            wd = f"{work}/{name}{rep}"
            r = reel_search(reel, rep, wd) if name == "reel_asha" else optuna_search(build, rep, wd)
            r["seed"] = rep
            runs[name].append(r)
            print(f"rep {rep} {name}: {len(r['curve'])} evaluations, {r['curve'][-1][0]} epochs, "
                  f"best GAP {max(m for _, m in r['curve']):.4f}, wall {r['wall']:.1f} s",
                  file=sys.stderr)
    load = os.getloadavg()[0]
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "runs.json"), "w") as f:
            json.dump({"runs": runs, "load": load, "reps": a.reps}, f, indent=1)
    best = max(m for rs in runs.values() for r in rs for _, m in r["curve"])
    print(f"space of configs/tune_moe.pbtxt (3 x 2 x 2 x 2), {TRIALS} trials, 1..{MAX_EPOCHS} "
          f"epochs, rungs {RUNG_EPOCHS} and {MAX_EPOCHS}, {PARALLEL} at once; {a.reps} runs each "
          f"(seeds 1..{a.reps}); best GAP@20 of all runs {best:.4f}; load {load:.2f}")
    print()
    print("| search | epochs trained (min / median / max) | best GAP@20 (min / median / max) "
          "| wall s (min / median / max) | wall s per trial (median) |")
    print("|---|---|---|---|---|")
    for name, rs in runs.items():
        walls = [r["wall"] for r in rs]
        print(f"| {name} | {stats([r['curve'][-1][0] for r in rs])} | "
              f"{stats([max(m for _, m in r['curve']) for r in rs], '{:.4f}')} | "
              f"{stats(walls, '{:.1f}')} | {statistics.median(walls) / TRIALS:.2f} |")
    print()
    print_targets(runs, "reel_asha", "optuna_tpe_sha", "epochs", best, a.tolerance)

if __name__ == "__main__":
    main()
