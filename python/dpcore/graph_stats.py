"""Private graph statistics: degree sequence and distribution, triangle and k-star counts.

Every release here but :func:`degree_distribution_node_dp` protects the **edges** of a graph on
a **public vertex set**: two graphs are neighbours when they have the same vertices
``0..n_nodes-1`` and differ in exactly one edge (edge-DP). :func:`degree_distribution_node_dp`
protects a whole vertex's edges (node-DP on the same public vertex set). The vertex count
``n_nodes`` is a public, required argument, never taken from the edges (a vertex without an edge
is still a vertex).

* :func:`degree_sequence`: the sorted degree sequence with exact discrete Laplace noise, made
  consistent (nondecreasing) by isotonic regression, rounded and clamped to [0, n - 1]
  (Hay, Li, Miklau, Jensen 2009). :func:`degree_distribution` is its histogram.
* :func:`triangle_count`: the number of triangles, by default with pure epsilon-DP by ladder
  functions (Zhang, Cormode, Procopiuc, Srivastava, Xiao 2015: an exponential mechanism whose
  rungs are the local sensitivities at distance t), or with (epsilon, delta)-DP by noise scaled
  to a smooth upper bound on the local sensitivity (Nissim, Raskhodnikova, Smith 2007; Karwa,
  Raskhodnikova, Smith, Yaroslavtsev 2011); both usually far below the global sensitivity n - 2.
* :func:`degree_distribution_node_dp`: the degree distribution under **node**-DP, after an
  edge-addition projection to a public maximum degree D (Day, Li, Lyu 2016's projection; our
  sensitivity bound, :func:`node_degree_sensitivity`).
* :func:`kstar_count`: the number of k-stars (a vertex with k of its neighbours), likewise by
  ladder functions (default) or smooth sensitivity (Karwa et al. 2011).
* :func:`triangle_local_sensitivity`, :func:`triangle_smooth_sensitivity`,
  :func:`kstar_local_sensitivity`, :func:`kstar_smooth_sensitivity`: the data-dependent bounds
  themselves (not releases; for inspection and tests).

The counting loops (CSR adjacency, triangles, common neighbours of all pairs, degree pairs for
k-stars, the degree-bounded projection, pool adjacent violators) are the ``dpcore._graph_stats``
kernel. Releases check every argument first, then
charge the accountant once (``dpcore._release.release``), then draw; error messages name the
parameter and never quote a private value (the edge count, a degree).

References
----------
[HLMJ09] M. Hay, C. Li, G. Miklau, D. Jensen, "Accurate estimation of the degree distribution of
private networks", ICDM 2009.
[NRS07] K. Nissim, S. Raskhodnikova, A. Smith, "Smooth sensitivity and sampling in private data
analysis", STOC 2007.
[KRSY11] V. Karwa, S. Raskhodnikova, A. Smith, G. Yaroslavtsev, "Private analysis of graph
structure", VLDB 2011.
[DLL16] W.-Y. Day, N. Li, M. Lyu, "Publishing graph degree distribution with node differential
privacy", SIGMOD 2016.
[ZCPSX15] J. Zhang, G. Cormode, C. M. Procopiuc, D. Srivastava, X. Xiao, "Private release of
graph statistics using ladder functions", SIGMOD 2015.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from dpcore import _edges, _exact, _graph_stats
from dpcore import _validation as check
from dpcore._floats import round_up as _round_up
from dpcore.random import Words64
from dpcore._release import Cost, release
from dpcore._smooth import SmoothMedianPlan, _rounded_laplace
from dpcore.mechanisms import MAX_DISCRETE_LAPLACE_SCALE, discrete_laplace
from dpcore.selection import ExponentialMechanism, exponential_index

if TYPE_CHECKING:
    from numpy.typing import ArrayLike
    from dpcore.accounting import AccountantLike
    from dpcore.random import RandomStateLike

__all__ = [
    "degree_sequence",
    "degree_distribution",
    "triangle_count",
    "triangle_local_sensitivity",
    "triangle_smooth_sensitivity",
    "kstar_count",
    "kstar_local_sensitivity",
    "kstar_smooth_sensitivity",
    "degree_distribution_node_dp",
    "node_degree_sensitivity",
    "DEGREE_SENSITIVITY",
    "MAX_STAR_SIZE",
]

#: L1 sensitivity of the sorted degree sequence under edge neighbours (one edge moves two
#: degrees by one each; sorting does not increase the L1 distance).
DEGREE_SENSITIVITY = 2
#: Largest k of :func:`kstar_count` (keeps C(n, k - 1) and its rounding error in range).
MAX_STAR_SIZE = 16
# The smooth bound of triangle_count is computed with beta - _BETA_SLACK and inflated by
# 1 + _INFLATE: together they absorb the rounding of exp (see _smooth_bound).
_BETA_SLACK = 2.0**-38
_INFLATE = Fraction(1, 2**40)


# --------------------------------------------------------------------------- input

def _adjacency(G, n_nodes, simplify, name="G"):
    """(n, indptr, indices): the validated simple graph as sorted CSR rows."""
    n, u, v = _pairs(G, n_nodes, simplify, name)
    indptr, indices = _graph_stats.csr_adjacency(n, u, v)
    return n, indptr, indices


def _pairs(G, n_nodes, simplify, name="G"):
    """(n, u, v): the validated simple graph's edges u < v as int32 arrays sorted by (u, v)."""
    n = _edges.check_n_nodes(n_nodes)  # first: the vertex count is public
    if not isinstance(simplify, (bool, np.bool_)):
        raise TypeError(f"simplify must be a bool, got {type(simplify).__name__}")
    if _edges.is_networkx(G):
        labels, edges = _edges.networkx_edges(G, name)
        if len(labels) != n:  # the node set is public
            raise ValueError(f"n_nodes must equal the number of nodes of the networkx graph {name}")
    else:
        edges = _edges.edge_array(G, n, name)
    u, v = _edges.simple_edges(edges, n, simplify, name)
    return n, u, v


