"""Typed surface of the compiled kernel dpcore._tree_scores (def-level names only)."""
import numpy as np
from numpy.typing import NDArray

def level_scores(tables: NDArray[np.int64], lo: NDArray[np.int64], hi: NDArray[np.int64],
                 bins: NDArray[np.int64], gini: bool, scale: float, inside: NDArray[np.uint8],
                 utility: NDArray[np.float64]) -> None: ...
