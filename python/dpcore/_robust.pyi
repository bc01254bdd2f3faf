"""Typed surface of the compiled kernel dpcore._robust (def-level names only)."""
from typing import Any

import numpy as np
from numpy.typing import NDArray

def smooth_sensitivity_sorted(
    x: NDArray[np.int64], lower: int, upper: int, m: int, beta: float, reach: int,
) -> Any: ...
def smooth_sensitivity_definition(
    x: NDArray[np.int64], lower: int, upper: int, m: int, beta: float,
) -> Any: ...
