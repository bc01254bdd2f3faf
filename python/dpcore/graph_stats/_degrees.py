"""Degree statistics: the sorted degree sequence and the degree distribution under edge-DP
(Hay, Li, Miklau, Jensen 2009), and the degree distribution under node-DP after a projection
to a public maximum degree (Day, Li, Lyu 2016).
"""
from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from dpcore import _graph_stats
from dpcore import _validation as check
from dpcore._docstrings import fill
from dpcore._floats import round_up as _round_up
from dpcore._release import Cost, release
from dpcore.mechanisms import MAX_DISCRETE_LAPLACE_SCALE, discrete_laplace
from dpcore.graph_stats import _docs as docs
from dpcore.graph_stats._input import _adjacency, _pairs

if TYPE_CHECKING:
    from numpy.typing import ArrayLike
    from dpcore.accounting import AccountantLike
    from dpcore.random import RandomStateLike

__all__ = ["degree_sequence", "degree_distribution", "degree_distribution_node_dp",
           "node_degree_sensitivity", "DEGREE_SENSITIVITY"]


#: L1 sensitivity of the sorted degree sequence under edge neighbours (one edge moves two
#: degrees by one each; sorting does not increase the L1 distance).
DEGREE_SENSITIVITY = 2


def _degree_plan(epsilon):
    """The discrete Laplace scale DEGREE_SENSITIVITY / epsilon, rounded up to a double."""
    epsilon = check.epsilon(epsilon)
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


@fill(graph=docs.GRAPH, simplify=docs.SIMPLIFY, random_state=docs.RANDOM_STATE,
      accountant=docs.ACCOUNTANT_EPSILON.format(label="graph.degree_sequence"), raises=docs.RAISES)
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
    {graph}
    epsilon : float
        Privacy parameter, > 0 (the noise scale 2 / epsilon must be <= 2**44).
    {simplify}
    {random_state}
    {accountant}

    Returns
    -------
    ndarray of int64, shape (n_nodes,)
        Nondecreasing, entries in [0, n_nodes - 1].

    {raises}

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


@fill(raises=docs.RAISES)
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

    {raises}

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


@fill(graph=docs.GRAPH, simplify=docs.SIMPLIFY, random_state=docs.RANDOM_STATE,
      accountant=docs.ACCOUNTANT_EPSILON.format(label="graph.degree_distribution_node_dp"), raises=docs.RAISES)
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
    {graph}
    max_degree : int
        D >= 1, public (never taken from the data).
    epsilon : float
        > 0 (the noise scale 2 D / epsilon must be <= 2**44).
    {simplify}
    {random_state}
    {accountant}

    Returns
    -------
    ndarray of int64, shape (max_degree + 1,)
        Entry d is the released number of vertices of projected degree d; they sum to n_nodes.

    {raises}

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
    epsilon = check.epsilon(epsilon)
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