def _epsilon(epsilon):
    return check.epsilon(epsilon)


# --------------------------------------------------------------------------- degrees


def _degree_plan(epsilon):
    """The discrete Laplace scale DEGREE_SENSITIVITY / epsilon, rounded up to a double."""
    epsilon = _epsilon(epsilon)
    scale = _round_up(Fraction(DEGREE_SENSITIVITY) / Fraction(epsilon))
    if scale > MAX_DISCRETE_LAPLACE_SCALE:
        raise ValueError(f"epsilon must be >= 2 / MAX_DISCRETE_LAPLACE_SCALE = "
                         f"{2 / MAX_DISCRETE_LAPLACE_SCALE!r}, got {epsilon!r}")
    return epsilon, scale


def _consistent(noisy, n):
    """Post-processing of a noisy sorted degree sequence: the least-squares nondecreasing fit,
    rounded to integers (half to even) and clamped to [0, n - 1] (both keep it nondecreasing)."""
    fit = _graph_stats.isotonic_nondecreasing(np.ascontiguousarray(noisy, dtype=np.float64))
    return np.clip(np.rint(fit), 0, n - 1).astype(np.int64)


def degree_sequence(G: ArrayLike, *, n_nodes: int, epsilon: float, simplify: bool = False,
                    random_state: RandomStateLike = None,
                    accountant: AccountantLike | None = None) -> np.ndarray:
    """The sorted degree sequence of a graph, with edge-DP and ordering consistency.

    The degrees d_(1) <= ... <= d_(n) get independent exact discrete Laplace noise of scale
    2 / epsilon; the noisy sequence is then projected onto nondecreasing sequences (isotonic
    regression by pool adjacent violators), rounded to integers and clamped to [0, n - 1]
    (Hay, Li, Miklau, Jensen 2009). The projection uses the public knowledge that the true
    sequence is sorted and removes much of the noise where many vertices share a degree.

    Parameters
    ----------
    G : networkx.Graph or array_like of int, shape (m, 2)
        Undirected simple graph: an edge array of vertex ids in [0, n_nodes), or a networkx
        graph whose ``n_nodes`` nodes are the public vertex set (never one built from the edges:
        ``nx.Graph(edge_list)`` drops isolated vertices).
    n_nodes : int
        The public number of vertices, in [3, 2**26]; checked before the edges are read.
    epsilon : float
        Privacy parameter, > 0 (the noise scale 2 / epsilon must be <= 2**44).
    simplify : bool, default=False
        Drop self-loops and repeated edges instead of raising.
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's cryptographically secure generator. Seeds are for tests only.
    accountant : dpcore.Accountant, optional
        Charged ``epsilon`` once (label ``"graph.degree_sequence"``), after every argument is
        checked and before anything is drawn.

    Returns
    -------
    ndarray of int64, shape (n_nodes,)
        Nondecreasing, entries in [0, n_nodes - 1].

    Raises
    ------
    TypeError, ValueError
        Invalid arguments (naming the parameter; never quoting the edges or their number).
    BudgetExceeded
        The accountant cannot afford ``epsilon``; nothing is drawn.

    Privacy
    -------
    epsilon-edge-DP: neighbours are graphs on the same public vertex set ``0..n_nodes-1``
    differing in one edge. One edge changes two degrees by one each, so the sorted sequence has
    L1 sensitivity 2 (``DEGREE_SENSITIVITY``), and the discrete Laplace noise of scale
    2 / epsilon (rounded up) is exact. Isotonic regression, rounding and clamping are
    post-processing. The vertex count is public and not protected; this is **not** node-DP (one
    vertex's edges can move many degrees). Charged: ``epsilon``, once. The sampler is not
    constant-time.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore.graph_stats import degree_sequence
    >>> star = np.array([[0, i] for i in range(1, 50)])
    >>> seq = degree_sequence(star, n_nodes=50, epsilon=1.0, random_state=3)
    >>> seq.shape, bool(np.all(np.diff(seq) >= 0)), int(seq.max()) <= 49
    ((50,), True, True)
    """
    n, indptr, _ = _adjacency(G, n_nodes, simplify)
    epsilon, scale = _degree_plan(epsilon)
    degrees = np.sort(np.diff(indptr))

    def draw(rng):
        noise = np.asarray(discrete_laplace(scale, size=n, random_state=rng), dtype=np.int64)
        return _consistent(degrees + noise, n)

    return release(draw, cost=Cost(epsilon), accountant=accountant, random_state=random_state,
                   label="graph.degree_sequence")


