"""stats.quantile(method="permute-and-flip"): exact permute-and-flip over the grid points, its
law against the exact one (coin formulation), with power against the exponential mechanism's
law and a wrong epsilon; the grid-size limit."""
import numpy as np
import pytest

from _gof import ALPHA, chisquare_pvalue
from test_stats import BOUNDS_Q, GRID_ARRAY, N, X_Q, draw_quantiles, em_scale, grid_law, power
from test_stats import rounded_level

import dpcore
from dpcore import stats


def flip_law(x, q, scale, bounds, points):
    """Permute-and-flip over the points: P(j) = p_j E[1 / (1 + K_j)], K_j the number of other
    heads (independent coins with p_i = exp(scale (u_i - max u))), by the Poisson-binomial
    recursion; independent of the implementation (which draws a uniform head)."""
    z = np.clip(x, *bounds)
    ranks = np.array([np.sum(z < g) for g in points])
    return flip_law_of_utilities(-np.abs(ranks - rounded_level(q) * len(z)), scale)


def flip_law_of_utilities(u, scale):
    """Permute-and-flip's law over candidates with utilities u (see :func:`flip_law`)."""
    p = np.exp(scale * (u - u.max()))
    law = np.empty(len(p))
    for j in range(len(p)):
        dist = np.array([1.0])  # distribution of the number of heads among the others
        for i in range(len(p)):
            if i != j:
                dist = np.concatenate([dist * (1 - p[i]), [0.0]]) + \
                    np.concatenate([[0.0], dist * p[i]])
        law[j] = p[j] * np.sum(dist / (1.0 + np.arange(len(dist))))
    return law


@pytest.mark.parametrize("grid", [11, "array"])
def test_flip_law_and_power(grid):
    points = GRID_ARRAY if grid == "array" else np.linspace(0.0, 10.0, grid)
    n_draws = N // 2
    out = draw_quantiles(0.3, n_draws, 21, grid=GRID_ARRAY if grid == "array" else grid,
                         method="permute-and-flip", epsilon=1.5)
    idx = np.searchsorted(points, out)
    assert np.all(points[idx] == out)  # grid points, exactly
    counts = np.bincount(idx, minlength=len(points))
    law = flip_law(X_Q, 0.3, em_scale(0.3, 1.5), BOUNDS_Q, points)
    assert abs(law.sum() - 1) < 1e-12
    assert chisquare_pvalue(counts, law) > ALPHA
    # power (computed) against the exponential mechanism on the same points and a 20% wrong
    # epsilon: both rejected
    for wrong in (grid_law(X_Q, 0.3, em_scale(0.3, 1.5), BOUNDS_Q, points),
                  flip_law(X_Q, 0.3, em_scale(0.3, 1.8), BOUNDS_Q, points)):
        assert power(law, wrong, n_draws) > 1 - 1e-4
        assert chisquare_pvalue(counts, wrong) < ALPHA


def test_flip_grid_limit_raises_before_charging():
    acc = dpcore.Accountant(1.0)
    for grid in (None, 2**22 + 2):
        with pytest.raises(ValueError, match="grid"):
            stats.quantile(X_Q, 0.5, epsilon=0.5, bounds=BOUNDS_Q, grid=grid,
                           method="permute-and-flip", accountant=acc)
    with pytest.raises(ValueError, match="method"):
        stats.quantile(X_Q, 0.5, epsilon=0.5, bounds=BOUNDS_Q, grid="continuous",
                       method="permute-and-flip", accountant=acc)
    assert not acc.history
    stats.median(X_Q, epsilon=0.5, bounds=BOUNDS_Q, grid=2**22 + 1, method="permute-and-flip",
                 accountant=acc, random_state=1)
    assert len(acc.history) == 1
