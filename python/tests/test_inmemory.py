"""reel.train / predict / evaluate with data= in memory (docs/python.md, "Training from memory"):
arrays at video and frame level, rgb + audio, pandas, iterables of batches; the frame-level path
against the TFRecords it was read from; every bad input's message; tables released after the
call; two threads training on different data at once."""

import gc
import threading
import weakref

import numpy as np
import pandas
import pytest

import reel
from reel import _reel

CLASSES = 8


def frame_videos(root, split="train"):
    """The synthetic frame-level videos of conftest's frame_data, in file order, as arrays."""
    recs = list(reel.read_tfrecords(str(root / split / "*.tfrecord"), level="frame"))
    return {"rgb": [np.array(r["rgb"]) for r in recs],
            "audio": [np.array(r["audio"]) for r in recs],
            "labels": [np.array(r["labels"]) for r in recs],
            "id": [r["id"] for r in recs]}


def bilstm_config(root, model="bilstm_video", steps=6, shuffle_buffer=0):
    options = {"hidden": 8} if model == "bilstm_video" else {"video_hidden": 8,
                                                             "audio_hidden": 4}
    frames = {"level": "frame", "max_frames": 12, "shuffle_buffer": shuffle_buffer}
    return {
        "data": {"name": "tfrecord", "options": {"files": str(root / "train" / "*.tfrecord"),
                                                 **frames}},
        "eval_data": {"name": "tfrecord", "options": {"files": str(root / "test" / "*.tfrecord"),
                                                      **frames}},
        "model": {"name": model, "options": options},
        "optimizer": {"name": "sync", "options": {"rule": "adam"}},
        "trainer": {"steps": steps, "batch_size": 8, "seed": 1, "num_classes": CLASSES,
                    "learning_rate": {"base": 0.01}, "log_every_steps": 1,
                    "checkpoint_dir": ""},
    }


def video_config(steps=6, features="mean_rgb,mean_audio", widths="16,4", checkpoint_dir=""):
    return {
        "model": {"name": "logistic", "options": {"features": features, "widths": widths}},
        "optimizer": {"name": "sync", "options": {"rule": "adam"}},
        "trainer": {"steps": steps, "batch_size": 8, "seed": 1, "num_classes": CLASSES,
                    "learning_rate": {"base": 0.05}, "log_every_steps": 1,
                    "checkpoint_dir": checkpoint_dir},
    }


def video_data(n=40, seed=0):
    """Video-level data with a planted signal: class c raises mean_rgb[c] and mean_audio[c % 4]."""
    rng = np.random.default_rng(seed)
    y = (rng.random((n, CLASSES)) < 0.3).astype(np.uint8)
    rgb = rng.normal(0, 0.1, (n, 16)).astype(np.float32)
    rgb[:, :CLASSES] += y
    audio = rng.normal(0, 0.1, (n, 4)).astype(np.float32)
    return {"mean_rgb": rgb, "mean_audio": audio, "labels": y}


def losses(result):
    return [e["loss"] for e in result._events if e["kind"] == "log"]


@pytest.mark.parametrize("model", ["bilstm_video", "two_stream"])
def test_frame_arrays_train_as_their_tfrecords(frame_data, model):
    # The same videos in the same order (no shuffling on either side), truncated at the same
    # max_frames: the batches are the same, so every logged loss is the same, bit for bit.
    cfg = bilstm_config(frame_data, model)
    from_files = reel.train(cfg)
    from_arrays = reel.train(cfg, data=frame_videos(frame_data),
                             eval_data=frame_videos(frame_data, "test"))
    assert len(losses(from_files)) == 6
    assert losses(from_arrays) == losses(from_files)
    assert from_arrays.examples == from_files.examples


def test_frame_layouts_agree(frame_data):
    # A list of [T_i, D] arrays, values + lengths, values + offsets and padded [N, T, D] + lengths
    # are one data set, so they train to the same losses.
    videos = frame_videos(frame_data)
    lengths = np.array([len(a) for a in videos["rgb"]])
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    padded = np.zeros((len(lengths), lengths.max(), 1024), np.float32)
    for i, a in enumerate(videos["rgb"]):
        padded[i, :len(a)] = a
    cfg = bilstm_config(frame_data, steps=3)
    runs = [reel.train(cfg, data={"rgb": rgb, "labels": videos["labels"]}) for rgb in (
        videos["rgb"],
        {"values": np.concatenate(videos["rgb"]), "lengths": lengths},
        {"values": np.concatenate(videos["rgb"]), "offsets": offsets},
        {"values": padded, "lengths": lengths})]
    assert all(losses(r) == losses(runs[0]) for r in runs[1:])


