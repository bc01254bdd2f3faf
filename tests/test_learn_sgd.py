"""DP-SGD for the linear models (dpcore.learn._sgd, kernel dpcore._sgd): the sampling law, the
exact lattice bound, the noise law of a released step, the plan's guarantee, validation before
the charge, and utility."""
import math

import numpy as np
import pytest

pytest.importorskip("sklearn")

from _gof import (  # noqa: E402
    ALPHA,
    chisquare_pvalue,
    dgauss_pmf,
    integer_pvalue,
    merge_sparse_bins,
    z_critical,
)

import dpcore  # noqa: E402
from dpcore import _sgd as kernel  # noqa: E402
from dpcore.curves import DEFAULT_ORDERS  # noqa: E402
from dpcore.learn import LinearRegression, LinearSVC, LogisticRegression, _sgd  # noqa: E402
from dpcore.random import bitgen_handle, check_random_state  # noqa: E402

BITS = _sgd.LATTICE_BITS


def _handle(seed):
    return bitgen_handle(check_random_state(seed))


# ------------------------------------------------------------------------------------------------
# the kernel: Poisson sampling and the lattice bound

def _mask(n, num, bits, seed, offset=0, cached=2):
    out = np.zeros(n, dtype=np.uint8)
    key = kernel.draw_key(_handle(seed))
    kernel.poisson_masks(n, kernel.PoissonRate(num, bits, cached), key, offset, out)
    return out


# (num, bits): bit-sliced comparison (skip 0), and geometric skipping with 2, 2**6, 2**8, 2**12
# records per emptiness test
RATES = [(1, 1), (5, 4), (11, 10), (9, 12), (3, 16)]


@pytest.mark.parametrize("num, bits", [(1, 0)] + RATES)
def test_poisson_sample_has_the_exact_rate(num, bits):
    """Each record is kept with probability num / 2**bits: the count over n records is
    Binomial(n, q) (z-test, alpha 1e-4 over the rates, two checks each), and the even and odd
    records are kept at the same rate."""
    q = num / 2**bits
    n = 400_000 if q > 1e-3 else 40 * 2**16
    out = _mask(n, num, bits, seed=bits)
    if q == 1.0:
        assert out.all()
        return
    se = math.sqrt(n * q * (1 - q))
    crit = z_critical(n_checks=2 * len(RATES))
    assert abs(out.sum() - n * q) < crit * se
    assert abs(int(out[::2].sum()) - int(out[1::2].sum())) < crit * se   # sd of the difference: se


def _gap_pvalue(out, q):
    """Chi-square of the gaps between consecutive kept records (and of the first index) against
    Geometric(q) (P(G >= g) = (1 - q)**g): cells of width 1 up to 64, then growing by 1/8."""
    gaps = np.diff(np.concatenate([[-1], np.flatnonzero(out)])) - 1
    edges = list(range(65))
    while edges[-1] < 40 / q:
        edges.append(int(edges[-1] * 1.125) + 1)
    edges = np.array(edges + [np.iinfo(np.int64).max], dtype=np.int64)
    survival = np.exp(np.log1p(-q) * edges[:-1].astype(float))
    probs = np.append(survival[:-1] - survival[1:], survival[-1])
    observed = np.histogram(gaps, bins=edges.astype(float))[0]
    observed[-1] += int(np.sum(gaps >= edges[-2])) - observed[-1]
    observed, expected = merge_sparse_bins(observed, probs * gaps.size)
    return chisquare_pvalue(observed, np.asarray(expected) / np.sum(expected))


@pytest.mark.parametrize("num, bits", RATES)
def test_poisson_gaps_are_geometric(num, bits):
    """The gaps between kept records are independent of the stream blocks and geometric with
    the exact rate (this checks the emptiness tests and the independent digits of the skip):
    chi-square, alpha 1e-4, over about 40,000 gaps (fewer at the smallest rate)."""
    q = num / 2**bits
    n = min(int(40_000 / q), 2**27)
    assert _gap_pvalue(_mask(n, num, bits, seed=100 + bits), q) > ALPHA


@pytest.mark.parametrize("num, bits, wrong", [(11, 10, (3, 8)), (9, 12, (5, 11)),
                                              (1, 1, (9, 4))])
