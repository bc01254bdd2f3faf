"""How many threads dpcore's kernels use: `set_num_threads`, `get_num_threads`, and the
threadpoolctl controller that lets ``threadpoolctl.threadpool_limits`` (and so joblib and
scikit-learn) cap them.

The pool itself is the compiled kernel ``dpcore._dpcore_threads``. threadpoolctl stays optional:
dpcore's controller is registered when threadpoolctl is imported, whether before or after dpcore
(a ``sys.meta_path`` hook waits for it, so dpcore's import does not pay for threadpoolctl's).

Privacy
-------
Releases nothing and charges nothing. The thread count never changes a release's law or its
guarantee: a threaded kernel splits its input into blocks of a fixed size (set by the input,
never by the thread count), each drawing from its own ChaCha20 stream keyed from the caller's
generator, so every output, seeded or not, has the law its release states, and a seeded output is
identical for any thread count (tests/test_threads.py checks both).
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import operator
import sys
import types
from typing import Any

from dpcore import _dpcore_threads


def get_num_threads() -> int:
    """get_num_threads()

    The number of threads dpcore's kernels may use for large inputs.

    Returns
    -------
    int
        The value set by `set_num_threads` (or by ``threadpoolctl.threadpool_limits``), else the
        default: the cores this process may run on (``os.sched_getaffinity`` where the OS has
        it, else ``os.cpu_count()``), capped by the environment variable ``DPCORE_NUM_THREADS``
        or, when that is unset, ``OMP_NUM_THREADS`` (which joblib sets in its worker processes,
        so that parallel jobs do not oversubscribe the machine).

    Examples
    --------
    >>> import dpcore
    >>> dpcore.get_num_threads() >= 1
    True
    """
    return int(_dpcore_threads.get_limit())


def set_num_threads(n: int | None) -> None:
    """set_num_threads(n)

    Set how many threads dpcore's kernels may use (process-wide).

    Kernels thread only large inputs: noise on at least 2**16 values, histogram counting of at
    least 2**20 points, selection over at least 2**20 candidates, local randomizers on at least
    2**16 reports. The thread count never changes a result: a seeded call gives the same output
    with 1, 2 or 64 threads (each block of the input, of a size fixed by the input, has its own
    random stream; see the user guide's section on randomness).

    Parameters
    ----------
    n : int or None
        Number of threads, >= 1 (more than the machine's cores is allowed, and wasteful).
        ``None`` restores the default (see `get_num_threads`).

    Raises
    ------
    TypeError
        If ``n`` is not an integer or None.
    ValueError
        If ``n`` < 1.

    Examples
    --------
    >>> import dpcore
    >>> before = dpcore.get_num_threads()
    >>> dpcore.set_num_threads(1)
    >>> dpcore.get_num_threads()
    1
    >>> dpcore.set_num_threads(before)

    ``threadpoolctl`` limits apply too (when threadpoolctl is installed)::

        from threadpoolctl import threadpool_limits
        with threadpool_limits(limits=1):
            dpcore.laplace(values, sensitivity=1.0, epsilon=1.0)  # one thread
    """
    if n is None:
        _dpcore_threads.set_limit(0)
        return
    if isinstance(n, bool):
        raise TypeError(f"n must be an int >= 1 or None, got {n!r}")
    try:
        count = operator.index(n)
    except TypeError:
        raise TypeError(f"n must be an int >= 1 or None, got {type(n).__name__} {n!r}") from None
    if count < 1:
        raise ValueError(f"n must be >= 1, got {count}")
    _dpcore_threads.set_limit(min(count, 2**30))


# ------------------------------------------------------------------------------------------------
# threadpoolctl (optional)

_SHARED_LIBRARY = "_dpcore_threads"


def _register(threadpoolctl: types.ModuleType) -> None:
    """Register dpcore's controller with an imported threadpoolctl (>= 3.0; older versions have
    no ``register`` and are left alone)."""
    if not hasattr(threadpoolctl, "register") or not hasattr(threadpoolctl, "LibController"):
        return

    class DpcoreController(threadpoolctl.LibController):  # type: ignore[name-defined]
        """threadpoolctl's view of dpcore's kernels (found by the pool's shared library)."""

        user_api = "dpcore"
        internal_api = "dpcore"
        filename_prefixes = (_SHARED_LIBRARY,)
        check_symbols = ("PyInit_" + _SHARED_LIBRARY,)

        def get_num_threads(self) -> int:
            return get_num_threads()

        def set_num_threads(self, num_threads: int) -> None:
            set_num_threads(num_threads)

        def get_version(self) -> None:
            return None  # dpcore's version is dpcore.__version__ (no import cycle from here)

    threadpoolctl.register(DpcoreController)


class _RegisteringLoader(importlib.abc.Loader):
    """threadpoolctl's own loader, then the registration."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self.inner.exec_module(module)
        _register(module)


class _ThreadpoolctlHook(importlib.abc.MetaPathFinder):
    """Waits in sys.meta_path for the first import of threadpoolctl (then leaves)."""

    def find_spec(self, fullname: str, path: Any = None,
                  target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != "threadpoolctl":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _RegisteringLoader(spec.loader)
        return spec


if "threadpoolctl" in sys.modules:
    _register(sys.modules["threadpoolctl"])
else:
    sys.meta_path.insert(0, _ThreadpoolctlHook())
