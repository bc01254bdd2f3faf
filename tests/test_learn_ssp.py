"""LinearRegression by sufficient-statistics perturbation (dpcore.learn._ssp; SSP and AdaSSP):
sensitivities, the noise-norm bound, the plan's budget, the released statistics' noise laws on
their grids, accuracy at huge epsilon, errors."""
import doctest
import math
from fractions import Fraction

import numpy as np
import pytest

pytest.importorskip("sklearn")

from scipy import stats  # noqa: E402

import dpcore  # noqa: E402
from _gof import ALPHA, chisquare_pvalue  # noqa: E402
from dpcore.calibration import zcdp_epsilon, zcdp_rho_for  # noqa: E402
from dpcore.learn import _ssp  # noqa: E402
from dpcore.learn._functional import LinearRegression  # noqa: E402
from dpcore.learn._ssp import (  # noqa: E402
    SSPDomain,
    gram_from_upper,
    ssp_noise_norm,
    ssp_plan,
    ssp_sensitivities,
    ssp_statistics,
)


def test_docstring_examples():
    result = doctest.testmod(_ssp, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


# ----------------------------------------------------------------------------- sensitivities

def _parts(x, y, c, weight):
    """Every released part for one record (x, y) as the plan lays it out (gram weight on the
    off-diagonal entries), the eigenvalue row [x, c] apart."""
    d = x.size
    iu = np.triu_indices(d)
    g = np.outer(x, x)[iu]
    g[iu[0] != iu[1]] *= weight
    return {"gram": g, "xy": x * y, "sum_x": x, "sum_y": np.array([y])}


def _random_pair(rng, domain):
    """Two records of the domain, mixing the extreme shapes (corners, axes, random points)."""
    b = np.array([float(v) for v in domain.coord])
    r = math.sqrt(float(domain.row_norm_sq))
    out = []
    for _ in range(2):
        kind = rng.integers(4)
        if kind == 0:
            x = b * rng.choice([-1.0, 1.0], b.size)
        elif kind == 1:
            x = np.zeros(b.size)
            x[rng.integers(b.size)] = rng.choice([-1.0, 1.0])
        elif kind == 2:
            x = -out[0][0] if out else rng.uniform(-1, 1, b.size) * b
        else:
            x = rng.uniform(-1, 1, b.size) * b
        x = np.clip(x, -b, b)
        norm = np.linalg.norm(x)
        if norm > r:
            x *= r / norm * (1 - 1e-12)
        out.append((x, rng.choice([-1.0, 1.0, rng.uniform(-1, 1)])))
    return out


DOMAINS = [SSPDomain.make(4, np.ones(4)),                 # per-feature bounds, 4 features
           SSPDomain.make(1, np.ones(3)),                 # unit row norm
           SSPDomain.make(1, [0.3, 1.0, 0.5, 0.2, 0.9])]  # both


@pytest.mark.parametrize("domain", DOMAINS, ids=["cube", "ball", "both"])
@pytest.mark.parametrize("gaussian", [False, True], ids=["L1", "L2"])
def test_sensitivities_bound_every_replacement(domain, gaussian):
    # 1500 random pairs of records (corners, axes, opposite rows, interior): the change of each
    # released part never exceeds its stated sensitivity; the largest seen comes near it for
    # the linear parts on the cube and the ball (the bound is attained there), so an overstated
    # bound is caught too; with both bounds min(sum b, sqrt(d) r) is valid but not attained.
    rng = np.random.default_rng(1)
    sens = {k: float(v) for k, v in ssp_sensitivities(domain, gaussian=gaussian,
                                                       intercept=True).items()}
    weight = 2.0 if gaussian else 1.0
    order = 2 if gaussian else 1
    worst = dict.fromkeys(sens, 0.0)
    for _ in range(1500):
        (x, y), (x2, y2) = _random_pair(rng, domain)
        a, b = _parts(x, y, 0.0, weight), _parts(x2, y2, 0.0, weight)
        for k in a:
            worst[k] = max(worst[k], float(np.linalg.norm(a[k] - b[k], ord=order)))
    for k in worst:
        assert worst[k] <= sens[k] * (1 + 1e-12), k
    assert worst["sum_y"] == pytest.approx(2.0)
    if domain is not DOMAINS[2]:
        assert worst["sum_x"] >= 0.9 * sens["sum_x"] and worst["xy"] >= 0.9 * sens["xy"]


def test_sensitivities_hand_values():
    cube = SSPDomain.make(10, np.ones(10))
    l1 = ssp_sensitivities(cube, gaussian=False, intercept=True)
    # diagonal min(10, 20) + off-diagonal 2 * 45 = 100 = d^2; X^T y and X^T 1: 2 ||x||_1 = 20
    assert l1["gram"] == 100 and l1["xy"] == 20 and l1["sum_x"] == 20 and l1["sum_y"] == 2
    l2 = ssp_sensitivities(cube, gaussian=True, intercept=True)
    assert l2["gram"] == 20 and float(l2["xy"]) == pytest.approx(2 * math.sqrt(10))
    # r^2 + c^2 with c = r / 2; without an intercept c = 0 and there is no sum
    assert float(l1["min_eigenvalue"]) == pytest.approx(12.5)
    plain = ssp_sensitivities(cube, gaussian=False, intercept=False)
    assert plain["min_eigenvalue"] == 10 and "sum_x" not in plain and "sum_y" not in plain
    ball = ssp_sensitivities(SSPDomain.make(1, np.ones(10)), gaussian=False, intercept=True)
    assert ball["gram"] == 2 + 9 and float(ball["xy"]) == pytest.approx(2 * math.sqrt(10))


@pytest.mark.parametrize("intercept", [True, False])
def test_min_eigenvalue_sensitivity_over_replacements(intercept):
    # Weyl: replacing one row moves the smallest eigenvalue of sum z z^T by <= r^2 + c^2;
    # tight when a record spans the only direction the others leave empty.
    rng = np.random.default_rng(3)
    domain = SSPDomain.make(3, np.ones(3))
    bound = float(ssp_sensitivities(domain, gaussian=False, intercept=intercept)["min_eigenvalue"])
    plan = ssp_plan(10**6, domain, epsilon=1.0, intercept=intercept, adaptive_ridge=True)
    worst = 0.0
    for trial in range(300):
        n = int(rng.integers(3, 12))
        X = rng.uniform(-1, 1, (n, 3))
        if trial % 3 == 0:
            X[:, 2] = 0.0                   # a flat direction that one record can fill
        X2 = X.copy()
        X2[0] = rng.choice([-1.0, 1.0], 3)
        lam = [ssp_statistics(A, np.zeros(n), plan)["min_eigenvalue"][0] for A in (X, X2)]
        worst = max(worst, abs(lam[0] - lam[1]))
    assert worst <= bound * (1 + 1e-12)
    assert worst >= 0.25 * bound


@pytest.mark.parametrize("d", [1, 2, 3, 5, 10, 40])
@pytest.mark.parametrize("law", ["laplace", "gaussian"])
def test_noise_norm_bound_covers_95_percent(d, law):
    # 2000 symmetric noise matrices as the plan releases them: Laplace with equal entries,
    # Gaussian with off-diagonal sd half the diagonal's. If the coverage were exactly 0.95 the
    # fraction would fall below 0.95 - 3 sd with probability ~0.001.
    rng = np.random.default_rng(d)
    draws, sd = 2000, 3.0
    off = sd if law == "laplace" else sd / 2
    tau = ssp_noise_norm(d, sd, off)
    inside = 0
    for _ in range(draws):
        if law == "laplace":
            E = rng.laplace(scale=sd / math.sqrt(2), size=(d, d))
        else:
            E = rng.normal(size=(d, d)) * off
            E[np.diag_indices(d)] *= 2
        E = np.triu(E) + np.triu(E, 1).T
        inside += np.linalg.norm(E, 2) <= tau
    assert inside / draws >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / draws)