def degree_distribution(G: ArrayLike, *, n_nodes: int, epsilon: float, simplify: bool = False,
                        random_state: RandomStateLike = None,
                        accountant: AccountantLike | None = None) -> np.ndarray:
    """The degree distribution (number of vertices of each degree 0..n-1), with edge-DP.

    The histogram of :func:`degree_sequence`'s consistent sequence: counts are nonnegative
    integers summing to ``n_nodes`` (Hay, Li, Miklau, Jensen 2009).

    Parameters
    ----------
    G, n_nodes, epsilon, simplify, random_state, accountant
        As for :func:`degree_sequence` (the accountant's label is
        ``"graph.degree_distribution"``).

    Returns
    -------
    ndarray of int64, shape (n_nodes,)
        Entry d is the released number of vertices of degree d.

    Raises
    ------
    TypeError, ValueError
        Invalid arguments (naming the parameter).
    BudgetExceeded
        The accountant cannot afford ``epsilon``; nothing is drawn.

    Privacy
    -------
    epsilon-edge-DP (graphs on the same public vertex set ``0..n_nodes-1`` differing in one
    edge), exactly as :func:`degree_sequence`, of which this is post-processing. The vertex
    count is public; not node-DP. Charged: ``epsilon``, once.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore.graph_stats import degree_distribution
    >>> ring = np.array([[i, (i + 1) % 40] for i in range(40)])
    >>> hist = degree_distribution(ring, n_nodes=40, epsilon=2.0, random_state=1)
    >>> int(hist.sum()), hist.shape
    (40, (40,))
    """
    n, indptr, _ = _adjacency(G, n_nodes, simplify)
    epsilon, scale = _degree_plan(epsilon)
    degrees = np.sort(np.diff(indptr))

    def draw(rng):
        noise = np.asarray(discrete_laplace(scale, size=n, random_state=rng), dtype=np.int64)
        return np.bincount(_consistent(degrees + noise, n), minlength=n).astype(np.int64)

    return release(draw, cost=Cost(epsilon), accountant=accountant, random_state=random_state,
                   label="graph.degree_distribution")


