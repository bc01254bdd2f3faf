"""The _histogram kernel and dpcore.stats.histogramdd: counts equal numpy.histogramdd exactly
(edges, the upper bound, float32/float64, explicit edges, clipping), chunked counting equals
one-shot counting, the noise stage is exact discrete Laplace on every cell (the empty ones
included, never left at its true count), post-processing, errors and the accountant."""
import math
from fractions import Fraction

import numpy as np
import pytest

from _gof import ALPHA, dlap_pmf, integer_pvalue, z_critical

from dpcore._release import bins as release_bins, sums as release_sums
import dpcore
from dpcore import _histogram, _noise, stats


def rng(seed):
    return np.random.Generator(dpcore.ChaCha20(seed))


def dlap_scale(sensitivity, epsilon):
    """The scale stats uses: sensitivity / epsilon as an exact rational, rounded up to a float."""
    exact = Fraction(sensitivity) / Fraction(epsilon)
    t = float(exact)
    return t if Fraction(t) >= exact else math.nextafter(t, math.inf)


def tricky_sample(n, d, bins, lo, hi, seed, dtype=np.float64):
    """Uniform points plus points exactly on every edge, on lo and on hi, and just outside."""
    g = np.random.default_rng(seed)
    x = g.uniform(lo, hi, size=(n, d))
    edges = np.linspace(lo, hi, bins + 1)
    special = np.concatenate([edges, np.nextafter(edges, -np.inf), np.nextafter(edges, np.inf)])
    for k in range(d):
        rows = g.integers(0, n, size=special.size)
        x[rows, k] = special
    return x.astype(dtype)


def kernel_counts(sample, grid, clip=False):
    counts = np.zeros(grid.size, dtype=np.int64)
    grid.count_into(np.ascontiguousarray(sample), counts, clip)
    return counts.reshape(grid.shape)


#: counting paths of the kernel: -1 the scalar axis-by-axis loop, 0 the portable block path,
#: 1 the AVX2 block path (runs as 0 on a CPU without AVX2)
LEVELS = [-1, 0, 1]


@pytest.fixture(params=LEVELS, ids=lambda v: f"level{v}")
def level(request):
    """Run the test with the kernel's counting path forced to one level, then restore it."""
    saved = _histogram._simd_level()
    got = _histogram._simd_level(request.param)
    assert got == request.param or (request.param == 1 and got == 0)
    yield got
    _histogram._simd_level(saved)


# ------------------------------------------------------------------------------------------------
# counting


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("d,bins", [(1, 10), (1, 1000), (2, 7), (3, 13), (5, 4)])
def test_counts_equal_numpy_histogramdd(d, bins, dtype, level):
    lo, hi = -0.3, 0.7  # edges that are not exact binary fractions
    x = tricky_sample(20_000, d, bins, lo, hi, seed=d * 1000 + bins, dtype=dtype)
    grid = release_bins.BinGrid.make(bins, [(lo, hi)] * d, d)
    ref, ref_edges = np.histogramdd(x, bins=bins, range=[(lo, hi)] * d)
    for e, r in zip(grid.edges, ref_edges):
        np.testing.assert_array_equal(e, r)
    got = kernel_counts(x, grid)
    np.testing.assert_array_equal(got, ref)
    assert got.sum() < x.shape[0]  # points just outside were dropped


def test_upper_bound_and_edges_land_as_in_numpy(level):
    lo, hi, bins = 0.1, 0.3, 10  # 0.1 + k * 0.02 is not exact in binary
    edges = np.linspace(lo, hi, bins + 1)
    x = np.concatenate([edges, [hi, hi, lo]])[:, None]
    grid = release_bins.BinGrid.make(bins, [(lo, hi)], 1)
    got = kernel_counts(x, grid)
    ref, _ = np.histogramdd(x, bins=bins, range=[(lo, hi)])
    np.testing.assert_array_equal(got, ref)
    assert got[-1] == 4  # the last edge counted in the last (closed) cell, three times hi


