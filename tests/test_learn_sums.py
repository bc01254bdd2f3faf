"""The one-pass lattice-sum kernels (dpcore._learn_sums) against the NumPy expressions they
replace, written out here as the reference: the same integers bit for bit on random rows, rows on
and beyond the bounds, lattice ties, rows the rounding would push out of the domain, and
non-finite values (flagged, mapped as numpy.nan_to_num maps them)."""
import math

import numpy as np
import pytest

from dpcore.learn import _ssp
from dpcore.learn._naive_bayes import GaussianNBSums, gaussian_nb_chunk


# ------------------------------------------------------------------------------------------------
# References: the NumPy passes of GaussianNB and SSPLattice before the kernels

def reference_class_sums(X, idx, k, lower, upper, grid):
    mid, half = (lower + upper) / 2.0, (upper - lower) / 2.0
    with np.errstate(invalid="ignore"):
        Z = np.nan_to_num(np.clip((np.clip(X, lower, upper) - mid) / half, -1.0, 1.0))
    d = Z.shape[1]
    counts = np.bincount(idx, minlength=k).astype(np.int64)
    sums = np.zeros((k, d), dtype=np.int64)
    squares = np.zeros((k, d), dtype=np.int64)
    np.add.at(sums, idx, np.rint(Z / grid).astype(np.int64))
    np.add.at(squares, idx, np.rint(Z * Z / grid).astype(np.int64))
    return counts, sums, squares


def reference_integers(lattice, Xs, ys):
    scaled = Xs * 2.0 ** -lattice.x_exponent
    a = np.rint(scaled)
    limit = np.array(lattice.coord_units, dtype=np.float64)

    def row_squares(v):
        vi = v.astype(np.int64)
        return np.einsum("ij,ij->i", vi, vi)

    outside = np.any(np.abs(a) > limit, axis=1) | (row_squares(a) > lattice.norm_units)
    if np.any(outside):
        t = np.clip(np.trunc(scaled[outside]), -limit, limit)
        while True:
            sq = row_squares(t)
            big = sq > lattice.norm_units
            if not np.any(big):
                break
            shrink = np.sqrt(lattice.norm_units / sq[big]) * (1.0 - 2.0**-30)
            t[big] = np.trunc(t[big] * shrink[:, None])
        a[outside] = t
    return a, np.rint(np.clip(ys, -1.0, 1.0) * 2.0 ** -lattice.y_exponent)


def reference_sums(lattice, Xs, ys):
    a, c = reference_integers(lattice, Xs, ys)
    ai, ci = a.astype(np.int64), c.astype(np.int64)
    return ai.T @ ai, ai.T @ ci, ai.sum(axis=0), np.array([ci.sum()])


def hard_rows(rng, n, d, lower, upper):
    """Rows inside and beyond [lower, upper], on the bounds, at their midpoint, signed zeros."""
    X = rng.uniform(lower - 1.0, upper + 1.0, (n, d))
    X[::7] = lower
    X[1::7] = upper
    X[2::7] = (lower + upper) / 2.0
    X[3::11] = -0.0
    X[4::13] = rng.normal(size=(X[4::13].shape[0], d)) * 1e6
    return X


# ------------------------------------------------------------------------------------------------
# GaussianNB

@pytest.mark.parametrize("d,epsilon", [(1, 0.5), (5, 1.0), (20, 3.0)])
def test_class_sums_equal_the_numpy_reference(d, epsilon):
    rng = np.random.default_rng(d)  # insecure-ok: test data
    lower, upper = rng.uniform(-3, -0.5, d), rng.uniform(0.5, 3, d)
    X = hard_rows(rng, 3000, d, lower, upper)
    plan = GaussianNBSums(epsilon, d)
    # lattice ties: z / g exactly half-way between two integers
    X[5] = (lower + upper) / 2.0 + (upper - lower) / 2.0 * 2.5 * plan.grid
    k = 3
    idx = rng.integers(0, k, X.shape[0])
    got, bad = plan.exact_rows(X, idx, k, lower, upper)
    assert not bad
    for g, r in zip(got, reference_class_sums(X, idx, k, lower, upper, plan.grid)):
        assert g.dtype == np.int64
        np.testing.assert_array_equal(g, r)
    # the rescaled-feature entry point too
    Z = rng.uniform(-1, 1, (500, d))
    for g, r in zip(plan.exact(Z, idx[:500], k),
                    reference_class_sums(Z, idx[:500], k, -np.ones(d), np.ones(d), plan.grid)):
        np.testing.assert_array_equal(g, r)


