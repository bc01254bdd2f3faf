"""The k-star count under edge-DP: its local and smooth sensitivities (from the kernel's degree
pairs) and the release, by ladder functions or smooth sensitivity.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from dpcore import _graph_stats
from dpcore import _validation as check
from dpcore._docstrings import fill
from dpcore._floats import round_up as _round_up
from dpcore.random import Words64
from dpcore._release import Cost, release
from dpcore._smooth import _rounded_laplace
from dpcore.graph_stats import _docs as docs
from dpcore.graph_stats._input import _adjacency, _pair_frontier
from dpcore.graph_stats._ladder import (_BETA_SLACK, _INFLATE, _graph_beta, _ladder_plan,
                                       _Ladder)

if TYPE_CHECKING:
    from numpy.typing import ArrayLike
    from dpcore.accounting import AccountantLike
    from dpcore.random import RandomStateLike

__all__ = ["kstar_count", "kstar_local_sensitivity", "kstar_smooth_sensitivity", "MAX_STAR_SIZE"]


#: Largest k of :func:`kstar_count` (keeps C(n, k - 1) and its rounding error in range).
MAX_STAR_SIZE = 16


def _star_size(k):
    return check.integer(k, "k", minimum=2, maximum=MAX_STAR_SIZE)


def _star_pairs(indptr, indices):
    """(p, q) int64 arrays: over vertex pairs, x_i >= x_j their degrees not counting each other,
    the pairs (x_i, x_j) not dominated in both (kernel ``star_profile``)."""
    return _pair_frontier(_graph_stats.star_profile, indptr, indices)


def _star_reach(p, q, n, s):
    """(x, y): the two degrees after s edge changes spent on the larger one first (capped at
    n - 2), the rest on the smaller; the best split since C(., r) is convex."""
    cap = n - 2
    x = np.minimum(p + s, cap)
    y = np.minimum(q + np.maximum(0, s - (cap - p)), cap)
    return x, y


def _kstar_local_at(p, q, n, r, s):
    """LS^(s) of the k-star count (r = k - 1), exactly (Python integers)."""
    x, y = _star_reach(p, q, n, s)
    return max(math.comb(int(a), r) + math.comb(int(b), r) for a, b in zip(x, y))


def _comb_float(x, r):
    """C(x, r) for integer arrays x >= 0, as doubles (relative error <= (r + 1) 2**-53; exactly 0
    for x < r: one factor is 0)."""
    out = np.ones(x.shape, dtype=np.float64)
    for t in range(r):
        out *= (x - t).astype(np.float64)
    return out / float(math.factorial(r))


def _kstar_smooth_value(p, q, n, r, beta):
    """max_s exp(-beta s) LS^(s) in doubles: a scan over s in doubling blocks, stopped when
    exp(-beta s) LS^(infinity) (a bound on every later term) is at or below the best, or when s
    passes 2 (n - 2), beyond which LS^(s) no longer changes."""
    smax = 2 * (n - 2)
    top = 2.0 * math.comb(n - 2, r)
    best, start, width = 0.0, 0, 256
    while start <= smax:
        s = np.arange(start, min(start + width, smax + 1), dtype=np.int64)
        x, y = _star_reach(p[:, None], q[:, None], n, s[None, :])
        values = np.max(_comb_float(x, r) + _comb_float(y, r), axis=0)
        best = max(best, float(np.max(np.exp(-beta * s.astype(np.float64)) * values)))
        start += s.size
        width = min(2 * width, 2**16)  # blocks of at most 2**16 distances per frontier pair
        if math.exp(-beta * start) * top <= best * (1 - 2.0**-40):
            break
    return best


def kstar_local_sensitivity(G: ArrayLike, *, n_nodes: int, k: int, distance: int = 0,
                            simplify: bool = False) -> int:
    """LS^(s) of the k-star count: the largest local sensitivity over graphs within ``distance``
    edge changes of G.

    The k-star count is sum over vertices of C(d_v, k). Toggling the edge {i, j} changes it by
    C(x_i, k - 1) + C(x_j, k - 1), x_i = d_i - [i ~ j] being i's degree not counting j. s edge
    changes raise x_i + x_j by at most s (each x at most n - 2), and since C(., k - 1) is convex
    the best is to raise the larger first:

        LS^(s)(G) = max over pairs of C(min(x_i + s, n - 2), k - 1)
                    + C(min(x_j + max(0, s - (n - 2 - x_i)), n - 2), k - 1),  x_i >= x_j.

    Parameters
    ----------
    G, n_nodes, simplify
        As for :func:`kstar_count`.
    k : int
        Star size, 2 <= k <= ``MAX_STAR_SIZE``.
    distance : int, default=0
        s >= 0.

    Returns
    -------
    int
        LS^(s)(G), a Python int (it can exceed the int64 range).

    Privacy
    -------
    Not a release: reads the private graph and returns a data-dependent number that is not
    differentially private (use :func:`kstar_count`). Charges nothing.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore.graph_stats import kstar_local_sensitivity
    >>> path = np.array([[0, 1], [1, 2], [2, 3]])
    >>> kstar_local_sensitivity(path, n_nodes=4, k=2)   # adding {1, 3}: C(2, 1) + C(1, 1)
    3
    """
    n, indptr, indices = _adjacency(G, n_nodes, simplify)
    r = _star_size(k) - 1
    s = check.integer(distance, "distance", minimum=0)
    p, q = _star_pairs(indptr, indices)
    return _kstar_local_at(p, q, n, r, s)


def kstar_smooth_sensitivity(G: ArrayLike, *, n_nodes: int, k: int, beta: float,
                             simplify: bool = False) -> float:
    """The beta-smooth sensitivity of the k-star count, max_s exp(-beta s) LS^(s)(G).

    See :func:`kstar_local_sensitivity` for LS^(s); the maximum over s is a scan that stops as
    soon as no later term can exceed the best (at most 2 (n - 2) distances).

    Parameters
    ----------
    G, n_nodes, simplify
        As for :func:`kstar_count`.
    k : int
        2 <= k <= ``MAX_STAR_SIZE``.
    beta : float
        > 0.

    Returns
    -------
    float
        S*(G), rounded (relative error below (beta s + k + 2) 2**-53 at the maximising s).

    Privacy
    -------
    Not a release: a data-dependent number that is not differentially private (use
    :func:`kstar_count`). Charges nothing.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore.graph_stats import kstar_smooth_sensitivity
    >>> path = np.array([[0, 1], [1, 2], [2, 3]])
    >>> kstar_smooth_sensitivity(path, n_nodes=4, k=2, beta=10.0)
    3.0
    """
    n, indptr, indices = _adjacency(G, n_nodes, simplify)
    r = _star_size(k) - 1
    beta = _graph_beta(beta)
    p, q = _star_pairs(indptr, indices)
    return _kstar_smooth_value(p, q, n, r, beta)


def _kstar_bound(p, q, n, r, beta):
    """A beta-smooth upper bound, as :func:`_smooth_bound` (each term's relative error is below
    (beta' s + r + 3) 2**-53 <= 2**-42: the maximising s has beta' s <= r ln(n) + 2 beta')."""
    t = _kstar_smooth_value(p, q, n, r, beta - _BETA_SLACK)
    return _round_up(Fraction(t) * (1 + _INFLATE))


def _kstar_count(indptr, r):
    degrees, times = np.unique(np.diff(indptr), return_counts=True)
    return sum(int(c) * math.comb(int(d), r + 1) for d, c in zip(degrees, times))


def _kstar_rungs(p, q, n, r):
    """The ladder LS^(s), s = 0..2 (n - 2), of the k-star count (r = k - 1) as Python ints in an
    object array (``_kstar_local_at`` for every s at once; constant from s = 2 (n - 2) on)."""
    table = np.array([math.comb(x, r) for x in range(n - 1)], dtype=object)
    s = np.arange(2 * (n - 2) + 1, dtype=np.int64)
    rungs = np.zeros(s.size, dtype=object)
    for pi, qi in zip(p.tolist(), q.tolist()):
        x, y = _star_reach(pi, qi, n, s)
        rungs = np.maximum(rungs, table[x] + table[y])
    return rungs


@fill(graph=docs.GRAPH, parameters=docs.ladder_parameters("graph.kstar_count"), raises=docs.RAISES,
      edge_dp=docs.EDGE_DP)
def kstar_count(G: ArrayLike, *, n_nodes: int, k: int, epsilon: float,
                delta: float | None = None, method: str | None = None, simplify: bool = False,
                random_state: RandomStateLike = None,
                accountant: AccountantLike | None = None) -> int:
    """The number of k-stars of a graph (sum over vertices of C(degree, k)), with edge-DP: by
    ladder functions (pure epsilon-DP, the default) or by smooth sensitivity
    ((epsilon, delta)-DP, when ``delta`` is given).

    * ``method="ladder"`` (Zhang, Cormode, Procopiuc, Srivastava, Xiao 2015): as for
      :func:`triangle_count`, the exponential mechanism over the integers whose rungs are the
      k-star count's local sensitivities at distance t (:func:`kstar_local_sensitivity`).
    * ``method="smooth"``: f(G) + (S(G) / alpha) L rounded to an integer, L standard Laplace,
      alpha = epsilon / 2, S a beta-smooth upper bound on the local sensitivity
      (:func:`kstar_smooth_sensitivity`; Karwa, Raskhodnikova, Smith, Yaroslavtsev 2011).

    Both are clamped to [0, n C(n - 1, k)]. The global sensitivity is 2 C(n - 2, k - 1); the
    local one is about 2 C(d_max, k - 1).

    Parameters
    ----------
    {graph}
    k : int
        Star size, 2 <= k <= ``MAX_STAR_SIZE`` (16).
    {parameters}

    Returns
    -------
    int
        The released number of k-stars, in [0, n C(n - 1, k)].

    {raises}

    Privacy
    -------
    {edge_dp}

    Ladder (epsilon-DP): the k-star count's exact LS^(s) is a ladder function (LS^(0)(G') >=
    |f(G) - f(G')|, LS^(s)(G) <= LS^(s+1)(G') for neighbours), so the rung index has
    sensitivity 1 and the exponential mechanism with weight exp(-c t), c = epsilon / 2 rounded
    down, is 2c <= epsilon-DP, sampled exactly as for :func:`triangle_count`. Charged:
    ``epsilon``, once.

    Smooth ((epsilon, delta)-DP): same mechanism and calibration as :func:`triangle_count`
    (Laplace noise on a beta-smooth bound computed with beta - 2**-38 and inflated by 2**-40;
    alpha = epsilon / 2; beta from :class:`dpcore.robust.SmoothMedianPlan`), with the k-star
    count's exact LS^(s). Charged: ``(epsilon, delta)``, once.

    Rounding and clamping are post-processing, sampled exactly. Not constant-time.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore.graph_stats import kstar_count
    >>> ring = np.array([[i, (i + d) % 300] for i in range(300) for d in (1, 2)])
    >>> isinstance(kstar_count(ring, n_nodes=300, k=2, epsilon=1.0, random_state=0), int)
    True
    >>> isinstance(kstar_count(ring, n_nodes=300, k=2, epsilon=1.0, delta=1e-6,
    ...                        random_state=0), int)
    True
    """
    n, indptr, indices = _adjacency(G, n_nodes, simplify)
    r = _star_size(k) - 1
    method, plan = _ladder_plan(epsilon, delta, method)
    count = _kstar_count(indptr, r)
    p, q = _star_pairs(indptr, indices)
    top = n * math.comb(n - 1, r + 1)
    if method == "ladder":
        ladder = _Ladder(count, _kstar_rungs(p, q, n, r), plan.scale)

        def draw(rng):
            return min(max(ladder.draw(rng), 0), top)

        # plan.cost: epsilon_effective with the exponential mechanism's bounded-range curve
        return release(draw, cost=plan.cost, accountant=accountant,
                       random_state=random_state, label="graph.kstar_count")

    scale = Fraction(_kstar_bound(p, q, n, r, plan.beta)) / plan.alpha

    def draw_smooth(rng):
        if scale == 0:  # k > n - 1: no graph on n vertices has a k-star, the count is always 0
            return 0
        value = _rounded_laplace(count, scale, Words64(rng))
        return min(max(value, 0), top)

    return release(draw_smooth, cost=Cost(plan.epsilon, plan.delta), accountant=accountant,
                   random_state=random_state, label="graph.kstar_count")
