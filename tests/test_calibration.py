"""Calibration math: known values (recomputed independently), exactness, safe-side rounding,
tightness, monotonicity and argument errors."""
import math
from fractions import Fraction

import pytest

from dpcore import calibration
from dpcore.calibration import _discrete_gaussian

mp = pytest.importorskip("mpmath")

ETA = Fraction(1, 2**53)


def _half_unit(text):
    """Half a unit in the last printed digit of a decimal string such as '7.2488e-3'."""
    mantissa, _, exp = text.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    return 0.5 * 10.0 ** (-decimals + (int(exp) if exp else 0))


def _matches_printed(value, text):
    # The reference numbers (published tables) are rounded to the digits shown; our values are
    # safe-side upper bounds within a relative 1e-8 of the exact value, so allow both.
    return abs(value - float(text)) <= _half_unit(text) + 1e-8 * abs(value)


# ---------------------------------------------------------------------------------------------
# independent references (mpmath, 50 digits)


def _mp_agm_delta(sigma, eps, sens):
    s = mp.mpf(sigma) / sens
    return mp.ncdf(1 / (2 * s) - eps * s) - mp.e**eps * mp.ncdf(-1 / (2 * s) - eps * s)


def _mp_agm_sigma(eps, delta, sens=1.0):
    lo, hi = mp.mpf("1e-3"), mp.mpf(1e6)
    for _ in range(200):
        mid = (lo + hi) / 2
        if _mp_agm_delta(mid, eps, sens) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


def _mp_discrete_delta(s2, eps, d):
    """CKS Theorem 7 by direct summation at 50 digits (moderate sigma only)."""
    s2 = mp.mpf(s2)
    sigma = float(mp.sqrt(s2))
    width = int(60 * sigma) + 60
    w = {k: mp.e ** (-mp.mpf(k) ** 2 / (2 * s2)) for k in range(-width, width + 1)}
    z = mp.fsum(w.values())
    a = eps * s2 / d - mp.mpf(d) / 2
    m = int(mp.floor(a)) + 1
    n = m + d - 1
    f = lambda k: w[k] if k in w else mp.e ** (-mp.mpf(k) ** 2 / (2 * s2))  # noqa: E731
    body = mp.fsum(f(k) for k in range(m, n + 1))
    tail = mp.fsum(f(k) for k in range(n + 1, n + 1 + width))
    return (body - mp.expm1(eps) * tail) / z


def _mp_zcdp_delta(rho, eps):
    """Tight conversion: minimise the log bound over alpha by bisection on its derivative."""
    rho, eps = mp.mpf(rho), mp.mpf(eps)
    slope = lambda a: (2 * a - 1) * rho - eps + mp.log(1 - 1 / a)  # noqa: E731
    lo, hi = mp.mpf(1) + mp.mpf(10) ** -40, (eps + 1) / (2 * rho) + 3
    for _ in range(400):
        mid = (lo + hi) / 2
        if slope(mid) < 0:
            lo = mid
        else:
            hi = mid
    a = (lo + hi) / 2
    log_d = (a - 1) * (a * rho - eps) - mp.log(a - 1) + a * mp.log(1 - 1 / a)
    return min(mp.mpf(1), mp.e**log_d)


@pytest.fixture(autouse=True)
def _precision():
    with mp.workdps(50):
        yield


# ---------------------------------------------------------------------------------------------
# snapping (exact)


@pytest.mark.parametrize("eps, bound", [(1.0, 100.0), (0.1, 50.0), (2.5, 3.0), (1e-3, 1e6), (7.0, 0.5)])
def test_snapping_scale_is_smallest_double_meeting_bound_exactly(eps, bound):
    lam = calibration.snapping_scale(eps, bound)

    def exact(x):
        return (1 + 12 * Fraction(bound) * ETA) / Fraction(x) + 2 * ETA

    assert exact(lam) <= Fraction(eps)
    assert exact(math.nextafter(lam, 0.0)) > Fraction(eps)  # one ulp less violates it
    assert lam < bound < 2.0**46 * lam
    eff = calibration.snapping_epsilon(lam, bound)
    assert Fraction(eff) >= exact(lam) and Fraction(math.nextafter(eff, 0.0)) < exact(lam)
    assert eff <= eps


