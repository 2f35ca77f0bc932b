"""reel.read_tfrecords and reel.batches on the real shards and synthetic frame data."""

import os
import shutil

import numpy as np
import pytest

import reel
from conftest import SHARDS, inspect_json, run_reel

PATTERN = str(SHARDS / "*.tfrecord")


def test_video_level_records_equal_reel_inspect_record_by_record():
    want = inspect_json(PATTERN)
    got = list(reel.read_tfrecords(PATTERN, level="video"))
    assert len(got) == len(want) == 902
    for g, w in zip(got, want):
        assert g["id"] == w["id"]
        assert g["labels"].tolist() == w["labels"]
        assert g["labels"].dtype == np.int32
        assert g["mean_rgb"].shape == (w["features"]["mean_rgb"],)
        assert g["mean_audio"].shape == (w["features"]["mean_audio"],)
        assert g["mean_rgb"].dtype == np.float32


def test_frame_level_records_equal_reel_inspect_and_are_dequantized(frame_data):
    pattern = str(frame_data / "train" / "*.tfrecord")
    want = inspect_json(pattern)
    got = list(reel.read_tfrecords(pattern, level="frame"))
    assert len(got) == len(want) == 40
    for g, w in zip(got, want):
        assert g["id"] == w["id"]
        assert g["labels"].tolist() == w["labels"]
        for name, width in (("rgb", 1024), ("audio", 128)):
            assert g[name].shape == (w["feature_lists"][name]["frames"], width)
            # q * 4/255 + 4/512 - 2 for bytes q in [0, 255] (plugins/tfrecord/README.md)
            assert g[name].min() >= -2.0 and g[name].max() <= 2.01


def test_arrays_view_the_batch_memory_without_copies():
    rec = next(iter(reel.read_tfrecords(PATTERN)))
    assert rec["mean_rgb"].base is not None  # a view of the reader's batch
    assert rec["mean_rgb"].flags["C_CONTIGUOUS"]


def test_batches_are_padded_with_lengths(frame_data):
    pattern = str(frame_data / "train" / "*.tfrecord")
    records = list(reel.read_tfrecords(pattern, level="frame"))
    seen = 0
    for b in reel.batches(pattern, level="frame", batch_size=16):
        n = len(b["id"])
        assert b["rgb"].shape[0] == n and b["rgb"].shape[2] == 1024
        assert b["label_offsets"].shape == (n + 1,)
        for i in range(n):
            r = records[seen + i]
            length = b["lengths"]["rgb"][i]
            assert length == r["rgb"].shape[0]
            np.testing.assert_array_equal(b["rgb"][i, :length], r["rgb"])
            assert not b["rgb"][i, length:].any()
            labels = b["label_ids"][b["label_offsets"][i]:b["label_offsets"][i + 1]]
            assert labels.tolist() == r["labels"].tolist()
        seen += n
    assert seen == 40


def test_missing_files_raise_file_not_found():
    with pytest.raises(FileNotFoundError, match="nothing-here"):
        next(iter(reel.read_tfrecords("data/yt8m/nothing-here*.tfrecord")))
    with pytest.raises(reel.NotFoundError):
        reel.batches("/no/such/dir/x.tfrecord")


def corrupt_copy(tmp_path):
    src = SHARDS / "validate0000.tfrecord"
    dst = tmp_path / "corrupt.tfrecord"
    shutil.copy(src, dst)
    data = bytearray(dst.read_bytes())
    data[5000] ^= 0xFF  # inside the first records' payloads: a data CRC mismatch
    dst.write_bytes(bytes(data))
    return dst, src


def test_corrupt_record_raises_data_loss_naming_the_file(tmp_path):
    dst, src = corrupt_copy(tmp_path)
    before = dst.read_bytes()
    with pytest.raises(reel.DataLossError, match="corrupt.tfrecord") as e:
        list(reel.read_tfrecords(str(dst)))
    assert e.value.code == "DATA_LOSS"
    assert dst.read_bytes() == before  # reading writes nothing


def test_skip_corrupt_skips_and_counts(tmp_path):
    dst, src = corrupt_copy(tmp_path)
    reader = reel.read_tfrecords(str(dst), skip_corrupt=True)
    got = list(reader)
    full = list(reel.read_tfrecords(str(src)))
    assert 0 < len(full) - len(got) <= 2
    assert reader.stats()["skipped_corrupt"] == len(full) - len(got)


def test_wrong_types_and_bad_options():
    with pytest.raises(TypeError, match="pattern"):
        reel.read_tfrecords(42)
    with pytest.raises(TypeError, match="skip_corrupt"):
        reel.read_tfrecords(PATTERN, skip_corrupt="yes")
    with pytest.raises(TypeError, match="batch_size"):
        reel.batches(PATTERN, batch_size=3.5)
    with pytest.raises(ValueError, match="level"):
        reel.read_tfrecords(PATTERN, level="clip")
    with pytest.raises(ValueError, match="no_such_option"):
        reel.read_tfrecords(PATTERN, options={"no_such_option": 1})
    with pytest.raises(ValueError, match="batch_size"):
        reel.batches(PATTERN, batch_size=0)


def rss_kib():
    with open(f"/proc/{os.getpid()}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_reading_the_shards_200_times_does_not_grow_memory():
    def read_all():
        n = 0
        for rec in reel.read_tfrecords(PATTERN):
            n += rec["mean_rgb"].shape[0] > 0
        return n

    for _ in range(20):  # warm: pools, allocator arenas, the plugin's buffers
        assert read_all() == 902
    start = rss_kib()
    for _ in range(180):
        read_all()
    grown = rss_kib() - start
    # One pass's records are 902 * 1152 floats = 4 MiB: keeping a pass's batches alive (a
    # reference cycle through the arrays' owner, a pool that never recycles) adds 720 MiB.
    assert grown < 8 * 1024, f"RSS grew by {grown} KiB over 180 passes"
