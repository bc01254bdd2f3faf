"""Typed surface of the compiled kernel dpcore._publish (def-level names only)."""
import numpy as np
from numpy.typing import NDArray

# Trees are flat, level by level from the root; the caller validates every argument.
def tree_from_leaves(
    leaves: NDArray[np.int64], k: int, levels: int, out: NDArray[np.int64]
) -> None: ...
def consistent_tree(
    noisy: NDArray[np.float64], k: int, levels: int, out: NDArray[np.float64]
) -> None: ...
def range_sums(
    tree: NDArray[np.float64],
    k: int,
    levels: int,
    lo: NDArray[np.int64],
    hi: NDArray[np.int64],
    out: NDArray[np.float64],
) -> None: ...
def counter_extend(
    psum: NDArray[np.int64],  # IN/OUT exact dyadic block sums, one per level
    noisy: NDArray[np.int64],  # IN/OUT the same with their noise
    t: int,
    last: int,
    events: NDArray[np.int64],
    bound: int,
    noise: NDArray[np.int64],
    out: NDArray[np.int64],
) -> int: ...  # the last release
def rect_sums(
    tree: NDArray[np.float64],
    c: int,  # splits per axis (k = c * c children per node)
    levels: int,
    lo: NDArray[np.int64],  # (q, 2)
    hi: NDArray[np.int64],  # (q, 2)
    out: NDArray[np.float64],
) -> None: ...
# Privelet: unnormalised Haar transform of every row of a (rows, 2**L) array (heap order)
def haar_forward(x: NDArray[np.int64] | NDArray[np.float64],
                 out: NDArray[np.int64] | NDArray[np.float64],
                 work: NDArray[np.int64] | NDArray[np.float64]) -> None: ...
def haar_inverse(c: NDArray[np.float64], out: NDArray[np.float64],
                 work: NDArray[np.float64]) -> None: ...
# MWEM on interval workloads
def range_answers(a: NDArray[np.float64], lo: NDArray[np.int64], hi: NDArray[np.int64],
                  prefix: NDArray[np.float64], out: NDArray[np.float64]) -> None: ...
def mw_ranges(a: NDArray[np.float64], lo: NDArray[np.int64], hi: NDArray[np.int64],
              measured: NDArray[np.float64], first: int, count: int, sweeps: int,
              total: float, width: int, bsum: NDArray[np.float64],
              bmul: NDArray[np.float64]) -> None: ...
