# Type stubs of reel.optuna (python/reel/optuna.py).
import os
from typing import Any, Callable, Mapping

import optuna

from . import _Config

METRICS: tuple[str, ...]

class PruningCallback:
    trial: optuna.Trial
    metric: str
    def __init__(self, trial: optuna.Trial, metric: str = ...) -> None: ...
    def __call__(self, event: dict[str, Any]) -> bool: ...

def suggest(trial: optuna.Trial, space: Mapping[str, Any]) -> dict[str, Any]: ...
def objective(config: _Config, space: Mapping[str, Any],
              overrides: Mapping[str, Any] | None = ..., *, metric: str = ..., prune: bool = ...,
              workdir: str | os.PathLike[str] | None = ...,
              verbose: bool = ...) -> Callable[[optuna.Trial], float]: ...
