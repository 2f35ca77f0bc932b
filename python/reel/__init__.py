"""reel from Python: read YouTube-8M TFRecords into NumPy, train, evaluate, predict and search.

The same core as the ``reel`` command (docs/python.md): the same plugins, found on the same search
path (``reel.configure(plugin_dirs=...)``, then ``REEL_PLUGIN_PATH``, then the install's
``lib/reel/plugins``), the same config files and ``--set`` overrides, the same trainer and
evaluator. Errors are exceptions (:mod:`reel.errors`).
"""

import os
import threading

from . import _config
from . import _inmemory
from . import _reel
from . import metrics  # noqa: F401  (reel.metrics.gap ...)
from .errors import (AlreadyExistsError, CancelledError, DataLossError,  # noqa: F401
                     DeadlineExceededError, Error, FailedPreconditionError, InternalError,
                     InvalidArgumentError, NotFoundError, OutOfRangeError, PermissionDeniedError,
                     Terminated, UnavailableError, UnimplementedError)

__version__ = _reel.sdk_version
__all__ = [
    "configure", "plugins", "read_tfrecords", "batches", "train", "TrainResult", "evaluate",
    "predict", "tune", "TuneResult", "metrics", "Error", "DataLossError", "Terminated",
]


def _check(value, types, argument, what):
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in _as_tuple(types)):
        raise TypeError(f"{argument} must be {what}, not {type(value).__name__}")
    return value


def _as_tuple(types):
    return types if isinstance(types, tuple) else (types,)


def _pattern(pattern, argument="pattern"):
    if isinstance(pattern, os.PathLike):
        return os.fspath(pattern)
    if isinstance(pattern, (list, tuple)):
        return ",".join(_pattern(p, argument) for p in pattern)
    return _check(pattern, str, argument, "a path, a glob pattern or a list of them")


def _on_main_thread():
    return threading.current_thread() is threading.main_thread()


def _stop_event(stop):
    if stop is not None and not callable(getattr(stop, "is_set", None)):
        raise TypeError(f"stop must be a threading.Event (anything with is_set()), not "
                        f"{type(stop).__name__}")
    return stop


def configure(plugin_dirs=()):
    """Loads plugins from ``plugin_dirs`` first (as ``reel --plugin-dir``); call before any other
    function of reel, which loads the plugins on first use."""
    dirs = [os.fspath(_check(d, (str, os.PathLike), "plugin_dirs[]", "a path"))
            for d in plugin_dirs]
    _reel.configure(dirs)


def plugins():
    """The plugins loaded: a list of dicts (name, version, path, components)."""
    return _reel.plugins()


def _source_options(pattern, level, features, num_classes, max_frames, compression, skip_corrupt,
                    batch_size, options):
    _check(level, str, "level", "'video' or 'frame'")
    if level not in ("video", "frame"):
        raise ValueError(f"level must be 'video' or 'frame', not {level!r}")
    out = {"files": _pattern(pattern), "level": level, "shuffle_buffer": "0",
           "batch_size": str(_check(batch_size, int, "batch_size", "an int")),
           "num_classes": str(_check(num_classes, int, "num_classes", "an int")),
           "max_frames": str(_check(max_frames, int, "max_frames", "an int")),
           "compression": _check(compression, str, "compression", "a str"),
           "skip_corrupt": "true" if _check(skip_corrupt, bool, "skip_corrupt", "a bool")
           else "false"}
    if features is not None:
        if isinstance(features, dict):
            features = ",".join(f"{k}:{v}" for k, v in features.items())
        out["features"] = _check(features, str, "features", "'name:size,...' or a dict")
    if options is not None:
        _check(options, dict, "options", "a dict of the data source's options")
        for k, v in options.items():
            out[_check(k, str, "options key", "a str")] = str(v)
    return out


def read_tfrecords(pattern, level="video", *, features=None, num_classes=3862, max_frames=300,
                   compression="auto", skip_corrupt=False, options=None, source="tfrecord"):
    """Yields the records of YouTube-8M TFRecord files one at a time, in file order.

    ``pattern``: a path, glob (``data/yt8m/*.tfrecord``), ``s3://`` URI, comma-separated list or
    a list of them. ``level``: ``"video"`` (``Example``: ``mean_rgb`` [1024] and ``mean_audio``
    [128] float32) or ``"frame"`` (``SequenceExample``: dequantized ``rgb`` [frames, 1024] and
    ``audio`` [frames, 128] float32). Each record is a dict with ``id`` (str), ``labels`` (int32
    array) and one array per feature; the arrays view the reader's batch memory (no copy, no
    Python object per element). Corrupt data raises :class:`reel.DataLossError` naming file and
    offset, unless ``skip_corrupt=True`` (the tfrecord plugin's policy: skipped and counted).
    ``features``, ``num_classes``, ``max_frames``, ``compression`` and ``options`` are the
    tfrecord data source's options (plugins/tfrecord/README.md).
    """
    opts = _source_options(pattern, level, features, num_classes, max_frames, compression,
                           skip_corrupt, 64, options)
    return _reel.Reader(_check(source, str, "source", "a data source name"), opts, True,
                        level == "video")