def test_snapping_grid_is_power_of_two_at_least_lambda():
    for lam in (0.3, 1.0, 1.0000000000000002, 3.0, 4.0, 1e-9, 12345.678):
        grid = calibration.snapping_grid(lam)
        assert grid >= lam and grid / 2 < lam
        assert math.frexp(grid)[0] == 0.5


def test_snapping_errors_name_the_parameter():
    with pytest.raises(ValueError, match="epsilon"):
        calibration.snapping_scale(2.0**-52, 10.0)  # = 2 eta exactly
    with pytest.raises(ValueError, match="epsilon"):
        calibration.snapping_scale(-1.0, 10.0)
    with pytest.raises(ValueError, match="bound"):
        calibration.snapping_scale(1.0, 0.5)  # bound <= lambda
    with pytest.raises(ValueError, match="bound"):
        calibration.snapping_scale(1.0, 2.0**47)  # bound >= 2**46 lambda
    with pytest.raises(ValueError, match="lam"):
        calibration.snapping_grid(0.0)
    with pytest.raises(TypeError, match="bound"):
        calibration.snapping_epsilon(1.0, "10")


def test_laplace_scale_rounds_up_exactly():
    for sens, eps in [(1.0, 0.3), (3.7, 0.1), (1e-3, 7.0), (1.0, 0.5)]:
        b = calibration.laplace_scale(sens, eps)
        assert Fraction(sens) / Fraction(b) <= Fraction(eps)
        assert Fraction(sens) / Fraction(math.nextafter(b, 0.0)) > Fraction(eps)


# ---------------------------------------------------------------------------------------------
# analytic Gaussian (Balle-Wang)


@pytest.mark.parametrize(
    "eps, delta, printed",
    [(1.0, 1e-5, "3.730632"), (0.5, 1e-6, "8.057618"), (2.0, 1e-5, "1.993812"), (0.1, 1e-5, "30.749566")],
)
def test_analytic_gaussian_sigma_known_values(eps, delta, printed):
    sigma = calibration.analytic_gaussian_sigma(eps, delta, 1.0)
    assert _matches_printed(sigma, printed)
    reference = _mp_agm_sigma(eps, delta)
    # the safety margin is a relative 2**-30 on delta: sigma moves by far less than 1e-8
    assert 0 <= (sigma - reference) / reference < 1e-8


@pytest.mark.parametrize(
    "eps, delta, sens", [(1.0, 1e-5, 1.0), (0.01, 1e-9, 3.0), (8.0, 1e-12, 0.25), (30.0, 0.1, 1.0)]
)
def test_analytic_gaussian_sigma_safe_and_tight(eps, delta, sens):
    sigma = calibration.analytic_gaussian_sigma(eps, delta, sens)
    assert calibration.analytic_gaussian_delta(sigma, eps, sens) <= delta
    assert _mp_agm_delta(sigma, eps, sens) <= delta
    assert calibration.analytic_gaussian_delta(sigma * (1 - 1e-9), eps, sens) > delta
    assert _mp_agm_delta(sigma * (1 - 1e-6), eps, sens) > delta  # the bound is tight


def test_analytic_gaussian_sigma_scales_with_sensitivity():
    s1 = calibration.analytic_gaussian_sigma(1.0, 1e-5, 1.0)
    s4 = calibration.analytic_gaussian_sigma(1.0, 1e-5, 4.0)
    assert s4 / s1 == pytest.approx(4.0, rel=1e-12)


@pytest.mark.parametrize("sigma", [0.05, 0.5, 1.0, 3.0, 30.0, 1e3, 1e5, 1e7])
@pytest.mark.parametrize("eps", [1e-6, 1e-3, 0.1, 1.0, 5.0, 50.0])
def test_analytic_gaussian_delta_never_underestimates(sigma, eps):
    exact = _mp_agm_delta(sigma, eps, 1.0)
    got = calibration.analytic_gaussian_delta(sigma, eps, 1.0)
    if exact < mp.mpf("1e-300"):
        assert got < 1e-290
        return
    assert got >= exact
    assert got <= exact * (1 + 1e-8)