def test_poisson_gap_test_has_power(num, bits, wrong):
    """The same test rejects a sample drawn at a rate 9-12.5% off the claimed one."""
    q = num / 2**bits
    n = min(int(40_000 / q), 2**27)
    assert _gap_pvalue(_mask(n, *wrong, seed=200 + bits), q) < ALPHA


@pytest.mark.parametrize("num, bits", RATES)
def test_poisson_sample_depends_on_the_key_and_the_index_only(num, bits):
    """A chunk starting at any offset draws exactly its part of the whole sample (the chunks
    of a Dask collection), and the exact path (every word of the expansions computed from the
    fractions, cached=0) takes the same decisions as the cached words."""
    n = 3 * kernel.STREAM_RECORDS + 1234
    whole = _mask(n, num, bits, seed=9)
    cuts = [0, 1, 777, kernel.STREAM_RECORDS - 3, kernel.STREAM_RECORDS + 5, n - 1000, n]
    parts = [_mask(b - a, num, bits, seed=9, offset=a) for a, b in zip(cuts[:-1], cuts[1:])]
    assert np.array_equal(whole, np.concatenate(parts))
    assert np.array_equal(whole[:70_000], _mask(70_000, num, bits, seed=9, cached=0))


def test_poisson_rate_expansions_are_exact():
    """The cached words are the binary expansion of the exact probabilities: x**S for the
    emptiness test and r / (1 + r), r = x**(2**j), for digit j (x = 1 - q)."""
    from fractions import Fraction

    rate = kernel.PoissonRate(11, 10)
    x = 1 - Fraction(11, 1024)
    probs = [x ** (2**j) / (1 + x ** (2**j)) for j in range(rate.skip)] + [x ** (2**rate.skip)]
    for idx, p in enumerate(probs):
        for i in range(3):
            assert rate.expansion_word(idx, i) == math.floor(p * 2**(64 * (i + 1))) % 2**64


@pytest.mark.parametrize("loss, k", [(kernel.Loss.LOGISTIC, 1), (kernel.Loss.HUBER, 3),
                                     (kernel.Loss.SQUARED, 1), (kernel.Loss.SOFTMAX, 4)])
def test_each_record_adds_an_integer_vector_within_the_bound(loss, k):
    """One record at a time (rate 1), with gradients far above the clipping norm and at it:
    the integer vector added has squared norm <= 4**BITS exactly (the sensitivity), and a
    record whose gradient is below the clipping norm is added unclipped (to rounding)."""
    rng = np.random.default_rng(5)  # test data, not noise
    d, limit = 7, 4**BITS
    for trial in range(300):
        x = rng.normal(size=(1, d))
        x /= np.linalg.norm(x) * rng.uniform(1.0, 1.5)
        W = rng.normal(size=(k, d)) * rng.choice([0.1, 10.0, 1e6])
        target = np.array([rng.integers(0, max(k, 2))], dtype=float)
        if loss == kernel.Loss.SQUARED:
            target = np.array([rng.normal() * 100])
        out = np.zeros(k * d, dtype=np.int64)
        clip = rng.choice([1e-3, 0.5, 1.0, 10.0])
        dropped = kernel.lattice_gradient_sum(x, target, W, int(loss), 0.5, clip, BITS, None,
                                              None, 0,
                                              1, out)
        assert dropped == 0
        assert int(np.sum(out.astype(object) ** 2)) <= limit


def test_unclipped_gradient_is_the_exact_sum_on_the_lattice():
    """Rate 1, a squared loss at W = 0 with rows whose gradients sit on the lattice: the sum is
    exact (no rounding), and a larger clipping norm leaves it unchanged."""
    X = np.array([[0.5, 0.0], [0.25, -0.25], [0.0, 0.125]])
    y = np.array([1.0, -1.0, 2.0])
    W = np.zeros((1, 2))
    out = np.zeros(2, dtype=np.int64)
    kernel.lattice_gradient_sum(X, y, W, int(kernel.Loss.SQUARED), 0.5, 1.0, BITS, None, None,
                                0, 1, out)
    exact = -(y[:, None] * X).sum(axis=0) * 2**BITS
    assert np.array_equal(out, exact.astype(np.int64))


