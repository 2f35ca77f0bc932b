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

Path = Union[str, os.PathLike[str]]
Pattern = Union[Path, Sequence[Path]]
Config = Union[Path, Mapping[str, Any]]
Event = dict[str, Any]
Callback = Callable[[Event], bool | None]
# In-memory data (docs/python.md, "Training from memory"): a dict or DataFrame of features and
# labels, or an iterable of such batches (or a callable returning an iterator of them).
Table = Union[Mapping[str, Any], pandas.DataFrame]
Data = Union[Table, Iterable[Table], Callable[[], Iterator[Table]]]

class StopEvent(Protocol):  # threading.Event, multiprocessing.Event ...
    def is_set(self) -> bool: ...

class Reader(Iterator[dict[str, Any]]):
    def __next__(self) -> dict[str, Any]: ...
    def stats(self) -> dict[str, int]: ...

def configure(plugin_dirs: Sequence[Path] = ...) -> None: ...
def plugins() -> list[dict[str, Any]]: ...
def read_tfrecords(pattern: Pattern, level: str = ..., *, features: str | Mapping[str, int] | None = ...,
                   num_classes: int = ..., max_frames: int = ..., compression: str = ...,
                   skip_corrupt: bool = ..., options: Mapping[str, Any] | None = ...,
                   source: str = ...) -> Reader: ...
def batches(pattern: Pattern, level: str = ..., batch_size: int = ..., *,
            features: str | Mapping[str, int] | None = ..., num_classes: int = ...,
            max_frames: int = ..., compression: str = ..., skip_corrupt: bool = ...,
            options: Mapping[str, Any] | None = ..., source: str = ...) -> Reader: ...

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
    config_text: str
    @property
    def metrics(self) -> pandas.DataFrame: ...

def train(config: Config, overrides: Mapping[str, Any] | None = ...,
          callbacks: Callback | Sequence[Callback] = ..., *, data: Data | None = ...,
          eval_data: Data | None = ..., resume: bool = ..., verbose: bool = ...,
          stop: StopEvent | None = ...) -> TrainResult: ...
def evaluate(checkpoint: Path, data: Pattern | Data, *, top_k: int = ...,
             batch_size: int = ...) -> dict[str, Any]: ...
def predict(checkpoint: Path, data: Pattern | Data, top_k: int = ..., *, batch_size: int = ...,
            as_frame: bool = ...) -> tuple[list[str], npt.NDArray[np.int32],
                                           npt.NDArray[np.float32]] | pandas.DataFrame: ...

class TuneResult:
    results: pandas.DataFrame
    best: dict[str, Any] | None
    best_config: str
    results_csv: str
    metric_name: str

def tune(search: Config, workdir: Path = ..., *, parallel: int = ...,
         overrides: Mapping[str, Any] | None = ..., resume: bool = ...,
         verbose: bool = ..., stop: StopEvent | None = ...) -> TuneResult: ...
