#!/usr/bin/env python3
"""The peer of reel_tune_overhead: scikit-learn's GridSearchCV (joblib, n_jobs=P) over N
candidates whose fit spins for --trial-ms, one train/test split each (PredefinedSplit), no refit.
Prints one JSON line in the same shape as reel_tune_overhead."""
import argparse
import json
import time

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.model_selection import GridSearchCV, PredefinedSplit


class Spin(BaseEstimator, ClassifierMixin):
    def __init__(self, seed=0, trial_ms=5.0):
        self.seed = seed
        self.trial_ms = trial_ms

    def fit(self, X, y):
        until = time.perf_counter() + self.trial_ms / 1000.0
        x = 0
        while time.perf_counter() < until:
            x += 1
        self.classes_ = np.unique(y)
        return self

    def score(self, X, y):
        return 0.5


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--trials", type=int, default=200)
    p.add_argument("--parallel", type=int, default=2)
    p.add_argument("--trial-ms", type=float, default=5.0)
    a = p.parse_args()
    X = np.zeros((8, 2))
    y = np.array([0, 1] * 4)
    split = PredefinedSplit([-1] * 4 + [0] * 4)  # one fit per candidate
    search = GridSearchCV(Spin(trial_ms=a.trial_ms), {"seed": list(range(a.trials))}, cv=split,
                          n_jobs=a.parallel, refit=False)
    t0 = time.perf_counter()
    search.fit(X, y)
    wall = time.perf_counter() - t0
    assert len(search.cv_results_["params"]) == a.trials
    ideal = a.trials * a.trial_ms / 1000.0 / a.parallel
    print(json.dumps({"program": "sklearn_gridsearchcv", "trials": a.trials,
                      "parallel": a.parallel, "trial_ms": a.trial_ms, "wall_s": round(wall, 4),
                      "ideal_s": round(ideal, 4),
                      "overhead_ms_per_trial": round((wall - ideal) * 1000.0 / a.trials * a.parallel, 4)}))


if __name__ == "__main__":
    main()
