"""MWEM (Hardt, Ligett, McSherry 2012): synthetic data for a workload of counting queries."""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from dpcore import _publish
from dpcore import _validation as check
from dpcore._docstrings import fill
from dpcore._floats import round_down
from dpcore._release import Cost, release
from dpcore._release.bins import OUTSIDE, box_queries
from dpcore._release.sums import IntegerNoise
from dpcore.curves import BoundedRange, Composed, PureDP
from dpcore.mechanisms import discrete_laplace
from dpcore.publish import _docs as docs
from dpcore.publish._wavelet import sample_grid

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpcore.accounting import AccountantLike
    from dpcore.random import RandomStateLike

__all__ = ["MWEMRelease", "mwem"]

#: Passes over all past measurements after each MWEM round (the paper re-applies its
#: measurements several times per round; 0 is the plain algorithm).
MWEM_REPLAY = 10
#: Most rounds accepted (each costs epsilon / (2 rounds + 1) twice).
MAX_MWEM_ROUNDS = 10_000


def _check_counting_queries(queries, n_cells):
    """(kind, lo, hi, dense): ``queries`` as intervals [lo, hi) of cells or a 0/1 matrix."""
    if isinstance(queries, tuple) and len(queries) == 2:
        lo, hi = box_queries(queries[0], queries[1], (n_cells,), "cell")
        lo, hi = np.ascontiguousarray(lo[..., 0].reshape(-1)), np.ascontiguousarray(
            hi[..., 0].reshape(-1))
        if lo.size == 0:
            raise ValueError("queries must hold at least one interval")
        return "ranges", lo, hi, None
    q = check.finite_array(queries, "queries")
    if q.ndim != 2 or q.shape[0] < 1 or q.shape[1] != n_cells:
        raise ValueError(f"queries must be a (queries, cells = {n_cells}) 0/1 matrix or a pair "
                         f"(lo, hi) of interval arrays, got shape {q.shape}")
    if not np.all((q == 0) | (q == 1)):
        raise ValueError("queries must be counting queries: every entry 0 or 1")
    return "dense", None, None, np.ascontiguousarray(q, dtype=np.float64)


@dataclass(frozen=True, eq=False)
class MWEMRelease:
    """MWEM's synthetic data (returned by :func:`mwem`)."""

    edges: list  #: bin edges per axis (float64 arrays)
    histogram: np.ndarray  #: synthetic counts: the average of the T rounds' weights (grid shape)
    final: np.ndarray  #: the last round's weights (grid shape)
    total: int  #: the noisy record count the weights sum to (at least 1)
    chosen: np.ndarray  #: index of the query selected in each round
    measured: np.ndarray  #: its noisy answer (exact integer count + discrete Laplace)
    noise: IntegerNoise  #: the per-measurement noise (scale (2 rounds + 1) / epsilon)

    def records(self, n: int, *, random_state: RandomStateLike = None) -> np.ndarray:
        """``n`` synthetic records drawn from ``histogram`` (each at its cell's centre), an
        (n, D) array (1-d grids: (n,)). Post-processing: costs nothing."""
        n = check.integer(n, "n", minimum=0)
        from dpcore.random import check_random_state

        rng = check_random_state(random_state)
        p = self.histogram.reshape(-1) / self.histogram.sum()
        cells = rng.choice(p.size, size=n, p=p)
        idx = np.unravel_index(cells, self.histogram.shape)
        out = np.column_stack([(e[i] + e[i + 1]) / 2 for e, i in zip(self.edges, idx)])
        return out[:, 0] if len(self.edges) == 1 else out


@fill(outside=docs.OUTSIDE, random_state=docs.RANDOM_STATE, accountant=docs.ACCOUNTANT,
      charged=docs.CHARGED)