def test_explicit_and_mixed_edges(level):
    g = np.random.default_rng(3)
    e0 = np.array([0.0, 0.1, 0.5, 0.55, 1.0])
    x = np.column_stack([g.uniform(-0.1, 1.1, 5000), g.uniform(0, 2, 5000)])
    x[:5, 0] = e0
    grid = release_bins.BinGrid.make([e0, 6], [None, (0.0, 2.0)], 2)
    ref, _ = np.histogramdd(x, bins=[e0, np.linspace(0, 2, 7)])
    np.testing.assert_array_equal(kernel_counts(x, grid), ref)


def test_clip_counts_the_clipped_points(level):
    g = np.random.default_rng(4)
    x = g.normal(0.5, 0.6, size=(10_000, 2))
    lo, hi = 0.0, 1.0
    grid = release_bins.BinGrid.make([8, 5], [(lo, hi)] * 2, 2)
    got = kernel_counts(x, grid, clip=True)
    ref, _ = np.histogramdd(np.clip(x, lo, hi), bins=[8, 5], range=[(lo, hi)] * 2)
    np.testing.assert_array_equal(got, ref)
    assert got.sum() == x.shape[0]


def test_chunked_counting_equals_one_shot(level):
    x = tricky_sample(30_001, 3, 9, 0.0, 1.0, seed=5)
    grid = release_bins.BinGrid.make(9, [(0.0, 1.0)] * 3, 3)
    one = kernel_counts(x, grid)
    acc = np.zeros(grid.size, dtype=np.int64)
    for start in range(0, x.shape[0], 4_097):
        grid.count_into(x[start:start + 4_097], acc, False)
    np.testing.assert_array_equal(acc.reshape(grid.shape), one)


def test_kernel_reports_dropped_and_nonfinite_rows(level):
    grid = release_bins.BinGrid.make(4, [(0.0, 1.0)] * 2, 2)
    x = np.array([[0.5, 0.5], [2.0, 0.5], [np.nan, 2.0], [0.5, np.inf], [-np.inf, 0.1]])
    counts = np.zeros(grid.size, dtype=np.int64)
    dropped, bad = _histogram.count_into(x, *grid.kernel_args, False, counts)
    assert (dropped, bad, counts.sum()) == (4, 3, 1)
    with pytest.raises(ValueError, match="sample must not contain NaN"):
        grid.count_into(x, counts, True)


def test_histogramdd_matches_numpy_layout():
    x = tricky_sample(5_000, 3, 6, 0.0, 1.0, seed=6)
    counts, edges = stats.histogramdd(x, bins=[6, 4, 3], range=[(0, 1)] * 3, epsilon=1e6,
                                      random_state=0)
    ref, ref_edges = np.histogramdd(x, bins=[6, 4, 3], range=[(0, 1)] * 3)
    assert counts.shape == ref.shape and counts.dtype == np.int64
    np.testing.assert_array_equal(counts, ref)  # scale 1e-6: the noise is 0 w.p. ~1
    for e, r in zip(edges, ref_edges):
        np.testing.assert_array_equal(e, r)
    # 1-d input is N points in one dimension; non-contiguous and integer input accepted
    c1, _ = stats.histogramdd(x[:, 0], bins=6, range=(0, 1), epsilon=1e6, random_state=0)
    np.testing.assert_array_equal(c1, np.histogram(x[:, 0], bins=6, range=(0, 1))[0])
    c2, _ = stats.histogramdd(np.asfortranarray(x)[:, ::2], bins=3, range=[(0, 1)] * 2,
                              epsilon=1e6, random_state=0)
    np.testing.assert_array_equal(c2, np.histogramdd(x[:, ::2], bins=3, range=[(0, 1)] * 2)[0])
    c3, _ = stats.histogramdd(np.array([[0, 1], [2, 2]]), bins=2, range=[(0, 2)] * 2,
                              epsilon=1e6, random_state=0)
    np.testing.assert_array_equal(c3, [[0, 1], [0, 1]])