def test_class_sums_flag_non_finite_values_and_bad_labels():
    rng = np.random.default_rng(3)  # insecure-ok: test data
    d = 4
    lower, upper = -np.ones(d), np.ones(d)
    plan = GaussianNBSums(1.0, d)
    X = rng.uniform(-2, 2, (200, d))
    y = rng.integers(0, 2, 200)
    classes = np.array([0, 1])
    exact, bad_values, bad_labels = gaussian_nb_chunk(X, y, lower, upper, classes, plan)
    assert not bad_values and not bad_labels
    for value in (np.nan, np.inf, -np.inf):
        Xb = X.copy()
        Xb[17, 2] = value
        exact, bad_values, _ = gaussian_nb_chunk(Xb, y, lower, upper, classes, plan)
        assert bad_values
        for g, r in zip(exact, reference_class_sums(Xb, y, 2, lower, upper, plan.grid)):
            np.testing.assert_array_equal(g, r)
    yb = y.copy()
    yb[5] = 7
    assert gaussian_nb_chunk(X, yb, lower, upper, classes, plan)[2]


def test_class_sums_refuse_bad_shapes_and_indices():
    plan = GaussianNBSums(1.0, 2)
    with pytest.raises(ValueError, match="outside"):
        plan.exact(np.zeros((3, 2)), np.array([0, 1, 2]), 2)
    with pytest.raises(ValueError, match="shapes"):
        plan.exact(np.zeros((3, 2)), np.array([0, 1]), 2)


# ------------------------------------------------------------------------------------------------
# SSP

def lattices(d, n):
    cube = _ssp.SSPDomain.make(d, np.ones(d))
    ball = _ssp.SSPDomain.make(1, np.full(d, 0.8))
    for domain in (cube, ball):
        for delta in (None, 1e-6):
            plan = _ssp.ssp_plan(n, domain, epsilon=1.0, delta=delta, adaptive_ridge=True)
            yield domain, _ssp.SSPLattice.make(plan, domain)


@pytest.mark.parametrize("d", [1, 3, 20])
def test_lattice_sums_equal_the_numpy_reference(d):
    """Scaled rows (the data_norm path and ssp_statistics): inside the domain, on its boundary,
    beyond it (truncated and shrunk), at lattice ties; any block size of the Gram."""
    rng = np.random.default_rng(10 + d)  # insecure-ok: test data
    n = 2000
    for domain, lattice in lattices(d, n):
        b = np.array([float(v) for v in domain.coord])
        r = math.sqrt(float(domain.row_norm_sq))
        Xs = rng.normal(size=(n, d))
        Xs *= (r * rng.uniform(0.5, 1.5, n) / np.linalg.norm(Xs, axis=1))[:, None]
        Xs[::5] = np.clip(Xs[::5], -b, b)
        Xs[1::9] = np.sign(Xs[1::9]) * b             # corners: outside the ball
        Xs[2::9] *= 1e9                              # far outside
        Xs[3] = 2.5 * 2.0 ** lattice.x_exponent      # ties
        ys = rng.uniform(-1.5, 1.5, n)
        ys[4] = 0.5 * 2.0 ** lattice.y_exponent
        a, c = lattice.integers(Xs, ys)
        ra, rc = reference_integers(lattice, Xs, ys)
        assert np.any(ra != np.rint(Xs * 2.0 ** -lattice.x_exponent))   # rows truncated
        np.testing.assert_array_equal(a, ra)
        np.testing.assert_array_equal(c, rc)
        for block in (1, 3, lattice.block_rows):
            small = _ssp.SSPLattice(lattice.x_exponent, lattice.y_exponent, lattice.coord_units,
                                    lattice.norm_units, lattice.multipliers, block)
            for g, ref in zip(small.sums(Xs, ys), reference_sums(lattice, Xs, ys)):
                assert g.dtype == np.int64
                np.testing.assert_array_equal(g, ref)


