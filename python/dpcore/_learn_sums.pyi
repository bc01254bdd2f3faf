"""Typed surface of the compiled kernel dpcore._learn_sums (def-level names only)."""
import numpy as np
from numpy.typing import NDArray

_Vec = NDArray[np.float64]  # 1-d, C-contiguous
_Mat = NDArray[np.float64]  # 2-d, C-contiguous
_Int = NDArray[np.int64]  # C-contiguous, accumulated into

# Shapes and dtypes are the caller's to give (dpcore.learn); mismatched shapes raise ValueError.
def class_feature_sums(X: _Mat, idx: _Int, lower: _Vec, upper: _Vec, centre: _Vec, half: _Vec,
                       inv_grid: float, counts: _Int, sums: _Int, squares: _Int) -> int: ...
def lattice_sums(X: _Mat, y: _Vec, lower: _Vec, upper: _Vec, centre: _Vec, half: _Vec,
                 y_lower: float, y_upper: float, y_centre: float, y_half: float,
                 x_scale: float, y_scale: float, limit: _Vec, norm_units: int, exact_rows: int,
                 gram: _Int, xy: _Int, sx: _Int, sy: _Int) -> int: ...
def lattice_integers(X: _Mat, y: _Vec, x_scale: float, y_scale: float, limit: _Vec,
                     norm_units: int, a: _Mat, c: _Vec) -> None: ...
def category_counts(X: NDArray[np.int64], idx: _Int, low: _Int, span: _Int, table_start: _Int,
                    tables: NDArray[np.int32], size: _Int, count_start: _Int,
                    counts: _Int) -> int: ...
