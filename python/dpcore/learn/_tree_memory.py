"""Memory for the per-record arrays of a private tree fit (``dpcore.learn._tree``): one block,
on whole 2 MiB pages when it is large.

Privacy
-------
Allocation only: nothing is read, released or charged here.
"""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["huge_pages", "record_arrays"]

_HUGE_PAGE = 2**21


def huge_pages(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """An uninitialised array; when it is large, on 2 MiB-aligned whole 2 MiB pages. numpy
    advises the OS to back allocations of 4 MiB or more with huge pages (Linux transparent huge
    pages), and aligned whole huge pages fault in once each instead of once per 4 KiB page
    (about 750 faults for the codes at n = 10**5, d = 30: a large part of a fit's time when the
    pages are new). Elsewhere an ordinary array; the memory is the same."""
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    if nbytes < _HUGE_PAGE:
        return np.empty(shape, dtype=dtype)
    raw = np.empty(-(-nbytes // _HUGE_PAGE) * _HUGE_PAGE + _HUGE_PAGE, dtype=np.uint8)
    start = -raw.ctypes.data % _HUGE_PAGE
    return raw[start:start + nbytes].view(dtype).reshape(shape)


def record_arrays(n: int, d: int,
                  code_dtype: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Uninitialised per-record arrays of a fit, in one block of memory (:func:`huge_pages`):
    the codes (n, d) of ``code_dtype``, and the node and the class index of each record (n,
    int32 each), every one 64-byte aligned."""
    size = np.dtype(code_dtype).itemsize * n * d
    start = -(-size // 64) * 64
    block = huge_pages((start + 8 * n + 64,), np.uint8)
    start += -(block.ctypes.data + start) % 64
    codes = block[:size].view(code_dtype).reshape(n, d)
    node = block[start:start + 4 * n].view(np.int32)
    labels = block[start + 4 * n:start + 8 * n].view(np.int32)
    return codes, node, labels
