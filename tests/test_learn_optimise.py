"""The certified ERM optimiser (dpcore.learn._optimise): the gradient bound on the returned
point (recomputed here), the warm start and the Hessian's precision, failure when tol is not
reached, and the certificate's rounding allowance."""
from fractions import Fraction

import numpy as np
import pytest

pytest.importorskip("sklearn")

from scipy import special  # noqa: E402

from dpcore.learn import _erm, _optimise  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::dpcore.accounting.PrivacyWarning")

TOL = 1e-6


def _certified(grad, lam, tol=TOL):
    """||grad|| <= tol * lam, up to the rounding of a gradient summed in another order."""
    return np.linalg.norm(grad) <= tol * lam + 1e-15


def _rows(rng, n, d):
    """Unit-ball rows y_i x_i with a constant column, as the classifiers build them."""
    X = rng.normal(size=(n, d - 1))
    y = np.where(X @ rng.normal(size=d - 1) + rng.normal(size=n) > 0, 1.0, -1.0)
    norm = float(np.quantile(np.linalg.norm(X, axis=1), 0.99))
    X *= (norm / np.maximum(np.linalg.norm(X, axis=1), norm))[:, None]
    Xs = np.hstack([X, np.ones((n, 1))]) / np.sqrt(norm**2 + 1.0)
    return Xs, y


def _noise(rng, size, large):
    """Zero, or a vector of norm 2 size / epsilon at epsilon = 0.1 (the objective's noise)."""
    if not large:
        return np.zeros(size)
    b = rng.normal(size=size)
    return b * (20.0 * size / np.linalg.norm(b))


def _d1_logistic(z):
    return -special.expit(-z)


def _d1_huber(h):
    def d1(z):
        return np.where(z < 1.0 - h, -1.0, np.where(z <= 1.0 + h, -(1.0 + h - z) / (2.0 * h), 0.0))
    return d1


def _binary_grad(d1, Z, lam, b, w):
    """The gradient of (1/n) sum loss(Z w) + (lam/2)||w||^2 + b^T w / n, from scratch."""
    n = Z.shape[0]
    return Z.T @ d1(Z @ w) / n + lam * w + b / n


LOSSES = {
    "logistic": (_erm._logistic, _d1_logistic),
    "huber 0.5": (_erm._make_huber(0.5), _d1_huber(0.5)),
    "huber 0.1": (_erm._make_huber(0.1), _d1_huber(0.1)),
}


@pytest.mark.parametrize("loss", sorted(LOSSES))
@pytest.mark.parametrize("large_noise", [False, True])
@pytest.mark.parametrize("n", [300, 5000])   # without and with the subsample warm start
def test_binary_minimiser_is_certified(loss, large_noise, n):
    loss_fn, d1 = LOSSES[loss]
    for seed in range(3):
        rng = np.random.default_rng(seed)  # insecure-ok: test data
        d = 8
        Z, y = _rows(rng, n, d)
        Z *= y[:, None]
        lam = 1.0 / n
        b = _noise(rng, d, large_noise)
        w = _optimise.minimise_binary(loss_fn, Z, lam, b, TOL, 100)
        assert _certified(_binary_grad(d1, Z, lam, b, w), lam)


def _spy_newton(monkeypatch):
    """Record the starting point of every call of _optimise.newton."""
    starts = []
    newton = _optimise.newton

    def spy(value_grad, newton_step, x, lam, tol, max_iter):
        starts.append(x.copy())
        return newton(value_grad, newton_step, x, lam, tol, max_iter)

    monkeypatch.setattr(_optimise, "newton", spy)
    return starts


def test_warm_start_from_a_subsample(monkeypatch):
    rng = np.random.default_rng(1)  # insecure-ok: test data
    Z, y = _rows(rng, 5000, 8)
    Z *= y[:, None]
    starts = _spy_newton(monkeypatch)
    _optimise.minimise_binary(_erm._logistic, Z, 1e-4, np.zeros(8), TOL, 100)
    # the subsample is solved first from 0, the full objective from its minimiser
    assert len(starts) == 2
    assert np.all(starts[0] == 0) and np.linalg.norm(starts[1]) > 0.1


