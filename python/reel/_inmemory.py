"""``data=`` of reel.train, reel.predict and reel.evaluate: arrays, DataFrames and iterables of
batches, checked here and handed to the data source ``numpy`` (python/array_source.h) without
copying where their layout allows. The accepted shapes: docs/python.md, "Training from memory".
"""

import collections.abc
import os
import threading

import numpy as np

from . import _reel

_NOT_FEATURES = ("labels", "id")


def is_in_memory(data):
    """True when ``data`` is not a path, pattern or list of them."""
    if isinstance(data, (str, bytes, os.PathLike)):
        return False
    if isinstance(data, (list, tuple)) and all(isinstance(p, (str, os.PathLike)) for p in data) \
            and len(data) > 0:
        return False
    return True


def _floats(value, where):
    a = np.asarray(value)
    if a.dtype.kind != "f":
        raise TypeError(f"{where} must hold floats (float32 is used in place), not {a.dtype}")
    return np.ascontiguousarray(a, dtype=np.float32)


def _not_finite(where, video, frame, column, value):
    return ValueError(f"{where}: video {video}, frame {frame}, column {column} is not finite "
                      f"({value})")


def _check_finite(flat, starts, lengths, where):
    """NaN or inf in a frame some video uses: ValueError naming video, frame and column.
    ``starts`` ascend (every layout _feature makes from one array). Checked in blocks of rows,
    so the mask it needs stays small whatever the array's size."""
    step = max(1, (1 << 22) // max(1, flat.shape[1]))
    for first in range(0, flat.shape[0], step):
        finite = np.isfinite(flat[first:first + step])
        if finite.all():
            continue
        for offset in np.flatnonzero(~finite.all(axis=1)):  # videos lie in order
            row = first + int(offset)
            video = int(np.searchsorted(starts, row, side="right")) - 1
            frame = row - int(starts[video])
            if frame < lengths[video]:  # else padding no video uses
                column = int(np.flatnonzero(~finite[offset])[0])
                raise _not_finite(where, video, frame, column, flat[row, column])


def _lengths(value, n, frames, where):
    lengths = np.asarray(value)
    if lengths.dtype.kind not in "iu":
        raise TypeError(f"{where} must hold ints, not {lengths.dtype}")
    if lengths.shape != (n,):
        raise ValueError(f"{where} has shape {lengths.shape}, want [{n}]")
    bad = np.flatnonzero((lengths < 1) | (lengths > frames))
    if bad.size:
        v = int(bad[0])
        raise ValueError(f"{where}: video {v} has length {int(lengths[v])}, want 1..{frames}")
    return lengths.astype(np.int32)


def _dict_feature(value, where):
    """{"values": [N, T, D] with optional "lengths" [N]} or {"values": [F, D] with "lengths"
    [N] or "offsets" [N + 1]}."""
    unknown = set(value) - {"values", "lengths", "offsets"}
    if unknown or "values" not in value:
        raise ValueError(f"{where} must be {{'values': ..., 'lengths' or 'offsets': ...}}, has "
                         f"keys {sorted(value)}")
    values = _floats(value["values"], f"{where}['values']")
    if values.ndim == 3:
        n, t, d = values.shape
        lengths = (np.full(n, t, np.int32) if value.get("lengths") is None
                   else _lengths(value["lengths"], n, t, f"{where}['lengths']"))
        return values.reshape(n * t, d), np.arange(n, dtype=np.int64) * t, lengths
    if values.ndim != 2:
        raise ValueError(f"{where}['values'] has shape {values.shape}, want [frames, D] or "
                         f"[videos, frames, D]")
    frames = values.shape[0]
    if (value.get("lengths") is None) == (value.get("offsets") is None):
        raise ValueError(f"{where}: give one of 'lengths' [videos] and 'offsets' [videos + 1] "
                         f"with values [frames, D]")
    if value.get("offsets") is not None:
        offsets = np.asarray(value["offsets"])
        if offsets.dtype.kind not in "iu" or offsets.ndim != 1 or offsets.size < 1:
            raise ValueError(f"{where}['offsets'] must be ints [videos + 1], got {offsets.dtype} "
                             f"{offsets.shape}")
        if offsets[0] != 0 or offsets[-1] != frames:
            raise ValueError(f"{where}['offsets'] must run from 0 to the {frames} frames of "
                             f"values, runs from {int(offsets[0])} to {int(offsets[-1])}")
        lengths = np.diff(offsets)
        bad = np.flatnonzero(lengths < 1)
        if bad.size:
            raise ValueError(f"{where}['offsets']: video {int(bad[0])} has "
                             f"{int(lengths[bad[0]])} frames, want >= 1")
        return values, offsets[:-1].astype(np.int64), lengths.astype(np.int32)
    lengths = np.asarray(value["lengths"])
    if lengths.dtype.kind not in "iu" or lengths.ndim != 1:
        raise ValueError(f"{where}['lengths'] must be ints [videos], got {lengths.dtype} "
                         f"{lengths.shape}")
    lengths = _lengths(lengths, lengths.size, frames, f"{where}['lengths']")
    if int(lengths.sum()) != frames:
        raise ValueError(f"{where}['lengths'] sum to {int(lengths.sum())}, values has {frames} "
                         f"frames")
    starts = np.concatenate([[0], np.cumsum(lengths[:-1], dtype=np.int64)]).astype(np.int64)
    return values, starts, lengths


def _feature(name, value, where):
    """One feature as (arrays, which, starts, lengths): video r's frames are lengths[r] rows of
    arrays[which[r]] (arrays[0] when which is None) from row starts[r]."""
    if isinstance(value, dict):
        flat, starts, lengths = _dict_feature(value, where)
        _check_finite(flat, starts, lengths, where)
        return [flat], None, starts, lengths
    if hasattr(value, "to_numpy") and not isinstance(value, np.ndarray):  # a pandas Series
        value = list(value.to_numpy())
    if isinstance(value, np.ndarray) and value.dtype != object:
        values = _floats(value, where)
        if values.ndim == 2:  # video level: one frame per video
            n = values.shape[0]
            starts, lengths = np.arange(n, dtype=np.int64), np.ones(n, np.int32)
        elif values.ndim == 3:
            n, t, d = values.shape
            values = values.reshape(n * t, d)
            starts, lengths = np.arange(n, dtype=np.int64) * t, np.full(n, t, np.int32)
        else:
            raise ValueError(f"{where} has shape {values.shape}, want [videos, D], "
                             f"[videos, frames, D] or a list of [frames, D]")
        _check_finite(values, starts, lengths, where)
        return [values], None, starts, lengths
    if not isinstance(value, (list, tuple, np.ndarray)):
        raise TypeError(f"{where} must be an array, a list of arrays or a dict of 'values' and "
                        f"'lengths', not {type(value).__name__}")
    arrays = [_floats(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if arrays and all(a.ndim == 1 for a in arrays):  # vectors: video level, one copy
        d = arrays[0].shape[0]
        for i, a in enumerate(arrays):
            if a.shape != (d,):
                raise ValueError(f"{where}[{i}] has shape {a.shape}, want [{d}]")
        return _feature(name, np.stack(arrays), where)
    width = None
    for i, a in enumerate(arrays):
        if a.ndim != 2 or a.shape[0] < 1 or (width is not None and a.shape[1] != width):
            want = f"[frames >= 1, {width if width is not None else 'D'}]"
            raise ValueError(f"{where}[{i}] has shape {a.shape}, want {want}")
        width = a.shape[1]
        finite = np.isfinite(a)
        if not finite.all():
            frame, column = (int(x[0]) for x in np.nonzero(~finite))
            raise _not_finite(where, i, frame, column, a[frame, column])
    n = len(arrays)
    return (arrays, np.arange(n, dtype=np.int64), np.zeros(n, np.int64),
            np.array([a.shape[0] for a in arrays], np.int32))


def _labels(value, n, where):
    """Labels as CSR (offsets int64 [n + 1], ids int32)."""
    if hasattr(value, "to_numpy") and not isinstance(value, np.ndarray):
        value = list(value.to_numpy())
    if isinstance(value, np.ndarray) and value.ndim == 2 and value.dtype != object:
        if value.dtype.kind not in "biu":
            raise TypeError(f"{where} as an indicator matrix must hold 0/1 or bools, not "
                            f"{value.dtype}")
        if value.shape[0] != n:
            raise ValueError(f"{where} has shape {value.shape}, want [{n}, classes]")
        bad = np.argwhere((value != 0) & (value != 1))
        if bad.size:
            v, c = (int(x) for x in bad[0])
            raise ValueError(f"{where}: video {v}, class {c} is {value[v, c]}, want 0 or 1")
        rows, ids = np.nonzero(value)
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(rows, minlength=n), out=offsets[1:])
        return offsets, ids.astype(np.int32)
    if not isinstance(value, (list, tuple, np.ndarray)):
        raise TypeError(f"{where} must be an indicator matrix [videos, classes] or a list of "
                        f"label-id lists, not {type(value).__name__}")
    if len(value) != n:
        raise ValueError(f"{where} has {len(value)} videos, the features have {n}")
    parts, offsets = [], np.zeros(n + 1, np.int64)
    for v, ids in enumerate(value):
        a = np.atleast_1d(np.asarray(ids))
        if a.size and a.dtype.kind not in "iu":
            raise TypeError(f"{where}[{v}] must be label ids (ints), not {a.dtype}")
        if a.ndim != 1:
            raise ValueError(f"{where}[{v}] has shape {a.shape}, want [labels]")
        if a.size and a.min() < 0:
            raise ValueError(f"{where}[{v}] has label {int(a.min())}, want >= 0")
        parts.append(a.astype(np.int32))
        offsets[v + 1] = offsets[v] + a.size
    return offsets, (np.concatenate(parts) if parts else np.zeros(0, np.int32)).astype(np.int32)


def table_fields(data, where="data", need_labels=True):
    """The fields of _reel.add_table for ``data`` (a dict or DataFrame), checked."""
    if hasattr(data, "columns") and hasattr(data, "index"):  # a pandas DataFrame
        data = {str(c): data[c] for c in data.columns}
    if not isinstance(data, collections.abc.Mapping):
        raise TypeError(f"{where} must be a dict or DataFrame of features and labels, not "
                        f"{type(data).__name__}")
    for k in data:
        if not isinstance(k, str):
            raise TypeError(f"{where}'s keys must be feature names (str), not {k!r}")
    names = [k for k in data if k not in _NOT_FEATURES]
    if not names:
        raise ValueError(f"{where} has no feature (e.g. 'rgb' and 'audio' [frames, D] per video, "
                         f"or 'mean_rgb' [videos, D])")
    features, n, first = [], None, None
    for name in names:
        arrays, which, starts, lengths = _feature(name, data[name], f"{where}[{name!r}]")
        if n is None:
            n, first = len(lengths), name
        elif len(lengths) != n:
            raise ValueError(f"{where}[{name!r}] has {len(lengths)} videos, {where}[{first!r}] "
                             f"has {n}")
        features.append((name, arrays, which, starts, lengths))
    if data.get("labels") is None:
        if need_labels:
            raise ValueError(f"{where} has no 'labels' (an indicator matrix [videos, classes] or "
                             f"a list of label-id lists)")
        offsets, ids = np.zeros(n + 1, np.int64), np.zeros(0, np.int32)
    else:
        offsets, ids = _labels(data["labels"], n, f"{where}['labels']")
    video_ids = None
    if data.get("id") is not None:
        video_ids = [str(i) for i in (data["id"].to_numpy() if hasattr(data["id"], "to_numpy")
                                      else data["id"])]
        if len(video_ids) != n:
            raise ValueError(f"{where}['id'] has {len(video_ids)} ids, the features have {n}")
    return (n, features, offsets, ids, video_ids)


class _Stream:
    """An iterable of batches (or a callable returning an iterator), read again each epoch; the
    exception a batch raises is kept and raised again by the caller."""

    def __init__(self, data, where, need_labels):
        self.data, self.where, self.need_labels = data, where, need_labels
        self.lock = threading.Lock()
        self.epoch, self.it, self.pos = None, None, 0
        self.error = None

    def _restart(self, epoch):
        it = self.data() if callable(self.data) else iter(self.data)
        if it is self.data and self.epoch is not None:
            raise ValueError(f"{self.where}: an iterator gives one pass over its batches, epoch "
                             f"{epoch} needs another: give a list of batches or a callable "
                             f"returning a new iterator")
        self.epoch, self.it, self.pos = epoch, it, 0

    def __call__(self, epoch, index):
        with self.lock:
            try:
                if epoch != self.epoch or index < self.pos:
                    self._restart(epoch)
                batch = None
                while self.pos <= index:
                    batch = next(self.it, None)
                    if batch is None:
                        return None
                    self.pos += 1
                return table_fields(batch, f"{self.where} batch {index}", self.need_labels)
            except BaseException as e:  # noqa: B902  (raised again by the caller)
                self.error = e
                raise


class Registered:
    """``data`` registered as a table (or stream) of the source ``numpy`` for one call:
    ``with Registered(data) as handle``; dropped, and the arrays released, on exit."""

    def __init__(self, data, where="data", need_labels=True):
        self.stream = None
        if data is None:
            self.handle = 0
        elif isinstance(data, (str, bytes, os.PathLike)):
            raise TypeError(f"{where} takes data in memory; files go in the config's data "
                            f"sections (or reel.predict's and reel.evaluate's data), not "
                            f"{data!r}")
        elif isinstance(data, collections.abc.Mapping) or hasattr(data, "columns"):
            self.handle = _reel.add_table(table_fields(data, where, need_labels))
        elif callable(data) or isinstance(data, collections.abc.Iterable):
            self.stream = _Stream(data, where, need_labels)
            self.handle = _reel.add_stream(self.stream)
        else:
            raise TypeError(f"{where} must be a dict or DataFrame of features and labels, or an "
                            f"iterable of such batches, not {type(data).__name__}")

    def __enter__(self):
        return self.handle

    def __exit__(self, *exc):
        if self.handle:
            _reel.drop_arrays(self.handle)
        if self.stream is not None and self.stream.error is not None and exc[0] is not None:
            error, self.stream.error = self.stream.error, None
            raise error from None
        return False