def test_adding_a_record_moves_the_sum_by_its_clipped_vector():
    """Same generator state, data sets differing by one record (rate 1): the sums differ by
    that record's integer vector, of norm <= 2**BITS."""
    rng = np.random.default_rng(3)  # test data, not noise
    X = rng.normal(size=(50, 4))
    X /= np.linalg.norm(X, axis=1)[:, None]
    y = rng.integers(0, 2, 50).astype(float)
    W = rng.normal(size=(1, 4)) * 3
    a, b = np.zeros(4, np.int64), np.zeros(4, np.int64)
    kernel.lattice_gradient_sum(X, y, W, 0, 0.5, 0.3, BITS, None, None, 0, 1, a)
    kernel.lattice_gradient_sum(X[:-1], y[:-1], W, 0, 0.5, 0.3, BITS, None, None, 0, 1,
                                b)
    diff = (a - b).astype(float)
    assert 0 < np.linalg.norm(diff) <= 2**BITS


# ------------------------------------------------------------------------------------------------
# the noise law of a released step

def _one_step_plan(sigma_units, n_hint=1):
    return _sgd.SGDPlan(n_steps=1, rate_num=1, rate_bits=0, noise_multiplier=sigma_units / 2**BITS,
                        clip=1.0, learning_rate=1.0, n_hint=n_hint, epsilon=1.0, delta=1e-6)


def _released_noise(sigma, draws, seed):
    """One-step fits (rate 1, learning rate 1, n_hint 1: the model is minus the released sum in
    lattice units times 2**-BITS) on three rows whose lattice sum is known exactly; returns the
    released sums minus the exact sum, in lattice units."""
    X = np.array([[0.5, 0.0, 0.0], [0.25, -0.25, 0.0], [0.0, 0.125, 0.25]])  # gradients < C
    y = np.array([1.0, -1.0, 2.0])
    exact = -(y[:, None] * X).sum(axis=0) * 2**BITS
    plan = _one_step_plan(sigma)
    rng = check_random_state(seed)
    out = []
    for _ in range(draws):
        W = _sgd.noisy_sgd(X, y, 1, "squared", plan, 0.0, rng)[0]
        released = -W * 2**BITS
        out.append(released - exact)
    return np.concatenate(out)


def test_step_noise_is_an_integer_discrete_gaussian():
    """The released step minus the exact lattice sum is an integer (multiples of the lattice)
    distributed as N_Z(0, sigma**2): chi-square against the exact pmf, alpha = 1e-4."""
    sigma = 2.0
    noise = _released_noise(sigma, 4000, seed=7)
    assert np.array_equal(noise, np.round(noise))
    support = np.arange(-16, 17)
    assert integer_pvalue(noise.astype(np.int64), dgauss_pmf(sigma), support) > ALPHA


def test_step_noise_test_has_power():
    """The same test rejects a 10% larger sigma than the one released."""
    noise = _released_noise(2.2, 4000, seed=8)
    assert integer_pvalue(noise.astype(np.int64), dgauss_pmf(2.0), np.arange(-16, 17)) < ALPHA


# ------------------------------------------------------------------------------------------------
# the plan

@pytest.mark.parametrize("epsilon, delta, n_hint", [(1.0, 1e-6, 10**6), (0.3, 1e-5, 10**4),
                                                    (4.0, 1e-8, 2000), (1.0, 1e-6, 50)])
def test_plan_meets_its_guarantee_on_the_full_orders_grid(epsilon, delta, n_hint):
    plan = _sgd.sgd_plan(21, epsilon, delta, n_hint, smoothness=0.25)
    assert plan.curve.epsilon_for(delta, orders=DEFAULT_ORDERS) <= epsilon
    assert plan.curve.relation == "add/remove"
    assert plan.curve.pld() is None   # the discrete Gaussian's RDP bound only
    # the calibration is tight: 0.5% less noise would exceed epsilon
    tighter = _sgd._step_curve(plan.noise_multiplier * 0.995, plan.rate).repeat(plan.n_steps)
    assert tighter.epsilon_for(delta, orders=_sgd.CALIBRATION_ORDERS) > epsilon
    assert plan.rate_num % 2 == 1 or plan.rate_bits == 0
    assert plan.rate * n_hint >= min(_sgd.SGD_MIN_BATCH, n_hint) * (1 - 2**-_sgd.RATE_DIGITS) / 2


