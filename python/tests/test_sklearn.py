"""reel.sklearn.VideoClassifier: scikit-learn's estimator checks, its targets and validation,
pickling that carries the weights into a new process, and a folder of its own per fit."""

import gc
import os
import pickle
import subprocess
import sys

import joblib
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score, cross_validate
from sklearn.utils.estimator_checks import (check_dataframe_column_names_consistency,
                                            check_n_features_in_after_fitting,
                                            parametrize_with_checks)

import reel
import reel.sklearn
from conftest import SHARDS

VideoClassifier = reel.sklearn.VideoClassifier


def real_shards(num_classes=3862):
    """X [902, 1152] (mean_rgb + mean_audio) and Y [902, classes] from the real shards."""
    recs = list(reel.read_tfrecords(str(SHARDS / "*.tfrecord")))
    X = np.stack([np.concatenate([r["mean_rgb"], r["mean_audio"]]) for r in recs])
    Y = np.zeros((len(recs), num_classes), np.uint8)
    for i, r in enumerate(recs):
        Y[i, r["labels"]] = 1
    return X, Y


@pytest.fixture(scope="module")
def synthetic(frame_data):
    """Frame-level synthetic videos averaged into video-level X, 8 classes."""
    recs = list(reel.read_tfrecords(str(frame_data / "train" / "*.tfrecord"), level="frame"))
    X = np.stack([np.concatenate([r["rgb"].mean(0), r["audio"].mean(0)]) for r in recs])
    Y = np.zeros((len(recs), 8), np.uint8)
    for i, r in enumerate(recs):
        Y[i, r["labels"]] = 1
    return X, Y


def small(**params):
    return VideoClassifier(model="logistic", epochs=2, batch_size=8, **params)


# The checks' data (300 blobs, 3 epochs) needs a larger step than the default's to reach their
# 0.83 training accuracy; both models are checked. No check is marked expected to fail.
@parametrize_with_checks([VideoClassifier(learning_rate=0.05),
                          VideoClassifier(model="logistic", learning_rate=0.05)])
def test_scikit_learn_estimator_checks(estimator, check):
    check(estimator)


@pytest.mark.parametrize("check", [check_n_features_in_after_fitting,
                                   check_dataframe_column_names_consistency])
def test_checks_outside_the_default_set(check):
    check("VideoClassifier", VideoClassifier(model="logistic"))


def test_fit_predict_score_on_the_real_shards():
    X, Y = real_shards()
    clf = VideoClassifier(model="logistic", epochs=1, batch_size=64)
    clf.fit(X[:600], Y[:600])
    proba = clf.predict_proba(X[600:])
    assert proba.shape == (302, 3862) and proba.dtype == np.float32
    assert ((proba >= 0) & (proba <= 1)).all()
    assert clf.score(X[600:], Y[600:]) == pytest.approx(reel.metrics.gap(proba, Y[600:]))
    assert clf.predict(X[600:]).shape == (302, 3862)


def test_learns_the_synthetic_signal(synthetic):
    X, Y = synthetic
    clf = VideoClassifier(model="moe", epochs=20, batch_size=8, learning_rate=0.01)
    clf.fit(X, Y)
    untrained = reel.metrics.gap(np.random.default_rng(0).random(Y.shape), Y)
    assert clf.score(X, Y) > untrained + 0.2


def test_every_indicator_form_trains_the_same_model(synthetic):
    X, Y = synthetic
    reference = small().fit(X, Y).predict_proba(X)
    labels = [list(np.flatnonzero(row)) for row in Y]
    for y in (Y.astype(bool), Y.astype(np.float32), sp.csr_matrix(Y.astype(np.float64)),
              Y.tolist(), labels):
        clf = small().fit(X, y)
        assert clf.multilabel_ and list(clf.classes_) == list(range(8))
        np.testing.assert_array_equal(clf.predict_proba(X), reference)


def test_label_sets_of_names(synthetic):
    X, Y = synthetic
    names = np.array(["cat", "dog", "car", "sea", "sky", "run", "sun", "toy"])
    sets = [set(names[np.flatnonzero(row)]) for row in Y]
    clf = small().fit(X, sets)
    assert list(clf.classes_) == sorted(names)
    order = np.argsort(names)  # the columns follow classes_
    by_columns = small().fit(X, Y[:, order]).predict_proba(X)
    np.testing.assert_array_equal(clf.predict_proba(X), by_columns)
    assert clf.score(X, sets) == pytest.approx(reel.metrics.gap(clf.predict_proba(X), Y[:, order]))


