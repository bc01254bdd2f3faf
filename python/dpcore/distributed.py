"""The counting and summing releases of :mod:`dpcore.stats` on Dask collections.

Each chunk (block of a Dask array, or partition of a Dask dataframe) is reduced on the workers
to exact integers: cell counts from the ``_histogram`` kernel, or a record count and sums in
grid units. The partial results are added exactly in a tree (int64 counts, Python-int sums), so
the total equals the single-machine one bit for bit, whatever the chunking. Only that total comes
back to the calling process, where the noise is drawn **once**, from the caller's
``random_state`` (the secure generator by default). The release therefore has exactly the law of
the corresponding :mod:`dpcore.stats` function, and with the same seed the same value.

Dask is optional (``pip install "dpcore[dask]"``); it is imported when a function here is called.
Whatever scheduler is active is used: a ``dask.distributed.Client`` if one is the default, else
Dask's local scheduler. numpy arrays are accepted too (computed locally).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
import numpy as np

from dpcore import _validation as check
from dpcore._release import Cost, release
from dpcore._release.bins import (
    OUTSIDE,
    BinGrid,
    add_cell_noise,
    histogram_noise,
    nonnegative_mode,
    postprocess_counts,
    sample_2d,
)
from dpcore._release.sums import Statistic, check_privacy, check_public_size, flat_records

if TYPE_CHECKING:
    from numpy.typing import ArrayLike
    from dpcore.random import RandomStateLike
    from dpcore.accounting import AccountantLike

__all__ = ["histogramdd", "histogram", "count", "sum", "mean"]

#: How many partial results are added together in one task of the reduction tree.
SPLIT_EVERY = 8


def _dask():
    try:
        import dask
        import dask.array as da
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError('dpcore.distributed needs Dask: pip install "dpcore[dask]"') from exc
    return dask, da


def _is_dataframe(obj):
    mod = type(obj).__module__
    return (mod.startswith("dask") and hasattr(obj, "to_delayed") and hasattr(obj, "npartitions")
            and not hasattr(obj, "chunks"))  # Dask arrays have npartitions too


def _blocks(data, *, two_d):
    """Delayed blocks of ``data`` (all columns of a 2-d array in each block) and a converter
    applied on the worker, or None for in-memory data."""
    if _is_dataframe(data):
        return data.to_delayed()
    if type(data).__module__.startswith("dask") and hasattr(data, "to_delayed"):
        if two_d and data.ndim == 2:
            data = data.rechunk({1: -1})
        return list(data.to_delayed().ravel())
    return None


def _as_array(block):
    if hasattr(block, "to_numpy"):  # pandas partition
        return block.to_numpy()
    return np.asarray(block)


def _tree(dask, parts, combine, split_every):
    """Reduce delayed ``parts`` with ``combine(list) -> part`` in a tree of fan-in split_every."""
    parts = list(parts)
    if not parts:
        return None
    combine_d = dask.delayed(combine, pure=True)
    while len(parts) > 1:
        parts = [combine_d(parts[i:i + split_every]) for i in range(0, len(parts), split_every)]
    return parts[0]


# ------------------------------------------------------------------------------------------------
# histogram


def _chunk_counts(block, grid, clip, one_d):
    arr = _as_array(block)
    if one_d:
        arr = arr.reshape(-1)
    sample = sample_2d(arr)
    counts = np.zeros(grid.size, dtype=np.int64)
    dropped, bad = _histogram_count(grid, sample, counts, clip)
    return counts, dropped, bad


def _histogram_count(grid, sample, counts, clip):
    return grid.count_rows_into(sample, counts, clip)


def _add_counts(parts):
    counts = parts[0][0].copy()
    dropped, bad = parts[0][1], parts[0][2]
    for c, dr, b in parts[1:]:
        counts += c
        dropped += dr
        bad += b
    return counts, dropped, bad


def _ndim_of(data):
    if _is_dataframe(data):
        return 1 if data.ndim == 1 else len(data.columns)
    shape = getattr(data, "shape", None)
    if shape is None:
        return np.asarray(data).shape[1] if np.ndim(data) == 2 else 1
    return 1 if len(shape) == 1 else int(shape[1])


def exact_histogramdd(sample: Any, grid: BinGrid, *, clip: bool = False,
                      split_every: int = SPLIT_EVERY) -> np.ndarray:
    """The exact (unreleased) flat int64 counts of ``sample`` on a ``dpcore._release.bins.BinGrid``, by a
    tree reduction of per-chunk kernel counts. Not a release: for tests and for the release
    functions here."""
    dask, _ = _dask()
    split_every = check.integer(split_every, "split_every", minimum=2)
    one_d = getattr(sample, "ndim", 2) == 1
    blocks = _blocks(sample, two_d=True)
    if blocks is None:
        counts = np.zeros(grid.size, dtype=np.int64)
        arr = sample_2d(sample)
        dropped, bad = _histogram_count(grid, arr, counts, clip)
    else:
        chunk = dask.delayed(_chunk_counts, pure=True)
        parts = [chunk(b, grid, clip, one_d) for b in blocks]
        total = _tree(dask, parts, _add_counts, split_every)
        if total is None:
            counts, dropped, bad = np.zeros(grid.size, dtype=np.int64), 0, 0
        else:
            (counts, dropped, bad), = dask.compute(total)
    if bad:
        raise ValueError("sample must not contain NaN or infinite values")  # no count: private
    return counts


def histogramdd(sample: Any, *, bins: int | ArrayLike, range: Sequence[Any] | None = None,
                epsilon: float, delta: float | None = None, mechanism: str = "laplace",
                outside: str = "drop", relation: str = "add_remove",
                nonnegative: bool | str = "clamp", consistent: bool = False,
                n: int | None = None, split_every: int = SPLIT_EVERY,
                random_state: RandomStateLike = None, accountant: AccountantLike | None = None
                ) -> tuple[np.ndarray, list[np.ndarray]]:
    """:func:`dpcore.stats.histogramdd` on a Dask array (n, d) or (n,), or a Dask dataframe
    (its columns are the coordinates).

    Parameters
    ----------
    sample : dask.array.Array, dask.dataframe.DataFrame or Series, or array_like
        The records, one row each.
    split_every : int, default=8
        Fan-in of the reduction tree (>= 2).
    bins, range, epsilon, delta, mechanism, outside, relation, nonnegative, consistent, n,
    random_state, accountant :
        As in :func:`dpcore.stats.histogramdd`.

    Returns
    -------
    counts : ndarray, shape = bins per axis
    edges : list of ndarray

    Privacy
    -------
    Exactly that of :func:`dpcore.stats.histogramdd` (epsilon-DP with ``"laplace"``,
    (epsilon, delta)-DP with ``"gaussian"``, under add/remove or replace-one): the exact counts
    are identical to the single-machine ones (integer tree reduction), nothing derived from the
    data but those counts leaves the workers' reduction, and the noise is drawn once, in the
    calling process, on every cell. Charged ``(epsilon, delta)`` after the counts are computed
    and before any noise is drawn.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> from dpcore import distributed
    >>> x = da.from_array(np.full((1000, 2), 0.25), chunks=(100, 2))
    >>> counts, edges = distributed.histogramdd(x, bins=2, range=[(0, 1), (0, 1)], epsilon=1.0,
    ...                                         random_state=0)
    >>> bool(abs(counts[0, 0] - 1000) < 30)
    True
    """
    d = _ndim_of(sample)
    grid = BinGrid.make(bins, range, d)
    mechanism, epsilon, delta = check_privacy(mechanism, epsilon, delta)
    if outside not in OUTSIDE:
        raise ValueError(f"outside must be 'drop' or 'clip', got {outside!r}")
    noise = histogram_noise(mechanism, relation, epsilon, delta)
    mode = nonnegative_mode(nonnegative, consistent)
    total = check_public_size(n, "add_remove")
    counts = exact_histogramdd(sample, grid, clip=outside == "clip", split_every=split_every)
    release(lambda rng: add_cell_noise(counts, noise, rng), cost=Cost(epsilon, delta),
            accountant=accountant, random_state=random_state, label="distributed.histogramdd")
    counts = postprocess_counts(counts, mode, total)
    return counts.reshape(grid.shape), list(grid.edges)


def histogram(x: Any, *, bins: int | ArrayLike, range: Sequence[float], epsilon: float,
              delta: float | None = None, mechanism: str = "laplace", nonnegative: bool | str = "clamp",
              n: int | None = None, split_every: int = SPLIT_EVERY, random_state: RandomStateLike = None,
              accountant: AccountantLike | None = None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`dpcore.stats.histogram` (equal-width bins) on a 1-d Dask array or Series.

    Returns
    -------
    counts : ndarray of int64
    edges : ndarray of float64

    Privacy
    -------
    That of :func:`dpcore.stats.histogram`: add/remove one record, L1 sensitivity 1, exact
    integer noise on every bin drawn once in the calling process; epsilon-DP (``"laplace"``) or
    (epsilon, delta)-DP (``"gaussian"``). Charged ``(epsilon, delta)``.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> from dpcore import distributed
    >>> x = da.from_array(np.full(500, 0.5), chunks=100)
    >>> counts, edges = distributed.histogram(x, bins=4, range=(0, 4), epsilon=1.0,
    ...                                       random_state=0)
    >>> edges
    array([0., 1., 2., 3., 4.])
    """
    if getattr(x, "ndim", 1) != 1:
        raise ValueError(f"x must be 1-d for histogram (use histogramdd), got ndim {x.ndim}")
    counts, edges = histogramdd(x, bins=bins, range=[range], epsilon=epsilon, delta=delta,
                                mechanism=mechanism, nonnegative=nonnegative, n=n,
                                split_every=split_every, random_state=random_state,
                                accountant=accountant)
    return counts, edges[0]


