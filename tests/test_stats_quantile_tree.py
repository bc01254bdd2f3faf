"""stats.quantile(split="recursive"), the default for 3 or more distinct levels on a grid: the
tree of levels, the sensitivity of a node's utility, the joint law of the released levels
against an exact law computed here (with power against the equal split and a wrong epsilon),
the dispatch of split="auto", and errors raised before anything is charged."""
import math
from fractions import Fraction

import numpy as np
import pytest

from _gof import ALPHA, chisquare_pvalue
from test_stats import BOUNDS_Q, X_Q, power, rounded_level
from test_stats_quantile_flip import flip_law_of_utilities

import dpcore
from dpcore import stats
from dpcore._release import quantiles as release_quantiles

LEVELS = (0.2, 0.5, 0.7, 0.9)  # depth 3: 0.7 first, then 0.5 and 0.9, then 0.2
POINTS = np.linspace(0.0, 10.0, 11)
EPSILON = 3.0  # 1 per round
N_DRAWS = 20_000


@pytest.mark.parametrize("m", range(1, 17))
def test_level_tree_releases_neighbours_first_in_log_depth(m):
    tree = release_quantiles.LevelTree(m)
    assert sorted(node[0] for node in tree.nodes) == list(range(m))
    assert tree.depth == math.ceil(math.log2(m + 1))
    seen, depth_of = set(), {}
    for mid, depth, below, above in tree.nodes:
        assert below < mid < above
        assert below in seen | {-1} and above in seen | {m}  # neighbours released before
        # the neighbours are the closest released levels: nothing released between them
        assert not any(below < s < above for s in seen)
        assert depth == 1 + max(depth_of.get(below, -1), depth_of.get(above, -1))
        seen.add(mid)
        depth_of[mid] = depth


def test_node_utility_sensitivity_is_max_n_d_minus_n():
    """-|D r - N n| over a node's records moves by at most max(N, D - N) when a record is
    added to them, and the bound is reached (brute force, ties included)."""
    g = np.random.default_rng(3)  # insecure-ok: test data
    ys = np.linspace(0, 10, 41)
    for numerator, denominator in ((5, 7), (2, 3), (0, 4), (3, 3), (1, 2)):
        worst = 0.0
        for _ in range(200):
            z = np.sort(np.round(g.uniform(0, 10, g.integers(0, 8))))
            extra = np.round(g.uniform(0, 10))
            u = [release_quantiles.scaled_rank_utility(
                [np.sum(w < y) for y in ys], numerator, denominator, w.size)
                for w in (z, np.sort(np.append(z, extra)))]
            worst = max(worst, float(np.max(np.abs(u[1] - u[0]))))
        assert worst == max(numerator, denominator - numerator)


def node_utilities(points, records, q):
    """-|#{x < g} - q n| for the level q (a Fraction) of the records, at each point."""
    n = len(records)
    return np.array([-abs(float(sum(1 for x in records if x < g) - q * n)) for g in points])


def node_law(points, records, q, scale):
    """The exponential mechanism over the points: weights exp(scale u), scale in rank units."""
    u = node_utilities(points, records, q)
    w = np.exp(scale * (u - u.max()))
    return w / w.sum()


def flip_node_law(points, records, q, scale):
    """Permute-and-flip over the points (its exact law, from test_stats_quantile_flip)."""
    return flip_law_of_utilities(node_utilities(points, records, q), scale)


def recursive_law(x, epsilon_round, factor=1.0, law=node_law):
    """Exact joint law of (y_0.2, y_0.5, y_0.7, y_0.9) of the recursive scheme over POINTS,
    written out for LEVELS: 0.7 over all records; 0.5 within [0, y_0.7] over the records
    below y_0.7 and 0.9 within [y_0.7, 10] over the others; 0.2 within [0, y_0.5] over the
    records below y_0.5. Each node: the level relative to its neighbours', scale
    epsilon_round / (2 max(q', 1 - q')) (times ``factor``: a wrong epsilon)."""
    z = np.sort(np.clip(x, *BOUNDS_Q))
    q = {level: Fraction(rounded_level(level)) for level in LEVELS}

    def node(points, records, lo, hi, level):
        rel = (q[level] - lo) / (hi - lo)
        return law(points, records, rel, factor * epsilon_round / (2 * float(max(rel, 1 - rel))))

    out = {}
    top = node(POINTS, z, 0, 1, 0.7)
    for a, pa in enumerate(top):
        below, above = z[z < POINTS[a]], z[z >= POINTS[a]]
        mid = node(POINTS[:a + 1], below, 0, q[0.7], 0.5)
        high = node(POINTS[a:], above, q[0.7], 1, 0.9)
        for b, pb in enumerate(mid):
            low = node(POINTS[:b + 1], below[below < POINTS[b]], 0, q[0.5], 0.2)
            for c, pc in enumerate(low):
                for d, pd in enumerate(high):
                    out[(c, b, a, a + d)] = pa * pb * pc * pd
    return out


