"""Hierarchical random graphs: fitting, private release (PrivHRG) and synthetic graphs.

A hierarchical random graph (Clauset, Moore, Newman 2008) is a dendrogram whose leaves are the
vertices, with a connection probability p_r at every internal node r: two vertices are joined
independently with the probability of their lowest common ancestor. :func:`fit_hrg` samples
dendrograms by the Clauset-Moore-Newman Markov chain (kernel ``dpcore._hrg``) and keeps the most
likely one seen; :func:`release_hrg` is PrivHRG (Xiao, Chen, Tan 2014), an edge-differentially
private release of a dendrogram, noisy connection counts and a synthetic graph;
:func:`sample_graph` draws a graph from a dendrogram.

Graphs are undirected and simple: a networkx graph (optional dependency) or an ``(m, 2)`` integer
edge array with ``n_nodes``. Self-loops and repeated edges are errors unless ``simplify=True``,
which drops them.

References
----------
[CMN08] A. Clauset, C. Moore, M. E. J. Newman, "Hierarchical structure and the prediction of
missing links in networks", Nature 453 (2008) 98-101.
[XCT14] Q. Xiao, R. Chen, K.-L. Tan, "Differentially private network data release via structural
inference", KDD 2014, 911-920.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any
import functools
import math
import os
import sys
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from dpcore import _edges, _hrg
from dpcore import _validation as check
from dpcore._progress import Progress
from dpcore.mechanisms import MAX_DISCRETE_LAPLACE_SCALE, discrete_laplace
from dpcore.random import bitgen_handle, check_random_state
from dpcore._release import Cost, release
from dpcore._floats import round_up as _round_up
from dpcore.graph_stats import (  # statistics of a graph (edge-DP and node-DP)
    DEGREE_SENSITIVITY,
    MAX_STAR_SIZE,
    degree_distribution,
    degree_distribution_node_dp,
    degree_sequence,
    kstar_count,
    kstar_local_sensitivity,
    kstar_smooth_sensitivity,
    node_degree_sensitivity,
    triangle_count,
    triangle_local_sensitivity,
    triangle_smooth_sensitivity,
)

if TYPE_CHECKING:
    from numpy.typing import ArrayLike
    from dpcore.random import RandomStateLike
    from dpcore.accounting import AccountantLike

__all__ = [
    "Dendrogram",
    "HRGRelease",
    "fit_hrg",
    "release_hrg",
    "sample_graph",
    "log_likelihood_sensitivity",
    "DEFAULT_STEPS_PER_NODE",
    "MAX_NODES",
    "BYTES_PER_NODE",
    "check_n_nodes",
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

#: Default number of MCMC steps per vertex (public: the step count is ``1000 * n``), the lower end
#: of PrivHRG's stopping rule (between 1000 n and 3000 n steps).
DEFAULT_STEPS_PER_NODE = 1000
#: Largest vertex count accepted (checked before anything is built). The kernel indexes the
#: 2n - 1 tree nodes and the 2m edge slots with int32, which caps n below 2**30; the limit is set
#: lower, at 2**26, where a release already needs about 27 GB (``BYTES_PER_NODE``).
MAX_NODES = _edges.MAX_NODES
#: Peak memory of a release per vertex (measured: about 320 bytes for the chain's state, the
#: dendrogram and the synthetic graph, plus about 70 bytes per edge), rounded up. A vertex count
#: whose estimate ``BYTES_PER_NODE * n_nodes`` exceeds the machine's physical memory is refused
#: before anything is allocated. Only the public vertex count enters the check: an error that
#: depended on the private edge count would reveal it.
BYTES_PER_NODE = 400
_CHUNK = 2**20  # steps per kernel call (about 0.3 s)


# --------------------------------------------------------------------------- input


def _physical_memory():
    """Bytes of physical memory (None when the platform does not tell)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def check_n_nodes(n_nodes: int, name: str = "n_nodes") -> int:
    """The public vertex count as an int in [3, MAX_NODES] whose estimated memory
    (``BYTES_PER_NODE * n_nodes``) fits in physical memory; otherwise a ValueError naming
    ``name``. Checked before anything is allocated or any edge is read.

    Privacy
    -------
    Not a release: a check of the public vertex count only (never of the edges, whose count is
    private), so its errors reveal nothing about the graph.
    """
    n = _edges.check_n_nodes(n_nodes, name)
    need = BYTES_PER_NODE * n
    have = _physical_memory()
    if have is not None and need > have:
        raise ValueError(
            f"{name} = {n} needs about {need / 2**30:.1f} GiB ({BYTES_PER_NODE} bytes per vertex, "
            f"more per edge), more than this machine's {have / 2**30:.1f} GiB of physical memory"
        )
    return n