def test_analytic_gaussian_beats_classical_formula():
    for eps in (0.1, 0.5, 0.9):
        for delta in (1e-5, 1e-8):
            classical = math.sqrt(2 * math.log(1.25 / delta)) / eps
            assert calibration.analytic_gaussian_sigma(eps, delta, 1.0) < classical


def test_analytic_gaussian_sigma_monotone():
    eps_grid = [0.05, 0.1, 0.3, 1.0, 2.0, 5.0]
    sigmas = [calibration.analytic_gaussian_sigma(e, 1e-6, 1.0) for e in eps_grid]
    assert all(a > b for a, b in zip(sigmas, sigmas[1:]))
    delta_grid = [1e-12, 1e-8, 1e-5, 1e-3, 0.1]
    sigmas = [calibration.analytic_gaussian_sigma(1.0, d, 1.0) for d in delta_grid]
    assert all(a > b for a, b in zip(sigmas, sigmas[1:]))


# ---------------------------------------------------------------------------------------------
# discrete Gaussian (CKS Theorem 7)


@pytest.mark.parametrize("s2, eps, d, printed", [(4.0, 1.0, 1, "7.2488e-3"), (25.0, 0.5, 1, "4.97763e-4")])
def test_discrete_gaussian_delta_known_values(s2, eps, d, printed):
    got = calibration.discrete_gaussian_delta(s2, eps, d)
    assert _matches_printed(got, printed)
    exact = _mp_discrete_delta(s2, eps, d)
    assert exact <= got <= exact * (1 + 1e-8)


@pytest.mark.parametrize("s2", [0.04, 0.3, 1.0, 4.0, 9.5, 100.0, 900.0])
@pytest.mark.parametrize("eps", [0.01, 0.5, 1.0, 3.0])
@pytest.mark.parametrize("d", [1, 2, 7])
def test_discrete_gaussian_delta_never_underestimates(s2, eps, d):
    exact = _mp_discrete_delta(s2, eps, d)
    got = calibration.discrete_gaussian_delta(s2, eps, d)
    if exact < mp.mpf("1e-300"):
        assert 0 < got < 1e-290
        return
    assert got >= min(exact, 1)
    assert got <= exact * (1 + 1e-8) or got == 1.0


def test_discrete_gaussian_branches_agree_at_moderate_sigma():
    """Direct summation and the Euler-Maclaurin bound are both upper bounds; at sigma ~ 1e4 the
    Euler-Maclaurin remainder is tiny, so they agree closely and EM is never below direct."""
    cases = [(3000.0, 800, 1.0), (10000.0, 2700, 1.0), (10000.0, 10000, 0.1), (5000.0, 100, 0.05)]
    for sigma, d, eps in cases:
        s2 = sigma * sigma
        direct = _discrete_gaussian._dg_log_delta(s2, eps, d, method="direct")
        em = _discrete_gaussian._dg_log_delta(s2, eps, d, method="euler-maclaurin")
        assert em >= direct
        assert em - direct < 1e-5


@pytest.mark.parametrize("log2_sigma", [20, 30, 40])
@pytest.mark.parametrize("eps, ratio", [(1.0, 3.73), (0.5, 8.0), (3.0, 1.5)])
def test_discrete_gaussian_delta_converges_to_continuous(log2_sigma, eps, ratio):
    sigma = 2.0**log2_sigma
    d = int(sigma / ratio)
    discrete = calibration.discrete_gaussian_delta(sigma * sigma, eps, d)
    continuous = calibration.analytic_gaussian_delta(sigma, eps, float(d))
    # the difference is of relative order (a/sigma)**4 / sigma**2 plus the 2**-30 margins
    assert discrete == pytest.approx(continuous, rel=1e-7)


