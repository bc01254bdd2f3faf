"""Typed surface of the compiled kernel dpcore._bingham (def-level names only)."""
import numpy as np
from numpy.typing import NDArray

from dpcore._random import BitgenHandle

_Vec = NDArray[np.float64]  # 1-d, C-contiguous
_Mat = NDArray[np.float64]  # 2-d, C-contiguous

#: Proposals per column draw before RuntimeError ("did not accept a proposal within N tries").
MAX_PROPOSALS: int
#: Proposals between two runs of the pending signal handlers (KeyboardInterrupt propagates).
SIGNAL_EVERY: int

def gibbs(lam: _Vec, Vt: _Mat, n_sweeps: int, h: BitgenHandle, trace: _Vec,
          counters: _Vec) -> None:
    """lam descending eigenvalues (d,); Vt (k, d) state in the eigenbasis, updated in place;
    trace (n_sweeps,) or empty; counters [proposals, accepts, bound violations] accumulated.
    Raises RuntimeError when a column draw makes MAX_PROPOSALS proposals without acceptance."""
    ...

def sequential(lam: _Vec, Vt: _Mat, start: int, h: BitgenHandle, counters: _Vec) -> None:
    """Exact draws of rows start..k-1 of Vt (k, d), each given the rows before it (RuntimeError
    after MAX_PROPOSALS proposals for one row)."""
    ...

def _raise_for(rc: int) -> None: ...
def _test_count_above(lam: _Vec, W: _Mat, mu: float) -> int: ...
def _test_positive_count(G: _Mat) -> int: ...
def _test_normals(n: int, h: BitgenHandle) -> _Vec: ...
def _test_envelope(lam: _Vec, W: _Mat, lo: float, n: int,
                   h: BitgenHandle) -> tuple[int, float, float, _Vec, _Mat]: ...