def _graph_arrays(G, n_nodes, simplify, name="G"):
    """(n, u, v, labels) for a networkx graph or an (m, 2) integer edge array."""
    if _edges.is_networkx(G):
        labels, edges = _edges.networkx_edges(G, name)
        if G.is_multigraph() and not simplify:
            raise ValueError(f"{name} is a multigraph: pass simplify=True to merge repeated edges")
        # The graph's node set is taken as public (documented in release_hrg): edge-DP protects
        # the edges only. n_nodes, when given, must agree with it.
        if n_nodes is not None and check_n_nodes(n_nodes) != len(labels):
            raise ValueError("n_nodes must equal the number of nodes of the networkx graph")
        n = len(labels)
    else:
        if n_nodes is None:
            raise TypeError(f"n_nodes is required when {name} is an edge array (the vertex set is public)")
        n = check_n_nodes(n_nodes)  # before touching the edges: the vertex count is public
        edges = _edges.edge_array(G, n, name)
        labels = None
    n = check_n_nodes(n, "the number of vertices")
    u, v = _edges.simple_edges(edges, n, simplify, name)
    return n, u, v, labels


# --------------------------------------------------------------------------- dendrogram


@dataclass(frozen=True, eq=False)
class Dendrogram:
    """A hierarchical random graph: a full binary tree over n leaves with a count per internal node.

    Node ids: leaves ``0..n-1`` (vertex i, labelled ``labels[i]`` when given), internal nodes
    ``n..2n-2``; row i of ``children`` and ``edge_counts`` belongs to internal node ``n + i``.

    Attributes
    ----------
    n_leaves : int
    children : ndarray of int64, shape (n - 1, 2)
    root : int
        Id of the root (an internal node).
    edge_counts : ndarray, shape (n - 1,)
        Edges whose lowest common ancestor is the node (E_r): exact integers for :func:`fit_hrg`,
        the noisy released counts (possibly negative or above ``n_pairs``) for :func:`release_hrg`.
    labels : tuple or None
        Original vertex labels (networkx input).
    log_likelihood : float or None
        Profile log-likelihood of the input graph (None for a private release: it depends on the
        private graph and is not released).
    private : bool
        True when the counts are a differentially private release.
    """

    n_leaves: int
    children: np.ndarray
    root: int
    edge_counts: np.ndarray
    labels: tuple | None = None
    log_likelihood: float | None = None
    private: bool = False
    info: dict = field(default_factory=dict)

    @functools.cached_property
    def _ranges(self):
        """(order, lo, hi): leaves in depth-first order, each node's leaves order[lo:hi]."""
        n = self.n_leaves
        ch = np.asarray(self.children)
        order = np.empty(n, dtype=np.int64)
        lo = np.zeros(2 * n - 1, dtype=np.int64)
        hi = np.zeros(2 * n - 1, dtype=np.int64)
        stack = [self.root]
        nxt = 0
        while stack:
            node = stack.pop()
            if node < 0:
                hi[~node] = nxt
                continue
            if node < n:
                order[nxt] = node
                lo[node] = nxt
                nxt += 1
                hi[node] = nxt
                continue
            lo[node] = nxt
            stack.append(~node)
            stack.append(int(ch[node - n, 1]))
            stack.append(int(ch[node - n, 0]))
        return order, lo, hi

    @property
    def leaf_order(self) -> np.ndarray:
        """Vertex ids in depth-first order (left child first): a seriation of the vertices."""
        return self._ranges[0].copy()

    @property
    def subtree_sizes(self) -> np.ndarray:
        """Number of leaves below each node (length 2n - 1)."""
        _, lo, hi = self._ranges
        return hi - lo

    @property
    def n_pairs(self) -> np.ndarray:
        """N_r = L_r R_r, the vertex pairs whose lowest common ancestor is each internal node."""
        size = self.subtree_sizes
        ch = np.asarray(self.children)
        return size[ch[:, 0]] * size[ch[:, 1]]

    @property
    def probabilities(self) -> np.ndarray:
        """Connection probability p_r = edge_counts / n_pairs clamped to [0, 1] per internal node."""
        return np.clip(np.asarray(self.edge_counts, dtype=float) / self.n_pairs, 0.0, 1.0)

    def _label(self, leaf):
        return self.labels[leaf] if self.labels is not None else int(leaf)

    def to_networkx(self) -> Any:
        """The tree as a networkx DiGraph (edges parent -> child). Leaves are the vertex labels;
        internal nodes are ``("internal", id)`` with attributes ``p``, ``edge_count``, ``n_pairs``."""
        import networkx as nx

        T = nx.DiGraph()
        n = self.n_leaves
        p, counts, pairs = self.probabilities, self.edge_counts, self.n_pairs

        def name(node):
            return self._label(node) if node < n else ("internal", int(node))

        for i in range(n - 1):
            T.add_node(name(n + i), p=float(p[i]), edge_count=counts[i].item(), n_pairs=int(pairs[i]))
        for i in range(n):
            T.add_node(name(i))
        for i, (a, b) in enumerate(np.asarray(self.children)):
            T.add_edge(name(n + i), name(int(a)))
            T.add_edge(name(n + i), name(int(b)))
        T.graph["root"] = name(self.root)
        return T

    def to_newick(self, precision: int = 4) -> str:
        """Newick string; internal nodes are labelled with p_r (``precision`` significant digits)."""
        n = self.n_leaves
        ch = np.asarray(self.children)
        p = self.probabilities

        def leaf(i):
            text = str(self._label(i))
            if any(c in text for c in " ,;:()[]'"):
                text = "'" + text.replace("'", "''") + "'"
            return text

        out = {}
        stack = [(self.root, False)]
        while stack:
            node, done = stack.pop()
            if node < n:
                out[node] = leaf(node)
            elif done:
                a, b = ch[node - n]
                out[node] = f"({out.pop(int(a))},{out.pop(int(b))}){p[node - n]:.{precision}g}"
            else:
                stack.append((node, True))
                stack.append((int(ch[node - n, 1]), False))
                stack.append((int(ch[node - n, 0]), False))
        return out[self.root] + ";"


