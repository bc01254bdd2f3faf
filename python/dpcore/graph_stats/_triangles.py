"""The triangle count under edge-DP: its local and smooth sensitivities (from the kernel's
Pareto frontier of common / one-sided neighbours over vertex pairs) and the release, by ladder
functions or smooth sensitivity.
"""
from __future__ import annotations

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

__all__ = ["triangle_count", "triangle_local_sensitivity", "triangle_smooth_sensitivity"]


def _frontier(indptr, indices):
    """(c, b) int64 arrays: for each number c of common neighbours some pair has, the largest
    number b of vertices adjacent to exactly one of such a pair (kernel ``pair_profile``),
    reduced to the pairs not dominated in both c and b."""
    return _pair_frontier(_graph_stats.pair_profile, indptr, indices)


def _local_at(c, b, n, s):
    """max over the frontier of min(c + floor((s + min(s, b)) / 2), n - 2)."""
    return int(np.max(np.minimum(c + (s + np.minimum(s, b)) // 2, n - 2)))


def _candidates(c, b, n, beta):
    """Distances s (per frontier pair, shape (k, 6)) among which max_s exp(-beta s) g(s) lies,
    g(s) = min(c + floor((s + min(s, b)) / 2), n - 2):

    * s <= min(b, n - 2 - c): g = c + s, and exp(-beta s)(c + s) is unimodal with its real
      maximum at 1 / beta - c (candidates: both ends and the two integers around it);
    * s = b + 2t: g = min(c + b + t, n - 2) (odd s - b repeat the value of the s before them),
      unimodal in t up to t = n - 2 - c - b with real maximum at 1 / (2 beta) - c - b.
    """
    cap = n - 2
    a_end = np.minimum(b, cap - c)
    t_end = cap - c - b  # >= 0: c + b <= n - 2 (the other vertices)
    star_a = np.clip(np.floor(1.0 / beta - c), 0, a_end).astype(np.int64)
    star_t = np.clip(np.floor(0.5 / beta - c - b), 0, t_end).astype(np.int64)
    return np.stack([
        np.zeros_like(c), a_end, star_a, np.minimum(star_a + 1, a_end),
        b + 2 * star_t, b + 2 * np.minimum(star_t + 1, t_end),
    ], axis=1)


def _smooth_value(c, b, n, beta):
    """max_s exp(-beta s) LS^(s), evaluated in doubles (each term within a relative
    (|beta s| + 2) 2**-53 of its exact value)."""
    s = _candidates(c, b, n, beta)
    g = np.minimum(c[:, None] + (s + np.minimum(s, b[:, None])) // 2, n - 2)
    return float(np.max(np.exp(-beta * s.astype(np.float64)) * g))


def triangle_local_sensitivity(G: ArrayLike, *, n_nodes: int, distance: int = 0,
                               simplify: bool = False) -> int:
    """LS^(s): the largest local sensitivity of the triangle count over graphs within ``distance``
    edge changes of G (s = 0: the local sensitivity of G itself).

    With c_ij the number of common neighbours of i and j and b_ij the number of other vertices
    adjacent to exactly one of them,

        LS^(s)(G) = max over pairs i != j of min(c_ij + floor((s + min(s, b_ij)) / 2), n - 2)

    (Nissim, Raskhodnikova, Smith 2007): toggling the edge {i, j} changes the count by c_ij, and
    one edge change makes a one-sided vertex common, two make a vertex adjacent to neither
    common. (Dropping the inner min gives an upper bound, exact once s >= b_ij.)

    Parameters
    ----------
    G, n_nodes, simplify
        As for :func:`triangle_count`.
    distance : int, default=0
        s >= 0.

    Returns
    -------
    int
        LS^(s)(G), at most n - 2.

    Privacy
    -------
    Not a release: reads the private graph and returns a data-dependent number that is not
    differentially private (use :func:`triangle_count`). Charges nothing.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore.graph_stats import triangle_local_sensitivity
    >>> k4 = np.array([[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]])
    >>> triangle_local_sensitivity(k4, n_nodes=4)
    2
    """
    n, indptr, indices = _adjacency(G, n_nodes, simplify)
    s = check.integer(distance, "distance", minimum=0)
    c, b = _frontier(indptr, indices)
    return _local_at(c, b, n, s)


def triangle_smooth_sensitivity(G: ArrayLike, *, n_nodes: int, beta: float,
                                simplify: bool = False) -> float:
    """The beta-smooth sensitivity of the triangle count, S*(G) = max_s exp(-beta s) LS^(s)(G).

    The smallest beta-smooth upper bound on the local sensitivity (Nissim, Raskhodnikova, Smith
    2007): S*(G) >= LS(G) and S*(G) <= exp(beta) S*(G') for graphs G, G' differing in one edge.
    The maximum over s is found exactly from a few candidate distances per (c, b) pair of the
    Pareto frontier computed by the kernel (see :func:`triangle_local_sensitivity`), in
    O(sum of squared degrees + n).

    Parameters
    ----------
    G, n_nodes, simplify
        As for :func:`triangle_count`.
    beta : float
        Smoothness, > 0.

    Returns
    -------
    float
        S*(G), rounded (relative error below (beta s + 2) 2**-53 at the maximising s).

    Privacy
    -------
    Not a release: a data-dependent number that is not differentially private (use
    :func:`triangle_count`). Charges nothing.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore.graph_stats import triangle_smooth_sensitivity
    >>> k4 = np.array([[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]])
    >>> triangle_smooth_sensitivity(k4, n_nodes=4, beta=10.0)   # the local sensitivity
    2.0
    """
    n, indptr, indices = _adjacency(G, n_nodes, simplify)
    beta = _graph_beta(beta)
    c, b = _frontier(indptr, indices)
    return _smooth_value(c, b, n, beta)


def _smooth_bound(c, b, n, beta):
    """A beta-smooth upper bound S >= LS: (1 + 2**-40) T rounded up, T the doubles' value of
    S*_{beta'} with beta' = beta - 2**-38. T is within a relative 2**-42 of S*_{beta'} (the
    maximising s has beta' s <= ln(n) + 2 beta' <= 2**11, as S* >= exp(-2 beta') and each term
    is below exp(-beta' s)(n - 2)), so S >= S*_{beta'} >= LS and
    S(G) <= e^{2**-39} S*_{beta'}(G) <= e^{2**-39 + beta'} S*_{beta'}(G') <= e^beta S(G')."""
    t = _smooth_value(c, b, n, beta - _BETA_SLACK)
    return _round_up(Fraction(t) * (1 + _INFLATE))


def _triangle_scale(c, b, n, plan):
    """The Laplace scale S / alpha (a rational) for the frontier of a graph."""
    return Fraction(_smooth_bound(c, b, n, plan.beta)) / plan.alpha


def _triangle_ladder(c, b, n):
    """sigma[j - 1] = min{s : LS^(s) >= j} for j = 1..n - 2 (nondecreasing int64): the ladder
    LS^(s) of the triangle count, stored by where it first reaches each value
    (LS^(s) = #{j : sigma_j <= s}). Per frontier pair the first s with
    c + floor((s + min(s, b)) / 2) >= j is max(0, j - c, 2 (j - c) - b)."""
    j = np.arange(1, n - 1, dtype=np.int64)
    sigma = np.full(j.size, np.iinfo(np.int64).max, dtype=np.int64)
    for ci, bi in zip(c.tolist(), b.tolist()):
        need = j - ci
        sigma = np.minimum(sigma, np.maximum(0, np.maximum(need, 2 * need - bi)))
    return sigma


def _triangle_rungs(sigma, n):
    """The ladder LS^(s), s = 0..2 (n - 2), of the triangle count from ``_triangle_ladder``
    (constant from s = 2 (n - 2) on)."""
    return np.searchsorted(sigma, np.arange(2 * (n - 2) + 1), side="right").astype(np.int64)


@fill(graph=docs.GRAPH, parameters=docs.ladder_parameters("graph.triangle_count"), raises=docs.RAISES,
      edge_dp=docs.EDGE_DP)
def triangle_count(G: ArrayLike, *, n_nodes: int, epsilon: float, delta: float | None = None,
                   method: str | None = None, simplify: bool = False,
                   random_state: RandomStateLike = None,
                   accountant: AccountantLike | None = None) -> int:
    """The number of triangles of a graph, with edge-DP: by ladder functions (pure epsilon-DP,
    the default) or by smooth sensitivity ((epsilon, delta)-DP, when ``delta`` is given).

    * ``method="ladder"`` (Zhang, Cormode, Procopiuc, Srivastava, Xiao 2015): the exponential
      mechanism over the integers with score -t on rung t. Rung 0 is the true count T; rung
      t >= 1 holds the integers r with L_{t-1} < |r - T| <= L_t, L_t = LS^(0) + ... + LS^(t-1),
      LS^(s) the local sensitivity at distance s (:func:`triangle_local_sensitivity`). So
      P(r) is proportional to exp(-epsilon t(r) / 2): most of the mass lies within a few LS
      of T, and the far tail falls off as for the global sensitivity n - 2.
    * ``method="smooth"``: T(G) + (S(G) / alpha) L rounded to an integer, with L standard
      Laplace, alpha = epsilon / 2 and S a beta-smooth upper bound on the local sensitivity
      (:func:`triangle_smooth_sensitivity`; Nissim, Raskhodnikova, Smith 2007, applied to
      triangles by Karwa et al. 2011).

    Both are clamped to [0, C(n, 3)]. On sparse graphs with few common neighbours both are far
    more accurate than noise for the global sensitivity n - 2.

    Parameters
    ----------
    {graph}
    {parameters}

    Returns
    -------
    int
        The released number of triangles, in [0, C(n, 3)].

    {raises}

    Privacy
    -------
    {edge_dp}

    Ladder (epsilon-DP): LS^(s) is a ladder function: LS^(0)(G') >= |T(G) - T(G')| and
    LS^(s)(G) <= LS^(s+1)(G') for neighbours, so an integer within L_t(G) of T(G) is within
    L_{t+1}(G') of T(G'): the rung index changes by at most 1. The exponential mechanism with
    weight exp(-c t), c = epsilon / 2 rounded down to a double, is then 2c <= epsilon-DP
    (Zhang et al. 2015). It is sampled exactly (no floating-point decision): rejection from the
    exact exponential mechanism of :func:`dpcore.exponential` over the at most n - 1 rungs where
    the ladder steps up, exact Bernoulli and geometric draws and integer arithmetic (see
    ``_Ladder``). Charged: ``epsilon``, once.

    Smooth ((epsilon, delta)-DP): S is beta-smooth: S(G) >= LS(G) >= |T(G) - T(G')| and
    S(G) <= e^beta S(G') for neighbours (computed with beta - 2**-38 and inflated by 2**-40,
    which absorbs the rounding of exp). The calibration is
    :class:`dpcore.robust.SmoothMedianPlan`'s Laplace one: alpha = epsilon / 2 bounds the slide
    (pure epsilon / 2), and beta is chosen so the dilation's log-ratio beta + |z| (e^beta - 1)
    is <= epsilon / 2 except with probability delta0 = delta e^(-epsilon / 2); together
    (epsilon, delta)-DP. (This beta is a little smaller than the often quoted
    epsilon / (2 ln(2 / delta)), for which this bound on the dilation's log-ratio exceeds
    epsilon / 2 by about beta.) Sampled exactly (rational arithmetic on lazily refined
    uniforms, ``dpcore._exact``). Charged: ``(epsilon, delta)``, once.

    Rounding and clamping are post-processing. Neither the samplers nor the counting are
    constant-time.

    References
    ----------
    [NRS07], [KRSY11], [ZCPSX15] (module docstring).

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore.graph_stats import triangle_count
    >>> ring = np.array([[i, (i + d) % 300] for i in range(300) for d in (1, 2)])
    >>> t = triangle_count(ring, n_nodes=300, epsilon=1.0, random_state=0)
    >>> s = triangle_count(ring, n_nodes=300, epsilon=1.0, delta=1e-6, random_state=0)
    >>> isinstance(t, int) and isinstance(s, int)
    True
    """
    n, indptr, indices = _adjacency(G, n_nodes, simplify)
    method, plan = _ladder_plan(epsilon, delta, method)
    count = _graph_stats.count_triangles(indptr, indices)
    c, b = _frontier(indptr, indices)
    top = n * (n - 1) * (n - 2) // 6
    if method == "ladder":
        ladder = _Ladder(count, _triangle_rungs(_triangle_ladder(c, b, n), n), plan.scale)

        def draw(rng):
            return min(max(ladder.draw(rng), 0), top)

        # plan.cost: epsilon_effective with the exponential mechanism's bounded-range curve
        return release(draw, cost=plan.cost, accountant=accountant,
                       random_state=random_state, label="graph.triangle_count")

    scale = _triangle_scale(c, b, n, plan)

    def draw_smooth(rng):
        value = _rounded_laplace(count, scale, Words64(rng))
        return min(max(value, 0), top)

    return release(draw_smooth, cost=Cost(plan.epsilon, plan.delta), accountant=accountant,
                   random_state=random_state, label="graph.triangle_count")