def test_multiclass_labels_minus_one_is_a_class(synthetic):
    X, _ = synthetic
    y = np.where(X[:, 0] > np.median(X[:, 0]), 7, -1)
    clf = VideoClassifier(model="logistic", epochs=20, batch_size=8, learning_rate=0.05).fit(X, y)
    assert not clf.multilabel_ and list(clf.classes_) == [-1, 7]
    proba = clf.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1, rtol=1e-6)
    assert set(clf.predict(X)) <= {-1, 7} and clf.score(X, y) > 0.6


def test_a_minus_one_in_an_indicator_is_refused(synthetic):
    X, Y = synthetic
    clf = small().fit(X, Y)
    before = clf.predict_proba(X)
    bad = Y.astype(np.int64)
    bad[bad == 0] = -1
    with pytest.raises(ValueError, match=r"holds only 0 and 1, but it holds \[-1\]"):
        clf.fit(X, bad)
    np.testing.assert_array_equal(clf.predict_proba(X), before)


@pytest.mark.parametrize("what, make, error, message", [
    ("NaN in X", lambda X, Y: (np.where(X == X[0, 0], np.nan, X), Y), ValueError,
     "Input X contains NaN"),
    ("inf in X", lambda X, Y: (np.where(X == X[0, 0], np.inf, X), Y), ValueError,
     "Input X contains infinity"),
    ("too large for float32", lambda X, Y: (X.astype(np.float64) * 1e300, Y), ValueError,
     "Input X contains infinity or a value too large for dtype\\('float32'\\)"),
    ("NaN in y", lambda X, Y: (X, np.where(Y == 1, np.nan, Y)), ValueError,
     "Input y contains NaN"),
    ("complex X", lambda X, Y: (X + 1j, Y), ValueError, "Complex data not supported"),
    ("no rows", lambda X, Y: (X[:0], Y[:0]), ValueError, "0 sample\\(s\\)"),
    ("1-D X", lambda X, Y: (X[:, 0], Y), ValueError, "Expected 2D array, got 1D array"),
    ("3-D X", lambda X, Y: (X[:, :, None], Y), ValueError, "Found array with dim 3"),
    ("rows differ", lambda X, Y: (X, Y[:-1]), ValueError, "inconsistent numbers of samples"),
    ("no y", lambda X, Y: (X, None), ValueError, "requires y to be passed"),
    ("continuous y", lambda X, Y: (X, X[:, 0]), ValueError, "Unknown label type: 'continuous'"),
    ("labels in a matrix", lambda X, Y: (X, Y * 3), ValueError, "holds only 0 and 1"),
])
@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning",
                            "ignore:invalid value encountered in reduce:RuntimeWarning")
def test_a_bad_fit_says_why_and_keeps_the_model(synthetic, what, make, error, message):
    X, Y = synthetic
    clf = small().fit(X, Y)
    before, checkpoint = clf.predict_proba(X), clf.checkpoint_
    with pytest.raises(error, match=message):
        clf.fit(*make(X, Y))
    assert clf.checkpoint_ == checkpoint and clf.n_features_in_ == X.shape[1]
    np.testing.assert_array_equal(clf.predict_proba(X), before)


@pytest.mark.parametrize("what, make, message", [
    ("NaN", lambda X: np.where(X == X[0, 0], np.nan, X), "Input X contains NaN"),
    ("other width", lambda X: X[:, :5], "X has 5 features, but VideoClassifier is expecting 1152"),
    ("1-D", lambda X: X[0], "Expected 2D array, got 1D array"),
    ("no rows", lambda X: X[:0], "0 sample\\(s\\)"),
])
def test_a_bad_predict_says_why(synthetic, what, make, message):
    X, Y = synthetic
    clf = small().fit(X, Y)
    with pytest.raises(ValueError, match=message):
        clf.predict_proba(make(X))


def test_unfitted_is_not_fitted_error(synthetic):
    X, _ = synthetic
    for method in ("predict", "predict_proba"):
        with pytest.raises(NotFittedError):
            getattr(VideoClassifier(), method)(X)