# ----------------------------------------------------------------------------- plan

@pytest.mark.parametrize("n, epsilon", [(10**4, 1.0), (500, 2.0), (10**6, 0.1)])
@pytest.mark.parametrize("intercept", [True, False])
@pytest.mark.parametrize("adaptive", [False, True], ids=["ssp", "adassp"])
def test_plan_spends_at_most_the_budget(n, epsilon, intercept, adaptive):
    domain = SSPDomain.make(5, np.ones(5))
    plan = ssp_plan(n, domain, epsilon=epsilon, intercept=intercept, adaptive_ridge=adaptive)
    assert ("min_eigenvalue" in plan.mechanisms) == adaptive
    assert ("sum_y" in plan.mechanisms) == ("sum_x" in plan.mechanisms) == intercept
    assert not plan.mean_only
    spent = sum(Fraction(m.epsilon_effective) for m in plan.mechanisms.values())
    assert spent <= Fraction(epsilon) and float(spent) == pytest.approx(epsilon, rel=1e-6)
    assert plan.cost.epsilon == epsilon and plan.cost.delta == 0
    gplan = ssp_plan(n, domain, epsilon=epsilon, delta=1e-6, intercept=intercept,
                     adaptive_ridge=adaptive)
    rho = zcdp_rho_for(epsilon, 1e-6)
    spent = sum(Fraction(m.rho) for m in gplan.mechanisms.values())
    assert spent <= Fraction(rho) and float(spent) == pytest.approx(rho, rel=1e-6)
    assert gplan.cost.rho == rho
    # each mechanism is calibrated for its part's sensitivity
    sens = ssp_sensitivities(domain, gaussian=True, intercept=intercept)
    for k, m in gplan.mechanisms.items():
        assert m.sensitivity >= float(sens[k])


