"""A scikit-learn estimator over reel's trainer: ``reel.sklearn.VideoClassifier``.

``fit(X, Y)`` trains a video-level model (``logistic`` or ``moe`` of the moe plugin) on features
X [videos, features] and the multi-label indicator matrix Y [videos, classes] with the same
trainer as ``reel train`` (the arrays are handed to it as the in-memory data source ``numpy``);
``predict_proba`` runs the same evaluator as ``reel predict``; ``score`` is GAP@20. Parameters
are plain constructor arguments, so ``clone``, ``GridSearchCV`` and ``cross_val_score`` work.
"""

import os
import tempfile

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

from . import _reel, train
from .metrics import gap


class VideoClassifier(ClassifierMixin, BaseEstimator):
    """Multi-label video classifier trained by reel.

    ``model``: ``"moe"`` or ``"logistic"``; ``experts`` (moe); ``learning_rate``, ``epochs``,
    ``batch_size``, ``seed``, ``rule`` (the sync optimizer's update rule: ``adam``, ``sgd`` ...);
    ``threshold``: the probability above which ``predict`` sets a label; ``workdir``: where
    checkpoints go (a fresh temporary folder when None).
    """

    def __init__(self, model="moe", experts=2, learning_rate=0.005, epochs=3, batch_size=32,
                 seed=1, rule="adam", threshold=0.5, workdir=None):
        self.model = model
        self.experts = experts
        self.learning_rate = learning_rate
        self.epochs = epochs
        self.batch_size = batch_size
        self.seed = seed
        self.rule = rule
        self.threshold = threshold
        self.workdir = workdir

    def _config(self, table, width, classes, checkpoint_dir):
        options = {"features": "x", "widths": str(width)}
        if self.model == "moe":
            options["experts"] = str(self.experts)
        return {
            "data": {"name": "numpy", "options": {"table": str(table)}},
            "model": {"name": self.model, "options": options},
            "optimizer": {"name": "sync", "options": {"rule": self.rule}},
            "trainer": {"epochs": self.epochs, "batch_size": self.batch_size, "seed": self.seed,
                        "num_classes": classes, "learning_rate": {"base": float(self.learning_rate)},
                        "log_every_steps": 0, "checkpoint_dir": checkpoint_dir},
        }

    def fit(self, X, Y):
        X = np.asarray(X, dtype=np.float32)
        Y = np.asarray(Y)
        if X.ndim != 2:
            raise ValueError(f"X must be [videos, features], got shape {X.shape}")
        if Y.ndim != 2 or Y.shape[0] != X.shape[0]:
            raise ValueError(f"Y must be the [videos, classes] indicator matrix for X's "
                             f"{X.shape[0]} videos, got shape {Y.shape}")
        if Y.dtype.kind not in "biu":
            raise ValueError(f"Y must hold 0/1 or bools, not {Y.dtype}")
        self.n_features_in_ = X.shape[1]
        self.n_classes_ = Y.shape[1]
        self.classes_ = np.arange(self.n_classes_)
        if self.workdir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="reel-sklearn-")
            workdir = self._tmp.name
        else:
            workdir = os.fspath(self.workdir)
        table = _reel.add_arrays(X, Y.astype(np.uint8))
        try:
            result = train(self._config(table, X.shape[1], Y.shape[1],
                                        os.path.join(workdir, "checkpoints")))
        finally:
            _reel.drop_arrays(table)
        self.checkpoint_ = result.checkpoint
        self.final_loss_ = result.final_loss
        return self

    def predict_proba(self, X):
        """Probabilities [videos, classes] (sigmoid of the model's logits)."""
        if not hasattr(self, "checkpoint_"):
            raise ValueError("VideoClassifier: call fit before predict_proba")
        X = np.asarray(X, dtype=np.float32)
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise ValueError(f"X must be [videos, {self.n_features_in_}], got shape {X.shape}")
        table = _reel.add_arrays(X, np.zeros((X.shape[0], 1), np.uint8))
        try:
            ids, classes, scores = _reel.predict(self.checkpoint_, "", self.n_classes_, 256, table)
        finally:
            _reel.drop_arrays(table)
        rows = np.array([int(i[1:]) for i in ids])  # ids are "r<row>", in row order
        proba = np.zeros((X.shape[0], self.n_classes_), np.float32)
        proba[rows[:, None], classes] = scores
        return proba

    def predict(self, X):
        """The indicator matrix of the classes whose probability exceeds ``threshold``."""
        return (self.predict_proba(X) > self.threshold).astype(np.int64)

    def score(self, X, Y, sample_weight=None):
        """GAP@20 of the predicted probabilities (docs/metrics.md)."""
        if sample_weight is not None:
            raise ValueError("VideoClassifier.score does not take sample weights")
        return gap(self.predict_proba(X), np.asarray(Y), k=20)
