# Type stubs of reel.sklearn (python/reel/sklearn.py).
import os

import numpy as np
import numpy.typing as npt
from sklearn.base import BaseEstimator, ClassifierMixin

class VideoClassifier(ClassifierMixin, BaseEstimator):
    checkpoint_: str
    final_loss_: float
    n_features_in_: int
    n_classes_: int
    def __init__(self, model: str = ..., experts: int = ..., learning_rate: float = ...,
                 epochs: int = ..., batch_size: int = ..., seed: int = ..., rule: str = ...,
                 threshold: float = ..., workdir: str | os.PathLike[str] | None = ...) -> None: ...
    def fit(self, X: npt.ArrayLike, Y: npt.ArrayLike) -> "VideoClassifier": ...
    def predict_proba(self, X: npt.ArrayLike) -> npt.NDArray[np.float32]: ...
    def predict(self, X: npt.ArrayLike) -> npt.NDArray[np.int64]: ...
    def score(self, X: npt.ArrayLike, Y: npt.ArrayLike, sample_weight: None = ...) -> float: ...
