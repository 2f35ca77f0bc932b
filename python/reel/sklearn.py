"""A scikit-learn estimator over reel's trainer: ``reel.sklearn.VideoClassifier`` (docs/python.md).

``fit(X, y)`` trains a video-level model (``logistic`` or ``moe`` of the moe plugin) on features
X [videos, features] with the same trainer as ``reel train`` (the arrays are handed to it as the
in-memory data source ``numpy``); ``predict_proba`` runs the same evaluator as ``reel predict``.
``y`` is multi-label (an indicator matrix, dense or sparse, or a list of label sets) or
multi-class (1-D class labels). Inputs are checked by scikit-learn's own validation, each fit
trains into a folder of its own, and a pickled estimator carries its checkpoint's bytes.
"""

import os
import shutil
import tempfile
import weakref

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.preprocessing import MultiLabelBinarizer
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import check_is_fitted, column_or_1d

from . import _reel, train
from .metrics import gap

_SPARSE = ("csr", "csc", "coo")


def _is_label_sets(y):
    """A list (or tuple) of label sets, as MultiLabelBinarizer takes: rows that are sets, or lists
    or arrays of labels. Rows of equal length holding only 0 and 1 are an indicator matrix, as
    scikit-learn reads them (``type_of_target``: ``multilabel-indicator``)."""
    if not isinstance(y, (list, tuple)) or not y:
        return False
    if not all(isinstance(r, (set, frozenset, list, tuple, np.ndarray)) for r in y):
        return False
    if any(isinstance(r, (set, frozenset)) for r in y) or len({len(r) for r in y}) > 1:
        return True
    try:
        return type_of_target(y) != "multilabel-indicator"
    except ValueError:
        return True


def _private_folder(owner):
    """A fresh temporary folder removed when ``owner`` is collected (or at exit), and the
    finalizer that removes it."""
    path = tempfile.mkdtemp(prefix="reel-sklearn-")
    return path, weakref.finalize(owner, shutil.rmtree, path, ignore_errors=True)


def _check_indicator(y):
    """Refuses a 2-D y that is not 0/1: a -1 must not become a positive."""
    values = np.unique(y.data if sp.issparse(y) else y)
    bad = values[~np.isin(values, [0, 1])]
    if bad.size:
        raise ValueError(
            f"y of shape {y.shape} is read as a multi-label indicator matrix, which holds only 0 "
            f"and 1, but it holds {bad[:5].tolist()}; pass class labels as a 1-D array, or "
            f"label sets as a list of lists")


