"""Privelet (Xiao, Wang, Gehrke 2010): Haar wavelet coefficients with noise, 1-d or multi-d,
with range counts and their exact variances."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dpcore import _publish
from dpcore import _validation as check
from dpcore._docstrings import fill
from dpcore._release import Cost, release
from dpcore._release.bins import (
    MAX_HISTOGRAM_CELLS,
    OUTSIDE,
    BinGrid,
    add_cell_noise,
    box_queries,
    pow2_at_least,
    sample_2d,
)
from dpcore._release.sums import IntegerNoise
from dpcore.publish import _docs as docs

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpcore.accounting import AccountantLike
    from dpcore.random import RandomStateLike

__all__ = ["PriveletHistogram", "privelet"]


def _along_axes(values, fn, dtype):
    """Apply the row kernel ``fn(rows_in, rows_out, work)`` along every axis in turn (the
    multi-d transform is the tensor product of the 1-d ones, so the order does not matter)."""
    out = np.ascontiguousarray(values, dtype=dtype)
    for axis in np.arange(out.ndim):
        moved = np.ascontiguousarray(np.moveaxis(out, axis, -1))
        rows = moved.reshape(-1, moved.shape[-1])
        res = np.empty_like(rows)
        fn(rows, res, np.empty(2 * rows.shape[1], dtype=dtype))
        out = np.moveaxis(res.reshape(moved.shape), -1, axis)
    return np.ascontiguousarray(out)


def _haar_weights(n):
    """Leaves under each coefficient of a length-n (power of two) heap-ordered Haar transform:
    n for the total, n / 2**depth(j) for node j. H H^T = diag(weights), so the coefficients of
    the inverse's adjoint are H c / weights."""
    depth = np.zeros(n, dtype=np.int64)
    depth[1:] = np.frexp(np.arange(1, n, dtype=np.float64))[1] - 1  # exact: bit_length - 1
    return (n >> depth).astype(np.float64)


def _box_sums(cum, lo, hi):
    """Sums over boxes [lo, hi) from an inclusive prefix-sum array ``cum`` (zero-padded in
    front on every axis): inclusion-exclusion over the 2**d corners."""
    d = lo.shape[-1]
    out = np.zeros(lo.shape[:-1], dtype=np.float64)
    for corner in range(1 << d):
        idx, sign = [], 1.0
        for axis in range(d):
            if corner >> axis & 1:
                idx.append(lo[..., axis])
                sign = -sign
            else:
                idx.append(hi[..., axis])
        out += sign * cum[tuple(idx)]
    return out


def _prefix_sums(counts):
    cum = np.zeros(tuple(s + 1 for s in counts.shape), dtype=np.float64)
    inner = counts.astype(np.float64)
    for axis in np.arange(counts.ndim):
        inner = np.cumsum(inner, axis=axis)
    cum[tuple(slice(1, None) for _ in counts.shape)] = inner
    return cum


def sample_grid(sample: ArrayLike, bins: int | ArrayLike, range: ArrayLike | None
                ) -> tuple[np.ndarray, BinGrid]:
    """(records, grid): the records as an (N, D) array and the public grid over them, as
    ``numpy.histogramdd`` reads ``bins`` and ``range`` (a 1-d sample: one axis, ``bins`` an int
    or one edge array)."""
    arr = sample_2d(sample)
    if arr.shape[1] == 1 and np.ndim(sample) == 1:
        return arr, BinGrid.make_1d(bins, range)
    return arr, BinGrid.make(bins, range, arr.shape[1])