@pytest.mark.parametrize("intercept", [True, False])
def test_scaled_sums_equal_the_numpy_reference(intercept):
    """Raw records with per-feature bounds (scaled in the kernel): the design's NumPy scaling
    then the reference sums; non-finite values flagged and mapped as numpy.nan_to_num does."""
    rng = np.random.default_rng(20 + intercept)  # insecure-ok: test data
    d, n = 6, 3000
    lower, upper = rng.uniform(-4, -1, d), rng.uniform(0.5, 3, d)
    design = _ssp.SSPDesign.make(d, (lower, upper), (-2.0, 5.0), None, intercept,
                                 *((1.5, 3.5) if intercept else (0.0, 5.0)))
    plan = _ssp.ssp_plan(n, design.domain, epsilon=1.0, intercept=intercept)
    lattice = _ssp.SSPLattice.make(plan, design.domain)
    X = hard_rows(rng, n, d, lower, upper)
    y = rng.uniform(-4, 7, n)
    y[::10] = -2.0
    X[7, 1], y[8], y[9] = np.nan, np.inf, np.nan
    sums, bad_x, bad_y = _ssp.ssp_chunk(X, y, design, lattice)
    assert bad_x and bad_y
    Xs, ys = design.scale(np.nan_to_num(X), np.nan_to_num(y))
    for g, ref in zip(sums, reference_sums(lattice, Xs, ys)):
        np.testing.assert_array_equal(g, ref)
    _, bad_x, bad_y = _ssp.ssp_chunk(np.nan_to_num(X), np.nan_to_num(y), design, lattice)
    assert not bad_x and not bad_y


# ------------------------------------------------------------------------------------------------
# CategoricalNB (NumPy, in blocks of rows): the counts of the per-column passes

def reference_categorical(X, y, categories, classes):
    """(counts, a value outside its categories, a label outside classes), column by column."""
    k = classes.size
    bad_labels = not bool(np.all(np.isin(y, classes)))
    idx = np.minimum(np.searchsorted(classes, y), k - 1)
    parts = [np.bincount(idx, minlength=k)]
    for j, cats in enumerate(categories):
        if not np.all(np.isin(X[:, j], cats)):
            return None, True, bad_labels
        parts.append(np.bincount(idx * cats.size + np.searchsorted(cats, X[:, j]),
                                 minlength=k * cats.size))
    return np.concatenate(parts).astype(np.int64), False, bad_labels


CATEGORY_CASES = {
    "small ints": ([np.arange(4), np.array([-3, 0, 7, 100]), np.arange(2)], np.int64),
    "uint": ([np.arange(3, dtype=np.uint64), np.array([5, 9], dtype=np.uint64)], np.uint64),
    "floats": ([np.array([-1.5, 0.0, 2.25]), np.array([1.0, 2.0])], np.float64),
    "wide ints": ([np.array([-2**40, 0, 2**40]), np.arange(3)], np.int64),
    "int32": ([np.array([-5, -1, 3]), np.arange(5)], np.int32),
}


@pytest.mark.parametrize("case", sorted(CATEGORY_CASES))
@pytest.mark.parametrize("block", [7, 4096])
def test_categorical_counts_equal_the_column_passes(case, block, monkeypatch):
    """The same counts and flags, rows split into blocks or not (NumPy) or in one compiled pass
    (integers with small spans); a value in a gap between categories, beyond them, or a wrapped
    integer is flagged as outside."""
    from dpcore.learn import _naive_bayes

    monkeypatch.setattr(_naive_bayes, "CATEGORY_BLOCK", block)
    categories, dtype = CATEGORY_CASES[case]
    rng = np.random.default_rng(len(case) + block)  # insecure-ok: test data
    n = 1000
    X = np.column_stack([cats[rng.integers(0, cats.size, n)] for cats in categories]).astype(dtype)
    classes = np.array([2, 5, 9])
    y = classes[rng.integers(0, 3, n)]
    got = _naive_bayes.categorical_nb_chunk(X, y, categories, classes)
    ref = reference_categorical(X, y, categories, classes)
    np.testing.assert_array_equal(got[0][0], ref[0])
    assert got[1:] == ref[1:] == (False, False)
    # in memory: the same counts through the estimator's path
    counts, bad = _naive_bayes.category_counts(X, np.searchsorted(classes, y), 3, categories)
    assert bad is None
    np.testing.assert_array_equal(counts, ref[0])
    outside = {"small ints": [50, 101, -4, 2**62], "uint": [4, 2**63 + 5, 2**64 - 1],
               "floats": [0.5, np.nan, np.inf], "wide ints": [1, -2**63, 2**41],
               "int32": [-2, 4, 2**31 - 1, -2**31]}[case]
    for value in outside:
        Xb = X.copy()
        Xb[n - 3, 0] = value
        assert _naive_bayes.categorical_nb_chunk(Xb, y, categories, classes)[1]
        assert reference_categorical(Xb, y, categories, classes)[1]
        with pytest.raises(ValueError, match=r"X\[:, 0\] contains values outside"):
            _naive_bayes._codes(Xb, categories)
    yb = y.copy()
    yb[3] = 4
    assert _naive_bayes.categorical_nb_chunk(X, yb, categories, classes)[2]