def batches(pattern, level="video", batch_size=32, *, features=None, num_classes=3862,
            max_frames=300, compression="auto", skip_corrupt=False, options=None,
            source="tfrecord"):
    """Yields padded batches as the trainer sees them: a dict with ``id`` (list of str), per
    feature a float32 array [B, T, D] zero past each video's length, ``lengths`` (feature name
    → int32 [B]) and the labels in CSR form, ``label_offsets`` (int64 [B + 1]) and
    ``label_ids`` (int32). Arguments as :func:`read_tfrecords`."""
    opts = _source_options(pattern, level, features, num_classes, max_frames, compression,
                           skip_corrupt, batch_size, options)
    return _reel.Reader(_check(source, str, "source", "a data source name"), opts, False,
                        level == "video")


class TrainResult:
    """What :func:`train` returns.

    ``steps``, ``examples``, ``epoch``, ``final_loss`` (mean over the last logging window),
    ``stopped`` (a callback stopped the run), ``checkpoint`` (URI of the last checkpoint written,
    "" if none), ``evals`` (every evaluation: a list of dicts with ``step``, ``gap``,
    ``hit_at_1``, ``perr``, ``map``, ``videos``), ``final_eval`` and ``metrics``: a pandas
    DataFrame of every logged window (``step``, ``epoch``, ``loss``, ``lr``,
    ``examples_per_sec`` (the whole job's), ``worker_examples_per_sec`` (the lead's own),
    ``grad_norm``) and evaluation (``eval_gap`` ...), one row per event; ``time``: where this
    process's training time went, seconds per part (``data``, ``compute``, ``update``, ``wait``,
    ``evaluation``, ``checkpoint``) and ``total``, as ``reel train`` prints it.
    """

    def __init__(self, raw, events):
        self.steps = raw["steps"]
        self.steps_this_run = raw["steps_this_run"]
        self.examples = raw["examples"]
        self.epoch = raw["epoch"]
        self.final_loss = raw["final_loss"]
        self.stopped = raw["stopped"]
        self.resumed = raw["resumed"]
        self.checkpoint = raw["checkpoint"]
        self.evals = raw["evals"]
        self.final_eval = raw["final_eval"]
        self.time = raw["time"]
        self.config_text = raw["config_text"]
        self._events = events

    @property
    def metrics(self):
        import pandas
        rows = []
        for e in self._events:
            row = {k: v for k, v in e.items() if k != "eval"}
            for k, v in e.get("eval", {}).items():
                row["eval_" + k] = v
            rows.append(row)
        return pandas.DataFrame(rows)

    def __repr__(self):
        return (f"TrainResult(steps={self.steps}, final_loss={self.final_loss:.4f}, "
                f"checkpoint={self.checkpoint!r}, evals={len(self.evals)})")


def train(config, overrides=None, callbacks=(), *, data=None, eval_data=None, resume=False,
          verbose=False, stop=None):
    """Runs ``reel train``'s training job in this process and returns a :class:`TrainResult`.

    ``config``: a path or URI of a text-format RunConfig (``configs/moe.pbtxt``), the text
    itself, or a dict of the same shape (``{"model": {"name": "moe", "options": {"experts":
    4}}, "trainer": {"steps": 100}}``). ``overrides``: ``{"trainer.steps": 500, ...}``, as
    ``--set``. ``callbacks``: callables ``f(event) -> bool | None`` called at each logged window
    (``event["kind"] == "log"``: ``step``, ``epoch``, ``loss``, ``lr``, ``examples_per_sec``
    (the whole job's), ``worker_examples_per_sec`` (the lead's own))
    and each evaluation (``"eval"``: ``event["eval"]`` the metrics); returning True stops the run
    after the step (it writes its checkpoint, ``result.stopped`` is True); an exception stops it
    and is raised here. The GIL is released while training: other Python threads run.
    ``stop``: a :class:`threading.Event` (anything with ``is_set()``); setting it, from any
    thread, stops this call alone as a callback returning True does (checked every 50 ms).
    Ctrl-C finishes the step, writes the checkpoint and raises KeyboardInterrupt; SIGTERM does the
    same and raises :class:`reel.Terminated` (a KeyboardInterrupt); continue with
    ``resume=True``. A signal stops every call in flight. Under ``srun``, ``mpirun`` or ``reel
    launch`` the processes form one group, as ``reel train`` does. ``verbose``: the command's
    progress lines on stderr. docs/python.md, "Stopping a run" and "Several processes".
    ``data``, ``eval_data``: train (evaluate) on features and labels in memory instead of the
    config's data (eval_data) section: a dict or pandas DataFrame (``{"rgb": ..., "audio": ...,
    "labels": ...}``) or an iterable of such batches (docs/python.md, "Training from memory").
    """
    text, is_path = _config.resolve(config)
    sets = _config.overrides_list(overrides)
    if callable(callbacks):
        callbacks = [callbacks]
    callbacks = list(_check(callbacks, (list, tuple), "callbacks", "a list of callables"))
    for i, cb in enumerate(callbacks):
        if not callable(cb):
            raise TypeError(f"callbacks[{i}] must be callable, not {type(cb).__name__}")
    _check(resume, bool, "resume", "a bool")
    _check(verbose, bool, "verbose", "a bool")
    _stop_event(stop)
    events = []

    def on_event(event):
        events.append(event)
        stop = False
        for cb in callbacks:
            stop = bool(cb(event)) or stop
        return stop

    with _inmemory.Registered(data, "data") as table, \
            _inmemory.Registered(eval_data, "eval_data") as eval_table:
        raw = _reel.train(text, is_path, sets, on_event, resume, 1 if verbose else 0,
                          _on_main_thread(), stop, table, eval_table)
    return TrainResult(raw, events)


