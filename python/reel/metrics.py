"""YouTube-8M metrics on NumPy inputs, by the core's own accumulator (docs/metrics.md).

``scores``: float [videos, classes] (probabilities or any monotone transform of them);
``labels``: the multi-label indicator matrix of the same shape (0/1, bool).
"""

import numpy as np

from . import _reel


def _arrays(scores, labels):
    scores = np.asarray(scores, dtype=np.float32)
    labels = np.asarray(labels)
    if labels.dtype.kind not in "biu":
        raise TypeError(f"labels must be an indicator matrix of 0/1 or bools, not {labels.dtype}")
    return scores, labels.astype(np.uint8, copy=False)


def compute(scores, labels, k=20):
    """Every metric: dict with ``gap`` (GAP@k), ``hit_at_1``, ``perr``, ``map``, ``videos``."""
    if not isinstance(k, int) or isinstance(k, bool):
        raise TypeError(f"k must be an int, not {type(k).__name__}")
    return _reel.metrics(*_arrays(scores, labels), k)


def gap(scores, labels, k=20):
    """Global average precision over every video's top ``k`` predictions."""
    return compute(scores, labels, k)["gap"]


def hit_at_1(scores, labels):
    """Fraction of videos whose best-scored class is one of their labels."""
    return compute(scores, labels)["hit_at_1"]


def perr(scores, labels):
    """Precision at equal recall rate, averaged over videos."""
    return compute(scores, labels)["perr"]


def mean_average_precision(scores, labels, k=20):
    """Mean over classes with positives of the per-class AP over the top ``k`` lists."""
    return compute(scores, labels, k)["map"]