def test_discrete_gaussian_delta_huge_sigma2_and_tiny_results():
    assert 0 < calibration.discrete_gaussian_delta(2.0**80, 1.0, 2**38) < 1e-4
    tiny = calibration.discrete_gaussian_delta(2.0**80, 1.0, 1)  # astronomically small
    assert tiny == math.ulp(0.0)  # reported as the smallest positive double, never 0
    assert calibration.discrete_gaussian_delta(0.01, 0.1, 30) == 1.0  # capped at 1


@pytest.mark.parametrize(
    "eps, delta, d",
    [(1.0, 1e-5, 1), (0.5, 1e-6, 3), (1.0, 1e-5, 1000), (1.0, 1e-5, 2**28), (2.0, 1e-9, 2**30)],
)
def test_discrete_gaussian_sigma_safe_and_tight(eps, delta, d):
    sigma = calibration.discrete_gaussian_sigma(eps, delta, d)
    assert calibration.discrete_gaussian_delta(sigma * sigma, eps, d) <= delta
    smaller = sigma * (1 - 2.0**-38)
    assert calibration.discrete_gaussian_delta(smaller * smaller, eps, d) > delta
    if d <= 3:  # check with the independent exact sum too
        assert _mp_discrete_delta(sigma * sigma, eps, d) <= delta


def test_discrete_gaussian_sigma_large_sensitivity_matches_continuous():
    d = 2**28
    sigma = calibration.discrete_gaussian_sigma(1.0, 1e-5, d)
    assert sigma / d == pytest.approx(calibration.analytic_gaussian_sigma(1.0, 1e-5, 1.0), rel=1e-8)


def test_discrete_gaussian_sigma_monotone():
    sigmas = [calibration.discrete_gaussian_sigma(e, 1e-6, 5) for e in (0.1, 0.5, 1.0, 2.0)]
    assert all(a > b for a, b in zip(sigmas, sigmas[1:]))
    sigmas = [calibration.discrete_gaussian_sigma(1.0, d, 5) for d in (1e-10, 1e-6, 1e-3)]
    assert all(a > b for a, b in zip(sigmas, sigmas[1:]))


# ---------------------------------------------------------------------------------------------
# zCDP conversions


@pytest.mark.parametrize(
    "rho, delta, tight, simple",
    [
        (0.025, 1e-6, "1.01407", "1.20039"),
        (0.5, 1e-5, "4.72839", "5.29853"),
        (1.0, 1e-6, "7.76622", "8.43384"),
    ],
)
def test_zcdp_epsilon_known_values(rho, delta, tight, simple):
    eps = calibration.zcdp_epsilon(rho, delta)
    assert _matches_printed(eps, tight)
    assert _matches_printed(calibration.zcdp_epsilon_simple(rho, delta), simple)
    assert calibration.zcdp_epsilon_simple(rho, delta) > eps
    exact_simple = rho + 2 * math.sqrt(rho * math.log(1 / delta))
    assert calibration.zcdp_epsilon_simple(rho, delta) == pytest.approx(exact_simple, rel=1e-14)


@pytest.mark.parametrize("rho", [1e-8, 1e-4, 0.01, 0.1, 1.0, 10.0, 100.0])
@pytest.mark.parametrize("eps", [0.0, 0.01, 0.1, 1.0, 5.0, 20.0])
def test_zcdp_delta_matches_exact_minimum(rho, eps):
    exact = _mp_zcdp_delta(rho, eps)
    got = calibration.zcdp_delta(rho, eps)
    if exact < mp.mpf("1e-300"):
        assert 0 < got < 1e-290
        return
    assert exact <= got <= exact * (1 + 1e-9)


@pytest.mark.parametrize("rho", [1e-6, 1e-3, 0.025, 0.5, 3.0, 100.0])
@pytest.mark.parametrize("delta", [1e-300, 1e-12, 1e-6, 0.01])
def test_zcdp_epsilon_consistent_and_tight(rho, delta):
    eps = calibration.zcdp_epsilon(rho, delta)
    assert calibration.zcdp_delta(rho, eps) <= delta
    assert _mp_zcdp_delta(rho, eps) <= delta
    if eps > 0:
        assert calibration.zcdp_delta(rho, eps * (1 - 1e-9)) > delta


