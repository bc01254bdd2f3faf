"""dpcore._tree_scores.level_scores against the NumPy definitions it replaces in the trees'
growing loop (dpcore.learn._tree_grid.split_utility and _base_offsets, and the candidate rule
of the box): the same candidates and the same doubles, so the exponential mechanism's law and
split_sensitivity's rounding analysis carry over unchanged."""
import numpy as np
import pytest

pytest.importorskip("sklearn")

from dpcore._tree_scores import level_scores  # noqa: E402
from dpcore.learn._tree_grid import _base_offsets, split_utility  # noqa: E402


def reference(tables, lo, hi, bins, criterion, scale):
    """The growing loop's NumPy computation before the kernel (fifth session)."""
    m, d, k, width = tables.shape
    cut = np.arange(1, width)
    excluded = (cut[None, :] >= bins[:, None]).ravel()
    cum = np.cumsum(tables, axis=3)
    below = cum[..., :-1]
    above = cum[..., -1:] - below
    inside = ((cut[None, None, :] > lo[:, :, None])
              & (cut[None, None, :] < hi[:, :, None])).reshape(m, -1)
    inside[~inside.any(axis=1)] = ~excluded
    per_feature = inside.reshape(m, d, width - 1).sum(axis=2)
    utility = split_utility(below.transpose(0, 1, 3, 2), above.transpose(0, 1, 3, 2), criterion)
    utility = (utility + _base_offsets(per_feature, scale)[:, :, None]).reshape(m, -1)
    utility[~inside] = -np.inf
    return inside, utility


def random_level(rng, m, d, k, width, big=False):
    bins = rng.integers(2, width + 1, d)
    bins[rng.integers(d)] = width
    tables = np.zeros((m, d, k, width), dtype=np.int64)
    lo = np.zeros((m, d), dtype=np.int64)
    hi = np.repeat(bins[None, :], m, axis=0)
    for r in range(m):
        n = rng.integers(0, 2**40 if big else 300)
        for f in range(d):
            tables[r, f, :, :bins[f]] = rng.multinomial(n, np.full(k * bins[f], 1 / (k * bins[f]))
                                                        ).reshape(k, bins[f])
        narrow = rng.random(d) < 0.5   # boxes narrowed by splits above (one node: none left)
        lo[r, narrow] = rng.integers(0, bins[narrow])
        hi[r, narrow] = np.minimum(bins[narrow], lo[r, narrow] + rng.integers(1, 4, narrow.sum()))
        if r == 0:
            hi[r] = lo[r] + 1
    return tables, lo, hi, bins


@pytest.mark.parametrize("criterion", ["gini", "max"])
@pytest.mark.parametrize("scale", [0.37, 1e-12, 25.0])
def test_same_candidates_and_doubles_as_numpy(criterion, scale):
    rng = np.random.default_rng(5)  # insecure-ok: test tables
    for m, d, k, width, big in [(1, 30, 2, 32, False), (4, 5, 3, 8, False), (6, 3, 10, 16, False),
                                (2, 4, 2, 4, True), (3, 7, 5, 300, False), (2, 3, 70, 4, False)]:
        tables, lo, hi, bins = random_level(rng, m, d, k, width, big)
        inside = np.empty((m, d * (width - 1)), dtype=np.uint8)
        utility = np.empty(inside.shape)
        level_scores(tables, lo, hi, bins, criterion == "gini", scale, inside, utility)
        want_inside, want = reference(tables, lo, hi, bins, criterion, scale)
        assert np.array_equal(inside.view(bool), want_inside)
        assert np.array_equal(utility, want)   # -inf where excluded, else the same doubles
        assert np.isinf(utility[0]).sum() < utility.shape[1]   # node 0 fell back to the grid


def test_scale_zero_gives_candidates_only():
    rng = np.random.default_rng(6)  # insecure-ok: test tables
    tables, lo, hi, bins = random_level(rng, 3, 4, 2, 8)
    inside = np.empty((3, 4 * 7), dtype=np.uint8)
    level_scores(tables, lo, hi, bins, True, 0.0, inside, np.empty((0, 0)))
    assert np.array_equal(inside.view(bool), reference(tables, lo, hi, bins, "max", 1.0)[0])


def test_shape_mismatch_raises():
    tables = np.zeros((2, 3, 2, 4), dtype=np.int64)
    lo, hi, bins = np.zeros((2, 3), np.int64), np.full((2, 3), 4, np.int64), np.full(3, 4, np.int64)
    with pytest.raises(ValueError, match="shape"):
        level_scores(tables, lo, hi, bins, True, 1.0, np.empty((2, 8), np.uint8), np.empty((2, 9)))