# ------------------------------------------------------------------------------------------------
# the noise stage


@pytest.mark.parametrize("relation,sensitivity", [("add_remove", 1), ("replace", 2)])
def test_noise_is_dlap_on_every_cell(relation, sensitivity):
    """200 000 cells (more than one noise chunk), a few occupied: the residuals are i.i.d.
    DLap(sensitivity / epsilon); a 10% wrong scale is rejected (power)."""
    eps = 0.9
    x = np.repeat([[0.05, 0.05], [0.55, 0.95]], [300, 20], axis=0)
    counts, _ = stats.histogramdd(x, bins=[400, 500], range=[(0, 1), (0, 1)], epsilon=eps,
                                  relation=relation, nonnegative=False, random_state=rng(11 + sensitivity))
    exact, _ = np.histogramdd(x, bins=[400, 500], range=[(0, 1), (0, 1)])
    noise = (counts - exact).reshape(-1)
    t = dlap_scale(sensitivity, eps)
    support = np.arange(-int(12 * t), int(12 * t) + 1)
    assert integer_pvalue(noise, dlap_pmf(t), support) > ALPHA
    assert integer_pvalue(noise, dlap_pmf(t * 1.1), support) < ALPHA
    # the two halves of the vector (different noise chunks) follow the same law
    half = noise.size // 2
    assert integer_pvalue(noise[half:], dlap_pmf(t), support) > ALPHA


def test_every_cell_is_noised():
    """Over 600 releases of a 30-cell grid, each cell's residual is 0 with probability
    P(DLap = 0), occupied and empty cells alike: no cell is ever left at its true count with
    probability 1 (z-test per cell, Bonferroni over the cells)."""
    eps, reps = 1.5, 600
    x = np.repeat(np.linspace(0.01, 0.3, 10), 5)[:, None]  # cells 0..8 occupied, the rest empty
    exact, _ = np.histogramdd(x, bins=30, range=[(0, 1)])
    g = rng(21)
    zeros = np.zeros(30)
    for _ in range(reps):
        counts, _ = stats.histogramdd(x, bins=30, range=[(0, 1)], epsilon=eps, nonnegative=False, random_state=g)
        zeros += counts == exact
    t = dlap_scale(1, eps)
    p0 = dlap_pmf(t)(0)
    se = math.sqrt(p0 * (1 - p0) / reps)
    z = z_critical(ALPHA, 30)
    assert np.all(np.abs(zeros / reps - p0) <= z * se), zeros / reps
    assert zeros.max() < reps
    assert (exact > 0).sum() >= 5 and (exact == 0).sum() >= 20


def test_discrete_laplace_add_into_uses_one_stream():
    """A seed is turned into one generator: chunks get different noise."""
    a = np.zeros(3 * 65536, dtype=np.int64)
    _noise.discrete_laplace_add_into(a, 3.0, 7)
    chunks = a.reshape(3, -1)
    assert not np.array_equal(chunks[0], chunks[1])
    b = np.zeros_like(a)
    _noise.discrete_laplace_add_into(b, 3.0, 7)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_seeded_noise_is_the_samplers_draws(mechanism):
    """The released counts are the exact counts plus the sampler's draws over the cells in C
    order, from the generator as given (Gaussian: dpcore.discrete_gaussian's draws)."""
    x = rng(52).random((300, 2))
    kw = {"delta": 1e-6} if mechanism == "gaussian" else {}
    counts, _ = stats.histogramdd(x, bins=[70, 40], range=[(0, 1)] * 2, epsilon=0.8,
                                  mechanism=mechanism, nonnegative=False, random_state=dpcore.ChaCha20(6), **kw)
    exact, _ = np.histogramdd(x, bins=[70, 40], range=[(0, 1)] * 2)
    scale = release_sums.IntegerNoise.calibrate(mechanism, 1, 0.8, kw.get("delta", 0.0)).scale
    sampler = dpcore.discrete_gaussian if mechanism == "gaussian" else dpcore.discrete_laplace
    noise = sampler(scale, size=(70, 40), random_state=dpcore.ChaCha20(6))
    np.testing.assert_array_equal(counts, exact.astype(np.int64) + noise)