def equal_split_law(x, epsilon_level):
    """The joint law of the four levels released independently (split="equal")."""
    z = np.clip(x, *BOUNDS_Q)
    margins = [node_law(POINTS, z, Fraction(rounded_level(level)),
                        epsilon_level / (2 * max(rounded_level(level), 1 - rounded_level(level))))
               for level in LEVELS]
    return {idx: float(np.prod([m[i] for m, i in zip(margins, idx)]))
            for idx in np.ndindex(*(len(m) for m in margins))}


def joint_counts(draws, laws):
    """Observed counts over the union of the laws' outcomes (and the outcomes seen), and each
    law's probabilities in the same order."""
    idx = [tuple(int(i) for i in np.searchsorted(POINTS, row)) for row in draws]
    keys = sorted(set().union(*laws) | set(idx))
    position = {k: j for j, k in enumerate(keys)}
    counts = np.bincount([position[k] for k in idx], minlength=len(keys))
    return counts, [np.array([law.get(k, 0.0) for k in keys]) for law in laws]


@pytest.mark.slow
@pytest.mark.parametrize("method", ["exact", "permute-and-flip"])
def test_recursive_joint_law_and_power(method):
    """20,000 joint draws against the exact law of the tree (chi-square at ALPHA); the same
    test rejects (computed power > 1 - 1e-4) the equal split of the budget and a 25% larger
    epsilon in every node."""
    draws = np.array([stats.quantile(X_Q, LEVELS, epsilon=EPSILON, bounds=BOUNDS_Q, grid=11,
                                     method=method, random_state=seed)
                      for seed in range(N_DRAWS)])
    assert np.all(np.isin(draws, POINTS))
    assert np.all(np.diff(draws, axis=1) >= 0)  # the levels come out sorted
    law = node_law if method == "exact" else flip_node_law
    exact = recursive_law(X_Q, EPSILON / 3, law=law)
    wrongs = [equal_split_law(X_Q, EPSILON / 4),
              recursive_law(X_Q, EPSILON / 3, factor=1.25, law=law)]
    counts, (p_exact, *p_wrongs) = joint_counts(draws, [exact, *wrongs])
    assert abs(p_exact.sum() - 1) < 1e-12
    assert chisquare_pvalue(counts, p_exact) > ALPHA
    for wrong in p_wrongs:
        assert power(p_exact, wrong / wrong.sum(), N_DRAWS) > 1 - 1e-4
        assert chisquare_pvalue(counts, wrong / wrong.sum()) < ALPHA


def test_auto_is_recursive_for_three_distinct_levels_on_a_grid():
    x = np.random.default_rng(4).normal(5, 2, 500)  # insecure-ok: test data

    def run(levels, **kw):
        return stats.quantile(x, levels, epsilon=1.0, bounds=BOUNDS_Q, random_state=11, **kw)

    for levels in ([0.1, 0.5, 0.9], [0.9, 0.25, 0.5, 0.75, 0.1]):
        assert np.array_equal(run(levels), run(levels, split="recursive"))
        assert not np.array_equal(run(levels), run(levels, split="equal"))
    for levels in ([0.5], [0.25, 0.75], [0.5, 0.5, 0.5]):  # fewer than 3, or repeated
        assert np.array_equal(run(levels), run(levels, split="equal"))
    assert np.array_equal(run([0.1, 0.5, 0.9], grid="continuous"),
                          run([0.1, 0.5, 0.9], grid="continuous", split="equal"))
    out = run([0.9, 0.25, 0.5, 0.75, 0.1])  # the caller's order
    assert out[1] <= out[2] <= out[3] and out[4] <= out[1] and out[3] <= out[0]


def test_split_errors_raise_before_charging():
    acc = dpcore.Accountant(1.0)
    cases = [dict(q=[0.1, 0.5, 0.9], split="tree"),
             dict(q=[0.1, 0.5, 0.9], split="recursive", grid="continuous"),
             dict(q=[0.1, 0.5, 0.5], split="recursive")]
    for kw in cases:
        with pytest.raises(ValueError, match="split"):
            stats.quantile(X_Q, epsilon=0.5, bounds=BOUNDS_Q, accountant=acc, **kw)
    assert not acc.history
    stats.quantile(X_Q, [0.0, 0.5, 1.0], epsilon=0.5, bounds=BOUNDS_Q, split="recursive",
                   accountant=acc, random_state=1)
    assert len(acc.history) == 1 and acc.history[0].epsilon == 0.5
