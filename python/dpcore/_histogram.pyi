"""Typed surface of the compiled kernel dpcore._histogram (def-level names only)."""
import numpy as np
from numpy.typing import NDArray

THREAD_MIN: int  # samples of this many points or more may be counted in parts (threads)

def count_into(
    sample: NDArray[np.float32] | NDArray[np.float64],  # (n, d), C-contiguous
    edges: NDArray[np.float64],  # every axis's edges, concatenated
    offsets: NDArray[np.int64],  # (d,) start of each axis's edges in `edges`
    nbins: NDArray[np.int64],  # (d,)
    strides: NDArray[np.int64],  # (d,) C-order strides of the flat counts
    scales: NDArray[np.float64],  # (d,) nbins / (hi - lo) for equal-width axes
    steps: NDArray[np.float64],  # (d,) (hi - lo) / nbins
    margins: NDArray[np.float64],  # (d,) fast-path margin; >= 0.5 disables it
    uniform: NDArray[np.uint8],  # (d,) 0 explicit, 1 linspace, 2 linspace == j * step + lo
    clip: bool,
    counts: NDArray[np.int64],  # flat, prod(nbins); incremented in place
) -> tuple[int, int]: ...  # (rows not counted, rows with NaN/inf among them)

def _set_prefetch_cells(cells: int, mode: int = ...) -> None: ...
def _simd_level(level: int | None = ...) -> int: ...  # -1 scalar, 0 portable block, 1 AVX2
