"""The public noise mechanisms: calibration, support, exact laws, Mironov's attack, errors."""
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from _gof import ALPHA, chisquare_pvalue, integer_pvalue
from _generators import GENERATOR_KINDS, generator

import dpcore
from dpcore import calibration
from dpcore._crlog import log as crlog
from dpcore.mechanisms import GaussianMechanism, LaplaceMechanism


# ---------------------------------------------------------------------------------------------
# calibration


@pytest.mark.parametrize("sensitivity, epsilon, size", [(1.0, 1.0, 1), (3.7, 0.1, 10), (1e-3, 7.0, 1000)])
def test_discrete_laplace_calibration(sensitivity, epsilon, size):
    m = LaplaceMechanism.calibrate(sensitivity=sensitivity, epsilon=epsilon, size=size)
    frac_grid = Fraction(m.grid)
    assert frac_grid.numerator == 1 or frac_grid.denominator == 1  # a power of two
    assert math.log2(m.grid) == int(math.log2(m.grid))
    sens_units = Fraction(sensitivity) / frac_grid + size
    assert sens_units / Fraction(m.scale) <= Fraction(epsilon)  # exact: never more loss than asked
    assert m.epsilon_effective <= epsilon
    assert m.epsilon_effective > epsilon * (1 - 1e-12)  # and not much less
    assert Fraction(m.scale) <= sens_units / Fraction(epsilon) * (1 + Fraction(1, 2**51))


def test_snapping_calibration_matches_mironov_bound():
    m = LaplaceMechanism.calibrate(sensitivity=1.0, epsilon=1.0, bound=100.0, method="snapping")
    eta = Fraction(1, 2**53)
    exact = (1 + 12 * Fraction(100) * eta) / Fraction(m.scale) + 2 * eta
    assert exact <= 1  # Mironov 2012, Theorem 1: for eps = 1, B = 100 the reported eps_snap <= 1 exactly
    assert m.grid >= m.scale and m.grid / 2 < m.scale  # Lambda = smallest power of two >= lambda
    assert m.delta_effective == 0.0  # B = 100 <= 372 lambda


def test_snapping_sensitivity_rounded_to_power_of_two():
    m = LaplaceMechanism.calibrate(sensitivity=3.0, epsilon=1.0, bound=50.0, method="snapping")
    assert m.unit == 4.0
    m2 = LaplaceMechanism.calibrate(sensitivity=4.0, epsilon=1.0, bound=50.0, method="snapping")
    assert m2.unit == 4.0 and m2.scale == m.scale


def test_snapping_large_bound_is_approximate_dp():
    m = LaplaceMechanism.calibrate(sensitivity=1.0, epsilon=1.0, bound=1000.0, method="snapping")
    assert m.delta_effective == 2.0**-1070


def test_gaussian_calibration_rho():
    m = GaussianMechanism.calibrate(sensitivity=2.0, rho=0.125, size=4)
    sens_units = 2.0 / m.grid + 2.0
    assert sens_units**2 / (2 * m.sigma**2) <= 0.125
    assert m.rho <= 0.125 and m.rho > 0.125 * (1 - 1e-9)


def test_gaussian_calibration_epsilon_delta_scalar_uses_exact_discrete_delta():
    m = GaussianMechanism.calibrate(sensitivity=1.0, epsilon=1.0, delta=1e-5)
    d_int = math.floor(1.0 / m.grid + 1.0)
    assert calibration.discrete_gaussian_delta(m.sigma**2, 1.0, d_int) <= 1e-5
    # in real units sigma is close to the analytic Gaussian value 3.730632 (Balle-Wang 2018)
    assert abs(m.sigma * m.grid - 3.730632) / 3.730632 < 1e-3


# ---------------------------------------------------------------------------------------------
# laws of the released values


def test_laplace_discrete_law():
    """Vector release, granularity 1/4, L1 sensitivity 1 over 1000 elements: 4 + 1000 grid units
    of sensitivity, scale 10.04 at epsilon 100; out/grid - rint(value/grid) ~ DLap(scale)."""
    n = 1000
    m = LaplaceMechanism.calibrate(sensitivity=1.0, epsilon=100.0, size=n, granularity=0.25)
    assert m.scale == pytest.approx(10.04)
    noise = []
    for seed in range(100):
        out = dpcore.laplace(np.full(n, 2.3), sensitivity=1.0, epsilon=100.0, granularity=0.25,
                             random_state=seed)
        units = out / 0.25
        assert np.all(units == np.round(units))
        noise.append(units - np.rint(2.3 / 0.25))
    noise = np.concatenate(noise).astype(np.int64)
    q = math.exp(-1 / m.scale)
    pmf = lambda k: (1 - q) / (1 + q) * q ** abs(k)
    assert integer_pvalue(noise, pmf, np.arange(-80, 81)) > ALPHA