@dataclass(frozen=True, eq=False)
class PriveletHistogram:
    """A released Privelet histogram (returned by :func:`privelet`): the noisy Haar
    coefficients, the counts they reconstruct, and range counts with exact variances."""

    edges: list  #: bin edges per axis (float64 arrays)
    padded_shape: tuple  #: grid shape with every axis padded to a power of two
    coefficients: np.ndarray  #: int64 noisy unnormalised Haar coefficients (padded_shape)
    noise: IntegerNoise  #: the per-coefficient noise (discrete Laplace, scale sensitivity/eps)

    @property
    def shape(self) -> tuple:
        return tuple(e.size - 1 for e in self.edges)

    @property
    def sensitivity(self) -> int:
        """L1 sensitivity of the coefficient vector: prod(1 + log2 n_i) over padded axes."""
        return math.prod(1 + n.bit_length() - 1 for n in self.padded_shape)

    @property
    def node_variance(self) -> float:
        """Variance of the noise on each coefficient (exact, discrete Laplace)."""
        return self.noise.variance

    @property
    def padded_counts(self) -> np.ndarray:
        """Counts reconstructed on the padded grid (float64; the padding cells estimate 0)."""
        return _along_axes(self.coefficients.astype(np.float64), _publish.haar_inverse,
                           np.float64)

    @property
    def counts(self) -> np.ndarray:
        """Reconstructed bin counts (float64, ``shape``; unbiased, consistent with every
        range count)."""
        return self.padded_counts[tuple(slice(0, s) for s in self.shape)].copy()

    def range_count(self, lo: ArrayLike, hi: ArrayLike) -> float | np.ndarray:
        """Estimated number of records in bins [lo, hi) (1-d: integers or arrays that
        broadcast; d-dim: arrays whose last axis holds one index per axis). Post-processing:
        costs nothing."""
        lo_b, hi_b = box_queries(lo, hi, self.shape, "bin")
        out = _box_sums(_prefix_sums(self.padded_counts), lo_b, hi_b)
        return float(out) if out.ndim == 0 else out

    def range_variance(self, lo: ArrayLike, hi: ArrayLike) -> float:
        """Exact variance of ``range_count(lo, hi)`` for one range (whatever the data).

        A range count is c . H^-1 y for the box indicator c and the noisy coefficients y;
        H^-T = diag(1 / weights) H and both factor over the axes, so the variance is
        node_variance * prod over axes of |H c_i / weights_i|**2."""
        lo_b, hi_b = box_queries(lo, hi, self.shape, "bin")
        if lo_b.ndim != 1:
            raise ValueError("range_variance takes one range")
        total = self.node_variance
        for axis, n in enumerate(self.padded_shape):
            c = np.zeros((1, n), dtype=np.float64)
            c[0, lo_b[axis]:hi_b[axis]] = 1.0
            alpha = np.empty_like(c)
            _publish.haar_forward(c, alpha, np.empty(2 * n))
            alpha = alpha[0] / _haar_weights(n)
            total *= float(alpha @ alpha)
        return total


@fill(outside=docs.OUTSIDE, random_state=docs.RANDOM_STATE, accountant=docs.ACCOUNTANT,
      charged=docs.CHARGED)