class VideoClassifier(ClassifierMixin, BaseEstimator):
    """Multi-label (or multi-class) video classifier trained by reel.

    ``model``: ``"moe"`` or ``"logistic"``; ``experts`` (moe); ``learning_rate``, ``epochs``,
    ``batch_size``, ``seed``, ``rule`` (the sync optimizer's update rule: ``adam``, ``sgd`` ...);
    ``threshold``: the probability above which multi-label ``predict`` sets a label; ``workdir``:
    a folder under which each fit makes a fresh folder of its own for its checkpoint (kept);
    None: a temporary folder removed with the estimator.
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

    def _more_tags(self):
        return {"multilabel": True}

    def _config(self, table, width, classes, checkpoint_dir):
        options = {"features": "x", "widths": str(width)}
        if self.model == "moe":
            options["experts"] = str(self.experts)
        return {
            "data": {"name": "numpy", "options": {"table": str(table)}},
            "model": {"name": self.model, "options": options},
            "optimizer": {"name": "sync", "options": {"rule": self.rule}},
            "trainer": {"epochs": self.epochs, "batch_size": self.batch_size, "seed": self.seed,
                        "num_classes": classes,
                        "learning_rate": {"base": float(self.learning_rate)},
                        "log_every_steps": 0, "checkpoint_dir": checkpoint_dir,
                        "keep_checkpoints": 1},
        }

    def _validate_X(self, X, reset):
        X = self._validate_data(X, reset=reset, accept_sparse=_SPARSE, dtype=np.float32)
        return X.toarray() if sp.issparse(X) else X

    def _targets(self, y, n):
        """y as the indicator matrix [n, classes] the trainer takes, its classes, and whether
        the problem is multi-label."""
        if _is_label_sets(y):
            binarizer = MultiLabelBinarizer()
            indicator = binarizer.fit_transform(y)
            return indicator.astype(np.uint8), binarizer.classes_, True
        if sp.issparse(y):
            y = y.tocsr()
        if y.ndim == 2 and y.shape[1] == 1:
            y = column_or_1d(y.toarray() if sp.issparse(y) else y, warn=True)
        check_classification_targets(y)
        if y.ndim == 1:
            classes, index = np.unique(y, return_inverse=True)
            indicator = np.zeros((n, len(classes)), np.uint8)
            indicator[np.arange(n), index] = 1
            return indicator, classes, False
        _check_indicator(y)
        indicator = y.toarray() if sp.issparse(y) else y
        return indicator.astype(np.uint8), np.arange(y.shape[1]), True

    def fit(self, X, y):
        """Trains a fresh model on X [videos, features] and y: a multi-label indicator matrix
        [videos, classes] (dense or sparse, any dtype holding 0/1), a list of label sets, or
        1-D class labels (multi-class). A failing fit leaves a fitted estimator as it was."""
        saved = dict(self.__dict__)
        try:
            return self._fit(X, y)
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(saved)
            raise

    def _fit(self, X, y):
        if _is_label_sets(y):
            X = self._validate_X(X, reset=True)
            if len(y) != X.shape[0]:
                raise ValueError(f"Found input variables with inconsistent numbers of samples: "
                                 f"[{X.shape[0]}, {len(y)}]")
        else:
            X, y = self._validate_data(X, y, accept_sparse=_SPARSE, dtype=np.float32,
                                       multi_output=True)
            X = X.toarray() if sp.issparse(X) else X
        indicator, classes, multilabel = self._targets(y, X.shape[0])
        if self.workdir is None:
            folder, cleanup = _private_folder(self)
        else:
            os.makedirs(self.workdir, exist_ok=True)
            folder, cleanup = tempfile.mkdtemp(prefix="fit-", dir=self.workdir), None
        table = _reel.add_arrays(X, indicator)
        try:
            result = train(self._config(table, X.shape[1], indicator.shape[1], folder))
        except BaseException:
            if cleanup is None:
                shutil.rmtree(folder, ignore_errors=True)
            else:
                cleanup()
            raise
        finally:
            _reel.drop_arrays(table)
        if getattr(self, "_cleanup", None) is not None:
            self._cleanup()  # the previous fit's private folder
        self._cleanup = cleanup
        self.checkpoint_ = result.checkpoint
        self.final_loss_ = result.final_loss
        self.classes_ = classes
        self.n_classes_ = len(classes)
        self.multilabel_ = multilabel
        return self

    def predict_proba(self, X):
        """Probabilities [videos, classes], columns in the order of ``classes_``: each class's
        sigmoid for multi-label; multi-class rows are those normalised to sum to 1 (one vs
        rest, as LogisticRegression's ``ovr``)."""
        check_is_fitted(self)
        X = self._validate_X(X, reset=False)
        table = _reel.add_arrays(X, np.zeros((X.shape[0], 1), np.uint8))
        try:
            ids, classes, scores = _reel.predict(self.checkpoint_, "", self.n_classes_, 256, table)
        finally:
            _reel.drop_arrays(table)
        rows = np.array([int(i[1:]) for i in ids])  # ids are "r<row>", in row order
        proba = np.zeros((X.shape[0], self.n_classes_), np.float32)
        proba[rows[:, None], classes] = scores
        if not self.multilabel_:
            total = proba.sum(axis=1, keepdims=True)
            proba = np.divide(proba, total, out=np.full_like(proba, 1 / self.n_classes_),
                              where=total > 0)
        return proba

    def predict(self, X):
        """Multi-label: the indicator matrix (int64, columns ``classes_``) of the classes whose
        probability exceeds ``threshold``. Multi-class: the most probable of ``classes_``."""
        proba = self.predict_proba(X)
        if self.multilabel_:
            return (proba > self.threshold).astype(np.int64)
        return self.classes_[np.argmax(proba, axis=1)]

    def score(self, X, y, sample_weight=None):
        """Multi-label: GAP@20 of the predicted probabilities (docs/metrics.md); multi-class:
        accuracy, as every scikit-learn classifier."""
        check_is_fitted(self)
        if not self.multilabel_:
            return super().score(X, y, sample_weight)
        if sample_weight is not None:
            raise ValueError("VideoClassifier.score does not take sample weights for multi-label "
                             "y (GAP@20 weighs every prediction alike)")
        proba = self.predict_proba(X)
        if _is_label_sets(y):
            indicator = MultiLabelBinarizer(classes=self.classes_).fit_transform(y)
        else:
            y = self._validate_data(X, y, reset=False, accept_sparse=_SPARSE,
                                    multi_output=True)[1]
            if y.ndim != 2 or y.shape[1] != self.n_classes_:
                raise ValueError(f"y must be the indicator matrix [videos, {self.n_classes_}] "
                                 f"of the classes fitted, got shape {y.shape}")
            _check_indicator(y)
            indicator = y.toarray() if sp.issparse(y) else y
        return gap(proba, indicator.astype(np.uint8), k=20)

    # Pickling carries the checkpoint: its bytes (a checkpoint is one file, docs/formats.md),
    # written back on load into a private temporary folder removed with the estimator.
    def __getstate__(self):
        state = dict(super().__getstate__())
        state.pop("_cleanup", None)
        if "checkpoint_" in state:
            path = state.pop("checkpoint_")
            with open(path, "rb") as f:
                state["_checkpoint_files"] = {os.path.basename(path): f.read()}
        return state

    def __setstate__(self, state):
        state = dict(state)
        files = state.pop("_checkpoint_files", None)
        super().__setstate__(state)
        if files is None:
            return
        (name, data), = files.items()
        if os.path.basename(name) != name or name in ("", ".", ".."):
            raise ValueError(f"VideoClassifier pickle: checkpoint name {name!r} is not a file name")
        folder, self._cleanup = _private_folder(self)
        path = os.path.join(folder, name)
        with open(path, "wb") as f:
            f.write(data)
        self.checkpoint_ = path