def test_laplace_discrete_scalar_law():
    draws = np.array([dpcore.laplace(0.0, sensitivity=1.0, epsilon=1.0, granularity=0.5, random_state=s)
                      for s in range(3000)])
    noise = (draws / 0.5).astype(np.int64)  # scale = (2 + 1) / 1 = 3
    q = math.exp(-1 / 3)
    pmf = lambda k: (1 - q) / (1 + q) * q ** abs(k)
    assert integer_pvalue(noise, pmf, np.arange(-15, 16)) > ALPHA


def snapping_cell_probabilities(x, lam, grid, bound):
    """Exact law of snapping (Mironov 2012, Section 5): cells of the Laplace(lam) noise around x."""
    ks = np.arange(-math.floor(bound / grid), math.floor(bound / grid) + 1)
    pts = ks * grid
    inner = pts[(pts > -bound) & (pts < bound)]
    F = lambda t: stats.laplace.cdf(t, scale=lam)
    probs = {}
    for p in inner:
        probs[p] = F(p + grid / 2 - x) - F(p - grid / 2 - x)
    top = inner.max() + grid / 2
    bottom = inner.min() - grid / 2
    probs[bound] = 1 - F(top - x)
    probs[-bound] = F(bottom - x)
    return probs


@pytest.mark.parametrize("x", [0.3, -7.0, 7.9])
def test_snapping_law(x):
    n = 200_000
    m = LaplaceMechanism.calibrate(sensitivity=1.0, epsilon=1.0, bound=8.0, method="snapping")
    out = dpcore.laplace(np.full(n, x), sensitivity=1.0, epsilon=1.0, bound=8.0, method="snapping",
                         random_state=int(abs(x) * 10))
    probs = snapping_cell_probabilities(x, m.scale, m.grid, 8.0)
    keys = sorted(probs)
    counts = [np.sum(out == k) for k in keys]
    assert sum(counts) == n  # support: nothing outside the grid and the two clamp points
    assert chisquare_pvalue(counts, np.array([probs[k] for k in keys])) > ALPHA


def test_snapping_law_power():
    n = 200_000
    m = LaplaceMechanism.calibrate(sensitivity=1.0, epsilon=1.0, bound=8.0, method="snapping")
    out = dpcore.laplace(np.full(n, 0.3), sensitivity=1.0, epsilon=1.0, bound=8.0, method="snapping",
                         random_state=1)
    probs = snapping_cell_probabilities(0.3, m.scale * 1.05, m.grid, 8.0)
    keys = sorted(probs)
    counts = [np.sum(out == k) for k in keys]
    assert chisquare_pvalue(counts, np.array([probs[k] for k in keys])) < ALPHA


def test_gaussian_law():
    """granularity 1/2, L2 sensitivity 1 over 400 elements (2 + sqrt(400) = 22 grid units),
    rho = 1/2: sigma = 22 units; out/grid ~ N_Z(0, sigma^2) at value 0."""
    n = 400
    m = GaussianMechanism.calibrate(sensitivity=1.0, rho=0.5, size=n, granularity=0.5)
    assert m.sigma == pytest.approx(22.0)
    noise = np.concatenate([
        dpcore.gaussian(np.zeros(n), sensitivity=1.0, rho=0.5, granularity=0.5, random_state=s) / 0.5
        for s in range(250)
    ]).astype(np.int64)
    ks = np.arange(-2000, 2001)
    norm = np.exp(-(ks**2) / (2 * m.sigma**2)).sum()
    pmf = lambda k: math.exp(-k * k / (2 * m.sigma**2)) / norm
    assert integer_pvalue(noise, pmf, np.arange(-100, 101)) > ALPHA


# ---------------------------------------------------------------------------------------------
# Mironov's attack: reachability harness (Mironov, CCS 2012, Section 3)