def test_unrepresentative_subsample_falls_back_to_zero(monkeypatch):
    # Every stride-th row (what the subsample takes) points one way, all the others the
    # other way: the subsample's minimiser is worse than 0 for the full objective.
    n, d = 5000, 8
    stride = n // (_optimise._WARM_ROWS_BINARY * d)
    rng = np.random.default_rng(2)  # insecure-ok: test data
    Z = rng.normal(size=(n, d)) * 0.05
    Z[:, 0] = -0.9
    Z[::stride, 0] = 0.9
    Z /= np.maximum(np.linalg.norm(Z, axis=1), 1.0)[:, None]
    lam = 1.0 / n
    starts = _spy_newton(monkeypatch)
    w = _optimise.minimise_binary(_erm._logistic, Z, lam, np.zeros(d), TOL, 100)
    assert len(starts) == 2 and starts[0][0] == 0 and starts[1].tolist() == [0.0] * d
    assert _certified(_binary_grad(_d1_logistic, Z, lam, np.zeros(d), w), lam)


def test_float64_hessian_when_lam_is_below_float32_rounding(monkeypatch):
    rng = np.random.default_rng(3)  # insecure-ok: test data
    Z, y = _rows(rng, 400, 5)
    Z *= y[:, None]
    calls = []   # (dtype of the Gram, lam >= 2^-16 * trace of the data Hessian)
    gram = _optimise._weighted_gram

    def spy(Zg, r, rows):
        calls.append((Zg.dtype, lam >= 2.0**-16 * np.sum(r**2 * np.sum(Z**2, axis=1))))
        return gram(Zg, r, rows)

    monkeypatch.setattr(_optimise, "_weighted_gram", spy)
    for lam in (1e-2, 1e-9):
        calls.clear()
        b = _noise(rng, 5, True)
        w = _optimise.minimise_binary(_erm._logistic, Z, lam, b, 1e-3, 100)
        assert _certified(_binary_grad(_d1_logistic, Z, lam, b, w), lam, 1e-3)
        assert calls and all((dtype == np.float32) == small for dtype, small in calls)
        # float32 throughout at the large lam, float64 at least at the start at the tiny one
        assert calls[0][0] == (np.float32 if lam == 1e-2 else np.float64)
        assert all(c[0] == np.float32 for c in calls) == (lam == 1e-2)


def _multinomial_grad(Xs, labels, k, lam, B, W):
    n = Xs.shape[0]
    P = special.softmax(Xs @ W.T, axis=1)
    P[np.arange(n), labels] -= 1.0
    return P.T @ Xs / n + lam * W + B / n


@pytest.mark.parametrize("k", [3, 10])
@pytest.mark.parametrize("large_noise", [False, True])
@pytest.mark.parametrize("n", [600, 8000])   # k = 3: without and with the warm start
def test_multinomial_minimiser_is_certified(k, large_noise, n):
    for seed in range(3):
        rng = np.random.default_rng(seed)  # insecure-ok: test data
        d = 6
        Xs, _ = _rows(rng, n, d)
        labels = np.argmax(Xs @ rng.normal(size=(d, k)) + 0.3 * rng.normal(size=(n, k)), axis=1)
        lam = 1.0 / n
        B = _noise(rng, k * d, large_noise).reshape(k, d)
        W = _optimise.minimise_multinomial(Xs, labels, k, lam, B, TOL, 100)
        assert W.shape == (k, d)
        assert _certified(_multinomial_grad(Xs, labels, k, lam, B, W), lam)