def test_mean_share_targets_the_stated_noise():
    # sum y's share puts the released mean's noise sd at MEAN_NOISE (within the share limits)
    domain = SSPDomain.make(3, np.ones(3))
    plan = ssp_plan(20_000, domain, epsilon=0.3)
    assert plan.noise_sd("sum_y") / 20_000 == pytest.approx(_ssp.MEAN_NOISE, rel=1e-6)
    big = ssp_plan(10**7, domain, epsilon=1.0)
    assert big.mechanisms["sum_y"].epsilon == pytest.approx(_ssp.MIN_Y_SHARE)
    gplan = ssp_plan(2_000, domain, epsilon=0.5, delta=1e-6)
    assert not gplan.mean_only
    assert gplan.noise_sd("sum_y") / 2_000 == pytest.approx(_ssp.MEAN_NOISE, rel=1e-6)


def test_mean_only_plan_is_the_public_gate():
    domain = SSPDomain.make(10, np.ones(10))
    for n in (100, 1000, 10**4, 10**5):
        for eps in (0.1, 1.0, 5.0):
            probe = ssp_plan(10**9, domain, epsilon=eps)   # the gram's share of epsilon
            share = float(_ssp._slope_shares(True, False)["gram"])     # 5/9 for SSP
            gram = _ssp.LaplaceMechanism.calibrate(
                sensitivity=100.0, epsilon=eps * share, size=55,
                granularity=probe.mechanisms["gram"].grid)
            sd = math.sqrt(2) * gram.scale * gram.grid
            expected = ssp_noise_norm(10, sd, sd) > _ssp.MAX_NOISE_PER_RECORD * n
            plan = ssp_plan(n, domain, epsilon=eps)
            assert plan.mean_only == expected
            if plan.mean_only:
                assert list(plan.mechanisms) == ["sum_y"] and plan.cost.epsilon == eps
                assert plan.mechanisms["sum_y"].epsilon == eps


# ----------------------------------------------------------------------------- noise laws

def _binned_law_pvalue(k, cdf, edges):
    """Chi-square of integer draws k against a discrete law given by its CDF at integers, in
    the bins cut at the integer ``edges`` (bin i: edges[i-1] < k <= edges[i])."""
    probs = np.diff(np.concatenate([[0.0], [cdf(e) for e in edges], [1.0]]))
    counts = np.bincount(np.searchsorted(edges, k, side="left"), minlength=edges.size + 1)
    return chisquare_pvalue(counts, probs)


def _dlap_cdf(t):
    q = math.exp(-1.0 / t)

    def cdf(m):   # P(K <= m) for P(k) ~ q^|k|
        return 1.0 - q ** (m + 1) / (1 + q) if m >= 0 else q ** (-m) / (1 + q)
    return cdf