def test_gaussian_mechanism_noise_scale():
    x = np.zeros((10, 1))
    counts, _ = stats.histogramdd(x, bins=50_000, range=[(0, 1)], epsilon=1.0, delta=1e-6,
                                  mechanism="gaussian", nonnegative=False, random_state=rng(31))
    noise = counts.astype(float).reshape(-1)
    noise[0] -= 10
    sigma = release_sums.IntegerNoise.calibrate("gaussian", 1, 1.0, 1e-6).scale
    # sample variance within z * SE of sigma**2 (SE of a variance ~ sigma**2 sqrt(2 / n))
    se = sigma**2 * math.sqrt(2 / noise.size)
    assert abs(noise.var() - sigma**2) < z_critical() * se + 0.01 * sigma**2
    with pytest.raises(ValueError, match="relation='replace'"):
        stats.histogramdd(x, bins=5, range=[(0, 1)], epsilon=1.0, delta=1e-6,
                          mechanism="gaussian", relation="replace")


# ------------------------------------------------------------------------------------------------
# post-processing, errors, accountant


def test_postprocessing_uses_only_the_noisy_counts():
    x = np.repeat([[0.1], [0.9]], [50, 3], axis=0)
    raw, _ = stats.histogramdd(x, bins=40, range=[(0, 1)], epsilon=0.5, nonnegative=False,
                               random_state=rng(41))
    clamped, _ = stats.histogramdd(x, bins=40, range=[(0, 1)], epsilon=0.5, random_state=rng(41))
    np.testing.assert_array_equal(clamped, np.maximum(raw, 0))  # the default: clamp at 0
    assert clamped.dtype == np.int64
    to_n, _ = stats.histogramdd(x, bins=40, range=[(0, 1)], epsilon=0.5, nonnegative="project",
                                n=53, random_state=rng(41))
    assert to_n.min() >= 0 and abs(to_n.sum() - 53) < 1e-9  # the public total
    nonneg, _ = stats.histogramdd(x, bins=40, range=[(0, 1)], epsilon=0.5, nonnegative=True,
                                  random_state=rng(41))
    cons, _ = stats.histogramdd(x, bins=40, range=[(0, 1)], epsilon=0.5, consistent=True,
                                random_state=rng(41))
    np.testing.assert_array_equal(nonneg, cons)   # one projection, either name
    assert cons.dtype == np.float64 and cons.min() >= 0
    assert abs(cons.sum() - max(raw.sum(), 0)) < 1e-6 * max(1, abs(raw.sum()))
    # the Euclidean projection onto the scaled simplex: v - theta clipped at 0 for one theta
    pos = cons > 0
    theta = (raw - cons)[pos]
    np.testing.assert_allclose(theta, theta[0], atol=1e-9)
    assert np.all(raw[~pos] <= theta[0] + 1e-9)