def _dendrogram_from_state(state, labels, *, counts=None, log_likelihood=None, private=False, info=None):
    a = state.arrays()
    n = state.n
    children = np.stack([a["ch0"][n:], a["ch1"][n:]], axis=1).astype(np.int64)
    if counts is None:
        counts = a["E"][n:].copy()
    return Dendrogram(
        n_leaves=n, children=children, root=int(state.root_id), edge_counts=counts,
        labels=None if labels is None else tuple(labels), log_likelihood=log_likelihood,
        private=private, info=dict(info or {}),
    )


# --------------------------------------------------------------------------- sensitivity


def log_likelihood_sensitivity(n_nodes: int) -> float:
    """Delta_u: the largest change of the HRG log-likelihood when one edge is added or removed.

    One edge changes one E_r by one; |ell(e+1, N) - ell(e, N)| is largest at e = 0 and grows with N,
    and N_r <= N_max = floor(n/2) ceil(n/2), so Delta_u = ln N_max - (N_max - 1) ln(1 - 1/N_max)
    (Xiao, Chen, Tan, SIGMOD 2014, Section 4). Rounded up by a few units in the last place.

    Privacy
    -------
    Not a release: a function of the public vertex count only. It is the sensitivity the
    exponential mechanism of :func:`release_hrg` is calibrated with (edge neighbours).

    Examples
    --------
    >>> round(log_likelihood_sensitivity(34), 6)
    6.664695
    """
    n = check.integer(n_nodes, "n_nodes", minimum=3)
    N = (n // 2) * ((n + 1) // 2)
    value = math.log(N) - (N - 1) * math.log1p(-1.0 / N)
    return math.nextafter(math.nextafter(value * (1 + 2**-50), math.inf), math.inf)


# --------------------------------------------------------------------------- the chain


def _run_chain(state, n_steps, temperature, h, progress, *, keep_best=False, show_loglik=False, label="hrg"):
    """Run the chain in chunks of _CHUNK steps: the generator's lock is held for one chunk at a
    time (other threads can draw in between), and the progress bar is updated after each chunk
    (step counters only)."""
    done = 0
    with Progress(f"{label} steps", n_steps, enabled=progress) as bar:
        while done < n_steps:
            step = min(_CHUNK, n_steps - done)
            state.run(step, temperature, h, keep_best)
            done += step
            bar.update(done)
    if progress and show_loglik:   # fit_hrg only: a non-private fit of the caller's graph
        print(f"{label}: log-likelihood {state.log_likelihood:.4f}", file=sys.stderr, flush=True)


def _steps(n_steps, n):
    if n_steps is None:
        return DEFAULT_STEPS_PER_NODE * n
    return check.integer(n_steps, "n_steps", minimum=0)


def fit_hrg(G: ArrayLike, *, n_nodes: int | None = None, n_steps: int | None = None,
            simplify: bool = False, random_state: RandomStateLike = None, progress: bool = False
            ) -> Dendrogram:
    """Fit a hierarchical random graph (not private): the most likely dendrogram the chain visits.

    Runs the Clauset-Moore-Newman Markov chain at temperature 1 (stationary law proportional to
    the likelihood) from a random dendrogram and returns the highest-likelihood state it visits
    (as Clauset's fitHRG does), with maximum-likelihood probabilities p_r = E_r / N_r.

    Parameters
    ----------
    G : networkx.Graph or array_like of int, shape (m, 2)
        Undirected simple graph; an edge array needs ``n_nodes``.
    n_nodes : int, optional
        Number of vertices (required with an edge array; vertex ids 0..n_nodes-1). At least 3.
    n_steps : int, optional
        MCMC steps; default ``DEFAULT_STEPS_PER_NODE * n`` (1000 n).
    simplify : bool, default=False
        Drop self-loops and repeated edges instead of raising.
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's cryptographically secure generator. Seeds are for tests only.
    progress : bool, default=False
        Show a progress bar of the steps on stderr, then the log-likelihood of the dendrogram
        found (fit_hrg is not private: the graph is the caller's own).

    Returns
    -------
    Dendrogram
        With exact edge counts and ``log_likelihood``.

    Raises
    ------
    TypeError, ValueError
        For a directed graph, a malformed edge array, self-loops or repeated edges (unless
        ``simplify``), or fewer than 3 vertices.

    Privacy
    -------
    None: the result is computed from the graph without noise. Use :func:`release_hrg` for a
    differentially private release.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore.graph import fit_hrg
    >>> edges = np.array([[0, 1], [1, 2], [2, 3], [3, 0]])   # the 4-cycle
    >>> d = fit_hrg(edges, n_nodes=4, n_steps=2000, random_state=1)
    >>> d.log_likelihood   # ((0, 2), (1, 3)): no edge inside a pair, all four across: p = 0, 0, 1
    0.0
    >>> sorted(d.probabilities.tolist())
    [0.0, 0.0, 1.0]
    """
    n, u, v, labels = _graph_arrays(G, n_nodes, simplify)
    steps = _steps(n_steps, n)
    h = bitgen_handle(random_state)
    state = _hrg.HRGState(n, u, v)
    state.random_tree(h)
    _run_chain(state, steps, 1.0, h, progress, keep_best=True, show_loglik=True, label="fit_hrg")
    state.restore_best()
    return _dendrogram_from_state(
        state, labels, log_likelihood=float(state.log_likelihood),
        info={"n_steps": steps, "n_edges": int(u.size)},
    )


# --------------------------------------------------------------------------- sampling


def _starts(sizes):
    """Where each of consecutive ranges of the given sizes starts (0, then the running sums)."""
    return np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)


