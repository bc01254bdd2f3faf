"""A discrete graphical model on a junction tree: its structure from a set of cliques, exact
marginals by belief propagation (in log space), marginals of any attribute set, and sampling.

The model is p(x) proportional to exp(sum_C theta_C(x_C)) over the junction tree's cliques C.
Everything here is post-processing: it reads parameters fitted to released noisy counts.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Collection, Iterable, Sequence

import numpy as np

from dpcore.synth._tree import sample_conditional

__all__ = ["JunctionTree", "expand", "marginalise", "model_cells"]

#: Separator masses at or below this are treated as 0 when a marginal is contracted.
TINY_MASS = 1e-300


def expand(values: np.ndarray, variables: Collection[int], target: Sequence[int],
           sizes: Sequence[int]) -> np.ndarray:
    """``values`` (axes: ``variables``, ascending) as an array broadcastable over ``target``
    (ascending, a superset)."""
    shape = [sizes[v] if v in variables else 1 for v in target]
    return np.reshape(values, shape)


def marginalise(values: np.ndarray, variables: Sequence[int], keep: Collection[int]
                ) -> np.ndarray:
    """Sum of ``values`` (axes: ``variables``) over the axes not in ``keep`` (order kept)."""
    axes = tuple(i for i, v in enumerate(variables) if v not in keep)
    return values.sum(axis=axes) if axes else values


def _logsumexp(values, axes) -> np.ndarray:
    """log sum exp over ``axes`` with the axes kept (length 1)."""
    if not axes:
        return values
    top = values.max(axis=axes, keepdims=True)
    return np.log(np.exp(values - top).sum(axis=axes, keepdims=True)) + top


def _triangulate(sizes, cliques) -> list:
    """Maximal cliques of a chordal graph containing every clique: greedy elimination, each
    step the variable whose elimination clique has the fewest cells (ties: fewest fill edges,
    then the lowest index)."""
    d = len(sizes)
    neighbours: list[set] = [set() for _ in range(d)]
    for clique in cliques:
        for v in clique:
            neighbours[v].update(u for u in clique if u != v)
    remaining = set(range(d))
    eliminated = []
    while remaining:
        def cost(v):
            nb = neighbours[v]
            fill = sum(1 for a in nb for b in nb if a < b and b not in neighbours[a])
            return (math.prod(sizes[u] for u in nb) * sizes[v], fill, v)

        v = min(remaining, key=cost)
        nb = neighbours[v]
        eliminated.append(tuple(sorted(nb | {v})))
        for a in nb:
            neighbours[a].update(nb - {a})
            neighbours[a].discard(v)
        remaining.discard(v)
    sets = sorted({frozenset(c) for c in eliminated}, key=len, reverse=True)
    maximal: list = []
    for s in sets:
        if not any(s <= m for m in maximal):
            maximal.append(s)
    return sorted(tuple(sorted(m)) for m in maximal)


def model_cells(sizes: Sequence[int], cliques: Iterable[Sequence[int]]) -> int:
    """Cells of the junction tree over ``cliques`` (what the model stores)."""
    return sum(math.prod(sizes[v] for v in c) for c in _triangulate(sizes, cliques))


@dataclass(eq=False)
class JunctionTree:
    """The junction tree of a set of cliques and the model's log-potentials on it.

    Attributes
    ----------
    sizes : tuple of int
    cliques : list of tuple
        The maximal cliques (ascending variables), after triangulation.
    edges : list of (int, int)
        Tree edges between clique positions (a maximum spanning tree on shared variables).
    order : list of int
        Breadth-first order from clique 0 (the root); ``parent[c]`` its parent (-1: root).
    theta : list of ndarray
        Log-potential of each clique (axes: its variables).
    """

    sizes: tuple
    cliques: list
    edges: list
    order: list
    parent: list
    theta: list
    _cached: tuple | None = None

    @classmethod
    def build(cls, sizes: Sequence[int], cliques: Iterable[Sequence[int]]) -> JunctionTree:
        sizes = tuple(int(s) for s in sizes)
        nodes = _triangulate(sizes, cliques)
        k = len(nodes)
        # Kruskal on |shared variables| (zero-weight edges join the components): a junction
        # tree of the maximal cliques of a chordal graph
        pairs = sorted(((len(set(nodes[i]) & set(nodes[j])), i, j)
                        for i in range(k) for j in range(i + 1, k)), key=lambda t: (-t[0], t[1:]))
        component = list(range(k))

        def find(i):
            while component[i] != i:
                component[i] = component[component[i]]
                i = component[i]
            return i

        edges = []
        for _, i, j in pairs:
            ri, rj = find(i), find(j)
            if ri != rj:
                component[ri] = rj
                edges.append((i, j))
        neighbours: list[list] = [[] for _ in range(k)]
        for i, j in edges:
            neighbours[i].append(j)
            neighbours[j].append(i)
        order, parent = [0], [-1] * k
        seen = {0}
        for node in order:
            for nb in neighbours[node]:
                if nb not in seen:
                    seen.add(nb)
                    parent[nb] = node
                    order.append(nb)
        theta = [np.zeros([sizes[v] for v in c]) for c in nodes]
        return cls(sizes, nodes, edges, order, parent, theta)

    @property
    def cells(self) -> int:
        return sum(t.size for t in self.theta)

    def home(self, clique: Iterable[int]) -> int:
        """Position of the smallest junction-tree clique containing ``clique``."""
        need = set(clique)
        best = [i for i, c in enumerate(self.cliques) if need <= set(c)]
        if not best:
            raise ValueError(f"no clique of the model contains {clique}")
        return min(best, key=lambda i: self.theta[i].size)

    def separator(self, node: int) -> tuple:
        p = self.parent[node]
        return tuple(v for v in self.cliques[node] if v in self.cliques[p]) if p >= 0 else ()

    def warm_start(self, old: JunctionTree) -> None:
        """Carry ``old``'s log-potentials over (each old clique into a clique containing it):
        the same distribution when every old clique has a home here."""
        for c, t in zip(old.cliques, old.theta):
            h = self.home(c)
            self.theta[h] = self.theta[h] + expand(t, c, self.cliques[h], self.sizes)

    def _schedule(self):
        """Per clique (cached): its children, and the axes and shapes of its messages (the
        separator kept in place with length-1 axes elsewhere, reshaped to the receiver's
        layout; variables are ascending in every clique, so a reshape aligns them)."""
        if getattr(self, "_cached", None) is None:
            k = len(self.cliques)
            children: list[list] = [[] for _ in range(k)]
            for node in self.order[1:]:
                children[self.parent[node]].append(node)
            up_axes: list = [None] * k
            up_shape: list = [None] * k
            down_axes: list = [None] * k
            down_shape: list = [None] * k
            for node in self.order[1:]:
                sep = set(self.separator(node))
                mine, theirs = self.cliques[node], self.cliques[self.parent[node]]
                up_axes[node] = tuple(i for i, v in enumerate(mine) if v not in sep)
                up_shape[node] = [self.sizes[v] if v in sep else 1 for v in theirs]
                down_axes[node] = tuple(i for i, v in enumerate(theirs) if v not in sep)
                down_shape[node] = [self.sizes[v] if v in sep else 1 for v in mine]
            self._cached = (children, up_axes, up_shape, down_axes, down_shape)
        return self._cached

    def calibrate(self) -> list:
        """Exact clique marginals (probabilities; axes: each clique's variables) by two passes
        of sum-product message passing in log space (a clique's message to a child is its full
        belief minus the child's message to it)."""
        children, up_axes, up_shape, down_axes, down_shape = self._schedule()
        k = len(self.cliques)
        up: list = [None] * k
        belief: list = [None] * k
        for node in reversed(self.order):
            total = self.theta[node]
            for child in children[node]:
                total = total + up[child]
            belief[node] = total
            if node != self.order[0]:
                up[node] = _logsumexp(total, up_axes[node]).reshape(up_shape[node])
        out: list = [None] * k
        for node in self.order:
            full = belief[node]
            for child in children[node]:
                message = _logsumexp(full - up[child], down_axes[child])
                belief[child] = belief[child] + message.reshape(down_shape[child])
            full = full - _logsumexp(full, tuple(range(full.ndim)))
            out[node] = np.exp(full)
        return out

    def project(self, marginals: list, clique: Iterable[int]) -> np.ndarray:
        """The model's marginal (probabilities, axes: ``clique`` ascending) of any attribute
        set, from calibrated clique ``marginals``: inside one clique, a sum; otherwise the
        smallest subtree covering the attributes, contracted (clique marginals over separator
        marginals)."""
        clique = tuple(sorted(clique))
        need = set(clique)
        inside = [i for i, c in enumerate(self.cliques) if need <= set(c)]
        if inside:
            i = min(inside, key=lambda j: marginals[j].size)
            return marginalise(marginals[i], self.cliques[i], need)
        nodes = self._subtree(need)
        operands = []
        for node in nodes:
            operands += [marginals[node], list(self.cliques[node])]
            if self.parent[node] in nodes:
                sep = self.separator(node)
                mass = marginalise(marginals[node], self.cliques[node], set(sep))
                # a separator cell of (sub)normal-underflow mass bounds the cells it joins by
                # the same mass: 0 there, never 1/mass = inf (which would make inf * 0 = NaN)
                inverse = np.divide(1.0, mass, out=np.zeros_like(mass),
                                    where=mass > TINY_MASS)
                operands += [inverse, list(sep)]
        return np.einsum(*operands, list(clique), optimize="greedy")

    def _subtree(self, need) -> list:
        """The cliques of the smallest connected subtree covering the variables ``need``: one
        clique per variable, then each deepest one replaced by its parent until they meet."""
        chosen: set = set()
        for v in sorted(need):
            if not any(v in self.cliques[c] for c in chosen):
                chosen.add(min((i for i, c in enumerate(self.cliques) if v in c),
                               key=lambda i: self.theta[i].size))
        depth = {self.order[0]: 0}
        for node in self.order[1:]:
            depth[node] = depth[self.parent[node]] + 1
        nodes, pending = set(chosen), set(chosen)
        while len(pending) > 1:
            deepest = max(pending, key=lambda n: (depth[n], n))
            pending.remove(deepest)
            pending.add(self.parent[deepest])
            nodes.add(self.parent[deepest])
        return [n for n in self.order if n in nodes]

    def sample(self, marginals: list, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` records (an (n, d) int64 array) from the calibrated ``marginals``: the root
        clique jointly, then each clique's new attributes given its separator."""
        d = len(self.sizes)
        codes = np.zeros((n, d), dtype=np.int64)
        for node in self.order:
            clique = self.cliques[node]
            sep = self.separator(node)
            new = tuple(v for v in clique if v not in sep)
            if not new:
                continue
            table = np.transpose(marginals[node], [clique.index(v) for v in sep + new])
            sep_cells = math.prod(self.sizes[v] for v in sep)
            table = np.maximum(table.reshape(sep_cells, -1), 0.0)
            if sep:
                parent_codes = np.ravel_multi_index(tuple(codes[:, v] for v in sep),
                                                    [self.sizes[v] for v in sep])
            else:
                parent_codes = np.zeros(n, dtype=np.int64)
            flat = sample_conditional(parent_codes, table, rng)
            for v, column in zip(new, np.unravel_index(flat, [self.sizes[v] for v in new])):
                codes[:, v] = column
        return codes