def privelet(sample: ArrayLike, *, bins: int | ArrayLike, range: ArrayLike | None = None,
             epsilon: float, outside: str = "drop", random_state: RandomStateLike = None,
             accountant: AccountantLike | None = None) -> PriveletHistogram:
    """Differentially private histogram by Privelet: noisy Haar wavelet coefficients (Xiao,
    Wang and Gehrke [XWG10]_), for accurate range counts in one or more dimensions.

    Each axis of the public grid is padded with empty bins to a power of two n_i and the
    counts are transformed by the unnormalised Haar transform along every axis (per axis: the
    total, and for every node of the binary tree over the bins the count of its left half
    minus that of its right half). Every coefficient is an exact integer and gets the same
    exact discrete Laplace noise; the counts are the inverse transform of the noisy
    coefficients. A range count then carries the noise of about 2 log2 n coefficients per
    axis instead of one per bin.

    Parameters
    ----------
    sample : array_like, shape (N,) or (N, D)
        The records (1-d: one value each; 2-d: one row of D coordinates each). NaN and
        infinities are rejected.
    bins : int, sequence of ints, or edge arrays
        Public, as ``numpy.histogramdd`` (1-d: an int or one edge array): equal-width bins
        over ``range``, or increasing edges.
    range : (float, float) for 1-d, or one (lower, upper) pair per axis
        Public; required for every axis whose bins are an int (never inferred from the data).
    epsilon : float
        Privacy parameter, > 0.
    {outside}
    {random_state}
    {accountant}

    Returns
    -------
    PriveletHistogram
        ``counts``, ``range_count(lo, hi)``, ``range_variance(lo, hi)``, the noisy
        ``coefficients``.

    Raises
    ------
    ValueError
        A missing ``range`` for an int ``bins``, invalid bins, NaN/infinite records, epsilon
        <= 0, an unknown ``outside``, a padded grid above 2**28 cells.
    TypeError
        Non-numeric ``sample``.

    Privacy
    -------
    Pure epsilon-DP under add/remove one record. A record is in at most one cell; one cell
    changing by 1 changes, per axis, the total and the log2 n_i differences of the cell's
    ancestors by 1 each, so over the tensor-product coefficients the L1 sensitivity is
    prod_i (1 + log2 n_i) (n_i the padded size of axis i; Privelet's generalised sensitivity
    with its weights folded into the unnormalised coefficients). Every coefficient, empty
    cells' included, gets independent discrete Laplace noise of scale sensitivity / epsilon
    (rounded up): epsilon-DP exactly. Grid and padding are public. Counts and range counts
    are post-processing.
    {charged}

    Notes
    -----
    The variance of a 1-d range count is node_variance * ((length / n)**2 + the sum over
    the tree's nodes of ((overlap with the left half - overlap with the right half) / size)**2);
    only nodes the range cuts (at most 2 per level) count, each at most 1/4, so it is at most
    node_variance * (1 + log2(n) / 2), against length * Var DLap(1 / epsilon) for the flat
    histogram. At n = 2**16, epsilon = 1 (exact variances, ``range_variance``): ranges from the
    first to the last quarter have about 49x lower variance than flat, uniformly random ranges
    about 28x (the 16-ary hierarchical histogram is about 2x lower still in 1-d).

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore import publish
    >>> x = np.full(1000, 0.3)
    >>> w = publish.privelet(x, bins=256, range=(0, 1), epsilon=1.0, random_state=0)
    >>> w.sensitivity, w.counts.shape
    (9, (256,))
    >>> bool(abs(w.range_count(0, 128) - 1000) < 100)
    True
    """
    arr, grid = sample_grid(sample, bins, range)
    epsilon = check.epsilon(epsilon)
    check.option(outside, "outside", OUTSIDE)
    padded = tuple(pow2_at_least(s) for s in grid.shape)
    if math.prod(padded) > MAX_HISTOGRAM_CELLS:
        raise ValueError(f"bins={grid.shape} padded to powers of two give {math.prod(padded)} "
                         f"cells, more than MAX_HISTOGRAM_CELLS = {MAX_HISTOGRAM_CELLS}")
    # counts, the padded cells and the coefficients (int64), with one transform temporary
    check.memory(8 * (grid.size + 3 * math.prod(padded)), "bins")
    sensitivity = math.prod(n.bit_length() for n in padded)  # 1 + log2 n per axis
    noise = IntegerNoise.calibrate("laplace", sensitivity, epsilon, 0.0)
    counts = np.zeros(grid.size, dtype=np.int64)
    grid.count_into(arr, counts, outside == "clip")
    cells = np.zeros(padded, dtype=np.int64)
    cells[tuple(slice(0, s) for s in grid.shape)] = counts.reshape(grid.shape)
    coefficients = _along_axes(cells, _publish.haar_forward, np.int64)
    release(lambda rng: add_cell_noise(coefficients.reshape(-1), noise, rng), cost=Cost(epsilon),
            accountant=accountant, random_state=random_state, label="publish.privelet")
    return PriveletHistogram(list(grid.edges), padded, coefficients, noise)