def _owners(starts, values):
    """Index i of the range [starts[i], starts[i + 1]) holding each value (an empty range shares
    its start with the next one, so the last range starting at or below the value is its owner)."""
    return np.searchsorted(starts, values, side="right") - 1


def _distinct(rng, totals, counts):
    """For each i, counts[i] distinct uniform integers in [0, totals[i]) (counts <= totals), as
    (owner index, value) arrays sorted by owner and value: repeated rounds of draws with
    replacement, keeping first occurrences (the set of the first k distinct values of an i.i.d.
    uniform sequence is a uniform k-subset). A round draws exactly what each owner still lacks, and
    only the values of owners still short are merged again, so the work is O(total draws)."""
    totals = np.asarray(totals, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.int64)
    base = _starts(totals)
    done = []
    kept = np.empty(0, dtype=np.int64)  # values of the owners still short
    need = counts.copy()
    active = np.flatnonzero(need > 0)
    while active.size:
        owner = np.repeat(active, need[active])
        draws = rng.integers(0, totals[owner], dtype=np.int64) + base[owner]
        kept = _edges.unique(np.concatenate([kept, draws]))
        own = _owners(base, kept)
        need[active] = counts[active] - np.bincount(own, minlength=totals.size)[active]
        full = need[own] == 0
        done.append(kept[full])
        kept = kept[~full]
        active = active[need[active] > 0]
    values = np.sort(np.concatenate(done)) if done else np.empty(0, dtype=np.int64)
    owner = _owners(base, values)
    return owner, values - base[owner]


