"""A graphical model fitted to noisy marginals on any cliques (Private-PGM style): the
distribution on the measured cliques' junction tree whose marginals minimise the
inverse-variance weighted squared error to the measurements, found by entropic mirror descent
with exact marginals from belief propagation (McKenna, Sheldon and Miklau 2019).

The loss is convex in the marginals and the model's marginals range over the whole marginal
polytope of the junction tree, so the fit is a consistent estimate: one distribution whose
marginals are as close as possible to every measurement together. Post-processing: it reads only
released noisy counts and their public noise scales.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from dpcore.synth._junction import JunctionTree
from dpcore.synth._tree import pool_marginals

__all__ = ["Measurement", "estimate_total", "fit_model", "merge_measurements", "mirror_descent",
           "pool_one_way"]

#: Armijo's sufficient-decrease fraction in the line search.
ARMIJO = 0.5
#: Mirror descent stops once an iteration lowers the loss by less than this fraction of it.
TOLERANCE = 1e-9
#: Halvings of the step size tried in one iteration before the iteration is skipped.
MAX_HALVINGS = 30


@dataclass(frozen=True, eq=False)
class Measurement:
    """One released marginal: its attribute positions (ascending), the noisy counts (axes in
    that order) and the noise's standard deviation per cell (public)."""

    clique: tuple
    noisy: np.ndarray
    std: float


def estimate_total(measurements: Sequence[Measurement]) -> float:
    """The inverse-variance average of the measurements' totals (each total's variance is
    std**2 times its cells), at least 1."""
    weights = np.array([1.0 / (m.std ** 2 * m.noisy.size) for m in measurements])
    totals = np.array([float(m.noisy.sum()) for m in measurements])
    return max(float(weights @ totals / weights.sum()), 1.0)


def merge_measurements(measurements: Sequence[Measurement]) -> list:
    """One measurement per clique (first-seen order): the inverse-variance average of its
    measurements, with the standard deviation of that average."""
    groups: dict = {}
    for m in measurements:
        groups.setdefault(m.clique, []).append(m)
    out = []
    for clique, group in groups.items():
        if len(group) == 1:
            out.append(group[0])
            continue
        weights = np.array([1.0 / m.std ** 2 for m in group])
        noisy = sum(w * np.asarray(m.noisy, float) for w, m in zip(weights, group))
        out.append(Measurement(clique, noisy / weights.sum(),
                               float(1.0 / np.sqrt(weights.sum()))))
    return out


def pool_one_way(measurements: Sequence[Measurement], groups: Sequence[Sequence[int]]) -> list:
    """The measurements merged per clique (:func:`merge_measurements`), the 1-way ones of the
    columns in ``groups`` shrunk toward their group's mean
    (:func:`dpcore.synth._tree.pool_marginals`). Post-processing."""
    merged = merge_measurements(measurements)
    one_way = {m.clique[0]: k for k, m in enumerate(merged) if len(m.clique) == 1}
    groups = [[j for j in g if j in one_way] for g in groups]
    groups = [g for g in groups if len(g) >= 3]
    if not groups:
        return merged
    columns = sorted({j for g in groups for j in g})
    position = {j: i for i, j in enumerate(columns)}
    pooled = pool_marginals([merged[one_way[j]].noisy for j in columns],
                            [merged[one_way[j]].std ** 2 for j in columns],
                            [[position[j] for j in g] for g in groups])
    for j in columns:
        m = merged[one_way[j]]
        merged[one_way[j]] = Measurement(m.clique, pooled[position[j]], m.std)
    return merged


class _Loss:
    """sum_i w_i ||mu_{C_i} - y_i / N||^2 with w_i = (std_min / std_i)**2 (relative inverse
    variances), its value and its gradient on the junction tree's cliques. Measurements of the
    same clique are merged first (their weighted average, weighted by the sum: the same loss up
    to a constant)."""

    def __init__(self, tree: JunctionTree, measurements, total):
        smallest = min(m.std for m in measurements)
        merged: dict = {}
        for m in measurements:
            weight = (smallest / m.std) ** 2
            y = np.asarray(m.noisy, float) / total
            if m.clique in merged:
                w0, y0 = merged[m.clique]
                merged[m.clique] = (w0 + weight, (w0 * y0 + weight * y) / (w0 + weight))
            else:
                merged[m.clique] = (weight, y)
        self.tree = tree
        self.items = []
        for clique, (w, y) in merged.items():
            home = tree.home(clique)
            variables = tree.cliques[home]
            axes = tuple(i for i, v in enumerate(variables) if v not in clique)
            shape = [tree.sizes[v] if v in clique else 1 for v in variables]
            self.items.append((home, axes, shape, y, w))

    def __call__(self, marginals):
        value = 0.0
        gradient = [np.zeros_like(t) for t in self.tree.theta]
        for home, axes, shape, target, weight in self.items:
            mu = marginals[home].sum(axis=axes) if axes else marginals[home]
            residual = mu - target
            value += weight * float(np.sum(residual * residual))
            gradient[home] += (2.0 * weight * residual).reshape(shape)
        return value, gradient


def mirror_descent(tree: JunctionTree, measurements: Sequence[Measurement], total: float,
                   iterations: int, step: float = 1.0) -> tuple[list, float, float]:
    """Run ``iterations`` steps of entropic mirror descent on ``tree.theta`` (in place) from
    its current value; returns the calibrated marginals, the loss and the last step size.

    Each step: theta <- theta - step * gradient(marginals), with the step doubled at the start
    of the iteration and halved until Armijo's condition holds (the decrease of the loss is at
    least half the decrease its linearisation predicts); it stops early at a minimum (no step
    lowers the loss) or once a step lowers it by less than ``TOLERANCE`` of its value."""
    loss = _Loss(tree, measurements, total)
    marginals = tree.calibrate()
    value, gradient = loss(marginals)
    for _ in range(iterations):
        step *= 2.0
        theta = tree.theta
        for _ in range(MAX_HALVINGS):
            tree.theta = [t - step * g for t, g in zip(theta, gradient)]
            trial = tree.calibrate()
            trial_value, trial_gradient = loss(trial)
            predicted = sum(float(np.sum(g * (m - t))) for g, m, t in
                            zip(gradient, marginals, trial))
            if trial_value <= value and value - trial_value >= ARMIJO * predicted:
                converged = value - trial_value <= TOLERANCE * value
                marginals, value, gradient = trial, trial_value, trial_gradient
                break
            step /= 2.0
        else:
            tree.theta = theta  # no step decreases the loss: at a minimum (to rounding)
            break
        if converged:
            break
    return marginals, value, step


def fit_model(sizes: Sequence[int], measurements: Sequence[Measurement], iterations: int,
              previous: JunctionTree | None = None, step: float = 1.0
              ) -> tuple[JunctionTree, list, float, float]:
    """A junction-tree model of ``measurements`` (fitted by :func:`mirror_descent`), warm started
    from ``previous`` when given: the new tree covers the previous tree's cliques too, so the
    fit starts from the previous distribution; returns (tree, marginals, total, step)."""
    cliques = [m.clique for m in measurements]
    if previous is not None:
        cliques += [tuple(c) for c in previous.cliques]
    tree = JunctionTree.build(sizes, cliques)
    if previous is not None:
        tree.warm_start(previous)
    total = estimate_total(measurements)
    marginals, _, step = mirror_descent(tree, measurements, total, iterations, step)
    return tree, marginals, total, step
