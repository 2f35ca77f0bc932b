"""A scikit-learn grid search over reel's video-level models on the real shards.

Run from the repository root after building (docs/python.md):
    PYTHONPATH=build/python python3 examples/python/sklearn_grid.py
"""

import numpy as np
from sklearn.model_selection import GridSearchCV, KFold

import reel
import reel.sklearn

records = list(reel.read_tfrecords("data/yt8m/*.tfrecord"))
X = np.stack([np.concatenate([r["mean_rgb"], r["mean_audio"]]) for r in records])
Y = np.zeros((len(records), 3862), np.uint8)
for i, r in enumerate(records):
    Y[i, r["labels"]] = 1

grid = GridSearchCV(reel.sklearn.VideoClassifier(model="logistic", epochs=2, batch_size=32),
                    {"learning_rate": [0.003, 0.01, 0.03]}, cv=KFold(3), n_jobs=1)
grid.fit(X, Y)
print("best", grid.best_params_, "GAP@20", round(grid.best_score_, 4))
for params, score in zip(grid.cv_results_["params"], grid.cv_results_["mean_test_score"]):
    print(params, round(score, 4))