def _dgauss_cdf(sigma):
    # sigma ~ 2^36 grid units: the discrete Gaussian's CDF at m is the normal CDF at m + 1/2
    # up to a relative exp(-2 pi^2 sigma^2) (Poisson summation)
    return lambda m: stats.norm.cdf((m + 0.5) / sigma)


@pytest.fixture(scope="module")
def law_data():
    rng = np.random.default_rng(17)  # insecure-ok: test data
    X = rng.uniform(-1, 1, (400, 2))
    y = np.clip(X @ [0.4, -0.3] + 0.2 * rng.normal(size=400), -1, 1)
    return X, y


# Draws per part for the law test. Power, computed before the test: 12 bins at the tested
# law's twelfths, alpha 1e-4 (11 degrees of freedom), draws from a law 15% wider: the
# chi-square's noncentrality is 6000 * 0.0107 (Laplace) / 0.0162 (Gaussian), power > 0.9999.
LAW_DRAWS = 6000


@pytest.mark.slow
@pytest.mark.parametrize("method", ["ssp", "adassp"])
@pytest.mark.parametrize("delta", [None, 1e-6], ids=["laplace", "gaussian"])
def test_released_statistics_noise_laws(law_data, delta, method):
    # Each noise step of the fit (X^T X, X^T y, X^T 1, sum y, AdaSSP's smallest eigenvalue), with
    # the plan and the release function the fit uses, 6000 draws of every part on one data set
    # (in [-1, 1] already, so the scaled statistics are the data's): every released value is on
    # its grid, and its integer noise k = released / grid - rint(exact / grid) follows the exact
    # discrete Laplace / discrete Gaussian at the plan's scale (chi-square, 12 bins, alpha
    # 1e-4); the same draws reject a 15% larger scale (power, see LAW_DRAWS).
    X, y = law_data
    kw = {} if delta is None else {"delta": delta}
    plan = LinearRegression(epsilon=2.0, bounds_X=(-1, 1), bounds_y=(-1, 1), random_state=0,
                            method=method, **kw).fit(X, y).plan_
    assert not plan.mean_only and plan.gaussian == (delta is not None)
    expected = set(_ssp.PARTS) - (set() if method == "adassp" else {"min_eigenvalue"})
    assert set(plan.mechanisms) == expected
    exact = ssp_statistics(X, y, plan)
    gen = np.random.default_rng(99)
    part_draws = {k: [] for k in plan.mechanisms}
    for k in plan.mechanisms:
        m = plan.mechanisms[k]
        single = _ssp.SSPPlan(plan.n, plan.d, plan.intercept, plan.gaussian, False,
                              plan.adaptive_ridge, plan.eigen_column, plan.offdiag_weight, plan.cost,
                              plan.sensitivities, {k: m})
        while sum(v.size for v in part_draws[k]) < LAW_DRAWS:
            released = _ssp.ssp_release(single, exact, gen)[k]
            units = released / m.grid - np.rint(exact[k] / m.grid)
            assert np.all(units == np.round(units)), f"{k}: released values off the grid"
            part_draws[k].append(units)
    for part, mech in plan.mechanisms.items():
        k = np.concatenate(part_draws[part])[:LAW_DRAWS]
        if delta is None:
            scale, make = mech.scale, _dlap_cdf
            edges = np.round(stats.laplace.ppf(np.arange(1, 12) / 12) * scale)
        else:
            scale, make = mech.sigma, _dgauss_cdf
            edges = np.round(stats.norm.ppf(np.arange(1, 12) / 12) * scale)
        assert _binned_law_pvalue(k, make(scale), edges) > ALPHA, part
        assert _binned_law_pvalue(k, make(1.15 * scale), edges) < ALPHA, part
    # the entries of one release are independent: no correlation between two entries
    g = np.concatenate(part_draws["gram"])
    g = g[: g.size // 3 * 3].reshape(-1, 3)
    assert abs(stats.pearsonr(g[:, 0], g[:, 1])[0]) < 4 / math.sqrt(len(g))


def test_released_values_are_multiples_of_their_grid(law_data):
    X, y = law_data
    for kw in ({}, {"delta": 1e-5}, {"method": "adassp"}):
        reg = LinearRegression(epsilon=1.0, bounds_X=(-1, 1), bounds_y=(-1, 1), random_state=4,
                               **kw).fit(X, y)
        for part, mech in reg.plan_.mechanisms.items():
            units = reg.noisy_statistics_[part] / mech.grid
            assert np.all(units == np.round(units)), part


# ----------------------------------------------------------------------------- fits

def _ols(X, y, intercept=True):
    A = np.column_stack([X, np.ones(len(X))]) if intercept else X
    return np.linalg.lstsq(A, y, rcond=None)[0]


@pytest.mark.parametrize("kw", [{}, {"delta": 1e-6}, {"data_norm": 4.0, "bounds_X": None},
                                {"data_norm": 4.0}, {"method": "adassp"},
                                {"method": "adassp", "delta": 1e-6}],
                         ids=["laplace", "gaussian", "norm", "both", "adassp", "adassp-gaussian"])
def test_huge_epsilon_matches_least_squares(kw):
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (3000, 3))
    y = X @ [0.5, -0.2, 0.1] + 0.3 + 0.1 * rng.normal(size=3000)
    params = dict(epsilon=1e9, bounds_X=(-2, 2), bounds_y=(-3, 3), random_state=0)
    params.update(kw)
    reg = LinearRegression(**params).fit(X, y)
    ref = _ols(X, y)
    np.testing.assert_allclose(reg.coef_, ref[:3], rtol=1e-4, atol=1e-5)
    assert reg.intercept_ == pytest.approx(ref[3], abs=1e-5)
    assert reg.ridge_ == 0.0