def _complements(totals, owner, values, nodes):
    """For each node in ``nodes`` (sorted), the values of [0, totals[node]) not among its entries
    in (owner, values), as (owner, value) arrays: one mask over the nodes' ranges, O(sum of
    their totals)."""
    totals = np.asarray(totals, dtype=np.int64)
    sizes = totals[nodes]
    start = _starts(sizes)
    slot = np.full(totals.size, -1, dtype=np.int64)
    slot[nodes] = np.arange(nodes.size)
    mine = slot[owner] >= 0
    keep = np.ones(int(sizes.sum()), dtype=bool)
    keep[start[slot[owner[mine]]] + values[mine]] = False
    flat = np.flatnonzero(keep)
    which = _owners(start, flat)
    return nodes[which], flat - start[which]


def sample_graph(dendrogram: Dendrogram, *, random_state: RandomStateLike = None,
                 as_networkx: bool = False) -> Any:
    """Draw a graph from a hierarchical random graph.

    Each vertex pair is an edge independently with probability p_r of its lowest common ancestor
    r. Drawn per internal node: K_r ~ Binomial(N_r, p_r), then K_r distinct pairs uniformly from
    the N_r pairs across r's two subtrees (the complement is drawn when K_r > N_r / 2). Cost
    O(n + edges drawn), not O(n^2).

    Parameters
    ----------
    dendrogram : Dendrogram
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's cryptographically secure generator. Seeds are for tests only.
    as_networkx : bool, default=False
        Return a networkx Graph on the dendrogram's labels instead of an edge array.

    Returns
    -------
    ndarray of int64, shape (k, 2), or networkx.Graph
        Edges (u, v) with u < v as vertex ids, sorted.

    Privacy
    -------
    Post-processing: sampling from a released (private) dendrogram keeps its guarantee and spends
    nothing.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore.graph import Dendrogram, sample_graph
    >>> d = Dendrogram(n_leaves=3, children=np.array([[0, 1], [3, 2]]), root=4,
    ...                edge_counts=np.array([1, 2]))
    >>> sample_graph(d, random_state=0).tolist()   # every probability is 1
    [[0, 1], [0, 2], [1, 2]]
    """
    if not isinstance(dendrogram, Dendrogram):
        raise TypeError(f"dendrogram must be a Dendrogram, got {type(dendrogram).__name__}")
    rng = check_random_state(random_state)
    n = dendrogram.n_leaves
    order, lo, _ = dendrogram._ranges
    ch = np.asarray(dendrogram.children, dtype=np.int64)
    size = dendrogram.subtree_sizes
    left, right = size[ch[:, 0]], size[ch[:, 1]]
    total = left * right
    k = rng.binomial(total, dendrogram.probabilities).astype(np.int64)
    flip = k > total // 2
    pick = np.where(flip, total - k, k)
    owner, idx = _distinct(rng, total, pick)
    direct = ~flip[owner]
    c_owner, c_idx = _complements(total, owner, idx, np.flatnonzero(flip & (k > 0)))
    owner = np.concatenate([owner[direct], c_owner])
    idx = np.concatenate([idx[direct], c_idx])
    i, j = np.divmod(idx, right[owner])
    a = order[lo[ch[owner, 0]] + i]
    b = order[lo[ch[owner, 1]] + j]
    edges = np.stack([np.minimum(a, b), np.maximum(a, b)], axis=1)
    edges = edges[np.lexsort((edges[:, 1], edges[:, 0]))] if edges.size else edges.reshape(0, 2)
    if not as_networkx:
        return edges
    import networkx as nx

    out = nx.Graph()
    out.add_nodes_from(dendrogram._label(x) for x in range(n))
    out.add_edges_from((dendrogram._label(x), dendrogram._label(y)) for x, y in edges)
    return out


