#!/usr/bin/env bash
# The same grid two ways (bench/journal/python.md): scikit-learn's GridSearchCV(n_jobs=2) over
# reel.sklearn.VideoClassifier against `reel tune --parallel 2`. Both: the logistic model,
# Adam, batch 32, 2 epochs, learning rates 0.003 / 0.01 / 0.03, trained on
# data/yt8m/validate000[01] and scored (GAP@20) on validate0002 (GridSearchCV through a
# PredefinedSplit, no refit). Run from the repository root after building:
#   bash bench/python/grid.sh [OUT_DIR]   (default bench/out; raw output python_grid.txt)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-bench/out}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
{
  echo "== GridSearchCV(n_jobs=2)"
  PYTHONPATH=build/python /usr/bin/python3 - <<'PY'
import time
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
                    {"learning_rate": [0.003, 0.01, 0.03]}, cv=split, n_jobs=2, refit=False)
t = time.perf_counter()
grid.fit(X, Y)
s = time.perf_counter() - t
for p, g in zip(grid.cv_results_["params"], grid.cv_results_["mean_test_score"]):
    print(p, f"GAP@20 {g:.4f}")
print(f"best {grid.best_params_} GAP@20 {grid.best_score_:.4f}; wall {s:.2f} s")
PY
  echo "== reel tune --parallel 2"
  {
    echo "base {"
    sed 's/^/  /' configs/logistic.pbtxt
    echo "}"
    echo 'dimension { field: "trainer.learning_rate.base" values: ["0.003", "0.01", "0.03"] }'
    echo 'search { algorithm: GRID budget_unit: EPOCHS max_budget: 2 }'
  } >"$work/search.pbtxt"
  start=$EPOCHREALTIME
  build/bin/reel tune --config "$work/search.pbtxt" --workdir "$work/tune" --parallel 2 \
    --set trainer.metrics_log= --set trainer.tensorboard_dir= 2>/dev/null
  awk -v s="$start" -v e="$EPOCHREALTIME" 'BEGIN { printf "wall %.2f s\n", e - s }'
} >"$out/python_grid.txt" 2>&1
cat "$out/python_grid.txt"