def test_categorical_counts_of_strings():
    from dpcore.learn import _naive_bayes

    categories = [np.array(["a", "b", "c"]), np.array(["no", "yes"])]
    X = np.array([["a", "no"], ["c", "yes"], ["b", "yes"], ["c", "no"]], dtype=object)
    classes = np.array([0, 1])
    y = np.array([0, 1, 1, 0])
    counts, bad_values, bad_labels = _naive_bayes.categorical_nb_chunk(X, y, categories, classes)
    ref = reference_categorical(X.astype(str), y, categories, classes)
    np.testing.assert_array_equal(counts[0], ref[0])
    assert not bad_values and not bad_labels
    X[2, 1] = 3   # not comparable with the strings
    assert _naive_bayes.categorical_nb_chunk(X, y, categories, classes)[1]


def test_category_kernel_refuses_indices_outside_its_arrays():
    from dpcore import _learn_sums

    X = np.zeros((2, 1), dtype=np.int64)
    one = np.ones(1, dtype=np.int64)
    zero = np.zeros(1, dtype=np.int64)
    table = np.zeros(1, dtype=np.int32)
    counts = np.zeros(4, dtype=np.int64)
    assert _learn_sums.category_counts(X, np.array([0, 1]), zero, one, zero, table, one,
                                       np.array([2]), counts) == -1
    np.testing.assert_array_equal(counts, [1, 1, 1, 1])
    with pytest.raises(ValueError, match="class index"):
        _learn_sums.category_counts(X, np.array([0, 4]), zero, one, zero, table, one,
                                    np.array([2]), counts)
    with pytest.raises(ValueError, match="outside counts"):
        _learn_sums.category_counts(X, np.array([0, 1]), zero, one, zero, table, one,
                                    np.array([3]), counts)
    with pytest.raises(ValueError, match="table"):
        _learn_sums.category_counts(X, np.array([0, 1]), zero, np.array([2]), zero, table, one,
                                    np.array([2]), counts)


def test_lattice_rows_shrunk_into_the_norm_bound_equal_the_reference():
    """A lattice whose norm bound is below what truncation leaves: the shrinking loop (float
    rounding of the scaling makes it rare in real plans) gives the reference's integers, and
    every row ends inside the bound."""
    rng = np.random.default_rng(31)  # insecure-ok: test data
    lattice = _ssp.SSPLattice(0, 0, (5, 5, 5), 10, {}, 8)
    Xs = rng.uniform(-6, 6, (400, 3))
    ys = rng.uniform(-1, 1, 400)
    a, c = lattice.integers(Xs, ys)
    ra, rc = reference_integers(lattice, Xs, ys)
    np.testing.assert_array_equal(a, ra)
    np.testing.assert_array_equal(c, rc)
    assert np.all(np.sum(a * a, axis=1) <= 10) and np.all(np.abs(a) <= 5)
    shrunk = np.sum(np.clip(np.trunc(Xs), -5, 5) ** 2, axis=1) > 10
    assert shrunk.sum() > 100   # the loop ran
    for g, ref in zip(lattice.sums(Xs, ys), reference_sums(lattice, Xs, ys)):
        np.testing.assert_array_equal(g, ref)