# ------------------------------------------------------------------------------------------------
# count, sum, mean: exact per-chunk integers, added exactly


def _chunk_exact(block, plan):
    records = flat_records(_as_array(block))
    return plan.exact(records)


def _add_exact(parts):
    n = 0
    totals = [0] * len(parts[0][1])
    for pn, pt in parts:
        n += pn
        totals = [a + b for a, b in zip(totals, pt)]
    return n, totals


def _exact(x, plan, split_every):
    dask, _ = _dask()
    split_every = check.integer(split_every, "split_every", minimum=2)
    blocks = _blocks(x, two_d=False)
    if blocks is None:
        return plan.exact(flat_records(x))
    chunk = dask.delayed(_chunk_exact, pure=True)
    total = _tree(dask, [chunk(b, plan) for b in blocks], _add_exact, split_every)
    if total is None:
        return plan.exact(np.zeros(0))
    (result,) = dask.compute(total)
    return result


def count(x: Any, *, epsilon: float, delta: float | None = None, mechanism: str = "laplace",
          split_every: int = SPLIT_EVERY, random_state: RandomStateLike = None,
          accountant: AccountantLike | None = None) -> int:
    """:func:`dpcore.stats.count` on a Dask collection (every element is one record).

    Returns
    -------
    int

    Privacy
    -------
    That of :func:`dpcore.stats.count`: add/remove one record, sensitivity 1, exact integer
    noise drawn once in the calling process. Charged ``(epsilon, delta)``.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> from dpcore import distributed
    >>> n = distributed.count(da.ones(1000, chunks=100), epsilon=1.0, random_state=0)
    >>> abs(n - 1000) < 30
    True
    """
    stat = Statistic.make("count", mechanism=mechanism, epsilon=epsilon, delta=delta)
    return stat.release(_exact(x, stat.plan, split_every), accountant=accountant,
                        random_state=random_state, label="distributed.count")


