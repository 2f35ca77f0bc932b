"""The same grid two ways, alternated: scikit-learn's GridSearchCV(n_jobs=2) over
reel.sklearn.VideoClassifier against `reel tune --parallel 2` (bench/journal/python.md).

Both: the logistic model, Adam, batch 32, 2 epochs, learning rates 0.003 / 0.01 / 0.03, trained
on data/yt8m/validate000[01] and scored by GAP@20 on validate0002 (GridSearchCV through a
PredefinedSplit with that one split and no refit; `reel tune` by its trials' final evaluation).
Each run is a whole process (an interpreter that reads the shards and searches, or the command),
timed from its start to its exit. One JSON line per run, then one per program with min / median
/ max; the first line names the CPU and the load. Run from the repository root after building:
    /usr/bin/python3 bench/python/grid.py [--reps 3] [--out bench/out/python_grid.jsonl]
"""

import argparse
import csv
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
RATES = ["0.003", "0.01", "0.03"]

SKLEARN = """
import json, time
import numpy as np
from sklearn.model_selection import GridSearchCV, PredefinedSplit
import reel, reel.sklearn

def load(pattern):
    recs = list(reel.read_tfrecords(pattern))
    X = np.stack([np.concatenate([r["mean_rgb"], r["mean_audio"]]) for r in recs])
    Y = np.zeros((len(recs), 3862), np.uint8)
    for i, r in enumerate(recs):
        Y[i, r["labels"]] = 1
    return X, Y

Xa, Ya = load("data/yt8m/validate000[01].tfrecord")
Xb, Yb = load("data/yt8m/validate0002.tfrecord")
X, Y = np.concatenate([Xa, Xb]), np.concatenate([Ya, Yb])
split = PredefinedSplit([-1] * len(Xa) + [0] * len(Xb))
grid = GridSearchCV(reel.sklearn.VideoClassifier(model="logistic", epochs=2, batch_size=32),
                    {"learning_rate": [%s]}, cv=split, n_jobs=2, refit=False)
t = time.perf_counter()
grid.fit(X, Y)
print(json.dumps({"search_s": time.perf_counter() - t,
                  "gap": {str(p["learning_rate"]): g for p, g in
                          zip(grid.cv_results_["params"], grid.cv_results_["mean_test_score"])}}))
""" % ", ".join(RATES)


def tune_config():
    base = (ROOT / "configs" / "logistic.pbtxt").read_text().splitlines()
    return ("base {\n" + "".join(f"  {line}\n" for line in base) + "}\n"
            f'dimension {{ field: "trainer.learning_rate.base" values: '
            f'[{", ".join(json.dumps(r) for r in RATES)}] }}\n'
            "search { algorithm: GRID budget_unit: EPOCHS max_budget: 2 }\n")


def run_sklearn(work):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "build" / "python"))
    start = time.perf_counter()
    p = subprocess.run(["/usr/bin/python3", "-c", SKLEARN], cwd=ROOT, env=env,
                       capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    out = json.loads(p.stdout.strip().splitlines()[-1])
    return wall, out["gap"], {"search_s": out["search_s"]}


def run_tune(work):
    search = work / "search.pbtxt"
    search.write_text(tune_config())
    tune_dir = work / f"tune-{time.monotonic_ns()}"
    start = time.perf_counter()
    subprocess.run([str(ROOT / "build" / "bin" / "reel"), "tune", "--config", str(search),
                    "--workdir", str(tune_dir), "--parallel", "2",
                    "--set", "trainer.metrics_log=", "--set", "trainer.tensorboard_dir="],
                   cwd=ROOT, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    with open(tune_dir / "results.csv") as f:
        rows = list(csv.DictReader(f))
    gap = {row["trainer.learning_rate.base"]: float(row["gap"]) for row in rows
           if row["status"] == "ok"}
    return wall, gap, {}


def cpu():
    info = {}
    for line in open("/proc/cpuinfo"):
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("model name", "cpu family", "model") and key not in info:
            info[key] = value.strip()
    info["cpus"] = os.cpu_count()
    return info


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", default="bench/out/python_grid.jsonl")
    args = parser.parse_args()
    out_path = ROOT / args.out
    out_path.parent.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    programs = {"gridsearchcv_reel_sklearn": run_sklearn, "reel_tune": run_tune}
    walls = {name: [] for name in programs}
    with open(out_path, "w") as out, tempfile.TemporaryDirectory() as work:
        def emit(record):
            out.write(json.dumps(record) + "\n")
            out.flush()
            print(json.dumps(record), file=sys.stderr)

        emit({"kind": "setup", "commit": commit, "cpu": cpu(), "loadavg": os.getloadavg(),
              "grid": RATES, "command": " ".join(["/usr/bin/python3"] + sys.argv)})
        for rep in range(1, args.reps + 1):
            for name, run in programs.items():
                load = os.getloadavg()
                wall, gap, extra = run(pathlib.Path(work))
                best = max(gap, key=gap.get)
                walls[name].append(wall)
                emit({"kind": "run", "program": name, "rep": rep, "wall_s": round(wall, 3),
                      "best_learning_rate": best, "best_gap": gap[best], "gap": gap,
                      "loadavg_before": load, **extra})
        for name, w in walls.items():
            emit({"kind": "summary", "program": name, "runs": len(w), "wall_s_min": min(w),
                  "wall_s_median": statistics.median(w), "wall_s_max": max(w)})
        emit({"kind": "end", "loadavg": os.getloadavg()})


if __name__ == "__main__":
    main()
