"""Memory for the per-record arrays of a private tree fit (``dpcore.learn._tree``): one block,
on whole 2 MiB pages when it is large, kept for the thread's next fit when it is at most
64 MiB (new pages fault in one by one, and two threads faulting the same block in slow each
other down: 8.0 ms to bin 10**6 x 30 on 2 threads into reused memory, 8.8-12.6 ms into new).

Privacy
-------
Allocation only: nothing is read, released or charged here.
"""
from __future__ import annotations

import threading
from typing import Any

import numpy as np

__all__ = ["huge_pages", "record_arrays"]

_HUGE_PAGE = 2**21
_KEPT_BYTES = 2**26   # the largest block a thread keeps between fits
_kept = threading.local()   # .block: this thread's block (a fit uses it only while it runs)


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
    int32 each), every one 64-byte aligned. They are valid until the calling thread's next
    call: a fit uses them only while it runs."""
    size = np.dtype(code_dtype).itemsize * n * d
    start = -(-size // 64) * 64
    block = _block(start + 8 * n + 64)
    start += -(block.ctypes.data + start) % 64
    codes = block[:size].view(code_dtype).reshape(n, d)
    node = block[start:start + 4 * n].view(np.int32)
    labels = block[start + 4 * n:start + 8 * n].view(np.int32)
    return codes, node, labels


def _block(nbytes: int) -> np.ndarray:
    """A uint8 block of at least ``nbytes``: the thread's kept block when large enough, else a
    new one (kept when at most ``_KEPT_BYTES``; a larger one is freed with its fit)."""
    kept = getattr(_kept, "block", None)
    if kept is not None and kept.size >= nbytes:
        return kept
    block = huge_pages((nbytes,), np.uint8)
    if nbytes <= _KEPT_BYTES:
        _kept.block = block
    return block
