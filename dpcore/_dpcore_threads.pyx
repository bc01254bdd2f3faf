# cython: language_level=3
"""The thread pool of the threaded kernels (no OpenMP: plain Python threads, so nothing beyond the
interpreter is needed on Linux, macOS or Windows).

A threaded kernel splits its input into blocks of a fixed size (set by the input, never by the
thread count), gives each block its own random stream (_random.pxd: `stream_key`, `stream_open`)
and calls `run_blocks(fn, nblocks)`: fn(b) for every block b, on up to `get_limit()` threads (the
calling thread and pool workers take the next unclaimed block until none is left). fn is called
with the GIL and releases it around its loops; blocks write disjoint parts of the output, so the
result does not depend on which thread ran which block.

* Ctrl-C: the calling thread checks for signals between its blocks (PyErr_CheckSignals: compiled
  code runs no signal handler by itself), raising KeyboardInterrupt there; the other threads then
  take no new block, and run_blocks returns (by
  raising) only after every block already started has finished, so no thread writes into memory
  the caller has given up.
* Fork: a forked child has none of its parent's threads; `os.register_at_fork` drops the pool in
  the child, which builds a new one on first use (a pool whose workers vanished would deadlock).
  The parent stops its idle workers just before forking (and starts new ones on next use), so
  the fork sees no extra thread (Python 3.12+ warns about forking a multi-threaded process).
* Nested calls (a block function reaching a threaded kernel, or a kernel called from a pool
  worker) run their blocks on the calling thread.
* The name of this module is distinctive on purpose: threadpoolctl finds its shared library by
  that prefix (python/dpcore/_threads.py registers the controller).
"""
import itertools
import os
import threading
from concurrent.futures import ThreadPoolExecutor, wait

from cpython.exc cimport PyErr_CheckSignals

# Environment variables that cap the default thread count, first found wins. joblib sets
# OMP_NUM_THREADS (with the other BLAS variables) in its worker processes to avoid
# oversubscription; dpcore follows it like an OpenMP library would.
ENV_LIMITS = ("DPCORE_NUM_THREADS", "OMP_NUM_THREADS")

cdef int _limit = 0  # 0: not set; the default is computed on first use
_pool = None
_pool_workers = 0
_pool_lock = threading.Lock()
_local = threading.local()


def available_cores():
    """The cores this process may run on (its CPU affinity where the OS reports it)."""
    if hasattr(os, "sched_getaffinity"):
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except OSError:
            pass
    return os.cpu_count() or 1


def env_limit():
    """The first positive integer among ENV_LIMITS (OpenMP's list form "4,2": its first entry),
    or None."""
    for name in ENV_LIMITS:
        text = os.environ.get(name, "").split(",")[0].strip()
        if text.isdigit() and int(text) > 0:
            return int(text)
    return None


def default_limit():
    cores = available_cores()
    env = env_limit()
    return cores if env is None else min(cores, env)


def get_limit():
    global _limit
    if _limit == 0:
        _limit = default_limit()
    return _limit


def set_limit(int n):
    """n >= 1 threads, or 0 for the default (validated by dpcore._threads)."""
    global _limit
    _limit = n


cdef object _get_pool(int workers):
    """The shared pool, grown to at least `workers` threads."""
    global _pool, _pool_workers
    with _pool_lock:
        if _pool is None or _pool_workers < workers:
            old = _pool
            _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dpcore")
            _pool_workers = workers
            if old is not None:
                old.shutdown(wait=False)
        return _pool


def _before_fork():
    global _pool, _pool_workers
    pool, _pool, _pool_workers = _pool, None, 0
    if pool is not None:
        pool.shutdown(wait=True)  # idle workers exit at once; running blocks finish first


def _after_fork_in_child():
    global _pool, _pool_workers, _pool_lock, _local
    _pool = None  # its threads do not exist here; never shut it down (that would join them)
    _pool_workers = 0
    _pool_lock = threading.Lock()
    _local = threading.local()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)


cdef class _Run:
    """One run_blocks call: the next unclaimed block, the stop flag and the first error."""
    cdef object fn
    cdef object counter
    cdef Py_ssize_t nblocks
    cdef public bint stop
    cdef public object error

    def __init__(self, fn, Py_ssize_t nblocks):
        self.fn = fn
        self.nblocks = nblocks
        self.counter = itertools.count()  # next() is atomic under the GIL
        self.stop = False
        self.error = None

    def here(self):
        """The calling thread's share (exceptions, KeyboardInterrupt included, propagate)."""
        cdef Py_ssize_t b
        while not self.stop:
            b = next(self.counter)
            if b >= self.nblocks:
                return
            self.fn(b)
            PyErr_CheckSignals()  # raises in the main thread only (a no-op elsewhere)

    def worker(self):
        """A pool worker's share: errors are kept for the caller."""
        _local.busy = True
        try:
            self.here()
        except BaseException as exc:
            self.stop = True
            if self.error is None:
                self.error = exc
        finally:
            _local.busy = False


cdef object _wait_all(list futures, _Run run):
    """Wait until no worker runs a block (not-started ones are cancelled); a Ctrl-C meanwhile
    stops the run and is returned (waiting goes on: the blocks write into the caller's arrays)."""
    interrupted = None
    pending = [f for f in futures if not f.cancel()]
    while pending:
        try:
            wait(pending)
            pending = []
        except KeyboardInterrupt as exc:
            run.stop = True
            interrupted = exc
            pending = [f for f in pending if not f.done()]
    return interrupted


def run_blocks(fn, Py_ssize_t nblocks):
    """Call fn(b) for b in range(nblocks) on up to get_limit() threads (see the module doc)."""
    cdef Py_ssize_t threads = min(get_limit(), nblocks)
    cdef Py_ssize_t b
    if threads <= 1 or getattr(_local, "busy", False):
        for b in range(nblocks):
            fn(b)
            PyErr_CheckSignals()
        return
    run = _Run(fn, nblocks)
    futures = []
    try:
        pool = _get_pool(threads - 1)
        for b in range(threads - 1):
            futures.append(pool.submit(run.worker))
    except RuntimeError:  # the pool was shut down meanwhile (a fork): fewer helpers
        pass
    _local.busy = True
    try:
        run.here()
    except BaseException:
        run.stop = True
        _wait_all(futures, run)
        raise
    finally:
        _local.busy = False
    interrupted = _wait_all(futures, run)
    if run.error is not None:
        raise run.error
    if interrupted is not None:
        raise interrupted