# --------------------------------------------------------------------------- PrivHRG


@dataclass(frozen=True, eq=False)
class HRGRelease:
    """Result of :func:`release_hrg`.

    Attributes
    ----------
    dendrogram : Dendrogram
        The sampled dendrogram with noisy edge counts (``private=True``).
    edges : ndarray of int64, shape (k, 2)
        The synthetic graph sampled from it (vertex ids).
    epsilon, epsilon_dendrogram, epsilon_counts : float
        Total budget and its split (eps1 for the dendrogram, eps2 for the counts).
    temperature : float
        The chain's temperature eps1 / (2 Delta_u).
    sensitivity : float
        Delta_u, the log-likelihood's sensitivity.
    n_steps : int
        MCMC steps run (public).
    guarantee : str
        What is proven about this release (see :func:`release_hrg`, Privacy).

    Privacy
    -------
    Edge-DP on a public vertex set. Proven: the noisy edge counts are exactly
    ``epsilon_counts``-DP given the dendrogram. Not proven: the dendrogram's
    ``epsilon_dendrogram``-DP holds for the MCMC chain's stationary law only, not for the finite
    run of ``n_steps`` steps that produced it.
    """

    dendrogram: Dendrogram
    edges: np.ndarray
    epsilon: float
    epsilon_dendrogram: float
    epsilon_counts: float
    temperature: float
    sensitivity: float
    n_steps: int

    @property
    def guarantee(self) -> str:
        return (
            f"edge-DP (graphs on the same public vertex set differing in one edge): the noisy "
            f"edge counts are exactly {self.epsilon_counts:.6g}-DP given the dendrogram; the "
            f"dendrogram's {self.epsilon_dendrogram:.6g}-DP holds for the MCMC chain's stationary "
            f"law only, not proven for the finite run of {self.n_steps} steps"
        )

    def to_networkx(self) -> Any:
        """The synthetic graph as a networkx Graph on the original labels."""
        import networkx as nx

        d = self.dendrogram
        out = nx.Graph()
        out.add_nodes_from(d._label(x) for x in range(d.n_leaves))
        out.add_edges_from((d._label(x), d._label(y)) for x, y in self.edges)
        return out


