"""Typed surface of the compiled kernel dpcore._noise_grid (def-level names only)."""
import numpy as np
from numpy.typing import NDArray

from dpcore._random import RandomStateLike

THREAD_MIN: int  # calls of this many values or more run in threaded blocks

# Parameters are validated by the caller (dpcore.mechanisms); nothing is here.
def discrete_laplace_grid_into(
    out: NDArray[np.float64],
    x: NDArray[np.float64],
    grid: float,
    bound: float,
    scale: float,
    random_state: RandomStateLike = ...,
) -> None: ...
def discrete_gaussian_grid_into(
    out: NDArray[np.float64],
    x: NDArray[np.float64],
    grid: float,
    sigma: float,
    random_state: RandomStateLike = ...,
) -> None: ...
def finite_magnitude(x: NDArray[np.float64]) -> float: ...  # max |x|, or nan if not all finite
