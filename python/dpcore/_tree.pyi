"""Typed surface of the compiled kernel dpcore._tree (def-level names only)."""
import numpy as np
from numpy.typing import NDArray

# Shapes and dtypes are the caller's to check (dpcore.learn._tree); nothing is validated here.
def bin_codes(
    X: NDArray[np.float64],
    lo: NDArray[np.float64],
    inv: NDArray[np.float64],
    top: NDArray[np.float64],  # (d,) n_bins[f] - 1
    y: NDArray[np.int32],
    codes: NDArray[np.uint8] | NDArray[np.uint16],  # (n, d)
    root: NDArray[np.int64],  # (d, k, n_bins)
) -> int: ...
def level_counts(
    codes: NDArray[np.uint8] | NDArray[np.uint16],  # (n, d)
    y: NDArray[np.int32],
    node: NDArray[np.int32],
    feature: NDArray[np.int32],  # the splits of the level above
    split: NDArray[np.int32],
    left: NDArray[np.int32],
    row: NDArray[np.int32],
    counts: NDArray[np.int64],  # (rows, d, k, n_bins)
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
def forest_counts(
    X: NDArray[np.float64],
    y: NDArray[np.int32],
    feature: NDArray[np.int32],
    threshold: NDArray[np.float64],
    n_trees: int,
    depth: int,
    counts: NDArray[np.int64],  # (n_trees * 2**depth, k)
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