def test_huge_epsilon_without_intercept():
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, (2000, 4))
    y = X @ [0.2, -0.1, 0.3, 0.05]
    reg = LinearRegression(epsilon=1e9, bounds_X=(-1, 1), bounds_y=(-2, 2), fit_intercept=False,
                           random_state=0).fit(X, y)
    np.testing.assert_allclose(reg.coef_, [0.2, -0.1, 0.3, 0.05], atol=1e-6)
    assert reg.intercept_ == 0.0 and "sum_y" not in reg.noisy_statistics_


def test_collinear_features_get_the_ridge():
    # a duplicated feature: the smallest eigenvalue is 0, so the ridge is its largest value,
    # RIDGE_SCALE times the noise bound, unless the noisy eigenvalue came out high
    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 1, 5000)
    X = np.column_stack([x, x, rng.uniform(-1, 1, 5000)])
    y = np.clip(0.6 * x, -1, 1)
    reg = LinearRegression(epsilon=1.0, bounds_X=(-1, 1), bounds_y=(-1, 1), random_state=3,
                           method="adassp").fit(X, y)
    assert reg.ridge_ > 0.5 * _ssp.RIDGE_SCALE * reg.noise_norm_
    assert np.all(np.isfinite(reg.coef_))
    assert reg.coef_[0] + reg.coef_[1] == pytest.approx(0.6, abs=0.1)   # split, not blown up


def test_ridge_is_the_stated_rule(law_data):
    X, y = law_data
    reg = LinearRegression(epsilon=0.5, bounds_X=(-1, 1), bounds_y=(-1, 1), random_state=5,
                           method="adassp").fit(X, y)
    plan, noisy = reg.plan_, reg.noisy_statistics_
    low = max(0.0, noisy["min_eigenvalue"][0] - plan.mechanisms["min_eigenvalue"].scale
              * plan.mechanisms["min_eigenvalue"].grid * math.log(1 / (2 * _ssp.FAILURE)))
    assert reg.ridge_ == pytest.approx(max(0.0, _ssp.RIDGE_SCALE * reg.noise_norm_ - low))
    assert reg.noise_norm_ >= plan.gram_noise_norm()
    plain = LinearRegression(epsilon=0.5, bounds_X=(-1, 1), bounds_y=(-1, 1),
                             random_state=5).fit(X, y)
    assert plain.ridge_ == 0.0 and "min_eigenvalue" not in plain.noisy_statistics_


