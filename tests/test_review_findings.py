"""Review findings (review 23) on learn._optimise, auto_alpha and gaussian_nb_budget, each
fixed; every test here failed before its fix."""
import math
import warnings
from fractions import Fraction

import numpy as np
import pytest

pytest.importorskip("sklearn")

import dpcore  # noqa: E402
from dpcore.learn import GaussianNB, _linear, _optimise  # noqa: E402


def test_newton_certificate_is_exact_when_rounding_exceeds_tol_lam():
    # Two rows, one weight; lam tiny and the linear term b/n huge, so w* ~ -b / (n lam) = -5e17
    # where float64 spacing is 64 and lam * 64 >> tol * lam. Contract: return a point with
    # exact ||grad|| <= tol * lam, or raise RuntimeError.
    Z = np.array([[0.5], [-0.3]])
    lam, tol = 1e-12, 1e-6
    b = np.array([1e6])
    try:
        w = _optimise.minimise_binary(_linear._logistic, Z, lam, b, tol, 100)
    except RuntimeError:
        return
    wq = Fraction(float(w[0]))
    # at this w the margins are -2.5e17 and +1.5e17: logistic derivatives -1 and 0 exactly
    # (to far below tol * lam = 1e-18)
    assert float(Z[0, 0] * w[0]) < -1e3 and float(Z[1, 0] * w[0]) > 1e3
    grad = Fraction(-1) * Fraction(0.5) / 2 + Fraction(lam) * wq + Fraction(1e6) / 2
    assert abs(grad) <= Fraction(tol) * Fraction(lam)


@pytest.mark.parametrize("n, d, epsilon, row_scale", [
    (100, 3, 1e-160, 2 ** 0.5),        # theta^2 = (4 / epsilon)^2 overflows
    (100, 3, 1.0, 1e160),              # n s^2 overflows (1/n/s/s is a subnormal > 0)
    (100, 3, 1.0, 1e-170),             # 1/n/s/s overflows
])
def test_auto_alpha_positive_and_finite_or_refused(n, d, epsilon, row_scale):
    # Review finding (fixed): auto_alpha returned inf or 0, or raised ZeroDivisionError, at
    # extreme public inputs. Now: a finite alpha > 0, or a ValueError that says to pass alpha.
    try:
        alpha = _linear.auto_alpha("objective", n, d, epsilon, row_scale=row_scale)
    except ValueError as exc:
        assert "pass alpha" in str(exc)
    else:
        assert alpha > 0 and math.isfinite(alpha)


def test_unrepresentable_auto_alpha_and_calibration_are_refused_before_the_charge():
    X = np.random.default_rng(0).normal(size=(50, 3))  # insecure-ok: test data
    y = np.arange(50) % 2
    for est in (_linear.LogisticRegression(epsilon=1e-160, data_norm=1.0, classes=[0, 1]),
                # c / (n alpha) so large that no epsilon is left, and exp(epsilon/2) overflows
                _linear.LinearSVC(h=1e-300, epsilon=2000.0, data_norm=1e5, classes=[0, 1])):
        acc = dpcore.Accountant(epsilon=1e4)
        est.set_params(accountant=acc)
        with pytest.raises(ValueError, match="alpha"):
            est.fit(X, y)
        assert acc.spent[0] == 0.0


def test_gaussian_nb_small_epsilon_does_not_raise_after_charging():
    rng = np.random.default_rng(0)  # insecure-ok: test data
    X = rng.normal(size=(20, 1000))
    y = rng.integers(0, 2, 20)
    acc = dpcore.Accountant(epsilon=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            GaussianNB(epsilon=1e-11, bounds=(-3, 3), classes=[0, 1], random_state=0,
                       accountant=acc).fit(X, y)
        except ValueError:
            # raising is acceptable only before anything is charged
            assert acc.spent[0] == 0.0
