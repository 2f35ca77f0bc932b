"""reel.sklearn.VideoClassifier under scikit-learn's clone, cross_val_score and GridSearchCV."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score

import reel
import reel.sklearn
from conftest import SHARDS


def real_shards(num_classes=3862):
    """X [902, 1152] (mean_rgb + mean_audio) and Y [902, classes] from the real shards."""
    recs = list(reel.read_tfrecords(str(SHARDS / "*.tfrecord")))
    X = np.stack([np.concatenate([r["mean_rgb"], r["mean_audio"]]) for r in recs])
    Y = np.zeros((len(recs), num_classes), np.uint8)
    for i, r in enumerate(recs):
        Y[i, r["labels"]] = 1
    return X, Y


def synthetic(frame_data):
    """Frame-level synthetic videos averaged into video-level X, 8 classes."""
    recs = list(reel.read_tfrecords(str(frame_data / "train" / "*.tfrecord"), level="frame"))
    X = np.stack([np.concatenate([r["rgb"].mean(0), r["audio"].mean(0)]) for r in recs])
    Y = np.zeros((len(recs), 8), np.uint8)
    for i, r in enumerate(recs):
        Y[i, r["labels"]] = 1
    return X, Y


def test_fit_predict_score_on_the_real_shards():
    X, Y = real_shards()
    clf = reel.sklearn.VideoClassifier(model="logistic", epochs=1, batch_size=64)
    clf.fit(X[:600], Y[:600])
    proba = clf.predict_proba(X[600:])
    assert proba.shape == (302, 3862) and proba.dtype == np.float32
    assert ((proba >= 0) & (proba <= 1)).all()
    assert clf.score(X[600:], Y[600:]) == pytest.approx(reel.metrics.gap(proba, Y[600:]))
    assert clf.predict(X[600:]).shape == (302, 3862)


def test_learns_the_synthetic_signal(frame_data):
    X, Y = synthetic(frame_data)
    clf = reel.sklearn.VideoClassifier(model="moe", epochs=20, batch_size=8, learning_rate=0.01)
    clf.fit(X, Y)
    untrained = reel.metrics.gap(np.random.default_rng(0).random(Y.shape), Y)
    assert clf.score(X, Y) > untrained + 0.2


def test_clone_cross_val_score_and_grid_search(frame_data):
    X, Y = synthetic(frame_data)
    clf = reel.sklearn.VideoClassifier(model="logistic", epochs=2, batch_size=8)
    copy = clone(clf)
    assert copy.get_params() == clf.get_params()
    scores = cross_val_score(clf, X, Y, cv=KFold(2))
    assert len(scores) == 2 and np.isfinite(scores).all()
    grid = GridSearchCV(clf, {"learning_rate": [0.001, 0.05]}, cv=KFold(2), n_jobs=1)
    grid.fit(X, Y)
    assert grid.best_params_["learning_rate"] in (0.001, 0.05)
    assert grid.best_estimator_.predict_proba(X).shape == (40, 8)


def test_bad_inputs():
    clf = reel.sklearn.VideoClassifier()
    with pytest.raises(ValueError, match="fit"):
        clf.predict_proba(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="indicator"):
        clf.fit(np.zeros((4, 3)), np.zeros((5, 2)))
    with pytest.raises(reel.Error, match="no_such_model"):
        reel.sklearn.VideoClassifier(model="no_such_model").fit(np.zeros((4, 3)),
                                                                np.zeros((4, 2), int))