def test_small_n_releases_the_mean_only():
    rng = np.random.default_rng(4)
    X = rng.uniform(0, 1, (60, 8))
    y = 3.0 + rng.uniform(-1, 1, 60)
    acc = dpcore.Accountant(10.0, 1e-3)
    reg = LinearRegression(epsilon=1.0, delta=1e-6, bounds_X=(0, 1), bounds_y=(2, 4),
                           accountant=acc, random_state=0).fit(X, y)
    assert reg.plan_.mean_only and np.all(reg.coef_ == 0)
    assert list(reg.noisy_statistics_) == ["sum_y"]
    assert 2.0 <= reg.intercept_ <= 4.0
    # with delta the mean is released by the discrete Gaussian under the same rho as a full
    # release: the cost (known before fit) does not depend on which branch n selects
    assert acc.history[0].rho == zcdp_rho_for(1.0, 1e-6) == reg.cost.rho


def test_gaussian_fit_is_charged_rho():
    rng = np.random.default_rng(5)
    X = rng.uniform(-1, 1, (5000, 3))
    y = np.clip(X @ [0.3, 0.2, -0.1], -1, 1)
    acc = dpcore.Accountant(2.0, 1e-5)
    LinearRegression(epsilon=1.0, delta=1e-6, bounds_X=(-1, 1), bounds_y=(-1, 1), accountant=acc,
                     random_state=0).fit(X, y)
    entry = acc.history[0]
    assert entry.rho == zcdp_rho_for(1.0, 1e-6)
    assert zcdp_epsilon(entry.rho, 1e-6) <= 1.0


def test_gram_layout_round_trip():
    rng = np.random.default_rng(6)
    X = rng.uniform(-1, 1, (50, 4))
    for weight in (1.0, 2.0):
        iu = np.triu_indices(4)
        upper = (X.T @ X)[iu]
        upper[iu[0] != iu[1]] *= weight
        np.testing.assert_allclose(gram_from_upper(upper, 4, weight), X.T @ X, rtol=1e-12)


@pytest.mark.parametrize("kw, match", [
    (dict(method="bogus"), "method"),
    (dict(method="functional", delta=1e-6), "delta"),
    (dict(method="functional", data_norm=1.0), "data_norm"),
    (dict(alpha=-0.1), "alpha"),
    (dict(eigen_floor=1.0), "eigen_floor"),
    (dict(delta=0.0), "delta"),
    (dict(delta=1.0), "delta"),
    (dict(data_norm=-1.0), "data_norm"),
    (dict(data_norm=math.inf), "data_norm"),
    (dict(bounds_X=None), "bounds_X is required"),
    (dict(bounds_y=None), "bounds_y is required"),
    (dict(epsilon=0.0), "epsilon"),
])
def test_bad_parameters_charge_nothing(kw, match):
    X = np.zeros((100, 2))
    y = np.zeros(100)
    acc = dpcore.Accountant(10.0, 1e-3)
    params = dict(bounds_X=(-1, 1), bounds_y=(-1, 1), accountant=acc)
    params.update(kw)
    with pytest.raises((ValueError, TypeError), match=match):
        LinearRegression(**params).fit(X, y)
    assert acc.history == []


def test_fitted_model_stores_no_exact_statistic(law_data):
    X, y = law_data
    reg = LinearRegression(epsilon=1.0, bounds_X=(-1, 1), bounds_y=(-1, 1), random_state=7).fit(X, y)
    exact = ssp_statistics(X, y, reg.plan_)
    for part, value in reg.noisy_statistics_.items():
        assert not np.allclose(value, exact[part], rtol=0, atol=1e-9), part


def test_alpha_is_a_ridge_in_the_scaled_units():
    # alpha is added to the centred noisy X^T X (the slopes only), as a public ridge: at huge
    # epsilon the fit is the ridge regression of the scaled data
    rng = np.random.default_rng(8)
    X = rng.uniform(-1, 1, (500, 3))
    y = X @ [0.5, -0.3, 0.2] + 0.1 * rng.normal(size=500)
    reg = LinearRegression(epsilon=1e9, alpha=50.0, bounds_X=(-1, 1), bounds_y=(-2, 2),
                           random_state=0).fit(X, y)
    Xc, yc = X - X.mean(axis=0), (y - y.mean()) / 2.0       # y scaled by its half-width 2
    w = np.linalg.solve(Xc.T @ Xc + 50.0 * np.eye(3), Xc.T @ yc)
    np.testing.assert_allclose(reg.coef_, 2.0 * w, rtol=1e-5)


