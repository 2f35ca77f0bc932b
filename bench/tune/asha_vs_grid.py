#!/usr/bin/env python3
"""ASHA against grid search over the same space, on the demo's synthetic frame-level data: the
compute (trial-steps) each spends before some finished trial is within --tolerance GAP of the best
grid trial, beside each search's total compute and wall time. The two searches alternate and each
runs --reps times (ASHA with seeds 1..reps; the grid is the same every time, only its timing
varies). Usage, from the repository root after a build:
    python3 bench/tune/asha_vs_grid.py --build build [--reps 3 --tolerance 0.01]

Trial-steps: a trial at rung 0 costs its budget; a promoted trial resumes from its previous rung's
checkpoint, so it costs only the steps it adds. The order is the order trials finished in (the
journal's order), so "to reach" counts what was spent until the search could have stopped.
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

# The space of configs/tune_bilstm_asha.pbtxt, with the learning rate on a 3-point grid for the
# grid search: 3 x 3 x 3 = 27 configurations, each at the full budget.
DIMENSIONS = """
dimension { field: "model.options.hidden" values: ["16", "32", "64"] }
dimension { field: "trainer.learning_rate.base" min: 0.001 max: 0.03 scale: LOG grid_points: 3 }
dimension { field: "model.options.pooling" values: ["last", "mean", "max"] }
"""


def base_config(data):
    text = open(os.path.join(REPO, "configs", "tune_bilstm_asha.pbtxt")).read()
    base = text[text.index("base {"):text.index("dimension {")]
    return base.replace("reel-demo/data", data)


def search_config(base, search):
    return base + DIMENSIONS + search + "objective { metric: GAP }\n"


def finished(journal):
    rows = [json.loads(line) for line in open(journal)]
    return [r for r in rows if r["event"] == "FINISHED"]


def cost_curve(records):
    """(cumulative trial-steps, metric) after each finished trial, in finishing order."""
    done_steps = {}  # config -> steps it had reached
    spent, curve = 0, []
    for r in records:
        cfg, steps = r["config"], int(r["steps"])
        spent += steps - done_steps.get(cfg, 0)
        done_steps[cfg] = steps
        curve.append((spent, r["metric"]))
    return curve


def run_search(reel, config_text, workdir):
    path = workdir + ".pbtxt"
    with open(path, "w") as f:
        f.write(config_text)
    start = time.monotonic()
    out = subprocess.run([reel, "tune", "--config", path, "--workdir", workdir, "--quiet"],
                         capture_output=True, text=True)
    wall = time.monotonic() - start
    if out.returncode != 0:
        sys.exit(f"reel tune failed:\n{out.stdout}\n{out.stderr}")
    records = finished(os.path.join(workdir, "journal.jsonl"))
    return cost_curve(records), wall


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default="build")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--tolerance", type=float, nargs="+", default=[0.01, 0.001])
    a = p.parse_args()
    reel = os.path.abspath(os.path.join(a.build, "bin", "reel"))
    work = tempfile.mkdtemp(prefix="reel_asha_vs_grid_")
    subprocess.run([reel, "demo", "--workdir", work + "/demo", "--quiet"], check=True,
                   capture_output=True)
    base = base_config(work + "/demo/data")
    grid = search_config(base, "search { algorithm: GRID max_budget: 180 }\n")
    samples = {"grid": [], "asha": []}
    for rep in range(1, a.reps + 1):
        asha = search_config(base, f"search {{ algorithm: ASHA trials: 27 seed: {rep} "
                             "budget_unit: STEPS min_budget: 20 max_budget: 180 eta: 3 }\n")
        for name, text in (("grid", grid), ("asha", asha)):  # alternate within every repetition
            curve, wall = run_search(reel, text, f"{work}/{name}{rep}")
            samples[name].append({"curve": curve, "wall": wall})
            print(f"rep {rep} {name}: {len(curve)} finished trials, {curve[-1][0]} trial-steps, "
                  f"best GAP {max(m for _, m in curve):.4f}, wall {wall:.1f} s",
                  file=sys.stderr)
    best_grid = max(m for _, m in samples["grid"][0]["curve"])
    print(f"space 3 x 3 x 3 (hidden x lr x pooling), grid at 180 steps vs ASHA (27 trials, "
          f"20..180 steps, eta 3); {a.reps} runs each; best grid GAP@20 {best_grid:.4f}; "
          f"load {os.getloadavg()[0]:.2f}")
    print()
    print("| search | total trial-steps | best GAP@20 (min / median / max) "
          "| wall s (min / median / max) |")
    print("|---|---|---|---|")
    for name, runs in samples.items():
        total = [r["curve"][-1][0] for r in runs]
        best = [max(m for _, m in r["curve"]) for r in runs]
        walls = [r["wall"] for r in runs]
        print(f"| {name} | {stats(total)} | {min(best):.4f} / {statistics.median(best):.4f} / "
              f"{max(best):.4f} | {min(walls):.1f} / {statistics.median(walls):.1f} / "
              f"{max(walls):.1f} |")
    print()
    print_targets({"grid": samples["grid"], "ASHA": samples["asha"]}, "ASHA", "grid",
                  "trial-steps", best_grid, a.tolerance, "best grid")


if __name__ == "__main__":
    main()