def test_plan_does_not_depend_on_the_data_size_for_privacy():
    """n_hint changes the batch and the step scale; the guarantee stays (epsilon, delta)."""
    for n_hint in (100, 10**4, 10**7):
        plan = _sgd.sgd_plan(5, 1.0, 1e-6, n_hint, smoothness=1.0)
        assert (plan.cost.epsilon, plan.cost.delta) == (1.0, 1e-6)
        assert plan.curve.epsilon_for(1e-6) <= 1.0


def test_rdp_accountant_composes_the_curve():
    X, y = _blobs(2000)
    acc = dpcore.Accountant(1.0, 1e-5, method="rdp")
    for _ in range(2):
        LogisticRegression(epsilon=0.4, delta=1e-6, method="sgd", n_hint=2000, data_norm=3.0,
                           classes=[0, 1], random_state=1, accountant=acc).fit(X, y)
    eps, _ = acc.spent
    assert eps <= 0.8   # two (0.4, 1e-6) fits compose below 0.8 at delta 1e-5


# ------------------------------------------------------------------------------------------------
# the estimators

def _blobs(n, seed=0):
    rng = np.random.default_rng(seed)  # test data, not noise
    X = rng.normal(size=(n, 4))
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
    return X, y


@pytest.mark.parametrize("bad, match", [
    (dict(n_hint=None), "n_hint is required"), (dict(n_hint=0), "n_hint"),
    (dict(n_hint=2.5), "n_hint"), (dict(delta=None), "delta is required"),
    (dict(delta=1.5), "delta"), (dict(method="objective"), "n_hint applies"),
])
@pytest.mark.parametrize("cls", [LogisticRegression, LinearSVC])
def test_classifier_parameters_are_checked_before_the_charge(cls, bad, match):
    X, y = _blobs(200)
    acc = dpcore.Accountant(10.0, 1e-3)
    kw = dict(epsilon=1.0, delta=1e-6, method="sgd", n_hint=200, data_norm=3.0, classes=[0, 1],
              accountant=acc)
    kw.update(bad)
    if bad.get("method") == "objective":
        kw.pop("delta")
    with pytest.raises((ValueError, TypeError), match=match):
        cls(**kw).fit(X, y)
    assert acc.history == []


@pytest.mark.parametrize("bad", [dict(n_hint=None), dict(delta=None), dict(n_hint=-3)])
def test_regression_parameters_are_checked_before_the_charge(bad):
    X, y = _blobs(200)
    acc = dpcore.Accountant(10.0, 1e-3)
    kw = dict(epsilon=1.0, delta=1e-6, method="sgd", n_hint=200, bounds_X=(-3, 3),
              bounds_y=(0, 1), accountant=acc)
    kw.update(bad)
    with pytest.raises(ValueError, match="n_hint|delta"):
        LinearRegression(**kw).fit(X, y.astype(float))
    assert acc.history == []
    with pytest.raises(ValueError, match="n_hint applies"):
        LinearRegression(epsilon=1.0, bounds_X=(-3, 3), bounds_y=(0, 1), n_hint=5).fit(X, y)


def test_fit_charges_the_plan_once_with_its_curve():
    X, y = _blobs(3000)
    clf = LogisticRegression(epsilon=1.0, delta=1e-6, method="sgd", n_hint=3000, data_norm=3.0,
                             classes=[0, 1], random_state=2)
    acc = dpcore.Accountant(2.0, 1e-5)
    cost = clf.cost
    clf.set_params(accountant=acc).fit(X, y)
    (entry,) = acc.history
    assert (entry.epsilon, entry.delta, entry.curve) == (cost.epsilon, cost.delta, cost.curve)
    assert entry.curve.relation == "add/remove"


@pytest.mark.parametrize("cls, classes", [(LogisticRegression, [0, 1]), (LogisticRegression,
                                                                        [0, 1, 2]),
                                          (LinearSVC, [0, 1]), (LinearSVC, [0, 1, 2])])