def _naive_reachable(y, f, lam):
    """Is y = f + s * lam * ln(k / 2**53) for some integer k in [1, 2**53) and sign s?"""
    found = np.zeros(len(y), dtype=bool)
    for s in (1.0, -1.0):
        lo = np.ones(len(y), dtype=np.int64)
        hi = np.full(len(y), 2**53 - 1, dtype=np.int64)
        g = lambda k: f + s * lam * np.log(k.astype(np.float64) / 2.0**53)
        # g is monotone in k (increasing for s = 1, decreasing for s = -1)
        target = y
        for _ in range(60):
            mid = (lo + hi) // 2
            v = g(mid)
            go_right = (v < target) if s > 0 else (v > target)
            lo = np.where(go_right, mid + 1, lo)
            hi = np.where(go_right, hi, mid)
        for dk in (-1, 0, 1):
            k = np.clip(lo + dk, 1, 2**53 - 1)
            found |= g(k) == target
    return found


def _snapping_reachable(y, x, lam, grid, bound):
    """Is y an output of snapping at input x for some double u in (0, 1) and sign?"""
    from dpcore._noise_snapping import _snap_finish

    found = np.zeros(len(y), dtype=bool)
    one_bits = np.float64(1.0).view(np.int64)
    for negative in (False, True):
        # outputs are monotone in u (non-decreasing for one sign, non-increasing for the other):
        # bisect on the bit pattern of u for the first u whose output reaches y, check neighbours.
        lo = np.ones(len(y), dtype=np.int64)  # smallest positive subnormal
        hi = np.full(len(y), one_bits - 1, dtype=np.int64)
        out_of = lambda bits: np.array([
            _snap_finish(x, float(l), negative, lam, grid, bound)
            for l in crlog(bits.view(np.float64))
        ])
        increasing = not negative  # ln(u) increases with u; the sign flips it
        for _ in range(64):
            mid = lo + (hi - lo) // 2
            v = out_of(mid)
            go_right = (v < y) if increasing else (v > y)
            lo = np.where(go_right, mid + 1, lo)
            hi = np.where(go_right, hi, mid)
        found |= out_of(np.minimum(lo, one_bits - 1)) == y
    return found


def test_naive_laplace_is_attackable():
    """~68% of naive outputs at f = 0 cannot come from f = 1 (Mironov, CCS 2012, Section 3)."""
    rng = np.random.default_rng(0)  # the naive sampler in the test: insecure by design
    k = rng.integers(1, 2**53, size=2000)
    s = rng.choice([-1.0, 1.0], size=2000)
    y = 0.0 + s * 1.0 * np.log(k / 2.0**53)
    assert np.all(_naive_reachable(y, 0.0, 1.0))  # the harness finds the true input
    distinguishable = 1 - _naive_reachable(y, 1.0, 1.0).mean()
    assert 0.6 < distinguishable < 0.75


def test_snapping_outputs_reachable_from_neighbour():
    m = LaplaceMechanism.calibrate(sensitivity=1.0, epsilon=1.0, bound=20.0, method="snapping")
    out = dpcore.laplace(np.zeros(300), sensitivity=1.0, epsilon=1.0, bound=20.0, method="snapping",
                         random_state=5)
    assert np.all(_snapping_reachable(out, 0.0, m.scale, m.grid, 20.0))
    assert np.all(_snapping_reachable(out, 1.0, m.scale, m.grid, 20.0))


def test_discrete_outputs_reachable_from_neighbour():
    """Discrete outputs are grid * integer; every integer is reachable from any input."""
    out = dpcore.laplace(np.zeros(1000), sensitivity=1000.0, epsilon=1.0, random_state=5)
    m = LaplaceMechanism.calibrate(sensitivity=1000.0, epsilon=1.0, size=1000)
    units = out / m.grid
    assert np.all(units == np.round(units))
    assert np.all(np.abs(units) < 2.0**53)


# ---------------------------------------------------------------------------------------------
# shapes, errors, accounting


def test_shapes():
    assert isinstance(dpcore.laplace(1.0, sensitivity=1.0, epsilon=1.0), float)
    assert dpcore.laplace(np.ones((2, 3)), sensitivity=1.0, epsilon=1.0).shape == (2, 3)
    assert dpcore.gaussian(np.ones((4, 1)), sensitivity=1.0, rho=1.0).shape == (4, 1)
    assert isinstance(dpcore.gaussian(2.0, sensitivity=1.0, epsilon=1.0, delta=1e-6), float)
    assert dpcore.laplace(np.ones(3), sensitivity=1.0, epsilon=1.0, bound=5.0, method="snapping").shape == (3,)
    assert dpcore.discrete_laplace(1.0).dtype == np.int64
    assert dpcore.discrete_gaussian(1.0, size=(2, 2)).shape == (2, 2)