# --------------------------------------------------------------------------- triangles


def _frontier(indptr, indices):
    """(c, b) int64 arrays: for each number c of common neighbours some pair has, the largest
    number b of vertices adjacent to exactly one of such a pair (kernel ``pair_profile``),
    reduced to the pairs not dominated in both c and b."""
    degrees = np.diff(indptr)
    order = np.argsort(-degrees, kind="stable").astype(np.int64)
    maxb = _graph_stats.pair_profile(indptr, indices, order)
    c = np.flatnonzero(maxb >= 0).astype(np.int64)
    b = maxb[c]
    # keep (c, b) only when b exceeds the b of every larger c
    later = np.maximum.accumulate(b[::-1])[::-1]
    keep = np.ones(c.size, dtype=bool)
    keep[:-1] = b[:-1] > later[1:]
    return c[keep], b[keep]


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


def _graph_beta(beta):
    beta = check.positive(beta, "beta")
    return beta


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
    Not a release: a data-dependent number that is not differentially private. Charges nothing.

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


def _triangle_plan(epsilon, delta):
    """(epsilon, delta, alpha, beta) of the Laplace smooth-sensitivity mechanism."""
    if delta is None:
        raise TypeError("delta is required: the smooth-sensitivity release is (epsilon, delta)-DP "
                        "(Laplace noise on a smooth bound), e.g. delta=1e-6")
    plan = SmoothMedianPlan.calibrate(epsilon, delta)
    if plan.beta <= 2 * _BETA_SLACK:
        raise ValueError(f"epsilon and delta give too small a smoothness beta; use epsilon >= "
                         f"2**-20 and delta >= 1e-300, got epsilon={epsilon!r}, delta={delta!r}")
    return plan


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


def _ladder_plan(epsilon, delta, method):
    """(method, plan): "ladder" with the exponential mechanism's calibration (sensitivity 1 of
    the rung index), or "smooth" with the smooth-sensitivity plan."""
    pure = delta is None or (isinstance(delta, (int, float, np.floating)) and
                             not isinstance(delta, bool) and delta == 0)
    if method is None:
        method = "ladder" if pure else "smooth"
    if method not in ("ladder", "smooth"):
        raise ValueError(f"method must be 'ladder' or 'smooth', got {method!r}")
    if method == "smooth":
        return method, _triangle_plan(epsilon, delta)
    if not pure:
        raise ValueError(f"method='ladder' is pure epsilon-DP: pass delta=None (or 0), "
                         f"got delta={delta!r}")
    return method, ExponentialMechanism.calibrate(sensitivity=1, epsilon=_epsilon(epsilon),
                                                  method="exact")


# A rational above ln 2 (ln 2 = 0.693147180559945309417232121458176...).
_LN2_UP = Fraction(693147180559945309417232121459, 10**30)


