"""Private histograms: exact integer noise on every bin or cell of public bins."""
from __future__ import annotations

from typing import TYPE_CHECKING

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
from dpcore._release.sums import check_privacy, check_public_size, flat_records

if TYPE_CHECKING:
    from numpy.typing import ArrayLike
    from dpcore.random import RandomStateLike
    from dpcore.accounting import AccountantLike

__all__ = ["histogram", "histogramdd"]


def _bin_edges(bins, value_range):
    """Validate public bins: an int with a required range, or an explicit edge array.
    Returns (bins, range) in the form numpy.histogram gets them."""
    if isinstance(bins, (str, bytes)):
        raise ValueError(
            f"bins must be an int or an array of edges, got {bins!r}: rules such as 'auto' look "
            "at the data"
        )
    if isinstance(bins, (int, np.integer)) and not isinstance(bins, (bool, np.bool_)):
        bins = check.integer(bins, "bins", minimum=1)
        lower, upper = check.bounds_pair(value_range, "range")
        return bins, (lower, upper)
    edges = check.finite_array(bins, "bins")
    if edges.ndim != 1 or edges.size < 2:
        raise ValueError(
            f"bins must be an int >= 1 or a 1-d array of at least 2 edges, got shape {edges.shape}"
        )
    if not np.all(np.diff(edges) > 0):
        raise ValueError("bins must be strictly increasing when given as edges")
    if value_range is not None:
        lower, upper = check.bounds_pair(value_range, "range")
        if lower != edges[0] or upper != edges[-1]:
            raise ValueError(
                f"range ({lower!r}, {upper!r}) disagrees with the edges given in bins "
                f"({edges[0]!r}, {edges[-1]!r}); give one or make them agree"
            )
    return edges, None