@pytest.mark.parametrize(
    "kwargs, exc, name",
    [
        (dict(value=np.nan, sensitivity=1.0, epsilon=1.0), ValueError, "value"),
        (dict(value=[1.0, np.inf], sensitivity=1.0, epsilon=1.0), ValueError, "value"),
        (dict(value="a", sensitivity=1.0, epsilon=1.0), TypeError, "value"),
        (dict(value=1.0, sensitivity=1.0, epsilon=0.0), ValueError, "epsilon"),
        (dict(value=1.0, sensitivity=1.0, epsilon=-1.0), ValueError, "epsilon"),
        (dict(value=1.0, sensitivity=0.0, epsilon=1.0), ValueError, "sensitivity"),
        (dict(value=1.0, sensitivity=1.0, epsilon=float("nan")), ValueError, "epsilon"),
        (dict(value=1.0, sensitivity="1", epsilon=1.0), TypeError, "sensitivity"),
        (dict(value=1.0, sensitivity=1.0, epsilon=1.0, method="snapping"), ValueError, "bound"),
        (dict(value=1.0, sensitivity=1.0, epsilon=1.0, bound=-2.0), ValueError, "bound"),
        (dict(value=1.0, sensitivity=1.0, epsilon=1.0, bound=0.5, method="snapping"), ValueError, "bound"),
        (dict(value=1.0, sensitivity=1.0, epsilon=1.0, method="gauss"), ValueError, "method"),
        (dict(value=1.0, sensitivity=1.0, epsilon=1.0, granularity=0.3), ValueError, "granularity"),
        (dict(value=1.0, sensitivity=1.0, epsilon=1.0, random_state="x"), TypeError, "random_state"),
    ],
)
def test_laplace_errors(kwargs, exc, name):
    value = kwargs.pop("value")
    with pytest.raises(exc, match=name):
        dpcore.laplace(value, **kwargs)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(sensitivity=1.0), "rho"),
        (dict(sensitivity=1.0, epsilon=1.0), "rho"),
        (dict(sensitivity=1.0, epsilon=1.0, delta=1e-5, rho=1.0), "rho"),
        (dict(sensitivity=1.0, epsilon=1.0, delta=0.0), "delta"),
        (dict(sensitivity=1.0, epsilon=1.0, delta=1.5), "delta"),
        (dict(sensitivity=1.0, rho=-1.0), "rho"),
        (dict(sensitivity=-1.0, rho=1.0), "sensitivity"),
    ],
)
def test_gaussian_errors(kwargs, name):
    with pytest.raises(ValueError, match=name):
        dpcore.gaussian(1.0, **kwargs)


def test_sampler_errors():
    with pytest.raises(ValueError, match="scale"):
        dpcore.discrete_laplace(0.0)
    with pytest.raises(ValueError, match="scale"):
        dpcore.discrete_laplace(2.0**45)
    with pytest.raises(ValueError, match="sigma"):
        dpcore.discrete_gaussian(-1.0)
    with pytest.raises(TypeError, match="size"):
        dpcore.discrete_gaussian(1.0, size=2.5)


def test_accountant_charged_and_refusal_releases_nothing():
    acc = dpcore.Accountant(1.0)
    dpcore.laplace(1.0, sensitivity=1.0, epsilon=0.6, accountant=acc)
    assert 0.59 < acc.spent[0] <= 0.6
    gen, twin = dpcore.ChaCha20(3), dpcore.ChaCha20(3)
    with pytest.raises(dpcore.BudgetExceeded):
        dpcore.laplace(1.0, sensitivity=1.0, epsilon=0.6, accountant=acc, random_state=gen)
    assert gen.random_raw() == twin.random_raw()  # nothing was drawn
    assert acc.spent[0] <= 0.6


def test_gaussian_charges_rho():
    acc = dpcore.Accountant(1.0, 1e-6)
    dpcore.gaussian(np.ones(3), sensitivity=1.0, rho=0.01, accountant=acc)
    assert acc.history[-1].rho == pytest.approx(0.01, rel=1e-6)


def test_seed_reproducible():
    a = dpcore.laplace(np.ones(10), sensitivity=1.0, epsilon=1.0, random_state=5)
    b = dpcore.laplace(np.ones(10), sensitivity=1.0, epsilon=1.0, random_state=5)
    c = dpcore.laplace(np.ones(10), sensitivity=1.0, epsilon=1.0, random_state=6)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