def test_errors_name_the_parameter():
    x = np.zeros((5, 2))
    ok = dict(bins=3, range=[(0, 1), (0, 1)], epsilon=1.0)
    with pytest.raises(ValueError, match=r"range\[0\] is required"):
        stats.histogramdd(x, bins=3, epsilon=1.0)
    with pytest.raises(ValueError, match="look at the data"):
        stats.histogramdd(x, **{**ok, "bins": "auto"})
    with pytest.raises(ValueError, match="one entry per dimension"):
        stats.histogramdd(x, **{**ok, "bins": [3, 3, 3]})
    with pytest.raises(ValueError, match="epsilon must be > 0"):
        stats.histogramdd(x, **{**ok, "epsilon": 0.0})
    with pytest.raises(ValueError, match="outside must be"):
        stats.histogramdd(x, **ok, outside="wrap")
    with pytest.raises(ValueError, match="relation must be"):
        stats.histogramdd(x, **ok, relation="swap")
    with pytest.raises(ValueError, match="sample must not contain NaN"):
        stats.histogramdd(np.array([[0.1, np.nan]]), **ok)
    with pytest.raises(ValueError, match=r"sample must be \(N, D\)"):
        stats.histogramdd(np.zeros((2, 2, 2)), **ok)
    with pytest.raises(TypeError, match="sample must contain real numbers"):
        stats.histogramdd(np.array(["a", "b"]), bins=3, range=(0, 1), epsilon=1.0)
    with pytest.raises(TypeError, match="nonnegative"):
        stats.histogramdd(x, **ok, nonnegative=1)
    with pytest.raises(ValueError, match="strictly increasing"):
        stats.histogramdd(x, bins=[[0, 1, 1], 2], range=[None, (0, 1)], epsilon=1.0)
    with pytest.raises(ValueError, match="more than"):
        stats.histogramdd(x, bins=[2**20, 2**20], range=[(0, 1)] * 2, epsilon=1.0)


def test_accountant_charged_before_drawing():
    acc = dpcore.Accountant(1.0)
    stats.histogramdd(np.zeros((3, 1)), bins=2, range=(0, 1), epsilon=0.75, accountant=acc,
                      random_state=0)
    with pytest.raises(dpcore.BudgetExceeded):
        stats.histogramdd(np.zeros((3, 1)), bins=2, range=(0, 1), epsilon=0.5, accountant=acc,
                          random_state=0)
    assert len(acc.history) == 1


def test_all_three_edge_modes_agree_with_numpy_on_random_ranges(level):
    """Computed edges (mode 2), loaded linspace edges (mode 1) and binary search (mode 0) give
    numpy's cells on random ranges and bin counts, with points on, just below and just above
    every edge."""
    g = np.random.default_rng(8)
    seen = set()
    for trial in range(40):
        lo = float(g.choice([0.0, -1.0, 1e-3, -123.456, 1e6])) + float(g.normal()) * trial % 3
        hi = lo + float(g.choice([1e-6, 0.1, 1.0, 3.7, 1e4]))
        bins = int(g.choice([1, 2, 3, 10, 97, 1000, 65_537]))
        x = tricky_sample(3000, 1, bins, lo, hi, seed=trial)[: 3000 + 3 * (bins + 1)]
        grid = release_bins.BinGrid.make(bins, [(lo, hi)], 1)
        ref, _ = np.histogramdd(x, bins=bins, range=[(lo, hi)])
        seen.add(int(grid.uniform[0]))
        for mode in (int(grid.uniform[0]), 1, 0):
            forced = release_bins.BinGrid(grid.edges, np.array([mode], dtype=np.uint8))
            np.testing.assert_array_equal(kernel_counts(x, forced), ref, err_msg=str(mode))
    assert 2 in seen


def test_fast_path_margin_near_edges(level):
    """Points 1 to 4096 ulps either side of every edge, on ranges far from zero (where the
    fast path's margin matters most): the cells are numpy's, with and without the fast path."""
    for lo, hi, bins in [(1e6, 1e6 + 1, 1000), (-7.3, 12.9, 777), (0.0, 1.0, 100_000),
                         (-1e-3, -1e-3 + 3e-9, 10), (5.0, 5.0 + 2**-20, 1024)]:
        edges = np.linspace(lo, hi, bins + 1)
        pts = [edges]
        for k in (1, 2, 3, 7, 31, 255, 4096):
            below, above = edges.copy(), edges.copy()
            for _ in range(k if k < 8 else 1):
                below = np.nextafter(below, -np.inf)
                above = np.nextafter(above, np.inf)
            if k >= 8:
                below = edges - k * np.spacing(edges)
                above = edges + k * np.spacing(edges)
            pts += [below, above]
        x = np.concatenate(pts)[:, None]
        grid = release_bins.BinGrid.make(bins, [(lo, hi)], 1)
        assert grid.uniform[0] == 2
        ref, _ = np.histogramdd(x, bins=bins, range=[(lo, hi)])
        np.testing.assert_array_equal(kernel_counts(x, grid), ref)
        args = list(grid.kernel_args)
        args[6] = np.ones(1)  # fast path off
        counts = np.zeros(grid.size, dtype=np.int64)
        _histogram.count_into(x, *args, False, counts)
        np.testing.assert_array_equal(counts, ref)


