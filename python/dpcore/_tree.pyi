"""Typed surface of the compiled kernel dpcore._tree (def-level names only)."""
import numpy as np
from numpy.typing import NDArray

# Shapes and dtypes are the caller's to check (dpcore.learn._tree); nothing is validated here.
def bin_codes(
    X: NDArray[np.float64],
    lo: NDArray[np.float64],
    inv: NDArray[np.float64],
    top: NDArray[np.float64],  # (d,) n_bins[f] - 1
    codes: NDArray[np.uint16],  # (d, n)
) -> None: ...
def level_counts(
    codes: NDArray[np.uint16],  # (d, n)
    y: NDArray[np.int32],
    node: NDArray[np.int32],
    left_only: int,
    counts: NDArray[np.int64],  # (d, rows, n_bins, k)
) -> None: ...
def class_counts(y: NDArray[np.int32], node: NDArray[np.int32], counts: NDArray[np.int64]) -> None: ...
def route(
    codes: NDArray[np.uint16],
    node: NDArray[np.int32],
    feature: NDArray[np.int32],
    split: NDArray[np.int32],
    left: NDArray[np.int32],
) -> None: ...
def apply(
    X: NDArray[np.float64],
    feature: NDArray[np.int32],
    threshold: NDArray[np.float64],
    left: NDArray[np.int32],
    roots: NDArray[np.int32],
    depth: int,
    out: NDArray[np.int32],
) -> None: ...
def leaf_counts(
    X: NDArray[np.float64],
    y: NDArray[np.int32],
    feature: NDArray[np.int32],
    threshold: NDArray[np.float64],
    left: NDArray[np.int32],
    roots: NDArray[np.int32],
    depth: int,
    slot: NDArray[np.int32],
    counts: NDArray[np.int64],
) -> None: ...
def vote(
    X: NDArray[np.float64],
    feature: NDArray[np.int32],
    threshold: NDArray[np.float64],
    left: NDArray[np.int32],
    roots: NDArray[np.int32],
    depth: int,
    slot: NDArray[np.int32],
    values: NDArray[np.float64],
    out: NDArray[np.float64],
) -> None: ...

# Test hook (private).
def _set_slab(size: int) -> int: ...
