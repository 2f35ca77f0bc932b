"""reel.evaluate, reel.predict and reel.metrics against `reel eval` and `reel predict`."""

import json

import numpy as np
import pytest

import reel
from conftest import SHARDS, moe_config, run_reel

TRAIN = SHARDS / "validate000[01].tfrecord"
TEST = str(SHARDS / "validate0002.tfrecord")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("eval")
    return reel.train(moe_config(TRAIN, TEST, workdir, steps=16)).checkpoint


@pytest.fixture(scope="module")
def frame_checkpoint(frame_data, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("frame_eval")
    cfg = moe_config(frame_data / "train" / "*.tfrecord", frame_data / "test" / "*.tfrecord",
                     workdir, level="frame", classes=8, steps=6, features="rgb,audio")
    return reel.train(cfg).checkpoint


def test_evaluate_equals_reel_eval(checkpoint):
    want = json.loads(run_reel("eval", "--checkpoint", checkpoint, "--data", TEST,
                               "--json").stdout)
    got = reel.evaluate(checkpoint, TEST)
    assert got["videos"] == want["videos"] > 0
    for key in ("gap", "hit_at_1", "perr", "map"):
        assert round(got[key], 6) == pytest.approx(want[key], abs=1e-6)


def test_predict_equals_reel_predict(checkpoint):
    out = run_reel("predict", "--checkpoint", checkpoint, "--data", TEST, "--top-k", 5).stdout
    rows = out.splitlines()[1:]
    ids, classes, scores = reel.predict(checkpoint, TEST, top_k=5)
    n = len(rows)
    assert len(ids) == n > 0
    assert classes.shape == scores.shape == (n, 5)
    for i, row in enumerate(rows):
        vid, pairs = row.split(",")
        values = pairs.split()
        assert vid == ids[i]
        assert [int(c) for c in values[0::2]] == classes[i].tolist()
        np.testing.assert_allclose([float(s) for s in values[1::2]], scores[i], atol=1e-6)
    frame = reel.predict(checkpoint, TEST, top_k=5, as_frame=True)
    assert list(frame.columns) == ["id", "rank", "class", "score"] and len(frame) == 5 * n


def test_metrics_on_numpy_equal_evaluate(checkpoint):
    # Every class's probability (top_k = all classes) and the labels as an indicator matrix.
    ids, classes, scores = reel.predict(checkpoint, TEST, top_k=3862)
    dense = np.zeros((len(ids), 3862), np.float32)
    np.put_along_axis(dense, classes, scores, axis=1)
    labels = np.zeros((len(ids), 3862), bool)
    for i, rec in enumerate(reel.read_tfrecords(TEST)):
        assert rec["id"] == ids[i]
        labels[i, rec["labels"]] = True
    want = reel.evaluate(checkpoint, TEST)
    assert reel.metrics.gap(dense, labels) == pytest.approx(want["gap"], abs=1e-6)
    assert reel.metrics.hit_at_1(dense, labels) == pytest.approx(want["hit_at_1"], abs=1e-6)
    assert reel.metrics.perr(dense, labels) == pytest.approx(want["perr"], abs=1e-6)


def test_gap_by_hand():
    # Two videos, three classes, k=2 (docs/metrics.md). Pooled top-2 predictions by score: 0.9
    # (true), 0.8 (false), 0.7 (true), 0.1 (false); 3 positives in all, one of them (video 1,
    # class 0) never in a top 2. AP = (1/1 + 2/3) / 3 = 5/9.
    scores = np.array([[0.9, 0.1, 0.0], [0.0, 0.8, 0.7]])
    labels = np.array([[1, 0, 0], [1, 0, 1]])
    assert reel.metrics.gap(scores, labels, k=2) == pytest.approx(5 / 9)
    assert reel.metrics.hit_at_1(scores, labels) == pytest.approx(0.5)


def test_on_synthetic_frame_data(frame_data, frame_checkpoint):
    test = str(frame_data / "test" / "*.tfrecord")
    want = json.loads(run_reel("eval", "--checkpoint", frame_checkpoint, "--data", test,
                               "--json").stdout)
    got = reel.evaluate(frame_checkpoint, test)
    assert got["videos"] == 16 and got["gap"] == pytest.approx(want["gap"], abs=1e-6)
    ids, classes, scores = reel.predict(frame_checkpoint, test, top_k=3)
    assert len(ids) == 16 and classes.max() < 8


def test_bad_inputs(checkpoint, tmp_path):
    with pytest.raises(FileNotFoundError):
        reel.evaluate(tmp_path / "no-checkpoint", TEST)
    with pytest.raises(FileNotFoundError, match="matches no file"):
        reel.evaluate(checkpoint, str(SHARDS / "none*.tfrecord"))
    with pytest.raises(TypeError, match="checkpoint"):
        reel.evaluate(1, TEST)
    with pytest.raises(ValueError, match="top_k"):
        reel.predict(checkpoint, TEST, top_k=0)
    with pytest.raises(ValueError):
        reel.metrics.gap(np.zeros((2, 3)), np.zeros((3, 3), int))
    with pytest.raises(TypeError, match="labels"):
        reel.metrics.gap(np.zeros((2, 3)), np.zeros((2, 3)))
    assert list(tmp_path.iterdir()) == []


def test_metrics_refuse_nan_scores_naming_row_and_class():
    scores = np.array([[0.9, 0.1, 0.0], [0.0, 0.8, 0.7]], dtype=np.float32)
    labels = np.array([[1, 0, 0], [1, 0, 1]])
    scores[1, 2] = np.nan
    for metric in (reel.metrics.compute, reel.metrics.gap, reel.metrics.hit_at_1,
                   reel.metrics.perr, reel.metrics.mean_average_precision):
        with pytest.raises(ValueError, match="row 1: the score of class 2 is NaN"):
            metric(scores, labels)
    with pytest.raises(reel.InvalidArgumentError):
        reel.metrics.gap(np.full((2, 3), np.nan), labels)