def test_video_level_rgb_audio_learns_and_predicts(tmp_path):
    train, test = video_data(64, 0), video_data(32, 1)
    result = reel.train(video_config(steps=40, checkpoint_dir=str(tmp_path / "ck")), data=train,
                        eval_data=test)
    assert result.final_eval["videos"] == 32
    assert result.final_eval["gap"] > 0.5  # a chance ranking of 8 classes at 30% scores ~0.4
    ids, classes, scores = reel.predict(result.checkpoint, {k: v for k, v in test.items()
                                                            if k != "labels"}, top_k=3)
    assert ids == [f"r{i}" for i in range(32)]
    assert classes.shape == (32, 3) and scores.shape == (32, 3)
    metrics = reel.evaluate(result.checkpoint, test)
    assert metrics["videos"] == 32
    assert metrics["gap"] == pytest.approx(result.final_eval["gap"])


def test_pandas_and_label_lists_match_arrays():
    d = video_data()
    frame = pandas.DataFrame({"mean_rgb": list(d["mean_rgb"]), "mean_audio": list(d["mean_audio"]),
                              "labels": [np.flatnonzero(row) for row in d["labels"]]})
    a = reel.train(video_config(), data=d)
    b = reel.train(video_config(), data=frame)
    assert losses(a) == losses(b)


def test_iterable_of_batches(frame_data):
    # Batches as the table source would cut them (8 videos, file order) give the same losses;
    # a list is read again each epoch, a generator only once.
    videos = frame_videos(frame_data)
    batches = [{k: v[i:i + 8] for k, v in videos.items()} for i in range(0, 40, 8)]
    cfg = bilstm_config(frame_data, steps=7)  # 5 batches an epoch: the list is read twice
    from_table = reel.train(cfg, data=videos)
    from_list = reel.train(cfg, data=batches)
    assert losses(from_list) == losses(from_table)
    from_callable = reel.train(cfg, data=lambda: iter(batches))
    assert losses(from_callable) == losses(from_table)
    with pytest.raises(ValueError, match="an iterator gives one pass over its batches, epoch 1"):
        reel.train(cfg, data=(b for b in batches))
    assert _reel.table_count() == 0


def test_generator_error_is_raised_with_its_batch(frame_data):
    def gen():
        yield {"rgb": [np.zeros((3, 1024), np.float32)], "labels": [[1]]}
        yield {"rgb": [np.full((3, 1024), np.nan, np.float32)], "labels": [[1]]}
    with pytest.raises(ValueError, match=r"data batch 1\['rgb'\]: video 0, frame 0, column 0 "
                                         r"is not finite \(nan\)"):
        reel.train(bilstm_config(frame_data, steps=4), data=gen())
    assert _reel.table_count() == 0


def test_contiguous_float32_is_used_in_place():
    # The table holds the caller's array itself (no copy): a reference while registered.
    d = video_data()
    before = d["mean_rgb"].__array_interface__["data"][0]
    fields = reel._inmemory.table_fields(d)
    assert fields[1][0][1][0].__array_interface__["data"][0] == before


def test_arrays_are_released_after_the_call(frame_data):
    d = video_data()
    rgb = d["mean_rgb"]
    ref = weakref.ref(rgb)
    reel.train(video_config(), data=d, eval_data=d)
    assert _reel.table_count() == 0
    del rgb, d
    gc.collect()
    assert ref() is None


