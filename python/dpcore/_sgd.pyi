"""Typed surface of the compiled kernel dpcore._sgd (def-level names only)."""
import enum

import numpy as np
from numpy.typing import NDArray

from dpcore._random import BitgenHandle

class Loss(enum.IntEnum):
    LOGISTIC = 0
    HUBER = 1
    SQUARED = 2
    SOFTMAX = 3

MAX_BITS: int
MAX_MODEL_SIZE: int
STREAM_RECORDS: int

class PoissonRate:
    num: int
    bits: int
    skip: int
    cached: int
    def __init__(self, num: int, bits: int, cached: int = ...) -> None: ...
    def expansion_word(self, idx: int, i: int) -> int: ...

def draw_key(handle: BitgenHandle) -> NDArray[np.uint64]: ...

# Shapes and dtypes are the caller's to check (dpcore.learn._sgd); nothing is validated here.
def lattice_gradient_sum(
    X: NDArray[np.float64],  # (n, d) rows of norm <= 1
    target: NDArray[np.float64],  # (n,)
    W: NDArray[np.float64],  # (k, d)
    loss: int,
    h: float,
    clip: float,
    bits: int,
    rate: PoissonRate | None,
    key: NDArray[np.uint64] | None,
    offset: int,
    positive: int,
    out: NDArray[np.int64],  # (k d,)
) -> int: ...
def poisson_masks(
    n: int, rate: PoissonRate, key: NDArray[np.uint64], offset: int, out: NDArray[np.uint8]
) -> None: ...