def sum(x: Any, *, bounds: ArrayLike | None = None, epsilon: float, delta: float | None = None,
        mechanism: str = "laplace", split_every: int = SPLIT_EVERY,
        random_state: RandomStateLike = None, accountant: AccountantLike | None = None) -> float:
    """:func:`dpcore.stats.sum` on a Dask collection: exact per-chunk sums on the grid.

    Returns
    -------
    float

    Privacy
    -------
    That of :func:`dpcore.stats.sum`: add/remove one record, records clipped to ``bounds``,
    integer sums in grid units added exactly (so the sensitivity is exact whatever the
    chunking), exact integer noise drawn once in the calling process. Charged
    ``(epsilon, delta)``.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> from dpcore import distributed
    >>> s = distributed.sum(da.ones(1000, chunks=100), bounds=(0, 1), epsilon=1.0,
    ...                     random_state=0)
    >>> abs(s - 1000) < 30
    True
    """
    stat = Statistic.make("sum", bounds=bounds, mechanism=mechanism, epsilon=epsilon, delta=delta)
    return stat.release(_exact(x, stat.plan, split_every), accountant=accountant,
                        random_state=random_state, label="distributed.sum")


def mean(x: Any, *, bounds: ArrayLike | None = None, epsilon: float, delta: float | None = None,
         mechanism: str = "laplace", split_every: int = SPLIT_EVERY,
         random_state: RandomStateLike = None, accountant: AccountantLike | None = None) -> float:
    """:func:`dpcore.stats.mean` on a Dask collection (n private; the same construction).

    Returns
    -------
    float

    Privacy
    -------
    That of :func:`dpcore.stats.mean` with n private: add/remove one record, records clipped
    to ``bounds``; ``"laplace"``: the pair of Bernstein sums (L1 sensitivity one record) with
    the whole budget; ``"gaussian"``: a noisy count and a noisy centred sum with half of it
    each. Exact integer partials added exactly, noise drawn once in the calling process.
    Charged ``(epsilon, delta)``.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> from dpcore import distributed
    >>> m = distributed.mean(da.full(1000, 0.5, chunks=100), bounds=(0, 1), epsilon=1.0,
    ...                      random_state=0)
    >>> abs(m - 0.5) < 0.1
    True
    """
    stat = Statistic.make("mean", bounds=bounds, mechanism=mechanism, epsilon=epsilon, delta=delta)
    return stat.release(_exact(x, stat.plan, split_every), accountant=accountant,
                        random_state=random_state, label="distributed.mean")