def test_sgd_classifiers_learn(cls, classes):
    X, y = _blobs(20000)
    if len(classes) == 3:
        y = np.digitize(X[:, 0], [-0.5, 0.5])
    clf = cls(epsilon=1.0, delta=1e-6, method="sgd", n_hint=20000, data_norm=3.0,
              classes=classes, random_state=3).fit(X, y)
    assert clf.score(X, y) > (0.95 if len(classes) == 2 else 0.8)
    assert clf.coef_.shape == (1 if len(classes) == 2 else 3, 4)


def test_sgd_regression_learns():
    rng = np.random.default_rng(4)  # test data, not noise
    X = rng.uniform(-1, 1, size=(30000, 3))
    y = np.clip(0.5 * X[:, 0] - 0.3 * X[:, 1] + 0.2 + 0.1 * rng.normal(size=30000), -1, 1)
    reg = LinearRegression(epsilon=1.0, delta=1e-6, method="sgd", n_hint=30000, bounds_X=(-1, 1),
                           bounds_y=(-1, 1), random_state=0).fit(X, y)
    assert np.allclose(reg.coef_, [0.5, -0.3, 0.0], atol=0.03)
    assert reg.intercept_ == pytest.approx(0.2, abs=0.03)


@pytest.mark.parametrize("kw", [dict(data_norm=2.0), dict(data_norm=2.0, fit_intercept=False),
                                dict(bounds_X=(-1, 1), fit_intercept=False)])
def test_sgd_regression_maps_back_to_the_raw_units(kw):
    """The model is fitted on rows scaled into the unit ball; its coefficients are reported in
    the caller's units (no-intercept data for the fits without one)."""
    rng = np.random.default_rng(6)  # test data, not noise
    X = rng.uniform(-1, 1, size=(30000, 3))
    offset = 0.2 if kw.get("fit_intercept", True) else 0.0
    y = np.clip(0.5 * X[:, 0] - 0.3 * X[:, 1] + offset + 0.05 * rng.normal(size=30000), -1, 1)
    reg = LinearRegression(epsilon=2.0, delta=1e-6, method="sgd", n_hint=30000,
                           bounds_y=(-1, 1), random_state=1, **kw).fit(X, y)
    assert np.allclose(reg.coef_, [0.5, -0.3, 0.0], atol=0.04)
    assert reg.intercept_ == pytest.approx(offset, abs=0.04)


# ------------------------------------------------------------------------------------------------
# gd: n_steps="auto"

def test_gd_steps_rule():
    assert _sgd.gd_steps(10**5, 1.0) == round(2 * 10**2.5)
    assert _sgd.gd_steps(10, 0.1) == _sgd.GD_MIN_STEPS
    assert _sgd.gd_steps(10**9, 1.0) == _sgd.GD_MAX_STEPS
    with pytest.raises(ValueError, match="epsilon"):
        _sgd.gd_steps(100, 0.0)


def test_gd_auto_steps_are_used_and_bad_steps_charge_nothing():
    X, y = _blobs(2500)
    clf = LogisticRegression(epsilon=1.0, delta=1e-6, method="gd", data_norm=3.0,
                             classes=[0, 1], random_state=0).fit(X, y)
    assert clf.calibration_["n_steps"] == _sgd.gd_steps(2500, 1.0)
    assert clf.score(X, y) > 0.95
    acc = dpcore.Accountant(10.0, 1e-3)
    for bad in ("many", 0, 2.5):
        with pytest.raises((ValueError, TypeError), match="n_steps"):
            LogisticRegression(epsilon=1.0, delta=1e-6, method="gd", data_norm=3.0, n_steps=bad,
                               classes=[0, 1], accountant=acc).fit(X, y)
    assert acc.history == []


def test_gd_default_converges_at_large_epsilon():
    """At epsilon = 1e6 the default plan (n_steps="auto", tail averaging) reaches the
    non-private model's accuracy."""
    from sklearn.linear_model import LogisticRegression as Exact

    X, y = _blobs(5000, seed=9)
    y = np.where(np.random.default_rng(9).random(5000) < 0.1, 1 - y, y)  # label noise
    gd = LogisticRegression(epsilon=1e6, delta=1e-6, method="gd", data_norm=4.0, alpha=1e-4,
                            classes=[0, 1], random_state=0).fit(X, y)
    exact = Exact(C=1e4).fit(X, y)
    assert gd.score(X, y) >= exact.score(X, y) - 0.01