def _triangle_rungs(sigma, n):
    """The ladder LS^(s), s = 0..2 (n - 2), of the triangle count from ``_triangle_ladder``
    (constant from s = 2 (n - 2) on)."""
    return np.searchsorted(sigma, np.arange(2 * (n - 2) + 1), side="right").astype(np.int64)


class _Ladder:
    """The ladder mechanism's law for one graph, prepared for :meth:`draw`.

    ``rungs`` holds I_s = LS^(s) for s = 0..S, constant from S on (int64 or Python ints). Rung 0
    is {count}; rung t >= 1 holds the integers at offset d, L_{t-1} < |d| <= L_t,
    L_u = I_0 + ... + I_{u-1}: m_t = 2 I_{t-1} of them, each of weight exp(-c t).

    m_t is nondecreasing, so m_t = sum over tau <= t of its jumps D_tau = m_tau - m_{tau-1} and
    the rung law is that of (tau, t), t >= tau, with weight D_tau exp(-c t): tau has weight
    D_tau exp(-c tau) / (1 - exp(-c)), and t - tau is geometric with ratio exp(-c). The
    centre takes the same form (D = 1, tau = 0) and is kept only when t = 0.

    tau is drawn by rejection from the exact exponential mechanism on utilities
    u_tau >= e ln(2) / c - tau, e = bit_length(D_tau) (so exp(c u_tau) >= 2^e exp(-c tau)),
    accepting with probability D_tau exp(-c (u_tau + tau)) = (D_tau / 2^e) (2^e exp(-gamma)),
    gamma = c (u_tau + tau) >= e ln 2: a uniform integer below 2^e compared with D_tau, and a
    uniform on (0, 2^-e] compared with exp(-gamma) (``_exact.uniform_below_exp``). Every step is
    exact. A round is accepted with probability above 1/10: D_tau / 2^e > 1/2, the rounding
    slack in gamma is ~2**-50 relative, and the centre's extension costs at most a factor 0.24
    (I_s >= 1 from s = k - 1 on for k-stars, s = 2 for triangles).
    """

    def __init__(self, count, rungs, scale):
        self.count = count
        self.scale = scale
        self.rungs = rungs
        self.last = len(rungs) - 1
        self.prefix = np.concatenate([np.zeros(1, dtype=rungs.dtype), np.cumsum(rungs)])
        jumps = 2 * np.diff(np.concatenate([np.zeros(1, dtype=rungs.dtype), rungs]))
        where = np.flatnonzero(jumps > 0)
        self.tau = np.concatenate([[0], where + 1]).astype(np.int64)  # m_t jumps at t = s + 1
        self.jump = [1] + [int(d) for d in jumps[where]]
        self.bits = [d.bit_length() for d in self.jump]
        lift = {e: _round_up(e * _LN2_UP / Fraction(scale)) for e in set(self.bits)}
        u = np.array([lift[e] for e in self.bits]) - self.tau.astype(np.float64)
        self.utility = np.nextafter(u, np.inf)  # >= lift - tau exactly (one step above RN)

    def _offset_end(self, u):
        """L_u = I_0 + ... + I_{u-1} (a Python int)."""
        if u <= self.last + 1:
            return int(self.prefix[u])
        return int(self.prefix[self.last + 1]) + (u - self.last - 1) * int(self.rungs[self.last])

    def draw(self, rng):
        if len(self.jump) == 1:  # every rung is empty: the count is constant on n vertices
            return self.count
        word = Words64(rng)
        c = Fraction(self.scale)
        while True:
            i = exponential_index(self.utility, self.scale, random_state=rng)
            e, tau = self.bits[i], int(self.tau[i])
            if _exact.uniform_integer(1 << e, word) >= self.jump[i]:
                continue
            lo, hi = _exact.positive_cell(word)
            gamma = c * (Fraction(float(self.utility[i])) + tau)
            if not _exact.uniform_below_exp(lo / 2**e, hi / 2**e, gamma, word):
                continue
            lo, hi = _exact.positive_cell(word)
            t = tau + _exact.floor_neglog_scaled(lo, hi, 1 / c, word)
            if i == 0:
                if t == 0:
                    return self.count
                continue
            width = int(self.rungs[min(t - 1, self.last)])
            pick = _exact.uniform_integer(2 * width, word)
            offset = self._offset_end(t - 1) + pick // 2 + 1
            return self.count + offset if pick % 2 else self.count - offset


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
    G : networkx.Graph or array_like of int, shape (m, 2)
        Undirected simple graph on the public vertex set (see :func:`degree_sequence`).
    n_nodes : int
        The public number of vertices, >= 3.
    epsilon : float
        > 0 (at most ``MAX_EPSILON``) for the ladder; in [2**-20, 2**10] for "smooth".
    delta : float or None, default=None
        None (or 0): pure epsilon-DP. In (0, 1) for "smooth": the probability with which the
        guarantee may fail.
    method : {"ladder", "smooth"} or None, default=None
        None picks "ladder" when ``delta`` is None or 0 and "smooth" otherwise.
    simplify : bool, default=False
        Drop self-loops and repeated edges instead of raising.
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's cryptographically secure generator. Seeds are for tests only.
    accountant : dpcore.Accountant, optional
        Charged once (label ``"graph.triangle_count"``): ``epsilon`` for the ladder,
        ``(epsilon, delta)`` for "smooth"; after every argument is checked and before anything
        is drawn.

    Returns
    -------
    int

    Raises
    ------
    TypeError, ValueError
        Invalid arguments (naming the parameter; never quoting the edges or their number).
    BudgetExceeded
        The accountant cannot afford the charge; nothing is drawn.

    Privacy
    -------
    Edge-DP: neighbours are graphs on the same public vertex set ``0..n_nodes-1`` differing in
    one edge. The vertex count is public; this is not node-DP.

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

        return release(draw, cost=Cost(plan.epsilon_effective), accountant=accountant,
                       random_state=random_state, label="graph.triangle_count")

    scale = _triangle_scale(c, b, n, plan)

    def draw_smooth(rng):
        value = _rounded_laplace(count, scale, Words64(rng))
        return min(max(value, 0), top)

    return release(draw_smooth, cost=Cost(plan.epsilon, plan.delta), accountant=accountant,
                   random_state=random_state, label="graph.triangle_count")