def test_multinomial_warm_start(monkeypatch):
    n, d, k = 8000, 6, 3
    stride = n // (_optimise._WARM_ROWS_MULTINOMIAL * k * d)
    assert stride >= _optimise._WARM_MIN_STRIDE
    rng = np.random.default_rng(6)  # insecure-ok: test data
    Xs, _ = _rows(rng, n, d)
    labels = np.argmax(Xs @ rng.normal(size=(d, k)) + 0.3 * rng.normal(size=(n, k)), axis=1)
    starts = _spy_newton(monkeypatch)
    _optimise.minimise_multinomial(Xs, labels, k, 1.0 / n, np.zeros((k, d)), TOL, 100)
    assert len(starts) == 2 and np.all(starts[0] == 0) and np.linalg.norm(starts[1]) > 0.1
    # every stride-th row (the subsample) in class 0, all others not: start from 0 instead
    labels = np.where(np.arange(n) % stride == 0, 0, 1 + (Xs[:, 0] > 0))
    starts.clear()
    W = _optimise.minimise_multinomial(Xs, labels, k, 1.0 / n, np.zeros((k, d)), TOL, 100)
    assert len(starts) == 2 and np.all(starts[1] == 0)
    assert _certified(_multinomial_grad(Xs, labels, k, 1.0 / n, np.zeros((k, d)), W), 1.0 / n)


def test_too_few_iterations_raise():
    rng = np.random.default_rng(4)  # insecure-ok: test data
    Z, y = _rows(rng, 5000, 8)
    Z *= y[:, None]
    with pytest.raises(RuntimeError, match="did not reach tol within max_iter"):
        _optimise.minimise_binary(_erm._logistic, Z, 1e-4, np.zeros(8), TOL, 1)
    labels = (y > 0).astype(int) + (Z[:, 0] > 0)
    with pytest.raises(RuntimeError, match="did not reach tol within max_iter"):
        _optimise.minimise_multinomial(Z, labels, 3, 1e-4, np.zeros((3, 8)), TOL, 1)


def test_newton_stalls_when_no_step_is_accepted():
    # a "Newton step" pointing uphill: no step length lowers f or the gradient norm
    with pytest.raises(RuntimeError, match="stalled before reaching tol"):
        _optimise.newton(lambda x: (float(x @ x), 2 * x, 0.0), lambda x, g: -g, np.ones(3), 1.0, 1e-6,
                         100)


def test_conjugate_gradient_and_softmax_rows():
    rng = np.random.default_rng(5)  # insecure-ok: test data
    A = rng.normal(size=(6, 6))
    H = A @ A.T + 0.1 * np.eye(6)
    g = rng.normal(size=6)
    s = _optimise.conjugate_gradient(lambda v: H @ v, g, 1e-10, 50)
    assert np.linalg.norm(H @ s - g) <= 1e-9 * np.linalg.norm(g)
    S = rng.normal(size=(5, 4)) * 300
    assert np.allclose(_optimise.softmax_rows(S.copy()), special.softmax(S, axis=1), rtol=1e-12,
                       atol=1e-300)


def test_newton_certificate_is_exact_when_rounding_exceeds_tol_lam():
    # Two rows, one weight; lam tiny and the linear term b/n huge, so w* ~ -b / (n lam) = -5e17
    # where float64 spacing is 64 and lam * 64 >> tol * lam. Contract: return a point with
    # exact ||grad|| <= tol * lam, or raise RuntimeError.
    Z = np.array([[0.5], [-0.3]])
    lam, tol = 1e-12, 1e-6
    b = np.array([1e6])
    try:
        w = _optimise.minimise_binary(_erm._logistic, Z, lam, b, tol, 100)
    except RuntimeError:
        return
    wq = Fraction(float(w[0]))
    # at this w the margins are -2.5e17 and +1.5e17: logistic derivatives -1 and 0 exactly
    # (to far below tol * lam = 1e-18)
    assert float(Z[0, 0] * w[0]) < -1e3 and float(Z[1, 0] * w[0]) > 1e3
    grad = Fraction(-1) * Fraction(0.5) / 2 + Fraction(lam) * wq + Fraction(1e6) / 2
    assert abs(grad) <= Fraction(tol) * Fraction(lam)