def mwem(sample: ArrayLike, *, bins: int | ArrayLike, range: ArrayLike | None = None,
         queries: ArrayLike | tuple, epsilon: float, rounds: int, replay: int = MWEM_REPLAY,
         outside: str = "drop", random_state: RandomStateLike = None,
         accountant: AccountantLike | None = None) -> MWEMRelease:
    """Synthetic data for a workload of counting queries by MWEM (Hardt, Ligett and McSherry
    [HLM12]_): multiplicative weights over the grid's cells, steered each round to the query
    the current synthetic data answers worst (picked with the exponential mechanism).

    Parameters
    ----------
    sample : array_like, shape (N,) or (N, D)
        The records. NaN and infinities are rejected.
    bins : int, sequence of ints, or edge arrays
        Public grid, as :func:`privelet` (``numpy.histogramdd``); the cells are the domain.
    range : (float, float) for 1-d, or one (lower, upper) pair per axis
        Public; required for every axis whose bins are an int.
    queries : (lo, hi) pair of int arrays, or array_like of shape (queries, cells)
        Public counting queries: intervals [lo, hi) of cells (in C order of the flattened
        grid: for 1-d grids, ranges of bins; the fast path), or a 0/1 matrix with one column
        per cell (any counting queries).
    epsilon : float
        Privacy parameter of the whole release, > 0.
    rounds : int
        Rounds T, 1 <= T <= 10000.
    replay : int, default=10
        Extra passes over all past measurements after each round (0: the plain algorithm).
    {outside}
    {random_state}
    {accountant}

    Returns
    -------
    MWEMRelease
        ``histogram`` (the synthetic counts), ``records(n)`` (sampled synthetic records),
        ``final``, the noisy ``total``, the ``chosen`` queries and their ``measured`` answers.

    Raises
    ------
    ValueError
        Invalid grid, NaN/infinite records, queries out of range or not 0/1, epsilon <= 0,
        rounds or replay out of range, an epsilon too small for the exact sampler.
    TypeError
        Non-numeric data, non-integer rounds, replay or interval bounds.

    Privacy
    -------
    Pure epsilon-DP under add/remove one record, by basic composition of 2T + 1 pure steps of
    epsilon / (2T + 1) each (rounded down exactly to a double, so they never sum above
    epsilon): the record count with discrete Laplace noise (sensitivity 1);
    then per round the exponential mechanism (dpcore.selection.exponential, method="exact")
    over the queries with score |rint(q(A)) - q(B)| (sensitivity exactly 1: a counting query's
    true answer q(B) moves by at most 1, the synthetic A depends only on earlier outputs, and
    the score is a difference of integers, exact in doubles), and the
    chosen query's exact integer answer plus discrete Laplace noise of scale (2T + 1) /
    epsilon. The weights, their average and sampled records are post-processing. Grid,
    queries, T and replay are public. The charge carries the curve of the T selections
    (bounded-range, step**2/8-zCDP each) and the T + 1 noisy counts (pure,
    :class:`dpcore.curves.Composed`), which the accountants' zCDP, RDP and PLD analyses use.
    {charged}

    Notes
    -----
    Weights start uniform with sum n~ (the noisy count, at least 1). A measurement m of query
    q multiplies A(x) by exp(q(x) (m - q(A)) / (2 n~)) and renormalises to n~. The release is
    the average of the T rounds' weights (the version the paper's accuracy bound is for).
    With interval queries (the compiled kernel) all answers come from one prefix sum and an
    update costs O(sqrt(cells)) (blocks of cells with a multiplier and a sum each); a 0/1
    matrix costs O(queries x cells) per round and O(cells) per update.

    References
    ----------
    .. [HLM12] M. Hardt, K. Ligett, F. McSherry, "A simple and practical algorithm for
       differentially private data release", NeurIPS 2012.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore import publish
    >>> x = np.random.default_rng(0).normal(0.5, 0.1, 2000)  # insecure-ok: example data
    >>> lo, hi = np.triu_indices(33, 1)  # all 528 ranges of 32 bins
    >>> m = publish.mwem(x, bins=32, range=(0, 1), queries=(lo, hi), epsilon=1.0, rounds=10,
    ...                  random_state=0)
    >>> m.histogram.shape, m.records(5, random_state=1).shape
    ((32,), (5,))
    >>> bool(abs(m.histogram[:16].sum() - np.sum(x < 0.5)) < 200)
    True
    """
    from dpcore import selection

    arr, grid = sample_grid(sample, bins, range)
    kind, lo, hi, dense = _check_counting_queries(queries, grid.size)
    epsilon = check.epsilon(epsilon)
    rounds = check.integer(rounds, "rounds", minimum=1, maximum=MAX_MWEM_ROUNDS)
    replay = check.integer(replay, "replay", minimum=0)
    check.option(outside, "outside", OUTSIDE)
    step = round_down(Fraction(epsilon) / (2 * rounds + 1))  # (2T + 1) steps sum to <= epsilon
    noise = IntegerNoise.calibrate("laplace", 1, step, 0.0)
    # selection.exponential(..., method="exact") calibrated once (validation before the
    # charge), then one selection per round from the release's generator
    chooser = selection.ExponentialMechanism.calibrate(sensitivity=1.0, epsilon=step,
                                                       method="exact")
    counts = np.zeros(grid.size, dtype=np.int64)
    grid.count_into(arr, counts, outside == "clip")
    if kind == "ranges":
        prefix = np.concatenate([[0], np.cumsum(counts)])
        truth = (prefix[hi] - prefix[lo]).astype(np.float64)  # exact integers
    else:
        truth = dense @ counts.astype(np.float64)  # exact: 0/1 rows, integer counts < 2**53

    def draw(rng):
        n_cells = counts.size
        one = np.empty(1, dtype=np.int64)
        discrete_laplace(noise.scale, out=one, random_state=rng)  # the draw of noise.draw(1, rng)
        total = max(int(counts.sum() + one[0]), 1)
        a = np.full(n_cells, total / n_cells)
        average = np.zeros(n_cells)
        chosen = np.empty(rounds, dtype=np.int64)
        measured = np.empty(rounds, dtype=np.float64)
        answers = np.empty(truth.size)
        scratch = np.empty(n_cells + 1)
        width = max(8, math.isqrt(n_cells))  # blocks of the update kernel: O(sqrt n) per update
        bsum, bmul = np.empty(-(-n_cells // width)), np.empty(-(-n_cells // width))
        for i in np.arange(rounds):
            if kind == "ranges":
                _publish.range_answers(a, lo, hi, scratch, answers)
            else:
                answers = dense @ a
            # integer scores, exact in doubles: a neighbour moves each by at most 1, exactly
            # (a float difference could move it by 1 plus a rounding error)
            q = chooser.select(np.abs(np.rint(answers) - truth), random_state=rng)
            chosen[i] = q
            discrete_laplace(noise.scale, out=one, random_state=rng)
            measured[i] = truth[q] + float(one[0])
            if kind == "ranges":
                _publish.mw_ranges(a, lo[chosen[:i + 1]], hi[chosen[:i + 1]],
                                   measured[:i + 1], int(i), int(i) + 1, replay, float(total), width,
                                   bsum, bmul)
            else:
                for k in [i] + list(np.arange(i + 1)) * replay:
                    row = dense[chosen[k]]
                    a *= np.exp(row * ((measured[k] - row @ a) / (2.0 * total)))
                    a *= total / a.sum()
            average += a
        return total, average / rounds, a, chosen, measured

    # T selections (bounded-range) and T + 1 noisy counts (pure), each at most ``step``
    curve = Composed((BoundedRange(chooser.epsilon_effective).repeat(rounds),
                      PureDP(step).repeat(rounds + 1)))
    total, average, final, chosen, measured = release(
        draw, cost=Cost(epsilon, curve=curve), accountant=accountant, random_state=random_state,
        label="publish.mwem")
    return MWEMRelease(list(grid.edges), average.reshape(grid.shape), final.reshape(grid.shape),
                       total, chosen, measured.astype(np.int64), noise)