def release_hrg(G: ArrayLike, *, epsilon: float, epsilon_split: float = 0.5,
                n_nodes: int | None = None, n_steps: int | None = None, simplify: bool = False,
                random_state: RandomStateLike = None, accountant: AccountantLike | None = None,
                progress: bool = False) -> HRGRelease:
    """Release a hierarchical random graph and a synthetic graph with edge-DP (PrivHRG).

    1. A dendrogram is drawn by the exponential mechanism with utility log L(T) (sensitivity
       Delta_u, :func:`log_likelihood_sensitivity`), i.e. from the law proportional to
       exp(eps1 log L(T) / (2 Delta_u)), approximately, by ``n_steps`` steps of the
       Clauset-Moore-Newman chain at temperature eps1 / (2 Delta_u) from a random start.
    2. Each internal node's edge count E_r gets exact discrete Laplace noise of scale 1 / eps2.
    3. A synthetic graph is drawn from the noisy dendrogram (:func:`sample_graph`).

    Parameters
    ----------
    G : networkx.Graph or array_like of int, shape (m, 2)
        Undirected simple graph; an edge array needs ``n_nodes``. A networkx graph's node set
        (its isolated vertices included) is taken as public: pass a graph whose nodes are the
        public vertex set, never one built from the edges (``nx.Graph(edge_list)`` drops the
        isolated vertices and reveals which vertices have an edge).
    epsilon : float
        Total budget, > 0.
    epsilon_split : float, default=0.5
        Fraction of ``epsilon`` for the dendrogram (eps1), in (0, 1); the rest (eps2) for the
        counts. The paper's released code takes the two as separate parameters; an equal split is
        our default.
    n_nodes : int, optional
        Number of vertices, public (required with an edge array: vertex ids 0..n_nodes-1, never
        taken from the edges, so a vertex without an edge is still a vertex). At most
        ``MAX_NODES`` and, at ``BYTES_PER_NODE`` bytes per vertex, within physical memory
        (checked first; a ValueError naming n_nodes otherwise). With a networkx graph it must
        equal the number of nodes.
    n_steps : int, optional
        MCMC steps, a public parameter; default ``DEFAULT_STEPS_PER_NODE * n`` (1000 n). Never
        chosen from the likelihood trace.
    simplify : bool, default=False
        Drop self-loops and repeated edges instead of raising.
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's cryptographically secure generator. Seeds are for tests only.
    accountant : Accountant, optional
        Charged ``epsilon`` (label ``"release_hrg"``) before anything is drawn.
    progress : bool, default=False
        Show a progress bar on stderr: steps done, elapsed time and time left (never the
        likelihood, which is private). The CLI turns it on (``--quiet`` turns it off).

    Returns
    -------
    HRGRelease

    Raises
    ------
    TypeError, ValueError
        Invalid arguments (naming the parameter).
    BudgetExceeded
        If the accountant cannot afford ``epsilon``; nothing is drawn.

    Privacy
    -------
    Edge neighbours: two graphs on the same public vertex set that differ in one edge. What is
    proven, exactly:

    * the noisy edge counts are eps2-DP given the dendrogram (eps2 = ``(1 - epsilon_split) *
      epsilon``; the vector (E_r) has L1 sensitivity 1 and the discrete Laplace noise is exact);
    * the dendrogram is eps1-DP (eps1 = ``epsilon_split * epsilon``) **only if drawn from the
      chain's stationary law** (the exponential mechanism). The finite run of ``n_steps`` steps
      from a random start that is actually made has **no proven guarantee**: its output law
      approaches the stationary one as the chain mixes, and nothing here certifies that it has.
      More steps move it closer.

    So the full ``epsilon`` = eps1 + eps2 is a proven bound for the idealised mechanism, not for
    this finite chain. The synthetic graph is post-processing. ``epsilon`` is charged to the
    accountant (once, after every argument is checked); ``HRGRelease.guarantee`` and the CLI
    print this statement with the release. The step count is public and not chosen from the private likelihood trace.
    The Metropolis test uses 53-bit uniforms and floating-point log-likelihoods (relative error
    near 1e-12), a negligible departure from exp(T log L). Run time depends on the graph (the
    chain's moves cost the size of a subtree); it is not constant-time.

    Notes
    -----
    Vertex count n >= 3. The counts of the released dendrogram are noisy integers (they can be
    negative or exceed N_r); probabilities are clamped to [0, 1]. The private log-likelihood is
    not released (``dendrogram.log_likelihood`` is None). The authors' optional subtree collapse
    heuristic is not implemented.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore.graph import release_hrg
    >>> ring = np.array([[i, (i + 1) % 20] for i in range(20)])
    >>> rel = release_hrg(ring, n_nodes=20, epsilon=1.0, n_steps=20000, random_state=7)
    >>> rel.edges.shape[1], rel.dendrogram.private, rel.epsilon_counts
    (2, True, 0.5)
    """
    epsilon = check.epsilon(epsilon)
    split = check.probability(epsilon_split, "epsilon_split")
    n, u, v, labels = _graph_arrays(G, n_nodes, simplify)
    steps = _steps(n_steps, n)
    eps1 = epsilon * split
    eps2 = epsilon - eps1
    du = log_likelihood_sensitivity(n)
    temperature = math.nextafter(eps1 / (2.0 * du), 0.0)  # rounded down: never hotter than eps1
    if not (temperature > 0 and eps2 > 0):
        raise ValueError(f"epsilon_split leaves no budget for one stage: eps1={eps1!r}, eps2={eps2!r}")
    scale = _round_up(1 / Fraction(eps2))  # rounded up: never less noise than 1 / eps2
    if scale > MAX_DISCRETE_LAPLACE_SCALE:
        raise ValueError(
            f"epsilon * (1 - epsilon_split) = {eps2!r} is too small: the count noise scale 1 / eps2 "
            f"must be <= {MAX_DISCRETE_LAPLACE_SCALE!r}"
        )

    def draw(rng):  # one generator for every stage
        h = bitgen_handle(rng)
        state = _hrg.HRGState(n, u, v)
        state.random_tree(h)
        _run_chain(state, steps, temperature, h, progress, label="release_hrg")
        exact = state.arrays()["E"][n:]
        noise = discrete_laplace(scale, size=exact.size, random_state=rng)
        noisy = exact + np.asarray(noise, dtype=np.int64)
        del exact
        d = _dendrogram_from_state(
            state, labels, counts=noisy, private=True,
            info={"epsilon": epsilon, "n_steps": steps, "temperature": temperature},
        )
        del state
        return d, sample_graph(d, random_state=rng)

    d, edges = release(draw, cost=Cost(epsilon), accountant=accountant, random_state=random_state,
                       label="release_hrg")
    return HRGRelease(
        dendrogram=d, edges=edges, epsilon=epsilon, epsilon_dendrogram=eps1, epsilon_counts=eps2,
        temperature=temperature, sensitivity=du, n_steps=steps,
    )