# --------------------------------------------------------------------------- k-stars


def _star_size(k):
    return check.integer(k, "k", minimum=2, maximum=MAX_STAR_SIZE)


def _star_pairs(indptr, indices):
    """(p, q) int64 arrays: over vertex pairs, x_i >= x_j their degrees not counting each other,
    the pairs (x_i, x_j) not dominated in both (kernel ``star_profile``)."""
    degrees = np.diff(indptr)
    order = np.argsort(-degrees, kind="stable").astype(np.int64)
    maxq = _graph_stats.star_profile(indptr, indices, order)
    p = np.flatnonzero(maxq >= 0).astype(np.int64)
    q = maxq[p]
    later = np.maximum.accumulate(q[::-1])[::-1]
    keep = np.ones(p.size, dtype=bool)
    keep[:-1] = q[:-1] > later[1:]
    return p[keep], q[keep]


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

    Privacy
    -------
    Not a release: a data-dependent number that is not differentially private (use
    :func:`kstar_count`). Charges nothing.

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

    Privacy
    -------
    Not a release: a data-dependent number that is not differentially private. Charges nothing.

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
    G : networkx.Graph or array_like of int, shape (m, 2)
        Undirected simple graph on the public vertex set (see :func:`degree_sequence`).
    n_nodes : int
        The public number of vertices, >= 3.
    k : int
        Star size, 2 <= k <= ``MAX_STAR_SIZE`` (16).
    epsilon : float
        > 0 (at most ``MAX_EPSILON``) for the ladder; in [2**-20, 2**10] for "smooth".
    delta : float or None, default=None
        None (or 0): pure epsilon-DP. In (0, 1) for "smooth".
    method : {"ladder", "smooth"} or None, default=None
        None picks "ladder" when ``delta`` is None or 0 and "smooth" otherwise.
    simplify : bool, default=False
        Drop self-loops and repeated edges instead of raising.
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's cryptographically secure generator. Seeds are for tests only.
    accountant : dpcore.Accountant, optional
        Charged once (label ``"graph.kstar_count"``): ``epsilon`` for the ladder,
        ``(epsilon, delta)`` for "smooth"; after every argument is checked and before anything
        is drawn.

    Returns
    -------
    int

    Raises
    ------
    TypeError, ValueError
        Invalid arguments (naming the parameter; never quoting the edges or their number).
    BudgetExceeded
        The accountant cannot afford the charge; nothing is drawn.

    Privacy
    -------
    Edge-DP: neighbours are graphs on the same public vertex set ``0..n_nodes-1`` differing in
    one edge. The vertex count is public; this is not node-DP.

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

        return release(draw, cost=Cost(plan.epsilon_effective), accountant=accountant,
                       random_state=random_state, label="graph.kstar_count")

    scale = Fraction(_kstar_bound(p, q, n, r, plan.beta)) / plan.alpha

    def draw_smooth(rng):
        if scale == 0:  # k > n - 1: no graph on n vertices has a k-star, the count is always 0
            return 0
        value = _rounded_laplace(count, scale, Words64(rng))
        return min(max(value, 0), top)

    return release(draw_smooth, cost=Cost(plan.epsilon, plan.delta), accountant=accountant,
                   random_state=random_state, label="graph.kstar_count")