@pytest.mark.parametrize("kind", GENERATOR_KINDS)
def test_snapping_and_grid_laplace_laws_under_every_generator(kind):
    n = 50_000
    m = LaplaceMechanism.calibrate(sensitivity=1.0, epsilon=1.0, bound=8.0, method="snapping")
    out = dpcore.laplace(np.full(n, 0.3), sensitivity=1.0, epsilon=1.0, bound=8.0, method="snapping",
                         random_state=generator(kind, 41))
    probs = snapping_cell_probabilities(0.3, m.scale, m.grid, 8.0)
    keys = sorted(probs)
    assert chisquare_pvalue([np.sum(out == k) for k in keys], [probs[k] for k in keys]) > ALPHA
    # grid Laplace: granularity 1/2, sensitivity 1, epsilon 1 -> scale (2 + 1) / 1 = 3 units
    units = dpcore.laplace(np.zeros(n), sensitivity=1.0, epsilon=1.0, granularity=0.5,
                           random_state=generator(kind, 42)) / 0.5
    m = LaplaceMechanism.calibrate(sensitivity=1.0, epsilon=1.0, size=n, granularity=0.5)
    q = math.exp(-1 / m.scale)
    pmf = lambda k: (1 - q) / (1 + q) * q ** abs(k)
    assert integer_pvalue(units.astype(np.int64), pmf, np.arange(-60, 61)) > ALPHA


# ---------------------------------------------------------------------------------------------
# out= and add_to= on the integer samplers (issue 26 item 2: the callers of the noise kernel)

SAMPLERS = {"laplace": (dpcore.discrete_laplace, 2.5), "gaussian": (dpcore.discrete_gaussian, 4.0)}


@pytest.mark.parametrize("kind", ["laplace", "gaussian"])
@pytest.mark.parametrize("shape", [(7,), (30, 50), (3000,)])
def test_out_and_add_to_give_the_samplers_draws(kind, shape):
    """out= holds the draws a fresh array would get from the same generator state; add_to= adds
    those draws to what is there (one call below 65536 cells: the same stream)."""
    sampler, scale = SAMPLERS[kind]
    expected = sampler(scale, size=shape, random_state=dpcore.ChaCha20(11))
    out = np.full(shape, 99, dtype=np.int64)
    assert sampler(scale, out=out, random_state=dpcore.ChaCha20(11)) is out
    np.testing.assert_array_equal(out, expected)
    base = np.arange(math.prod(shape), dtype=np.int64).reshape(shape)
    counts = base.copy()
    assert sampler(scale, shape, add_to=counts, random_state=dpcore.ChaCha20(11)) is counts
    np.testing.assert_array_equal(counts, base + expected)


@pytest.mark.parametrize("kind", ["laplace", "gaussian"])
def test_out_and_add_to_are_checked_before_drawing(kind):
    sampler, scale = SAMPLERS[kind]
    rng = dpcore.default_rng(3)
    before = rng.bit_generator.state
    good = np.zeros(4, dtype=np.int64)
    read_only = np.zeros(4, dtype=np.int64)
    read_only.flags.writeable = False
    for name in ("out", "add_to"):
        cases = [
            (TypeError, "dtype int64", np.zeros(4)),
            (TypeError, "dtype int64", np.zeros(4, dtype=">i8")),
            (TypeError, "numpy array", [0, 0, 0, 0]),
            (ValueError, "C-contiguous", np.zeros((4, 2), dtype=np.int64)[:, 0]),
            (ValueError, "writeable", read_only),
        ]
        for error, message, bad in cases:
            with pytest.raises(error, match=f"{name} must .*{message}"):
                sampler(scale, **{name: bad}, random_state=rng)
        with pytest.raises(ValueError, match=f"disagrees with {name}.shape"):
            sampler(scale, 5, **{name: good}, random_state=rng)
    with pytest.raises(TypeError, match="not both"):
        sampler(scale, out=good, add_to=good.copy(), random_state=rng)
    assert rng.bit_generator.state == before
    assert not good.any()


def test_add_to_adds_in_place_to_a_view():
    """A contiguous view of a larger array is written through (the histogram callers pass flat
    views of their counts)."""
    counts = np.zeros((4, 6), dtype=np.int64)
    row = counts[2]
    dpcore.discrete_laplace(50.0, add_to=row, random_state=5)
    assert row.any() and not counts[[0, 1, 3]].any()
    np.testing.assert_array_equal(counts[2], row)