# ------------------------------------------------------------------------------------------------
# the block (vector) path against numpy, every dimension it serves, awkward values


def nasty_values(lo, hi, bins):
    """Values that stress the fast path's tests: on and next to lo, hi and an inner edge, far
    outside, signed zeros, subnormals, infinities and NaN."""
    e = np.linspace(lo, hi, bins + 1)
    inner = e[bins // 2]
    base = [lo, hi, inner, 0.0, -0.0, 5e-324, -5e-324, 1e-300, -1e-300, 1e300, -1e300,
            np.inf, -np.inf, np.nan, lo - (hi - lo), hi + (hi - lo)]
    near = [f(v, s) for v in (lo, hi, inner) for s in (-np.inf, np.inf) for f in (np.nextafter,)]
    return np.array(base + near)


def searchsorted_counts(x, bins, ranges):
    """numpy.histogramdd's rule axis by axis (bin = searchsorted(edges, x, 'right') - 1, the
    last edge in the last bin, outside dropped) for grids too large for histogramdd's
    (bins + 2)**d intermediate array."""
    shape = tuple(bins)
    flat = np.zeros(x.shape[0], dtype=np.int64)
    keep = np.ones(x.shape[0], dtype=bool)
    for k, (b, (lo, hi)) in enumerate(zip(bins, ranges)):
        e = np.linspace(lo, hi, b + 1)
        idx = np.searchsorted(e, x[:, k], side="right") - 1
        idx[x[:, k] == e[-1]] = b - 1
        keep &= (idx >= 0) & (idx < b)
        flat = flat * b + np.clip(idx, 0, b - 1)
    return np.bincount(flat[keep], minlength=math.prod(shape)).reshape(shape)


def reference_counts(x, bins, ranges, clip):
    """numpy's counts of the rows without NaN/inf (clipped first with ``clip``); returns
    (counts, rows not counted, rows with NaN/inf)."""
    finite = np.isfinite(x).all(axis=1)
    xf = x[finite].astype(np.float64)
    lo = np.array([r[0] for r in ranges])
    hi = np.array([r[1] for r in ranges])
    if clip:
        xf = np.clip(xf, lo, hi)
    if len(bins) <= 8:
        counts = np.histogramdd(xf, bins=bins, range=ranges)[0].astype(np.int64)
        np.testing.assert_array_equal(searchsorted_counts(xf, bins, ranges), counts)
    else:
        counts = searchsorted_counts(xf, bins, ranges)
    inside = ((xf >= lo) & (xf <= hi)).all(axis=1)
    return counts, int(x.shape[0] - inside.sum()), int((~finite).sum())


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("clip", [False, True])
def test_block_path_every_dimension_and_tail(dtype, clip, level):
    """d = 1..17 (the block path serves d <= 16, 17 goes axis by axis), row counts that are not
    multiples of 4 (the tail rows), random ranges, points on and next to edges, nasty values in
    random places, small and prefetched grids: counts, dropped and non-finite rows as numpy."""
    g = np.random.default_rng(11)
    saved_prefetch = 1 << 17
    try:
        for d in range(1, 18):
            for n in (1, 3, 4, 7, 517 + d):
                bins = [int(b) for b in g.integers(1, 8 if d < 6 else 3, size=d)]
                ranges = [(float(lo), float(lo) + float(w)) for lo, w in
                          zip(g.normal(0, 10, size=d), g.choice([1e-3, 0.7, 3.0, 1e3], size=d))]
                x = np.column_stack([g.uniform(lo - 0.1 * (hi - lo), hi + 0.1 * (hi - lo), n)
                                     for lo, hi in ranges])
                for k, ((lo, hi), b) in enumerate(zip(ranges, bins)):
                    vals = np.concatenate([np.linspace(lo, hi, b + 1), nasty_values(lo, hi, b)])
                    rows = g.integers(0, n, size=min(n, vals.size))
                    x[rows, k] = g.choice(vals, size=rows.size)
                with np.errstate(over="ignore"):  # 1e300 as float32 is inf: fine here
                    x = x.astype(dtype)
                grid = release_bins.BinGrid.make(bins, ranges, d)
                assert grid.uniform.min() >= 1
                ref, not_counted, nonfinite = reference_counts(x, bins, ranges, clip)
                for prefetch in (1 << 17, 0):  # prefetch off (small grid) and forced on
                    _histogram._set_prefetch_cells(prefetch)
                    counts = np.zeros(grid.size, dtype=np.int64)
                    got = _histogram.count_into(x, *grid.kernel_args, clip, counts)
                    np.testing.assert_array_equal(counts.reshape(grid.shape), ref,
                                                  err_msg=f"d={d} n={n} prefetch={prefetch}")
                    assert got == (not_counted, nonfinite)
    finally:
        _histogram._set_prefetch_cells(saved_prefetch)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_block_path_large_uniform_sample(dtype, level):
    """Many points exactly on and next to the edges of a 3-d grid with ranges far from zero
    (the margin is widest there), mixed into uniform points: numpy's counts exactly."""
    ranges = [(1e5, 1e5 + 3.0), (-7.3, 12.9), (-1e-3, -1e-3 + 3e-9)]
    bins = [300, 77, 10]
    g = np.random.default_rng(12)
    n = 60_001
    x = np.column_stack([g.uniform(lo, hi, n) for lo, hi in ranges])
    for k, ((lo, hi), b) in enumerate(zip(ranges, bins)):
        e = np.linspace(lo, hi, b + 1)
        vals = np.concatenate([e, np.nextafter(e, -np.inf), np.nextafter(e, np.inf),
                               e - 3 * np.spacing(e), e + 3 * np.spacing(e)])
        rows = g.integers(0, n, size=vals.size)
        x[rows, k] = vals
    x = x.astype(dtype)
    grid = release_bins.BinGrid.make(bins, ranges, 3)
    ref, not_counted, _ = reference_counts(x, bins, ranges, False)
    counts = np.zeros(grid.size, dtype=np.int64)
    assert _histogram.count_into(x, *grid.kernel_args, False, counts) == (not_counted, 0)
    np.testing.assert_array_equal(counts.reshape(grid.shape), ref)


def test_simd_level_hook():
    saved = _histogram._simd_level()
    try:
        assert _histogram._simd_level(-1) == -1
        assert _histogram._simd_level(0) == 0
        assert _histogram._simd_level(1) in (0, 1)
    finally:
        _histogram._simd_level(saved)
    assert _histogram._simd_level() == saved


@pytest.mark.parametrize("d, kwargs, match", [
    (1, dict(bins=10, range=(0.0, 1e-308)), "too narrow"),
    (1, dict(bins=10, range=(-1e308, 1e308)), "too wide"),
    (2, dict(bins=[2**15, 2**14], range=[(0, 1), (0, 1)]), "MAX_HISTOGRAM_CELLS"),
])
def test_degenerate_grids_refused_before_anything(d, kwargs, match):
    """Bins a double cannot resolve (the kernel would loop for ages) and grids beyond the cell
    cap are refused up front, with nothing charged (issue 14)."""
    acc = dpcore.Accountant(1.0)
    with pytest.raises(ValueError, match=match):
        stats.histogramdd(np.zeros((3, d)), epsilon=0.5, accountant=acc, **kwargs)
    assert acc.history == []