def histogram(x: ArrayLike, *, bins: int | ArrayLike, range: ArrayLike | None = None,
              epsilon: float, delta: float | None = None, mechanism: str = "laplace",
              nonnegative: bool | str = "clamp", n: int | None = None,
              relation: str = "add_remove", random_state: RandomStateLike = None,
              accountant: AccountantLike | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Differentially private histogram: exact integer noise on every bin, empty bins included.

    Parameters
    ----------
    x : array_like of float
        The records (any shape; each element is one record). NaN and infinities are rejected.
    bins : int or array_like of float
        Public: the number of equal-width bins over ``range``, or the increasing bin edges.
        Rules that look at the data (``"auto"`` and the like) are refused.
    range : (float, float) or None
        Public (lower, upper) of the bins. Required when ``bins`` is an int (never inferred from
        the data); with explicit edges it may be None or must equal (edges[0], edges[-1]).
    epsilon : float
        Privacy parameter, > 0.
    delta : float, optional
        None (default) or 0 for ``mechanism="laplace"``; 0 < delta < 1 for ``mechanism="gaussian"``.
    mechanism : {"laplace", "gaussian"}, default="laplace"
        Exact discrete Laplace (scale 1/epsilon) or exact discrete Gaussian noise per bin.
    nonnegative : {"clamp", "project", False}, default="clamp"
        Post-processing. ``"clamp"``: negative counts set to 0 (int64 counts; never further
        from a non-negative truth than the raw ones, bin by bin). ``"project"`` (or ``True``):
        the non-negative counts closest (least squares) to the noisy ones with the total ``n``
        if given, else the noisy total (0 if negative; Lee, Wang, Kifer 2015); float64 counts.
        ``False``: the raw noisy counts. The default was chosen on development data (see the
        user guide, "Statistics"): clamping had the smallest L1 error in most cells and is never
        worse than the raw counts; the projection helps at small epsilon and small n only.
    n : int, optional
        A public total of the counts (the number of records inside the range), used only by
        ``nonnegative="project"``; never computed from the data.
    relation : {"add_remove", "replace"}, default="add_remove"
        Neighbouring relation the noise is calibrated for (L1 sensitivity 1 or 2; the
        Gaussian with add/remove only).
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's process-wide cryptographically secure generator. Seeds are for
        tests and reproducibility only.
    accountant : dpcore.Accountant, optional
        Charged ``(epsilon, delta)`` before anything is drawn; if the budget would be overspent
        it raises ``BudgetExceeded`` and nothing is released.

    Returns
    -------
    counts : ndarray of int64 (float64 with ``nonnegative="project"``)
        Noisy counts, one per bin (as ``numpy.histogram``'s first output), clamped at 0 by
        default.
    edges : ndarray of float64
        The bin edges, equal to ``numpy.histogram(x, bins=bins, range=range)[1]``.

    Raises
    ------
    ValueError
        Missing ``range`` with an int ``bins`` (naming ``range``), data-dependent or invalid
        bins, NaN or infinite records (naming ``x``), epsilon <= 0, delta out of range.

    Privacy
    -------
    Neighbouring relation: add/remove one record (``relation="replace"``: replace-one). Bins are
    numpy's (half-open, the last one closed); records outside the range are not counted (as in
    numpy; nothing is clipped into the edge bins). One record is in at most one bin, so the
    vector of counts has L1 and L2 sensitivity 1 (2 under replace-one: two bins move by 1).
    Every bin, empty or not, gets independent exact integer noise, so the set of bins with
    nonzero output reveals nothing. ``"laplace"``: discrete Laplace with scale sensitivity /
    epsilon rounded up: pure epsilon-DP exactly. ``"gaussian"``: only one coordinate moves, by
    1, so the exact scalar CKS delta applies: (epsilon, delta)-DP. ``nonnegative`` is
    post-processing (of the noisy counts and the public ``n``). Without
    ``relation="replace"``, under replace-one neighbours the release is 2 epsilon-DP.
    Charged: ``(epsilon, delta)``.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore import stats
    >>> x = np.concatenate([np.full(500, 0.5), np.full(300, 2.5)])
    >>> counts, edges = stats.histogram(x, bins=4, range=(0.0, 4.0), epsilon=1.0, random_state=0)
    >>> edges
    array([0., 1., 2., 3., 4.])
    >>> bool(abs(counts[0] - 500) < 30 and abs(counts[1]) < 30)
    True
    """
    records = flat_records(x)
    bins, value_range = _bin_edges(bins, range)
    mechanism, epsilon, delta = check_privacy(mechanism, epsilon, delta)
    mode = nonnegative_mode(nonnegative)
    total = check_public_size(n, "add_remove")
    noise = histogram_noise(mechanism, relation, epsilon, delta)
    grid = BinGrid.make_1d(bins, value_range)
    counts = np.zeros(grid.size, dtype=np.int64)
    grid.count_into(records[:, None], counts, False, name="x")
    release(lambda rng: add_cell_noise(counts, noise, rng), cost=Cost(epsilon, delta),
            accountant=accountant, random_state=random_state, label="stats.histogram")
    return postprocess_counts(counts, mode, total), grid.edges[0]


# ------------------------------------------------------------------------------------------------
# d-dimensional histogram (kernel _histogram)

def histogramdd(sample: ArrayLike, *, bins: int | ArrayLike, range: ArrayLike | None = None,
                epsilon: float, delta: float | None = None, mechanism: str = "laplace",
                outside: str = "drop", relation: str = "add_remove",
                nonnegative: bool | str = "clamp", consistent: bool = False,
                n: int | None = None, random_state: RandomStateLike = None,
                accountant: AccountantLike | None = None) -> tuple[np.ndarray, list[np.ndarray]]:
    """Differentially private d-dimensional histogram: exact integer noise on every cell.

    Parameters
    ----------
    sample : array_like, shape (N, D) or (N,)
        The records, one row each (a 1-d array is N records in one dimension, as in numpy).
        float32 and float64 are binned as they are; other real types as float64. NaN and
        infinities are rejected.
    bins : int, sequence of ints or sequence of edge arrays
        Public, as ``numpy.histogramdd``: the number of equal-width bins (for every axis or per
        axis) over ``range``, or per-axis increasing edges. Rules that look at the data are
        refused.
    range : sequence of (float, float), optional
        Public (lower, upper) per axis; required for every axis whose bins are given as an int
        (never inferred from the data). For D = 1 a single pair is accepted.
    epsilon : float
        Privacy parameter, > 0.
    delta : float, optional
        None (default) or 0 for ``mechanism="laplace"``; 0 < delta < 1 for ``mechanism="gaussian"``.
    mechanism : {"laplace", "gaussian"}, default="laplace"
        Exact discrete Laplace or exact discrete Gaussian noise in every cell.
    outside : {"drop", "clip"}, default="drop"
        Records with a coordinate outside its range: not counted (``"drop"``, as numpy), or
        counted in the nearest edge cell of that axis (``"clip"``).
    relation : {"add_remove", "replace"}, default="add_remove"
        Neighbouring relation the noise is calibrated for (L1 sensitivity 1 or 2).
    nonnegative : {"clamp", "project", False}, default="clamp"
        Post-processing, as in :func:`histogram` (clamp at 0 by default).
    n : int, optional
        A public total of the counts for ``nonnegative="project"``, as in :func:`histogram`.
    consistent : bool, default=False
        ``True`` is ``nonnegative="project"`` (the name of earlier versions).
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's process-wide cryptographically secure generator. Seeds are for
        tests and reproducibility only.
    accountant : dpcore.Accountant, optional
        Charged ``(epsilon, delta)`` before anything is drawn; if the budget would be overspent
        it raises ``BudgetExceeded`` and nothing is released.

    Returns
    -------
    counts : ndarray of int64 (float64 when projected), shape = number of bins per axis
        The noisy counts, clamped at 0 by default.
    edges : list of ndarray of float64
        The bin edges per axis, equal to ``numpy.histogramdd``'s.

    Raises
    ------
    ValueError
        A missing ``range`` for an int ``bins`` (naming it), invalid bins, NaN or infinite
        records (naming ``sample``), epsilon <= 0, delta out of range, an unknown ``outside``
        or ``relation``, more than 2**28 cells (``MAX_HISTOGRAM_CELLS``).
    TypeError
        Non-numeric ``sample``; ``nonnegative`` neither a bool nor "clamp"/"project";
        non-bool ``consistent``.

    Privacy
    -------
    Pure epsilon-DP (``"laplace"``) or (epsilon, delta)-DP (``"gaussian"``) under the chosen
    neighbouring relation (add/remove one record by default, or replace-one). The cell of a record depends only on that record and the public
    edges (clipped with ``outside="clip"``, else possibly in no cell), so adding or removing one
    record changes one count by 1 (L1 = L2 sensitivity 1) and replacing one changes two counts
    by 1 (L1 sensitivity 2; Laplace only). Every cell, empty or not, gets independent exact
    integer noise (discrete Laplace of scale sensitivity/epsilon rounded up, or the CKS-
    calibrated discrete Gaussian), so which cells are occupied is not revealed. The noise is
    drawn after the counts are final; ``nonnegative`` and ``consistent`` use only the noisy
    counts (post-processing). Charged: ``(epsilon, delta)``.

    Notes
    -----
    Binning is ``numpy.histogramdd``'s exactly (half-open cells, the last one per axis closed;
    equal-width bins are guessed arithmetically and corrected against the edges), done by the
    ``_histogram`` kernel in one pass over the data without the GIL.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore import stats
    >>> xy = np.column_stack([np.full(400, 0.25), np.full(400, 0.75)])
    >>> counts, edges = stats.histogramdd(xy, bins=2, range=[(0, 1), (0, 1)], epsilon=1.0,
    ...                                   random_state=0)
    >>> counts.shape
    (2, 2)
    >>> bool(abs(counts[0, 1] - 400) < 30 and abs(counts[1, 0]) < 30)
    True
    """
    arr = sample_2d(sample)
    grid = BinGrid.make(bins, range, arr.shape[1])
    mechanism, epsilon, delta = check_privacy(mechanism, epsilon, delta)
    if outside not in OUTSIDE:
        raise ValueError(f"outside must be 'drop' or 'clip', got {outside!r}")
    noise = histogram_noise(mechanism, relation, epsilon, delta)
    mode = nonnegative_mode(nonnegative, consistent)
    total = check_public_size(n, "add_remove")
    counts = np.zeros(grid.size, dtype=np.int64)
    grid.count_into(arr, counts, outside == "clip")
    release(lambda rng: add_cell_noise(counts, noise, rng), cost=Cost(epsilon, delta),
            accountant=accountant, random_state=random_state, label="stats.histogramdd")
    return postprocess_counts(counts, mode, total).reshape(grid.shape), list(grid.edges)

