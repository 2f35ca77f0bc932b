# Type stubs of reel.sklearn (python/reel/sklearn.py).
import os
from typing import Any

import numpy as np
import numpy.typing as npt
from sklearn.base import BaseEstimator, ClassifierMixin

class VideoClassifier(ClassifierMixin, BaseEstimator):
    checkpoint_: str
    final_loss_: float
    n_features_in_: int
    feature_names_in_: npt.NDArray[np.object_]
    classes_: npt.NDArray[Any]
    n_classes_: int
    multilabel_: bool
    def __init__(self, model: str = ..., experts: int = ..., learning_rate: float = ...,
                 epochs: int = ..., batch_size: int = ..., seed: int = ..., rule: str = ...,
                 threshold: float = ..., workdir: str | os.PathLike[str] | None = ...) -> None: ...
    def fit(self, X: Any, y: Any) -> "VideoClassifier": ...
    def predict_proba(self, X: Any) -> npt.NDArray[np.float32]: ...
    def predict(self, X: Any) -> npt.NDArray[Any]: ...
    def score(self, X: Any, y: Any, sample_weight: npt.ArrayLike | None = ...) -> float: ...
    def __getstate__(self) -> dict[str, Any]: ...
    def __setstate__(self, state: dict[str, Any]) -> None: ...