def test_two_threads_train_on_their_own_data():
    a, b = video_data(seed=0), video_data(seed=5)
    alone = {k: losses(reel.train(video_config(), data=d)) for k, d in (("a", a), ("b", b))}
    assert alone["a"] != alone["b"]
    got, errors = {}, []

    def run(key, d):
        try:
            got[key] = losses(reel.train(video_config(), data=d))
        except Exception as e:  # noqa: BLE001  (reported by the assertion below)
            errors.append(e)
    threads = [threading.Thread(target=run, args=kv) for kv in (("a", a), ("b", b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert got == alone
    assert _reel.table_count() == 0


BAD = [
    ({"mean_rgb": np.zeros((4, 16), np.int64), "labels": np.zeros((4, 8), np.uint8)},
     TypeError, r"data\['mean_rgb'\] must hold floats \(float32 is used in place\), not int64"),
    ({"mean_rgb": np.zeros(16, np.float32), "labels": np.zeros((1, 8), np.uint8)},
     ValueError, r"data\['mean_rgb'\] has shape \(16,\), want \[videos, D\]"),
    ({"mean_rgb": np.zeros((4, 16), np.float32), "mean_audio": np.zeros((5, 4), np.float32),
      "labels": np.zeros((4, 8), np.uint8)},
     ValueError, r"data\['mean_audio'\] has 5 videos, data\['mean_rgb'\] has 4"),
    ({"mean_rgb": np.zeros((4, 16), np.float32)}, ValueError, r"data has no 'labels'"),
    ({"mean_rgb": np.zeros((4, 16), np.float32), "labels": np.zeros((3, 8), np.uint8)},
     ValueError, r"data\['labels'\] has shape \(3, 8\), want \[4, classes\]"),
    ({"mean_rgb": np.zeros((4, 16), np.float32), "labels": np.full((4, 8), 2, np.uint8)},
     ValueError, r"data\['labels'\]: video 0, class 0 is 2, want 0 or 1"),
    ({"mean_rgb": np.zeros((4, 16), np.float32), "labels": np.zeros((4, 8), np.float32)},
     TypeError, r"indicator matrix must hold 0/1 or bools, not float32"),
    ({"mean_rgb": np.zeros((2, 16), np.float32), "labels": [[1], [-2]]},
     ValueError, r"data\['labels'\]\[1\] has label -2, want >= 0"),
    ({"mean_rgb": np.zeros((2, 16), np.float32), "labels": [[1], ["a"]]},
     TypeError, r"data\['labels'\]\[1\] must be label ids \(ints\)"),
    ({"mean_rgb": np.zeros((2, 16), np.float32), "labels": [[1]]},
     ValueError, r"data\['labels'\] has 1 videos, the features have 2"),
    ({"rgb": [np.zeros((3, 1024), np.float32), np.zeros((3, 100), np.float32)],
      "labels": [[1], [2]]},
     ValueError, r"data\['rgb'\]\[1\] has shape \(3, 100\), want \[frames >= 1, 1024\]"),
    ({"rgb": [np.zeros((3, 1024), np.float32), np.zeros((0, 1024), np.float32)],
      "labels": [[1], [2]]},
     ValueError, r"data\['rgb'\]\[1\] has shape \(0, 1024\), want \[frames >= 1, 1024\]"),
    ({"rgb": {"values": np.zeros((6, 1024), np.float32), "lengths": [3, 2]}, "labels": [[1], [2]]},
     ValueError, r"data\['rgb'\]\['lengths'\] sum to 5, values has 6 frames"),
    ({"rgb": {"values": np.zeros((6, 1024), np.float32), "offsets": [0, 4, 3]},
      "labels": [[1], [2]]},
     ValueError, r"data\['rgb'\]\['offsets'\] must run from 0 to the 6 frames of values, runs "
                 r"from 0 to 3"),
    ({"rgb": {"values": np.zeros((6, 1024), np.float32), "offsets": [0, 4, 4, 6]},
      "labels": [[1], [2], [3]]},
     ValueError, r"data\['rgb'\]\['offsets'\]: video 1 has 0 frames, want >= 1"),
    ({"rgb": {"values": np.zeros((2, 5, 1024), np.float32), "lengths": [5, 6]},
      "labels": [[1], [2]]},
     ValueError, r"data\['rgb'\]\['lengths'\]: video 1 has length 6, want 1..5"),
    ({"rgb": {"values": np.zeros((6, 1024), np.float32)}, "labels": [[1], [2]]},
     ValueError, r"data\['rgb'\]: give one of 'lengths' \[videos\] and 'offsets'"),
    ({"rgb": "frames", "labels": [[1]]},
     TypeError, r"data\['rgb'\] must be an array, a list of arrays or a dict"),
    ({"labels": [[1]]}, ValueError, r"data has no feature"),
    ({1: np.zeros((1, 4), np.float32), "labels": [[1]]},
     TypeError, r"data's keys must be feature names \(str\), not 1"),
    ({"mean_rgb": np.zeros((2, 16), np.float32), "labels": [[1], [2]], "id": ["a"]},
     ValueError, r"data\['id'\] has 1 ids, the features have 2"),
    (42, TypeError, r"data must be a dict or DataFrame of features and labels, or an iterable"),
    ("data/*.tfrecord", TypeError, r"data takes data in memory; files go in the config's data "
                                   r"sections"),
    ([{"mean_rgb": np.zeros((2, 16), np.float32), "mean_audio": np.zeros((2, 4), np.float32),
       "labels": [[1], [2]]}, 7],
     TypeError, r"data batch 1 must be a dict or DataFrame of features and labels, not int"),
]


@pytest.mark.parametrize("data,error,message", BAD)
def test_bad_input_is_refused_by_name(data, error, message):
    keep = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in data.items()} \
        if isinstance(data, dict) else data
    with pytest.raises(error, match=message):
        reel.train(video_config(), data=data)
    assert _reel.table_count() == 0
    if isinstance(data, dict):  # nothing lost: the caller's arrays are as they were
        for k, v in data.items():
            if isinstance(v, np.ndarray):
                np.testing.assert_array_equal(v, keep[k])


@pytest.mark.parametrize("where,frame,column", [(0, 0, 0), (3, 2, 7), (5, 4, 1023)])
def test_non_finite_values_are_found(where, frame, column):
    videos = [np.zeros((5, 1024), np.float32) for _ in range(6)]
    videos[where][frame, column] = np.inf
    message = rf"data\['rgb'\]: video {where}, frame {frame}, column {column} is not finite \(inf\)"
    for rgb in (videos, {"values": np.concatenate(videos), "lengths": [5] * 6},
                {"values": np.stack(videos)}):
        with pytest.raises(ValueError, match=message):
            reel.train(video_config(), data={"rgb": rgb, "labels": [[1]] * 6})
    flat = np.zeros((6, 16), np.float32)
    flat[where, column % 16] = np.nan
    with pytest.raises(ValueError, match=rf"data\['mean_rgb'\]: video {where}, frame 0, column "
                                         rf"{column % 16} is not finite \(nan\)"):
        reel.train(video_config(), data={"mean_rgb": flat, "labels": [[1]] * 6})
    assert _reel.table_count() == 0


def test_nan_in_padding_is_ignored():
    # Frames past a video's length are not read: NaN there is not an error.
    padded = np.zeros((2, 4, 16), np.float32)
    padded[0, 3] = np.nan
    fields = reel._inmemory.table_fields({"mean_rgb": {"values": padded, "lengths": [3, 4]},
                                          "labels": [[1], [2]]})
    assert fields[0] == 2


def test_label_outside_num_classes_names_the_video():
    d = {"mean_rgb": np.zeros((2, 16), np.float32), "mean_audio": np.zeros((2, 4), np.float32),
         "labels": [[1], [CLASSES]]}
    with pytest.raises(reel.InvalidArgumentError, match=r"video 1 has label 8 outside \[0, 8\)"):
        reel.train(video_config(), data=d)
    assert _reel.table_count() == 0


def test_bad_eval_data_is_named_and_data_is_released():
    good = video_data()
    bad = dict(good, mean_audio=np.zeros((3, 4), np.float32))
    with pytest.raises(ValueError, match=r"eval_data\['mean_audio'\] has 3 videos, "
                                         r"eval_data\['mean_rgb'\] has 40"):
        reel.train(video_config(), data=good, eval_data=bad)
    assert _reel.table_count() == 0


def test_non_finite_found_past_the_first_block():
    # The check goes through a large array in blocks of rows: a NaN in a later block is found.
    rgb = np.zeros((5000, 1024), np.float32)
    rgb[4321, 5] = np.nan
    with pytest.raises(ValueError, match=r"video 4321, frame 0, column 5 is not finite"):
        reel.train(video_config(), data={"mean_rgb": rgb, "labels": [[0]] * 5000})


def test_two_ranks_share_the_arrays_and_refuse_a_stream():
    d = video_data()
    cfg = video_config()
    cfg["trainer"]["local_ranks"] = 2
    result = reel.train(cfg, data=d)
    assert result.steps == 6
    with pytest.raises(NotImplementedError, match="an iterable of batches feeds one rank"):
        reel.train(cfg, data=[d])
    assert _reel.table_count() == 0


def test_resume_from_arrays_continues_where_it_stopped(tmp_path):
    # A stopped run's checkpoint records how far into the arrays it got; the resumed call
    # registers them anew and continues there, as one uninterrupted run would.
    d = video_data()
    whole = reel.train(video_config(steps=8), data=d)
    cfg = video_config(steps=8, checkpoint_dir=str(tmp_path / "ck"))
    stopped = reel.train(cfg, callbacks=lambda e: e["kind"] == "log" and e["step"] == 3, data=d)
    assert stopped.stopped and stopped.steps == 3
    resumed = reel.train(cfg, data=d, resume=True)
    assert resumed.resumed and resumed.steps == 8
    assert losses(stopped) + losses(resumed) == losses(whole)