@pytest.mark.parametrize("kw", [{}, {"delta": 1e-6}, {"method": "adassp"}])
def test_fit_is_the_documented_post_processing(kw):
    # The slopes and intercept recomputed from the released statistics by the documented rule
    # (projected means, centred Gram, [ridge], spectrum pulled to its mean by the noise's
    # expected spread, floor at EIGEN_FLOOR tau), in plain NumPy.
    rng = np.random.default_rng(9)
    X = rng.normal(size=(20_000, 4)) / 3
    y = np.clip(X @ [0.3, 0.2, -0.4, 0.1] + 0.1 + 0.2 * rng.normal(size=20_000), -1, 1)
    reg = LinearRegression(epsilon=1.0, bounds_X=(-1, 1), bounds_y=(-1, 1), random_state=3,
                           **kw).fit(X, y)
    plan, rel, n, d = reg.plan_, reg.noisy_statistics_, 20_000, 4
    A = np.zeros((d, d))
    A[np.triu_indices(d)] = rel["gram"]
    A[np.triu_indices(d, 1)] /= plan.offdiag_weight
    A = np.triu(A) + np.triu(A, 1).T
    xbar = np.clip(rel["sum_x"] / n, -1, 1)
    ybar = float(np.clip(rel["sum_y"][0] / n, -1, 1))
    C = A - n * np.outer(xbar, xbar)
    g = rel["xy"] - n * xbar * ybar
    mu, V = np.linalg.eigh(C + reg.ridge_ * np.eye(d))
    sd = plan.noise_sd("gram")
    noise = (d - 1) * (sd**2 + d * (sd / plan.offdiag_weight) ** 2)
    m = mu.mean()
    mu = m + max(0.0, 1 - noise / np.sum((mu - m) ** 2)) * (mu - m)
    mu = np.maximum(mu, _ssp.EIGEN_FLOOR * reg.noise_norm_)
    w = V @ ((V.T @ g) / mu)
    np.testing.assert_allclose(reg.coef_, w, rtol=1e-9, atol=1e-12)
    assert reg.intercept_ == pytest.approx(ybar - w @ xbar, abs=1e-12)
    if kw.get("method") != "adassp":
        assert reg.ridge_ == 0.0


@pytest.mark.parametrize("domain", DOMAINS)
def test_lattice_rows_stay_in_the_domain_and_sums_are_on_the_grids(domain):
    """Rows on the domain's boundary (norm r, coordinates at +-b_j) and inside: the lattice rows
    a h keep |a_j h| <= b_j and ||a h||^2 <= r^2 (so the sensitivities hold), move each
    coordinate by at most h, and every released sum is an integer number of grid units."""
    rng = np.random.default_rng(12)  # insecure-ok: test data
    d = domain.d
    b = np.array([float(v) for v in domain.coord])
    r = math.sqrt(float(domain.row_norm_sq))
    rows = rng.normal(size=(300, d))
    rows *= (r / np.linalg.norm(rows, axis=1))[:, None]            # on the sphere of radius r
    rows = np.clip(rows, -b, b)
    rows = np.vstack([rows, np.sign(rng.normal(size=(50, d))) * b])  # corners
    rows *= np.minimum(1.0, r / np.linalg.norm(rows, axis=1))[:, None]
    ys = rng.uniform(-1, 1, len(rows))
    for delta in (None, 1e-6):
        plan = ssp_plan(len(rows), domain, epsilon=1.0, delta=delta, adaptive_ridge=True)
        lattice = _ssp.SSPLattice.make(plan, domain)
        a, c = lattice.integers(rows, ys)
        h = 2.0 ** lattice.x_exponent
        assert np.all(np.abs(a) * h <= b) and np.all(np.abs(c) * 2.0 ** lattice.y_exponent <= 1)
        assert np.all(np.sum((a * h) ** 2, axis=1) <= float(domain.row_norm_sq))
        assert np.max(np.abs(a * h - rows)) <= h
        stats_ = ssp_statistics(rows, ys, plan, domain)
        for part in _ssp.SUM_PARTS:
            units = stats_[part] / plan.mechanisms[part].grid
            assert np.array_equal(units, np.round(units)), part
