"""Typed surface of the compiled kernel dpcore._noise_snapping (def-level names only)."""
import numpy as np
from numpy.typing import NDArray

from dpcore._random import RandomStateLike

THREAD_MIN: int  # calls of this many values or more run in threaded blocks

# Parameters are validated by the caller (dpcore.mechanisms); nothing is here.
def snapping_into(
    out: NDArray[np.float64],
    x: NDArray[np.float64],
    lam: float,
    grid: float,
    bound: float,
    random_state: RandomStateLike = ...,
    unit: float = ...,
) -> None: ...

# Test hooks: the pieces of the kernel.
def _round_to_multiple(y: float, grid: float) -> float: ...
def _snap_finish(
    x: float, log_u: float, negative: bool, lam: float, grid: float, bound: float
) -> float: ...