def evaluate(checkpoint, data, *, top_k=20, batch_size=64):
    """``reel eval``: the metrics (dict: ``gap``, ``hit_at_1``, ``perr``, ``map``, ``videos``,
    ``top_k``) of the model in ``checkpoint`` (a checkpoint file or folder, its newest) on the
    records ``data`` matches, read as the checkpoint's config reads its evaluation data; or of
    ``data`` in memory, as :func:`train` takes it."""
    ckpt = os.fspath(_check(checkpoint, (str, os.PathLike), "checkpoint", "a path"))
    k = _check(top_k, int, "top_k", "an int")
    size = _check(batch_size, int, "batch_size", "an int")
    if not _inmemory.is_in_memory(data):
        return _reel.evaluate(ckpt, _pattern(data, "data"), k, size)
    with _inmemory.Registered(data, "data") as table:
        return _reel.evaluate(ckpt, "", k, size, table)


def predict(checkpoint, data, top_k=20, *, batch_size=64, as_frame=False):
    """``reel predict``: for every video of ``data``, its ``top_k`` classes and probabilities,
    best first. Returns ``(ids, classes, scores)``: a list of str, int32 [N, top_k] and float32
    [N, top_k]; or with ``as_frame=True`` a pandas DataFrame (``id``, ``class``, ``score``, one
    row per video and rank). ``data``: a pattern of files, or videos in memory as :func:`train`
    takes them (labels not needed; ids from ``data["id"]``, else ``r<row>``)."""
    ckpt = os.fspath(_check(checkpoint, (str, os.PathLike), "checkpoint", "a path"))
    k = _check(top_k, int, "top_k", "an int")
    if k < 1:
        raise ValueError(f"top_k must be >= 1, got {k}")
    size = _check(batch_size, int, "batch_size", "an int")
    if _inmemory.is_in_memory(data):
        with _inmemory.Registered(data, "data", need_labels=False) as table:
            ids, classes, scores = _reel.predict(ckpt, "", k, size, table)
    else:
        ids, classes, scores = _reel.predict(ckpt, _pattern(data, "data"), k, size)
    if not as_frame:
        return ids, classes, scores
    import numpy
    import pandas
    return pandas.DataFrame({"id": numpy.repeat(ids, k), "rank": numpy.tile(numpy.arange(k),
                                                                             len(ids)),
                             "class": classes.reshape(-1), "score": scores.reshape(-1)})


class TuneResult:
    """What :func:`tune` returns: ``results`` (a pandas DataFrame, one row per trial, best
    first, as results.csv), ``best`` (the best row as a dict, or None), ``best_config`` (path of
    best.pbtxt) and ``metric_name``."""

    def __init__(self, raw):
        import pandas
        self.results = pandas.DataFrame(raw["rows"])
        self.best = raw["rows"][raw["best"]] if raw["best"] is not None else None
        self.best_config = raw["best_config"]
        self.results_csv = raw["results_csv"]
        self.metric_name = raw["metric_name"]

    def __repr__(self):
        return f"TuneResult(trials={len(self.results)}, best_config={self.best_config!r})"


def tune(search, workdir="reel-tune", *, parallel=0, overrides=None, resume=False,
         verbose=False, stop=None):
    """``reel tune``: runs the search (a path of a TuneConfig, its text or a dict) with trials in
    parallel in this process, journal and results in ``workdir``; returns a :class:`TuneResult`.
    ``parallel``: trials at once (0: the config's, else the cores). Ctrl-C stops the running
    trials, keeps the journal resumable and raises KeyboardInterrupt (SIGTERM:
    :class:`reel.Terminated`); ``stop`` (a :class:`threading.Event`) stops them without one."""
    text, is_path = _config.resolve(search, "search")
    sets = _config.overrides_list(overrides)
    wd = os.fspath(_check(workdir, (str, os.PathLike), "workdir", "a path"))
    _check(parallel, int, "parallel", "an int")
    if parallel < 0 or parallel > 1024:
        raise ValueError(f"parallel must lie in [0, 1024], got {parallel}")
    raw = _reel.tune(text, is_path, sets, wd, parallel, _check(resume, bool, "resume", "a bool"),
                     1 if _check(verbose, bool, "verbose", "a bool") else 0, _on_main_thread(),
                     _stop_event(stop))
    return TuneResult(raw)
