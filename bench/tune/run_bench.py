#!/usr/bin/env python3
"""Task-parallel overhead of reel tune beside scikit-learn's GridSearchCV and Optuna, in one run: the
programs alternate, each case runs --reps times, and min/median/max of the overhead per trial
are reported with the ratio of medians. Usage (from the repository root, after a build with
-DREEL_BUILD_BENCH=ON):
    python3 bench/tune/run_bench.py --build build [--trials 200 --trial-ms 5 --parallel 2 --reps 3]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def run(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default="build")
    p.add_argument("--trials", type=int, default=200)
    p.add_argument("--trial-ms", type=float, default=5.0)
    p.add_argument("--parallel", type=int, default=2)
    p.add_argument("--reps", type=int, default=3)
    a = p.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    work = tempfile.mkdtemp(prefix="reel_tune_bench_")
    # Debian's scikit-learn is installed for the system interpreter (as python3-torch is for the
    # BiLSTM bench); REEL_PYTHON overrides.
    python = os.environ.get("REEL_PYTHON") or (
        "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable)
    common = ["--trials", str(a.trials), "--trial-ms", str(a.trial_ms), "--parallel", str(a.parallel)]
    programs = {
        "reel_threads": [os.path.join(a.build, "bin", "reel_tune_overhead"), "--executor", "threads",
                         "--workdir", work + "/t"] + common,
        "reel_inproc": [os.path.join(a.build, "bin", "reel_tune_overhead"), "--executor", "inproc",
                        "--workdir", work + "/i"] + common,
        "reel_tcp": [os.path.join(a.build, "bin", "reel_tune_overhead"), "--executor", "tcp",
                     "--workdir", work + "/c"] + common,
        "sklearn_gridsearchcv": [python, os.path.join(here, "sklearn_gridsearch.py")] + common,
        "optuna_tpe": [python, os.path.join(here, "optuna_overhead.py"), "--sampler", "tpe"] + common,
        "optuna_random": [python, os.path.join(here, "optuna_overhead.py"), "--sampler",
                          "random"] + common,
    }
    samples = {name: [] for name in programs}
    for rep in range(a.reps):
        for name, cmd in programs.items():  # alternate the programs within every repetition
            r = run(cmd)
            samples[name].append(r)
            print(f"rep {rep + 1} {name}: wall {r['wall_s']:.3f} s, overhead "
                  f"{r['overhead_ms_per_trial']:.3f} ms/trial", file=sys.stderr)
    print(f"{a.trials} trials of {a.trial_ms} ms, {a.parallel} at once, {a.reps} runs each; "
          f"load: {os.getloadavg()[0]:.2f}")
    print("| program | wall s (min / median / max) | overhead ms per trial (min / median / max) |")
    print("|---|---|---|")
    med = {}
    for name, rs in samples.items():
        w = sorted(r["wall_s"] for r in rs)
        o = sorted(r["overhead_ms_per_trial"] for r in rs)
        med[name] = statistics.median(o)
        print(f"| {name} | {w[0]:.3f} / {statistics.median(w):.3f} / {w[-1]:.3f} | "
              f"{o[0]:.3f} / {med[name]:.3f} / {o[-1]:.3f} |")
    for peer in ("sklearn_gridsearchcv", "optuna_tpe", "optuna_random"):
        for name in ("reel_threads", "reel_inproc", "reel_tcp"):
            print(f"overhead ratio {name} / {peer} (medians): {med[name] / med[peer]:.2f}")


if __name__ == "__main__":
    main()