@pytest.mark.parametrize("eps", [1e-3, 0.1, 1.0, 10.0])
@pytest.mark.parametrize("delta", [1e-12, 1e-6, 0.1])
def test_zcdp_rho_for_is_largest_valid(eps, delta):
    rho = calibration.zcdp_rho_for(eps, delta)
    assert calibration.zcdp_delta(rho, eps) <= delta
    assert _mp_zcdp_delta(rho, eps) <= delta
    assert calibration.zcdp_delta(rho * (1 + 1e-9), eps) > delta
    # round trip through the epsilon conversion (each rounds to its own safe side)
    assert calibration.zcdp_epsilon(rho, delta) == pytest.approx(eps, rel=1e-9)


def test_zcdp_monotone():
    rhos = [calibration.zcdp_rho_for(e, 1e-6) for e in (0.1, 0.5, 1.0, 4.0)]
    assert all(a < b for a, b in zip(rhos, rhos[1:]))
    deltas = [calibration.zcdp_delta(0.1, e) for e in (0.1, 0.5, 1.0, 4.0)]
    assert all(a > b for a, b in zip(deltas, deltas[1:]))


# ---------------------------------------------------------------------------------------------
# advanced composition


def test_advanced_composition_known_value():
    eps, delta = calibration.advanced_composition(0.1, 0.0, 100, 1e-6)
    exact = 0.1 * math.sqrt(2 * 100 * math.log(1e6)) + 100 * 0.1 * math.expm1(0.1)
    assert _matches_printed(eps, "6.308")
    assert exact <= eps <= exact * (1 + 1e-12)
    assert delta == 1e-6
    eps2, delta2 = calibration.advanced_composition(0.1, 1e-7, 100, 1e-6)
    assert eps2 == eps
    assert Fraction(delta2) >= 100 * Fraction(1e-7) + Fraction(1e-6)
    assert delta2 == pytest.approx(1.1e-5, rel=1e-12)


def test_advanced_composition_can_lose_to_basic():
    eps, _ = calibration.advanced_composition(1.0, 0.0, 2, 1e-6)
    assert eps > 2.0


# ---------------------------------------------------------------------------------------------
# errors


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: calibration.analytic_gaussian_sigma(0.0, 1e-5, 1.0), "epsilon"),
        (lambda: calibration.analytic_gaussian_sigma(1.0, 1.0, 1.0), "delta"),
        (lambda: calibration.analytic_gaussian_sigma(1.0, 1e-5, -1.0), "sensitivity"),
        (lambda: calibration.analytic_gaussian_delta(0.0, 1.0, 1.0), "sigma"),
        (lambda: calibration.discrete_gaussian_delta(-4.0, 1.0, 1), "sigma2"),
        (lambda: calibration.discrete_gaussian_delta(4.0, -1.0, 1), "epsilon"),
        (lambda: calibration.discrete_gaussian_delta(4.0, 1.0, 0), "sensitivity"),
        (lambda: calibration.discrete_gaussian_sigma(1.0, 0.0, 1), "delta"),
        (lambda: calibration.zcdp_delta(0.0, 1.0), "rho"),
        (lambda: calibration.zcdp_epsilon(0.1, 1.5), "delta"),
        (lambda: calibration.zcdp_epsilon_simple(-0.1, 1e-6), "rho"),
        (lambda: calibration.zcdp_rho_for(0.0, 1e-6), "epsilon"),
        (lambda: calibration.advanced_composition(0.1, 0.0, 0, 1e-6), "k"),
        (lambda: calibration.advanced_composition(0.1, 0.0, 10, 0.0), "delta_prime"),
        (lambda: calibration.laplace_scale(1.0, math.inf), "epsilon"),
    ],
)
def test_errors_name_the_parameter(call, name):
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        call()


def test_type_errors_name_the_parameter():
    with pytest.raises(TypeError, match="sensitivity"):
        calibration.discrete_gaussian_delta(4.0, 1.0, 1.5)
    with pytest.raises(TypeError, match="epsilon"):
        calibration.zcdp_rho_for("1", 1e-6)
