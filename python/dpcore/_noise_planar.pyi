"""Typed surface of the compiled kernel dpcore._noise_planar (def-level names only)."""
from collections.abc import Callable
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from dpcore._random import RandomStateLike

# Parameters are validated by the caller (dpcore.local); nothing is here.
def planar_laplace_into(
    out: NDArray[np.int64], decay: Fraction, scale: float, random_state: RandomStateLike = ...
) -> None: ...  # rows of out (n x 2): exact draws with P(d) ~ exp(-decay ||d||_2)

# Test hooks: the pieces of the kernel.
def _planar_gamma(d1: int, d2: int, decay: Fraction, scale: float) -> tuple[float, float]: ...
def _planar_accept(
    d: NDArray[np.int64], decay: Fraction, scale: float, random_state: RandomStateLike = ...
) -> NDArray[np.int8]: ...
def _planar_accept_cell(u: float, d1: int, d2: int, decay: Fraction, scale: float) -> int: ...
def _planar_accept_exact(
    u: float, d1: int, d2: int, decay: Fraction, scale: float, bits: Callable[[], int]
) -> bool: ...