# --------------------------------------------------------------------------- node-DP degrees


def node_degree_sensitivity(max_degree: int) -> int:
    """L1 sensitivity 2 D of the sorted degree sequence of the edge-addition projection under
    node neighbours (graphs on the same vertex set differing only in edges at one vertex).

    The projection takes the vertex pairs in lexicographic order (public) and keeps an edge when
    both ends have fewer than D kept edges. Run it on G and G' (differing only at vertex v) side
    by side and let delta be the difference of the kept degrees (G minus G').

    * An edge {a, b} away from v is in both graphs. It is decided differently only when an end,
      say a, is full (D kept edges) in one run and not in the other; keeping it in the run where
      a is not full moves delta_a one step towards 0 and delta_b by one, so
      sum over x != v of |delta_x| does not grow.
    * An edge {v, w} kept in one run only (P of them kept in G only, N in G' only) moves
      delta_v and delta_w by the same +-1, so sum over x != v of |delta_x| grows by at most 1.

    At the end sum |delta| <= (P + N) + |P - N| = 2 max(P, N) <= 2 D, since the edges at v kept
    in one run are at most v's kept degree D. Sorting does not increase the L1 distance. The
    bound is attained: v isolated in G and joined in G' to D vertices with no other edge. Checked
    exhaustively on all graphs with <= 6 vertices in the tests.

    Privacy
    -------
    Not a release: a function of the public D only.

    Examples
    --------
    >>> node_degree_sensitivity(10)
    20
    """
    return 2 * check.integer(max_degree, "max_degree", minimum=1)