def test_data_frame_feature_names(synthetic):
    X, Y = synthetic
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    clf = small().fit(frame, Y)
    assert list(clf.feature_names_in_) == list(frame.columns) and clf.n_features_in_ == 1152
    np.testing.assert_array_equal(clf.predict_proba(frame), small().fit(X, Y).predict_proba(X))
    with pytest.raises(ValueError, match="feature names should match"):
        clf.predict_proba(frame.rename(columns={"f0": "other"}))


def test_pickle_predicts_bit_identically_in_a_new_process(synthetic, tmp_path):
    X, Y = synthetic
    clf = small().fit(X, Y)
    expected, folder = clf.predict_proba(X), os.path.dirname(clf.checkpoint_)
    (tmp_path / "model.pkl").write_bytes(pickle.dumps(clf))
    np.save(tmp_path / "X.npy", X)
    del clf
    gc.collect()
    assert not os.path.exists(folder)  # the fit's private folder went with the estimator
    script = ("import pickle, sys, numpy as np\n"
              "clf = pickle.load(open(sys.argv[1] + '/model.pkl', 'rb'))\n"
              "np.save(sys.argv[1] + '/proba.npy', clf.predict_proba(np.load(sys.argv[1] + "
              "'/X.npy')))\n")
    subprocess.run([sys.executable, "-c", script, str(tmp_path)], check=True,
                   env=dict(os.environ))
    proba = np.load(tmp_path / "proba.npy")
    assert proba.dtype == np.float32 and proba.tobytes() == expected.tobytes()


def test_joblib_dump_carries_the_weights(synthetic, tmp_path):
    X, Y = synthetic
    clf = small().fit(X, Y)
    expected = clf.predict_proba(X)
    joblib.dump(clf, tmp_path / "model.joblib")
    del clf
    gc.collect()
    loaded = joblib.load(tmp_path / "model.joblib")
    assert loaded.predict_proba(X).tobytes() == expected.tobytes()


def test_cross_validate_in_two_processes_returns_working_estimators(synthetic):
    X, Y = synthetic
    out = cross_validate(small(), X, Y, cv=KFold(2), n_jobs=2, return_estimator=True)
    assert np.isfinite(out["test_score"]).all()
    first, second = (e.predict_proba(X) for e in out["estimator"])
    assert first.shape == second.shape == (40, 8) and not np.array_equal(first, second)
    for fold, estimator in enumerate(out["estimator"]):  # KFold(2): fold i tests half i
        test = slice(20 * fold, 20 * fold + 20)
        assert estimator.score(X[test], Y[test]) == out["test_score"][fold]


def test_estimators_sharing_a_workdir_keep_their_own_models(synthetic, tmp_path):
    X, Y = synthetic
    a = small(workdir=tmp_path).fit(X[:20], Y[:20])
    before = a.predict_proba(X)
    b = clone(a).fit(X[20:], Y[20:])
    np.testing.assert_array_equal(a.predict_proba(X), before)
    assert not np.array_equal(b.predict_proba(X), before)
    folders = {os.path.dirname(a.checkpoint_), os.path.dirname(b.checkpoint_)}
    assert len(folders) == 2 and all(os.path.dirname(f) == str(tmp_path) for f in folders)


def test_a_refit_removes_the_previous_private_folder(synthetic):
    X, Y = synthetic
    clf = small().fit(X, Y)
    first = os.path.dirname(clf.checkpoint_)
    clf.fit(X[:20], Y[:20])
    assert not os.path.exists(first) and os.path.exists(clf.checkpoint_)


def test_clone_cross_val_score_and_grid_search(synthetic):
    X, Y = synthetic
    clf = small()
    copy = clone(clf)
    assert copy.get_params() == clf.get_params()
    scores = cross_val_score(clf, X, Y, cv=KFold(2))
    assert len(scores) == 2 and np.isfinite(scores).all()
    grid = GridSearchCV(clf, {"learning_rate": [0.001, 0.05]}, cv=KFold(2), n_jobs=1)
    grid.fit(X, Y)
    assert grid.best_params_["learning_rate"] in (0.001, 0.05)
    assert grid.best_estimator_.predict_proba(X).shape == (40, 8)


def test_a_plugin_error_reaches_the_caller():
    with pytest.raises(reel.Error, match="no_such_model"):
        VideoClassifier(model="no_such_model").fit(np.zeros((4, 3)), np.zeros((4, 2), int))
