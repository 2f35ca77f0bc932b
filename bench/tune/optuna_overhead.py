#!/usr/bin/env python3
"""A peer of reel_tune_overhead: an Optuna 3.1 study (in-memory storage, n_jobs=P threads) of N
trials whose objective spins for --trial-ms and reports once to a successive-halving pruner, with
the sampler of the search comparison (TPE) or RandomSampler. Prints one JSON line in the same
shape as reel_tune_overhead."""
import argparse
import json
import time

import optuna


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--trials", type=int, default=200)
    p.add_argument("--parallel", type=int, default=2)
    p.add_argument("--trial-ms", type=float, default=5.0)
    p.add_argument("--sampler", choices=["tpe", "random"], default="tpe")
    a = p.parse_args()

    def objective(trial):
        x = trial.suggest_int("seed", 0, a.trials - 1)
        until = time.perf_counter() + a.trial_ms / 1000.0
        while time.perf_counter() < until:
            x += 1
        trial.report(0.5, 1)
        if trial.should_prune():
            raise optuna.TrialPruned()
        return 0.5

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = (optuna.samplers.TPESampler(seed=1) if a.sampler == "tpe"
               else optuna.samplers.RandomSampler(seed=1))
    study = optuna.create_study(direction="maximize", sampler=sampler,
                                pruner=optuna.pruners.SuccessiveHalvingPruner())
    t0 = time.perf_counter()
    study.optimize(objective, n_trials=a.trials, n_jobs=a.parallel)
    wall = time.perf_counter() - t0
    assert len(study.trials) == a.trials
    ideal = a.trials * a.trial_ms / 1000.0 / a.parallel
    print(json.dumps({"program": f"optuna_{a.sampler}", "trials": a.trials,
                      "parallel": a.parallel, "trial_ms": a.trial_ms, "wall_s": round(wall, 4),
                      "ideal_s": round(ideal, 4),
                      "overhead_ms_per_trial": round((wall - ideal) * 1000.0 / a.trials * a.parallel, 4)}))


if __name__ == "__main__":
    main()