def degree_distribution_node_dp(G: ArrayLike, *, n_nodes: int, max_degree: int, epsilon: float,
                                simplify: bool = False, random_state: RandomStateLike = None,
                                accountant: AccountantLike | None = None) -> np.ndarray:
    """The degree distribution of a graph's projection to maximum degree D, with node-DP.

    1. Projection (Day, Li, Lyu 2016's edge addition): the vertex pairs are taken in
       lexicographic order of their ids and an edge is kept when both ends have fewer than
       D = ``max_degree`` kept edges.
    2. The sorted degree sequence of the projection gets exact discrete Laplace noise of scale
       2 D / epsilon (:func:`node_degree_sensitivity`), is made nondecreasing by isotonic
       regression, rounded and clamped to [0, D] (Hay et al. 2009), and its histogram is
       returned.

    High-degree vertices are counted with their projected degree (at most D): choose D above
    most degrees, but the noise grows with D.

    Parameters
    ----------
    G : networkx.Graph or array_like of int, shape (m, 2)
        Undirected simple graph on the public vertex set (see :func:`degree_sequence`).
    n_nodes : int
        The public number of vertices, >= 3.
    max_degree : int
        D >= 1, public (never taken from the data).
    epsilon : float
        > 0 (the noise scale 2 D / epsilon must be <= 2**44).
    simplify : bool, default=False
        Drop self-loops and repeated edges instead of raising.
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's cryptographically secure generator. Seeds are for tests only.
    accountant : dpcore.Accountant, optional
        Charged ``epsilon`` once (label ``"graph.degree_distribution_node_dp"``), after every
        argument is checked and before anything is drawn.

    Returns
    -------
    ndarray of int64, shape (max_degree + 1,)
        Entry d is the released number of vertices of projected degree d; they sum to n_nodes.

    Raises
    ------
    TypeError, ValueError
        Invalid arguments (naming the parameter; never quoting the edges or their number).
    BudgetExceeded
        The accountant cannot afford ``epsilon``; nothing is drawn.

    Privacy
    -------
    epsilon-node-DP on a public vertex set: neighbours are graphs on the same vertices
    ``0..n_nodes-1`` that differ only in edges incident to one vertex (any of its edges added,
    removed or rewired; this covers "adding" a vertex that was isolated). The vertex count is
    public and not protected. The projection's sorted degree sequence has L1 sensitivity 2 D
    (:func:`node_degree_sensitivity`, proof there), so exact discrete Laplace noise of scale
    2 D / epsilon (rounded up) is epsilon-DP; isotonic regression, rounding, clamping and the
    histogram are post-processing. Node-DP implies edge-DP with the same epsilon. Charged:
    ``epsilon``, once. Not constant-time.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore.graph_stats import degree_distribution_node_dp
    >>> ring = np.array([[i, (i + 1) % 500] for i in range(500)])
    >>> hist = degree_distribution_node_dp(ring, n_nodes=500, max_degree=4, epsilon=1.0,
    ...                                    random_state=0)
    >>> hist.shape, int(hist.sum())
    ((5,), 500)
    """
    n, u, v = _pairs(G, n_nodes, simplify)
    sensitivity = node_degree_sensitivity(max_degree)
    bound = sensitivity // 2
    epsilon = _epsilon(epsilon)
    scale = _round_up(Fraction(sensitivity) / Fraction(epsilon))
    if scale > MAX_DISCRETE_LAPLACE_SCALE:
        raise ValueError(f"2 max_degree / epsilon must be <= MAX_DISCRETE_LAPLACE_SCALE = "
                         f"{MAX_DISCRETE_LAPLACE_SCALE!r}, got max_degree={bound!r}, "
                         f"epsilon={epsilon!r}")
    # degrees, noise and the consistent sequence (n each), the histogram (max_degree + 1)
    check.memory(8 * (3 * n + 2 * (bound + 1)), "n_nodes and max_degree")
    degrees = np.sort(_graph_stats.project_degrees(n, u, v, bound))

    def draw(rng):
        noise = np.asarray(discrete_laplace(scale, size=n, random_state=rng), dtype=np.int64)
        seq = _consistent(degrees + noise, bound + 1)
        return np.bincount(seq, minlength=bound + 1).astype(np.int64)

    return release(draw, cost=Cost(epsilon), accountant=accountant, random_state=random_state,
                   label="graph.degree_distribution_node_dp")
