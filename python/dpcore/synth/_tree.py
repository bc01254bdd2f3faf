"""A tree-structured model from noisy 1-way and 2-way marginals, in closed form, and sampling.

On a tree, consistent non-negative marginals (one table per edge, agreeing on shared
attributes) define a distribution: the product of the edge tables over the product of the shared
node marginals, sampled from the root down by conditionals. The noisy measurements are made
non-negative and consistent first:

1. each attribute's marginal is the inverse-variance average of its own noisy 1-way marginal and
   the sums of the noisy 2-way tables that contain it; the total is the inverse-variance average
   of every measured marginal's total;
2. each marginal is projected (Euclidean) onto the non-negative vectors with that total;
3. each edge table is projected onto the tables with those row and column sums (least squares,
   closed form), clipped at zero and raked back to the sums (iterative proportional fitting,
   from a start holding a trace of the independent table, so that the sums are reachable).

Everything here is post-processing of released noisy counts.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["TreeModel", "consistent_table", "interaction_shrinkage", "main_effects",
           "pool_marginals", "sample_conditional", "shrink_interaction", "simplex_projection",
           "size_groups"]

#: Raking sweeps of each edge table (it stops earlier once the sums match to 1e-9).
RAKING_SWEEPS = 200
#: Share of an edge table's mass given to the independent table before raking (keeps every
#: cell of a positive row and column reachable).
TRACE = 1e-6
#: Shrink each noisy edge table's interaction toward independence (see
#: :func:`shrink_interaction`; chosen on development data, ``bench/synth_marginal_dev.py``).
SHRINK_INTERACTIONS = True


def simplex_projection(values: np.ndarray, total: float) -> np.ndarray:
    """The Euclidean projection of ``values`` onto {x >= 0, sum x = total} (total > 0)."""
    v = np.asarray(values, dtype=np.float64)
    u = np.sort(v)[::-1]
    cumulative = np.cumsum(u) - total
    ranks = np.arange(1, v.size + 1)
    rho = np.nonzero(u - cumulative / ranks > 0)[0][-1]
    theta = cumulative[rho] / (rho + 1.0)
    return np.maximum(v - theta, 0.0)


def consistent_table(noisy: np.ndarray, rows: np.ndarray, cols: np.ndarray,
                     sweeps: int = RAKING_SWEEPS) -> np.ndarray:
    """A non-negative table near ``noisy`` whose row and column sums are ``rows`` and ``cols``
    (non-negative, with equal totals)."""
    table = np.asarray(noisy, dtype=np.float64)
    n_rows, n_cols = table.shape
    # least-squares projection onto {row sums = rows, column sums = cols}: add a row term, a
    # column term and a constant (the orthogonal complement of the constraints' null space)
    row_gap = rows - table.sum(axis=1)
    col_gap = cols - table.sum(axis=0)
    shift = row_gap.sum()
    table = (table + row_gap[:, None] / n_cols + col_gap[None, :] / n_rows
             - shift / (n_rows * n_cols))
    # clipped at zero, plus a trace (1e-6 of the mass) of the independent table on the cells
    # whose row and column sums are positive: raking then always has a solution to reach
    total = max(rows.sum(), 1e-300)
    table = np.maximum(table, 0.0) + TRACE * np.outer(rows, cols) / total
    table[rows <= 0, :] = 0.0
    table[:, cols <= 0] = 0.0
    scale = max(rows.sum(), 1.0)
    for _ in range(sweeps):
        table *= _ratio(rows, table.sum(axis=1))[:, None]
        table *= _ratio(cols, table.sum(axis=0))[None, :]
        if np.max(np.abs(table.sum(axis=1) - rows)) <= 1e-9 * scale:
            break
    return table


def main_effects(table: np.ndarray) -> np.ndarray:
    """The least-squares projection of ``table`` onto the sums of functions of one axis each
    (its main effects): sum over the axes of the mean over the other axes, less (k - 1) times
    the grand mean."""
    table = np.asarray(table, dtype=np.float64)
    k = table.ndim
    grand = table.mean()
    out = np.full(table.shape, -(k - 1) * grand)
    for axis in range(k):
        others = tuple(a for a in range(k) if a != axis)
        out = out + table.mean(axis=others, keepdims=True)
    return out


def _james_stein(norm: float, dof: int, variance: float) -> float:
    """max(0, 1 - (dof - 2) variance / norm): the positive-part James-Stein factor of a noisy
    vector of ``dof`` dimensions and squared norm ``norm`` (0 for a zero vector)."""
    return 0.0 if norm <= 0.0 else max(0.0, 1.0 - (dof - 2) * variance / norm)


def _interaction(noisy: np.ndarray, independent: ArrayLike) -> np.ndarray:
    """The part of ``noisy - independent`` orthogonal to the main effects."""
    residual = noisy - np.asarray(independent, dtype=np.float64)
    return residual - main_effects(residual)


def _shrunk_interaction(noisy: np.ndarray, independent: ArrayLike, variance: float
                        ) -> tuple[float, np.ndarray | None]:
    """(James-Stein factor, interaction) of a noisy table; (1, None) when df <= 2."""
    df = math.prod(s - 1 for s in noisy.shape)
    if df <= 2:
        return 1.0, None
    interaction = _interaction(noisy, independent)
    return _james_stein(float(np.sum(interaction * interaction)), df, variance), interaction


def interaction_shrinkage(noisy: np.ndarray, independent: np.ndarray, variance: float
                          ) -> float:
    """The positive-part James-Stein factor of a noisy table's interaction.

    R is the part of ``noisy - independent`` orthogonal to the main effects: df = prod(size - 1)
    dimensions, in which i.i.d. noise of ``variance`` per cell has a squared norm of df *
    variance on average. The factor is max(0, 1 - (df - 2) variance / ||R||**2), or 1 when
    df <= 2 (James-Stein shrinks nothing there). It reads the noisy table, a table fitted to
    released values and the public noise scale: post-processing."""
    return _shrunk_interaction(np.asarray(noisy, dtype=np.float64), independent, variance)[0]


def shrink_interaction(noisy: np.ndarray, independent: np.ndarray, variance: float
                       ) -> np.ndarray:
    """``noisy`` with its interaction (the part of ``noisy - independent`` orthogonal to the
    main effects) multiplied by :func:`interaction_shrinkage`; the main effects are kept as
    measured.

    When a table's counts are within the noise, its interaction is mostly noise, which
    clipping and raking would turn into spurious dependence (and mass on empty cells); the
    James-Stein factor keeps an interaction in proportion to how far it stands above the
    noise (all of it for tables with many records per cell, none for pure noise)."""
    noisy = np.asarray(noisy, dtype=np.float64)
    factor, interaction = _shrunk_interaction(noisy, independent, variance)
    return noisy if interaction is None else noisy - (1.0 - factor) * interaction


def size_groups(sizes: Sequence[int], eligible: Sequence[bool] | None = None) -> list:
    """Positions of the (eligible) columns grouped by their number of codes: the groups of at
    least three columns with at least three codes each (public: the domain's shape)."""
    groups: dict = {}
    for j, size in enumerate(sizes):
        if size >= 3 and (eligible is None or eligible[j]):
            groups.setdefault(int(size), []).append(j)
    return [g for g in groups.values() if len(g) >= 3]


def pool_marginals(values: Sequence[np.ndarray], variances: Sequence[float],
                   groups: Sequence[Sequence[int]]) -> list:
    """Noisy 1-way counts with each grouped column shrunk toward its group's mean (empirical
    Bayes; Efron and Morris): column j of a group with mean m becomes
    m + f_j (y_j - m), f_j = max(0, 1 - (k - 2) v_j / ||y_j - m||**2) for k codes and per-cell
    noise variance v_j. Columns whose counts stand far above the noise keep them (f_j near 1);
    columns within the noise borrow the shape the group shares. Post-processing of noisy counts,
    their public variances and the public grouping."""
    out = [np.asarray(v, dtype=np.float64) for v in values]
    for group in groups:
        mean = np.mean([out[j] for j in group], axis=0)
        shrunk = []
        for j in group:
            gap = out[j] - mean
            shrunk.append(mean + _james_stein(float(gap @ gap), out[j].size,
                                              float(variances[j])) * gap)
        for j, y in zip(group, shrunk):
            out[j] = y
    return out


def _ratio(target, current):
    out = np.zeros_like(target)
    positive = current > 0
    out[positive] = target[positive] / current[positive]
    return out


def sample_conditional(parent_codes: np.ndarray, table: np.ndarray,
                       rng: np.random.Generator) -> np.ndarray:
    """Child codes drawn from the rows of ``table`` (parent value x child value, non-negative)
    selected by ``parent_codes``; a row summing to zero draws from the column sums."""
    table = np.asarray(table, dtype=np.float64)
    fallback = table.sum(axis=0)
    out = np.empty(parent_codes.size, dtype=np.int64)
    u = rng.random(parent_codes.size)
    order = np.argsort(parent_codes, kind="stable")
    values, starts = np.unique(parent_codes[order], return_index=True)
    ends = np.append(starts[1:], order.size)
    for value, start, end in zip(values, starts, ends):
        row = table[value]
        if not row.sum() > 0:
            row = fallback
        out[order[start:end]] = draw_categorical(row, u[order[start:end]])
    return out


def draw_categorical(weights: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """Codes with probabilities proportional to ``weights`` (non-negative, positive sum), by
    inverse CDF of the given uniforms in [0, 1); a zero weight is never drawn."""
    weights = np.asarray(weights, dtype=np.float64)
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    cdf[np.nonzero(weights > 0)[0][-1]:] = 1.0  # rounding never reaches a zero-weight tail
    return np.searchsorted(cdf, uniforms, side="right").astype(np.int64)


@dataclass(frozen=True, eq=False)
class TreeModel:
    """A distribution over integer-coded records: consistent marginals on a spanning tree.

    Attributes
    ----------
    sizes : tuple of int
        Codes per attribute.
    marginals : list of ndarray
        Non-negative 1-way marginal of each attribute, each summing to ``total``.
    edges : list of (int, int)
        The tree's edges (attribute positions).
    tables : list of ndarray
        Non-negative 2-way table of each edge (first attribute by second), consistent with
        ``marginals``.
    total : float
        The estimated number of records.
    """

    sizes: tuple
    marginals: list
    edges: list
    tables: list
    total: float

    @classmethod
    def estimate(cls, sizes: Sequence[int], one_way: Sequence[tuple[ArrayLike, ArrayLike]],
                 edges: Sequence[tuple[int, int]], two_way: Sequence[tuple[ArrayLike, float]],
                 groups: Sequence[Sequence[int]] = ()) -> TreeModel:
        """The model from noisy measurements.

        Parameters
        ----------
        sizes : sequence of int
        one_way : list of (noisy counts, per-cell variance)
            One per attribute (variance a scalar or an array).
        edges : list of (int, int)
            A spanning tree (or forest) over the attributes.
        two_way : list of (noisy table, per-cell variance)
            One per edge.
        groups : list of lists of int, optional
            Columns whose marginal estimates are shrunk toward their group's mean
            (:func:`pool_marginals`; the mean per-cell variance of each estimate).
        """
        d = len(sizes)
        estimates = [[(np.asarray(y, float), np.broadcast_to(np.asarray(v, float), np.shape(y)))]
                     for y, v in one_way]
        totals = [(float(np.sum(y)), float(np.sum(v))) for (y, v), in estimates]
        for (a, b), (table, var) in zip(edges, two_way):
            table = np.asarray(table, dtype=np.float64)
            estimates[a].append((table.sum(axis=1), np.full(sizes[a], var * sizes[b])))
            estimates[b].append((table.sum(axis=0), np.full(sizes[b], var * sizes[a])))
            totals.append((float(table.sum()), var * table.size))
        weights = np.array([1.0 / v for _, v in totals])
        total = max(float(np.dot(weights, [t for t, _ in totals]) / weights.sum()), 1.0)
        means, variances = [], []
        for i in range(d):
            precision = sum(1.0 / v for _, v in estimates[i])
            means.append(sum(y / v for y, v in estimates[i]) / precision)
            variances.append(float(np.mean(1.0 / precision)))
        means = pool_marginals(means, variances, groups)
        marginals = [simplex_projection(mean, total) for mean in means]
        tables = []
        for (a, b), (t, var) in zip(edges, two_way):
            t = np.asarray(t, float)
            if SHRINK_INTERACTIONS:
                t = shrink_interaction(t, np.outer(marginals[a], marginals[b]) / total, var)
            tables.append(consistent_table(t, marginals[a], marginals[b]))
        return cls(tuple(int(s) for s in sizes), marginals, list(edges), tables, total)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` records (an (n, d) int64 array): each tree's root from its marginal, then each
        attribute from its edge table given its parent's code (breadth-first)."""
        d = len(self.sizes)
        codes = np.zeros((n, d), dtype=np.int64)
        done = np.zeros(d, dtype=bool)
        neighbours: list[list] = [[] for _ in range(d)]
        for (a, b), table in zip(self.edges, self.tables):
            neighbours[a].append((b, table))
            neighbours[b].append((a, table.T))
        for root in range(d):
            if done[root]:
                continue
            codes[:, root] = draw_categorical(self.marginals[root], rng.random(n))
            done[root] = True
            queue = [root]
            while queue:
                parent = queue.pop(0)
                for child, table in neighbours[parent]:
                    if not done[child]:
                        codes[:, child] = sample_conditional(codes[:, parent], table, rng)
                        done[child] = True
                        queue.append(child)
        return codes
