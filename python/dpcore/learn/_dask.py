"""The learners on Dask collections (``fit(dask_array, ...)``, issue 30 item 3).

A fit reads a Dask array, dataframe or series chunk by chunk on the workers and brings back to
the calling process only exact integer sums (or integer sufficient statistics), never rows;
the noise is drawn there, once per release, from the estimator's ``random_state``. Which
learners and methods accept a Dask collection, and why the result has exactly the law of the
in-memory fit, is said where each one is fitted: :class:`DaskRows` (``method="gd"`` and
``"sgd"`` of the linear classifiers), :func:`sum_chunks` (the one-pass sufficient statistics of
GaussianNB, CategoricalNB and LinearRegression's SSP, whose chunk functions are the in-memory
sums themselves: ``dpcore._learn_sums`` and ``dpcore.learn._naive_bayes.category_counts``),
:class:`DaskChunks` (KMeans) and :class:`DaskRecords` (the trees).

Dask is optional (``pip install "dpcore[dask]"``) and imported only when a Dask collection is
passed. Whatever scheduler is active is used (a ``dask.distributed.Client`` if one is the
default, else Dask's local scheduler).
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Callable

import numpy as np

from dpcore.learn import _base
from dpcore.learn._sgd import LatticeStep, chunk_lattice_sum, class_targets

__all__ = ["is_dask_collection", "DaskRows", "DaskChunks", "aligned_chunks", "sum_chunks",
           "regression_targets"]

#: How many partial results one task of the reduction tree adds.
SPLIT_EVERY = 8


def is_dask_collection(obj: Any) -> bool:
    """Whether ``obj`` is a Dask collection (array, dataframe, series); never imports Dask."""
    return type(obj).__module__.partition(".")[0] in ("dask", "dask_expr") and hasattr(
        obj, "__dask_graph__")


def _dask():
    try:
        import dask
        import dask.array as da
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError('fitting on a Dask collection needs Dask: pip install "dpcore[dask]"'
                          ) from exc
    return dask, da


def _dask_array(obj, da):
    """A Dask array with known chunk sizes along the rows, or None for in-memory data (the
    partition lengths of a dataframe are counted on the workers: used to place the chunks,
    never released)."""
    if hasattr(obj, "to_dask_array"):   # dataframe or series
        with warnings.catch_warnings():   # string labels become an object array: fine here
            warnings.filterwarnings("ignore", message=".*extension dtypes", category=UserWarning)
            obj = obj.to_dask_array(lengths=True)
    elif not is_dask_collection(obj) or not hasattr(obj, "chunks"):
        return None
    if any(math.isnan(c) for c in obj.chunks[0]):
        obj = obj.compute_chunk_sizes()
    return obj


def aligned_chunks(X: Any, y: Any) -> tuple[Any, Any, list[int]]:
    """(X, y) as Dask arrays whose row chunks coincide (X with all its columns in each chunk),
    and the global index of each chunk's first row. Either may be in memory (y may be None);
    both checked for shape here (before anything is charged)."""
    _, da = _dask()
    Xd, yd = _dask_array(X, da), (None if y is None else _dask_array(y, da))
    if Xd is None:
        X = np.asarray(X)
        if X.ndim != 2:
            raise ValueError("X must be 2-d (n_samples, n_features)")
        Xd = da.from_array(X, chunks=(yd.chunks[0] if yd is not None else -1, -1))
    if Xd.ndim != 2:
        raise ValueError("X must be 2-d (n_samples, n_features)")
    Xd = Xd.rechunk({1: -1})
    offsets = np.concatenate([[0], np.cumsum(Xd.chunks[0])[:-1]]).astype(int).tolist()
    if y is None:
        return Xd, None, offsets
    if yd is None:
        yd = da.from_array(np.asarray(y), chunks=(Xd.chunks[0],))
    if yd.ndim != 1:
        raise ValueError("y must be 1-d")
    if yd.shape[0] != Xd.shape[0]:
        raise ValueError("X and y must have the same number of rows")   # the counts are private
    if yd.chunks[0] != Xd.chunks[0]:
        yd = yd.rechunk((Xd.chunks[0],))
    return Xd, yd, offsets


def _prepare_chunk(xb, yb, design, params, targets, target_params):
    """On a worker: the chunk's rows of norm <= 1 and its targets, and whether it holds a
    non-finite value or a bad target (a label outside the classes, a non-finite target),
    checked on the client before any charge; the flags are the only thing read back."""
    x = np.asarray(xb, dtype=np.float64)
    bad_values = not bool(np.isfinite(x).all())
    with np.errstate(invalid="ignore", over="ignore"):
        Z = np.ascontiguousarray(design(x, *params))
    target, bad_targets = targets(yb, *target_params)
    return Z, target, bad_values, bad_targets


def regression_targets(y: Any, low: float, high: float, centre: float,
                       half: float) -> tuple[np.ndarray, bool]:
    """A regression target clipped to [low, high], then (y - centre) / half; and whether some
    target is not finite."""
    y = np.asarray(y, dtype=np.float64)
    return (np.clip(y, low, high) - centre) / half, not bool(np.isfinite(y).all())


def _flags(part):
    return part[2], part[3]


def _chunk_sum(part, offset, W, step):
    return chunk_lattice_sum(part[0], part[1], offset, W, step)


def _client():
    """The default dask.distributed Client, or None (then Dask's local scheduler runs in this
    process)."""
    try:
        from distributed import default_client
        return default_client()
    except (ImportError, ValueError):
        return None


class DaskRows:
    """The rows of a Dask collection, designed (clipped and scaled to norm <= 1) and kept on
    the workers: the row source of ``method="gd"`` and ``"sgd"`` (the in-memory one is
    :class:`dpcore.learn._sgd.ArrayRows`).

    :meth:`lattice_sum` sends the model and the step (its key) to every chunk; each returns the
    int64 lattice sum of its records (``dpcore._sgd``: the Poisson sample of a record is a
    function of the step's key and the record's global index, so a chunk draws exactly its part
    of the in-memory sample), and the client adds them exactly. With a ``dask.distributed``
    Client the designed chunks stay on the workers (futures) and each step is one round of
    tasks; with Dask's local scheduler (no Client) the chunks already live in this process and
    are summed in a loop, without a task graph per step.

    Privacy
    -------
    That of the in-memory fit, with the same law and, for the same seed, the same released
    model (whatever the chunking or the scheduler): the integer sum is identical bit for bit
    (exact int64 addition of the same per-record integer vectors), the generator of the
    calling process is read in the same order (step keys and noise), and every rounding after
    the release happens on the client as in memory. Nothing but the chunks' integer sums and
    two validity flags per chunk leaves the workers; the partition lengths of a dataframe are
    counted to place the chunks (not released). Parameters, shapes, values and labels are all
    checked before the estimator charges its accountant.
    """

    def __init__(self, parts: list, offsets: list[int], n_rows: int, n_columns: int,
                 client: Any) -> None:
        self.parts = parts
        self.client = client
        self.offsets = offsets
        self.n_rows = n_rows
        self.n_columns = n_columns

    @classmethod
    def for_classifier(cls, est: Any, X: Any, y: Any, classes: np.ndarray | None,
                       design: Callable[..., np.ndarray], params: tuple) -> DaskRows:
        """The rows of a linear classifier's fit: ``design(x, *params)`` maps a chunk of X to
        rows of norm <= 1 (``params`` public), y to class indices of ``classes``. Refuses what
        the Dask path does not support before anything is charged."""
        if est.method not in ("gd", "sgd"):
            raise ValueError("a Dask collection is fitted with method='gd' or 'sgd' only (the "
                             f"other methods need the rows in memory), got {est.method!r}")
        if classes is None:
            raise ValueError("classes is required to fit a Dask collection: give the public "
                             "label set")
        Xd, yd, offsets = aligned_chunks(X, y)
        width = int(Xd.shape[1])
        return cls.make(est, Xd, yd, offsets, design, params, class_targets, (classes,),
                        width + (params[-1] is not None), "y contains labels outside classes")

    @classmethod
    def make(cls, est: Any, Xd: Any, yd: Any, offsets: list[int],
             design: Callable[..., np.ndarray], params: tuple,
             targets: Callable[..., tuple[np.ndarray, bool]], target_params: tuple,
             n_columns: int, bad_target_message: str) -> DaskRows:
        """The rows of aligned chunks (:func:`aligned_chunks`): ``design(x, *params)`` on the
        workers gives rows of norm <= 1 (``n_columns`` wide), ``targets(y, *target_params)``
        the targets and a flag; every flag checked here, before any charge."""
        dask, _ = _dask()
        n = int(Xd.shape[0])
        if n < 1:
            raise ValueError("X has no rows")
        _base.check_n(n)
        prepare = dask.delayed(_prepare_chunk, pure=True)
        parts = [prepare(xb, yb, design, params, targets, target_params)
                 for xb, yb in zip(Xd.to_delayed().ravel(), yd.to_delayed().ravel())]
        client = _client()
        if client is not None:   # futures: the chunks stay on the workers
            parts = client.compute(parts)
            flags = client.gather(client.map(_flags, parts))
        else:
            parts = list(dask.compute(*parts))
            flags = [_flags(p) for p in parts]
        if any(f[0] for f in flags):
            raise ValueError("X must not contain NaN or infinite values")
        if any(f[1] for f in flags):
            raise ValueError(bad_target_message)
        est.n_features_in_ = int(Xd.shape[1])
        return cls(parts, offsets, n, n_columns, client)

    def lattice_sum(self, W: np.ndarray, step: LatticeStep) -> np.ndarray:
        """The int64 lattice sum of one step over all chunks (added exactly on the client)."""
        if self.client is not None:
            sums = self.client.gather(self.client.map(_chunk_sum, self.parts, self.offsets,
                                                      W=W, step=step))
        else:
            sums = [_chunk_sum(p, off, W, step) for p, off in zip(self.parts, self.offsets)]
        total = np.zeros(W.size, dtype=np.int64)
        for s in sums:
            total += s
        return total


def _add_parts(parts):
    """Exact elementwise sum of (arrays, flag, flag, ...) partials: int64 arrays added, flags
    or-ed."""
    arrays = [np.array(a, copy=True) for a in parts[0][0]]
    flags = list(parts[0][1:])
    for part in parts[1:]:
        for total, a in zip(arrays, part[0]):
            total += a
        flags = [f or g for f, g in zip(flags, part[1:])]
    return (tuple(arrays), *flags)


def sum_chunks(Xd: Any, yd: Any, chunk_fn: Callable[..., tuple], params: tuple) -> tuple:
    """Sufficient statistics on the workers: ``chunk_fn(x, y, *params)`` on every aligned chunk
    (from :func:`aligned_chunks`) returns (tuple of int64 arrays, flags...); the arrays are added
    exactly in a tree of fan-in SPLIT_EVERY and the flags or-ed, and only that total comes back
    to the calling process. Integer addition is exact and associative, so the total is the
    in-memory one bit for bit whatever the chunking."""
    dask, _ = _dask()
    chunk = dask.delayed(chunk_fn, pure=True)
    parts = [chunk(xb, yb, *params)
             for xb, yb in zip(Xd.to_delayed().ravel(), yd.to_delayed().ravel())]
    add = dask.delayed(_add_parts, pure=True)
    while len(parts) > 1:
        parts = [add(parts[i:i + SPLIT_EVERY]) for i in range(0, len(parts), SPLIT_EVERY)]
    (total,) = dask.compute(parts[0])
    return total


class DaskChunks:
    """Per-chunk data prepared once on the workers (``prepare(x, *params)`` returns (payload,
    whether the chunk holds a non-finite value), checked here before any charge), then summed
    over by :meth:`sum`: ``fn(payload, *args)`` per chunk returns int64 arrays (or a tuple of
    them), added exactly on the client. The iterative fits whose every release is a sum over
    the records (KMeans' Lloyd counts and sums) run on it; like :class:`DaskRows`, only those
    integer totals leave the workers."""

    def __init__(self, X: Any, prepare: Callable[..., tuple], params: tuple) -> None:
        dask, _ = _dask()
        Xd, _, _ = aligned_chunks(X, None)
        self.shape = tuple(int(v) for v in Xd.shape)
        if self.shape[0] < 1:
            raise ValueError("X has no rows")
        _base.check_n(self.shape[0])
        task = dask.delayed(prepare, pure=True)
        parts = [task(xb, *params) for xb in Xd.to_delayed().ravel()]
        self.client = _client()
        if self.client is not None:
            self.parts = self.client.compute(parts)
            flags = self.client.gather(self.client.map(_second, self.parts))
        else:
            self.parts = list(dask.compute(*parts))
            flags = [p[1] for p in self.parts]
        if any(flags):
            raise ValueError("X must not contain NaN or infinite values")

    def sum(self, fn: Callable[..., Any], *args: Any) -> Any:
        """sum over chunks of fn(payload, *args) (int64 arrays or tuples of them), exact."""
        if self.client is not None:
            results = self.client.gather(self.client.map(_apply_payload, self.parts, fn=fn,
                                                         args=args))
        else:
            results = [fn(p[0], *args) for p in self.parts]
        single = not isinstance(results[0], tuple)
        totals = [np.array(a, copy=True) for a in ((results[0],) if single else results[0])]
        for r in results[1:]:
            for total, a in zip(totals, (r,) if single else r):
                total += a
        return totals[0] if single else tuple(totals)


def _second(part):
    return part[1]


def _apply_payload(part, fn, args):
    return fn(part[0], *args)


# ------------------------------------------------------------------------------------------------
# Records prepared once per chunk, then summed over many times (the trees' level counts)

class DaskRecords:
    """Aligned chunks of X and y (:func:`aligned_chunks`) prepared once on the workers and kept
    there: ``prepare(x, y, *params)`` returns (payload, summary), the summary being (tuple of
    int64 arrays, flags...); the summaries are added exactly and the flags or-ed into
    ``summary`` (checked by the caller before any charge). :meth:`sum` then adds, over the
    chunks, ``fn(payload, extra, *args)`` (an int64 array), ``extra`` being the chunk's item of
    a per-chunk list. The private trees count their levels on it (``dpcore.learn._tree``): only
    those integer totals leave the workers, so the released model is the in-memory one bit for
    bit whatever the chunking."""

    def __init__(self, Xd: Any, yd: Any, prepare: Callable[..., tuple], params: tuple) -> None:
        dask, _ = _dask()
        self.shape = tuple(int(v) for v in Xd.shape)
        if self.shape[0] < 1:
            raise ValueError("X has no rows")
        _base.check_n(self.shape[0])
        self.bounds = np.cumsum((0,) + tuple(int(c) for c in Xd.chunks[0])).tolist()
        task = dask.delayed(prepare, pure=True)
        parts = [task(xb, yb, *params)
                 for xb, yb in zip(Xd.to_delayed().ravel(), yd.to_delayed().ravel())]
        self.client = _client()
        if self.client is not None:   # futures: the payloads stay on the workers
            self.parts = self.client.compute(parts)
            summaries = self.client.gather(self.client.map(_second, self.parts))
        else:
            self.parts = list(dask.compute(*parts))
            summaries = [p[1] for p in self.parts]
        self.summary = _add_parts(summaries)

    def per_chunk(self, values: np.ndarray | None = None) -> list:
        """One item per chunk: None each (``values`` None), or the chunk's rows of the
        per-record array ``values`` (sent to the workers once: futures with a Client)."""
        if values is None:
            return [None] * len(self.parts)
        pieces = [values[a:b] for a, b in zip(self.bounds[:-1], self.bounds[1:])]
        return self.client.scatter(pieces) if self.client is not None else pieces

    def sum(self, fn: Callable[..., np.ndarray], extras: list, *args: Any) -> np.ndarray:
        """The exact sum over the chunks of ``fn(payload, extra, *args)`` (int64 arrays)."""
        if self.client is not None:
            results = self.client.gather(self.client.map(_apply_extra, self.parts, extras,
                                                         fn=fn, args=args, pure=False))
        else:
            results = [fn(p[0], e, *args) for p, e in zip(self.parts, extras)]
        total = np.array(results[0], dtype=np.int64, copy=True)
        for r in results[1:]:
            total += r
        return total


def _apply_extra(part, extra, fn, args):
    return fn(part[0], extra, *args)


def tree_chunks(est: Any, X: Any, y: Any, classes: np.ndarray | None) -> tuple[Any, Any]:
    """Aligned Dask arrays of X and y for a tree fit (the public classes are required; sets
    ``est.n_features_in_``)."""
    if classes is None:
        raise ValueError("classes is required to fit a Dask collection: give the public label "
                         "set")
    X, y, _ = aligned_chunks(X, y)
    if X.shape[1] < 1:
        raise ValueError("X has no features (columns)")
    est.n_features_in_ = int(X.shape[1])
    return X, y


def check_tree_flags(bad_values: bool, bad_labels: bool) -> None:
    """Refuse a Dask fit whose chunks flagged a label outside classes or a non-finite X
    (before anything is charged)."""
    if bad_labels:
        raise ValueError("y contains labels outside classes")
    if bad_values:
        raise ValueError("Input X contains NaN or infinity")


class DaskLevelCounts:
    """The level counts of private trees (``start(part)``, ``count(routing, row, table)``, as
    ``dpcore.learn._tree._RecordCounts`` in memory) over :class:`DaskRecords`: each level's
    table is summed over the chunks, ``chunk_fn(payload, start, history, row, shape)`` giving a
    chunk's part; a chunk moves its records from their roots down every level so far (the
    workers keep no state between levels, so a lost or repeated task changes nothing)."""

    def __init__(self, records: DaskRecords, chunk_fn: Callable[..., np.ndarray]) -> None:
        self.records, self.chunk_fn = records, chunk_fn

    def start(self, part: np.ndarray | None) -> None:
        self.starts = self.records.per_chunk(part)
        self.history: list[tuple] = []

    def count(self, routing: tuple, row: np.ndarray, table: np.ndarray) -> None:
        self.history.append((routing, row.size))
        table += self.records.sum(self.chunk_fn, self.starts, self.history, row,
                                  table.shape)


def class_index(y: Any, classes: np.ndarray) -> tuple[np.ndarray, bool]:
    """(class index of each label (int32), whether a label is outside classes)."""
    y = np.asarray(y)
    index = np.minimum(np.searchsorted(classes, y), classes.size - 1)
    try:
        outside = not bool(np.all(np.take(classes, index) == y))
    except (TypeError, ValueError):
        outside = True
    return index.astype(np.int32), outside
