# Type stubs of the package reel (python/reel/__init__.py; docs/python.md).
import os
from typing import Any, Callable, Iterable, Iterator, Mapping, Protocol, Sequence, Union

import numpy as np
import numpy.typing as npt
import pandas

from . import metrics as metrics
from .errors import (AlreadyExistsError as AlreadyExistsError, CancelledError as CancelledError,
                     DataLossError as DataLossError,
                     DeadlineExceededError as DeadlineExceededError, Error as Error,
                     FailedPreconditionError as FailedPreconditionError,
                     InternalError as InternalError, InvalidArgumentError as InvalidArgumentError,
                     NotFoundError as NotFoundError, OutOfRangeError as OutOfRangeError,
                     PermissionDeniedError as PermissionDeniedError, Terminated as Terminated,
                     UnavailableError as UnavailableError,
                     UnimplementedError as UnimplementedError)

__version__: str
__all__ = [
    "configure", "plugins", "read_tfrecords", "batches", "train", "TrainResult", "evaluate",
    "predict", "tune", "TuneResult", "metrics", "Error", "DataLossError", "Terminated",
]

_Path = Union[str, os.PathLike[str]]
_Pattern = Union[_Path, Sequence[_Path]]
_Config = Union[_Path, Mapping[str, Any]]
_Event = dict[str, Any]
_Callback = Callable[[_Event], bool | None]
# In-memory data (docs/python.md, "Training from memory"): a dict or DataFrame of features and
# labels, or an iterable of such batches (or a callable returning an iterator of them).
_Table = Union[Mapping[str, Any], pandas.DataFrame]
_Data = Union[_Table, Iterable[_Table], Callable[[], Iterator[_Table]]]

class _StopEvent(Protocol):  # threading.Event, multiprocessing.Event ...
    def is_set(self) -> bool: ...

# What read_tfrecords and batches return: the extension's reader (reel._reel.Reader), which is
# not a name of the package.
class _Reader(Iterator[dict[str, Any]]):
    def __next__(self) -> dict[str, Any]: ...
    def stats(self) -> dict[str, int]: ...

def configure(plugin_dirs: Sequence[_Path] = ...) -> None: ...
def plugins() -> list[dict[str, Any]]: ...
def read_tfrecords(pattern: _Pattern, level: str = ..., *,
                   features: str | Mapping[str, int] | None = ...,
                   num_classes: int = ..., max_frames: int = ..., compression: str = ...,
                   skip_corrupt: bool = ..., options: Mapping[str, Any] | None = ...,
                   source: str = ...) -> _Reader: ...
def batches(pattern: _Pattern, level: str = ..., batch_size: int = ..., *,
            features: str | Mapping[str, int] | None = ..., num_classes: int = ...,
            max_frames: int = ..., compression: str = ..., skip_corrupt: bool = ...,
            options: Mapping[str, Any] | None = ..., source: str = ...) -> _Reader: ...

class TrainResult:
    steps: int
    steps_this_run: int
    examples: int
    epoch: int
    final_loss: float
    stopped: bool
    resumed: bool
    checkpoint: str
    evals: list[dict[str, Any]]
    final_eval: dict[str, Any] | None
    time: dict[str, float]
    config_text: str
    def __init__(self, raw: Mapping[str, Any], events: list[_Event]) -> None: ...
    @property
    def metrics(self) -> pandas.DataFrame: ...

def train(config: _Config, overrides: Mapping[str, Any] | None = ...,
          callbacks: _Callback | Sequence[_Callback] = ..., *, data: _Data | None = ...,
          eval_data: _Data | None = ..., resume: bool = ..., verbose: bool = ...,
          stop: _StopEvent | None = ...) -> TrainResult: ...
def evaluate(checkpoint: _Path, data: _Pattern | _Data, *, top_k: int = ...,
             batch_size: int = ...) -> dict[str, Any]: ...
def predict(checkpoint: _Path, data: _Pattern | _Data, top_k: int = ..., *, batch_size: int = ...,
            as_frame: bool = ...) -> tuple[list[str], npt.NDArray[np.int32],
                                           npt.NDArray[np.float32]] | pandas.DataFrame: ...

class TuneResult:
    results: pandas.DataFrame
    best: dict[str, Any] | None
    best_config: str
    results_csv: str
    metric_name: str
    def __init__(self, raw: Mapping[str, Any]) -> None: ...

def tune(search: _Config, workdir: _Path = ..., *, parallel: int = ...,
         overrides: Mapping[str, Any] | None = ..., resume: bool = ...,
         verbose: bool = ..., stop: _StopEvent | None = ...) -> TuneResult: ...
