"""dpcore.learn.PCA: scikit-learn contract, calibration of each method, the PPCA law (k = 1,
exact) against quadrature, utility at large epsilon, accounting, errors."""
import math
import re
import warnings

import numpy as np
import pytest

sklearn = pytest.importorskip("sklearn", reason="dpcore.learn needs scikit-learn (extra 'learn')")
from sklearn.base import clone  # noqa: E402
from sklearn.exceptions import NotFittedError  # noqa: E402

from _gof import z_critical  # noqa: E402

import dpcore  # noqa: E402
from dpcore.learn import PCA  # noqa: E402
from dpcore.learn import _pca  # noqa: E402


def _spiked(n=2000, d=8, seed=0):
    rng = np.random.default_rng(seed)
    scales = np.array([4.0, 2.0, 1.0] + [0.2] * (d - 3))
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    return (rng.standard_normal((n, d)) * scales) @ Q.T


def _captured(X, V, norm):
    Xc = _pca._scaled_rows(X, norm)
    A = Xc.T @ Xc
    top = np.sort(np.linalg.eigvalsh(A))[::-1][: V.shape[1]].sum()
    return np.trace(V.T @ A @ V) / top


METHODS = [
    dict(),                                            # "auto" without delta: ppca, eigengap
    dict(delta=1e-6),                                  # "auto" with delta: sulq
    dict(method="ppca", sampler="gibbs"),
    dict(method="ppca", sampler="deflation"),
    dict(method="ppca", allocation="equal"),
    dict(method="sulq", delta=1e-6),
    dict(method="power", delta=1e-6),
]


@pytest.mark.parametrize("kw", METHODS, ids=lambda kw: "-".join(str(v) for v in kw.values()))
def test_fit_shapes_orthonormal_and_utility(kw):
    X = _spiked()
    pca = PCA(3, epsilon=50.0, data_norm=12.0, random_state=1, **kw).fit(X)
    V = pca.components_.T
    assert pca.components_.shape == (3, 8)
    assert np.abs(V.T @ V - np.eye(3)).max() < 1e-10
    assert pca.explained_variance_.shape == (3,)
    assert pca.n_components_ == 3 and pca.n_features_in_ == 8
    assert _captured(X, V, 12.0) > 0.95
    Z = pca.transform(X)
    assert np.allclose(Z, X @ V)
    assert np.allclose(PCA(3, epsilon=50.0, data_norm=12.0, random_state=1, **kw).fit_transform(X), Z)


def test_clone_and_get_params():
    pca = PCA(2, epsilon=0.5, data_norm=3.0, method="sulq", delta=1e-5, random_state=3)
    params = pca.get_params()
    assert params["epsilon"] == 0.5 and params["data_norm"] == 3.0 and params["delta"] == 1e-5
    c = clone(pca)
    assert c.get_params() == params and c is not pca
    assert not hasattr(c, "components_")


def test_sklearn_estimator_checks():
    from sklearn.utils.estimator_checks import check_estimator

    for est in [PCA(1, epsilon=1e9, data_norm=100.0, random_state=0),
                PCA(1, epsilon=1e9, data_norm=100.0, sampler="deflation", random_state=0),
                PCA(1, epsilon=1e9, delta=1e-6, data_norm=100.0, method="sulq", random_state=0),
                PCA(1, epsilon=1e9, delta=1e-6, data_norm=100.0, method="power", random_state=0)]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", sklearn.exceptions.SkipTestWarning)
            results = check_estimator(est, on_fail=None)
        failed = [(r["check_name"], str(r["exception"])[:200]) for r in results
                  if r["status"] == "failed"]
        # the only expected failure: the empty-data error does not quote the number of rows
        assert [name for name, _ in failed] == ["check_estimators_empty_data_messages"], failed


def test_not_fitted():
    with pytest.raises(NotFittedError):
        PCA(1, data_norm=1.0).transform(np.zeros((2, 3)))


def test_scaled_rows_and_second_moment():
    X = np.array([[3.0, 4.0], [0.3, 0.4], [0.0, 0.0]])
    C = _pca._scaled_rows(X, 1.0)
    assert np.allclose(C, [[0.6, 0.8], [0.3, 0.4], [0.0, 0.0]])
    assert np.allclose(_pca._scaled_rows(X, 2.0), [[0.6, 0.8], [0.15, 0.2], [0.0, 0.0]])
    Y = np.random.default_rng(0).standard_normal((50, 4))  # insecure-ok: test data
    S = _pca._second_moment(Y)
    assert np.array_equal(S, S.T) and np.allclose(S, Y.T @ Y)


def test_explained_variance_close_at_large_epsilon():
    X = _spiked(n=5000)
    pca = PCA(2, epsilon=200.0, data_norm=12.0, random_state=2).fit(X)
    Xc = _pca._scaled_rows(X, 12.0) * 12.0
    exact = np.einsum("ij,ij->j", Xc @ pca.components_.T, Xc @ pca.components_.T) / len(X)
    assert np.allclose(pca.explained_variance_, exact, rtol=0.05)


def test_public_mean_is_subtracted():
    X = _spiked() + 10.0
    mean = np.full(8, 10.0)
    pca = PCA(2, epsilon=50.0, data_norm=12.0, mean=mean, random_state=4).fit(X)
    assert np.array_equal(pca.mean_, mean)
    assert np.allclose(pca.transform(X), (X - mean) @ pca.components_.T)


# ------------------------------------------------------------------------------------------------
# The PPCA law: k = 1 is exact, so the first component follows the vector Bingham with
# C = (epsilon / 2) X^T X / L^2 (replace-one calibration); checked by quadrature in d = 2.

def _bingham_d2_moments(C, n=4000):
    th = 2 * np.pi * np.arange(n) / n
    x = np.stack([np.cos(th), np.sin(th)], axis=1)
    logf = np.einsum("ni,ij,nj->n", x, C, x)
    f = np.exp(logf - logf.max())
    f /= f.sum()
    m2 = np.einsum("n,ni,nj->ij", f, x, x)
    m4 = np.einsum("n,ni,nj->ij", f, x**2, x**2)
    return m2, m4


def _first_components(X, eps, n_fits, sampler, seed):
    rng = dpcore.default_rng(seed)
    out = np.empty((n_fits, 2))
    for i in range(n_fits):
        pca = PCA(1, epsilon=eps, data_norm=1.0, sampler=sampler, variance_share=0.0,
                  random_state=rng).fit(X)
        out[i] = pca.components_[0]
    return out


@pytest.mark.parametrize("sampler", ["gibbs", "deflation"])
def test_ppca_k1_law(sampler):
    rng = np.random.default_rng(5)
    X = rng.standard_normal((20, 2)) * [1.0, 0.4]
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    eps = 0.6
    v = _first_components(X, eps, 3000, sampler, seed=6)
    est = np.array([np.mean(v[:, 0] ** 2), np.mean(v[:, 0] * v[:, 1])])
    crit = z_critical(n_checks=2)

    def zmax(factor):
        m2, m4 = _bingham_d2_moments(factor * X.T @ X)
        exact = np.array([m2[0, 0], m2[0, 1]])
        se = np.sqrt(np.array([m4[0, 0] - m2[0, 0] ** 2, m4[0, 1] - m2[0, 1] ** 2]) / len(v))
        return np.max(np.abs(est - exact) / se)

    assert zmax(eps / 2) < crit                    # the CSS constant epsilon / 2
    assert zmax(eps) > crit                        # power: the add/remove constant is rejected


# ------------------------------------------------------------------------------------------------
# Calibration of the Gaussian methods: what is passed to dpcore.gaussian

def test_sulq_and_power_calibration(monkeypatch):
    calls = []

    def fake_gaussian(value, **kw):
        calls.append(kw)
        return np.asarray(value, dtype=float)

    monkeypatch.setattr(_pca, "gaussian", fake_gaussian)
    X = _spiked(n=100, d=4)
    PCA(2, epsilon=1.0, delta=1e-6, data_norm=2.0, method="sulq", random_state=0).fit(X)
    assert calls[0]["sensitivity"] == pytest.approx(math.sqrt(2.0), rel=1e-3)
    assert calls[0]["epsilon"] == 1.0 and calls[0]["delta"] == 1e-6
    calls.clear()
    PCA(2, epsilon=1.0, delta=1e-6, data_norm=2.0, method="power", n_iter=5, random_state=0).fit(X)
    assert len(calls) == 5
    rho = dpcore.calibration.zcdp_rho_for(1.0, 1e-6)
    assert sum(c["rho"] for c in calls) == pytest.approx(rho)
    assert all(c["sensitivity"] == pytest.approx(math.sqrt(2.0), rel=1e-3) for c in calls)


def test_power_sensitivity_bound_is_tight():
    # max over rows x, x' (norm <= 1) and orthonormal Y of |x x^T Y - x' x'^T Y|_F: the bound
    # sqrt(2) must hold for random and locally optimised rows, and be attained
    from scipy.optimize import minimize
    rng = np.random.default_rng(7)  # insecure-ok: test inputs
    d, k = 5, 2
    Y = np.linalg.qr(rng.standard_normal((d, k)))[0]

    def change(z):
        x, xp = z[:d], z[d:]
        x, xp = x / max(1.0, np.linalg.norm(x)), xp / max(1.0, np.linalg.norm(xp))
        return np.linalg.norm(np.outer(x, x @ Y) - np.outer(xp, xp @ Y))

    best = 0.0
    for _ in range(40):
        res = minimize(lambda z: -change(z), rng.standard_normal(2 * d), method="Nelder-Mead",
                       options=dict(maxiter=4000, xatol=1e-10, fatol=1e-12))
        best = max(best, change(res.x))
    assert best <= _pca._POWER_SENSITIVITY * (1 + 1e-12)
    assert best > _pca._POWER_SENSITIVITY * (1 - 1e-4)
    attained = change(np.concatenate([Y[:, 0], Y[:, 1]]))      # orthogonal rows in span(Y)
    assert attained == pytest.approx(math.sqrt(2.0), rel=1e-12)


def test_accountant_charged_before_release():
    X = _spiked(n=200, d=4)
    acc = dpcore.Accountant(epsilon=1.0)
    PCA(1, epsilon=1.0, data_norm=5.0, accountant=acc, random_state=0).fit(X)
    assert acc.spent[0] == pytest.approx(1.0)
    pca = PCA(1, epsilon=0.5, data_norm=5.0, accountant=acc, random_state=0)
    with pytest.raises(dpcore.BudgetExceeded):
        pca.fit(X)
    assert not hasattr(pca, "components_")


def test_no_exact_utility_stored_or_printed(capsys):
    """The Gibbs trace tr(V^T C V) is an exact function of the data (its last value is the
    private utility): it is neither stored nor printed (issue 14)."""
    X = _spiked(n=300, d=6)
    pca = PCA(2, epsilon=5.0, data_norm=10.0, sampler="gibbs", n_sweeps=25, random_state=0,
              progress=True).fit(X)
    assert not hasattr(pca, "trace_")
    err = capsys.readouterr().err
    assert "bingham sweeps: 25/25 (100%)" in err
    assert "tr(" not in err and "acceptance" not in err
    for line in err.splitlines():  # only counters and times
        assert re.fullmatch(r"bingham sweeps: \d+/25 \(\d+%\) \d+:\d\d( elapsed, ~\d+:\d\d left)?", line)


def test_default_sampler_is_exact():
    """The default is the exact deflation sampler; the Gibbs chain (stationary-law only for
    k > 1) runs only on request."""
    assert PCA().sampler == "deflation" and PCA().method == "auto"


def test_clone_shares_accountant_and_generator():
    acc = dpcore.Accountant(10.0)
    rng = dpcore.default_rng()
    twin = clone(PCA(2, epsilon=1.0, data_norm=10.0, random_state=rng, accountant=acc))
    assert twin.accountant is acc and twin.random_state is rng
    twin.fit(_spiked(n=300, d=6))
    assert acc.spent[0] == pytest.approx(1.0)


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(n_components=1), ValueError, "data_norm is required"),
    (dict(n_components=None, data_norm=1.0), ValueError, "n_components is required"),
    (dict(n_components=4, data_norm=1.0), ValueError, "n_components must be <= 3"),
    (dict(n_components=1, data_norm=1.0, delta=1e-5, method="ppca"), ValueError,
     "delta must be None"),
    (dict(n_components=1, data_norm=1.0, allocation="oracle"), ValueError, "allocation"),
    (dict(n_components=1, data_norm=1.0, delta=0.0), ValueError, "delta"),
    (dict(n_components=1, data_norm=1.0, method="sulq"), ValueError, "delta is required"),
    (dict(n_components=1, data_norm=1.0, method="svd"), ValueError, "method"),
    (dict(n_components=1, data_norm=1.0, sampler="mh"), ValueError, "sampler"),
    (dict(n_components=1, data_norm=-1.0), ValueError, "data_norm must be > 0"),
    (dict(n_components=1, data_norm=1.0, epsilon=0.0), ValueError, "epsilon must be > 0"),
    (dict(n_components=1, data_norm=1.0, variance_share=1.0), ValueError, "variance_share"),
    (dict(n_components=1, data_norm=1.0, mean=[0.0]), ValueError, "mean must have shape"),
    (dict(n_components=1.5, data_norm=1.0), TypeError, "n_components"),
    (dict(n_components=1, data_norm=1.0, progress="yes"), TypeError, "progress"),
])
def test_errors(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        PCA(**kwargs).fit(np.ones((5, 4)))


def test_nan_rejected():
    X = np.ones((5, 3))
    X[1, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        PCA(1, data_norm=1.0).fit(X)


@pytest.mark.parametrize("sampler, k, epsilon", [("gibbs", 2, 1e8), ("deflation", 2, 4e11),
                                                 ("gibbs", 1, 4e11)])
def test_matrix_beyond_the_sampler_refused_before_the_charge(sampler, k, epsilon):
    """Constant columns with a huge epsilon: the sampler's matrix has an eigenvalue spread it
    cannot handle in floating point (the Gibbs chain ran unbounded, then failed after the
    charge). The public bound epsilon n / 2 on the spread refuses it before the charge."""
    import time

    X = np.ones((1000, 3))
    acc = dpcore.Accountant(1e14)
    start = time.monotonic()
    with pytest.raises(ValueError, match="epsilon is too large"):
        PCA(k, epsilon=epsilon, data_norm=1.0, sampler=sampler, accountant=acc,
            random_state=0).fit(X)
    assert acc.history == [] and time.monotonic() - start < 5.0


def test_spread_bound_leaves_room_for_large_epsilon():
    # just inside the bounds the samplers still draw (constant columns, the worst case)
    X = np.ones((1000, 3))
    n = X.shape[0] * _pca._SUM_SLACK
    eps_gibbs = 2 * _pca._MAX_SPREAD_GIBBS / n / 0.9 * (1 - 1e-9)
    PCA(2, epsilon=eps_gibbs, data_norm=1.0, sampler="gibbs", n_sweeps=20,
        random_state=0).fit(X)
    eps_exact = 2 * 2 * _pca._MAX_SPREAD_EXACT / n / 0.9 * (1 - 1e-9)
    PCA(2, epsilon=eps_exact, data_norm=1.0, allocation="equal", random_state=0).fit(X)
    # the eigengap allocation may give one step all of epsilon': its bound is k times lower
    with pytest.raises(ValueError, match="epsilon is too large"):
        PCA(2, epsilon=eps_exact, data_norm=1.0, random_state=0).fit(X)
    PCA(2, epsilon=eps_exact / 2, data_norm=1.0, random_state=0).fit(X)


def test_set_output_pandas_names_the_components():
    pd = pytest.importorskip("pandas")
    X = pd.DataFrame(np.random.default_rng(0).normal(size=(100, 4)) / 4, columns=list("abcd"))
    pca = PCA(2, epsilon=1.0, data_norm=1.0, random_state=0).set_output(transform="pandas")
    out = pca.fit_transform(X)
    assert list(out.columns) == ["pca0", "pca1"]
    np.testing.assert_array_equal(out.to_numpy(), pca.set_output(transform="default").transform(X))


# ------------------------------------------------------------------------------------------------
# method="auto": the rule reads public inputs only

@pytest.mark.parametrize("delta, method, cost", [(None, "ppca", (0.7, 0.0)),
                                                 (1e-6, "sulq", (0.7, 1e-6))])
def test_auto_resolves_from_delta(delta, method, cost):
    acc = dpcore.Accountant(epsilon=1.0, delta=1e-5)
    pca = PCA(2, epsilon=0.7, delta=delta, data_norm=12.0, accountant=acc, random_state=0)
    pca.fit(_spiked(n=500))
    assert pca.method_ == method and pca.method == "auto"
    assert acc.spent == pytest.approx(cost)


# ------------------------------------------------------------------------------------------------
# SuLQ's noise: the exact law of the noisy second-moment matrix

def _normal_bins_pvalue(z, n_bins=40):
    """Chi-square p-value of z against N(0, 1) on n_bins equiprobable cells."""
    from scipy import stats
    from _gof import chisquare_pvalue
    edges = stats.norm.ppf(np.linspace(0, 1, n_bins + 1)[1:-1])
    counts = np.bincount(np.searchsorted(edges, z), minlength=n_bins)
    return chisquare_pvalue(counts, np.full(n_bins, 1.0 / n_bins))


@pytest.mark.slow
def test_sulq_noise_law():
    """M - S for the released matrix M: diagonal noise N_Z(0, sigma^2) on the grid, off-diagonal
    sigma / sqrt(2), sigma = sqrt(2) / sqrt(2 rho) with rho the zCDP level of (epsilon, delta)
    (the Frobenius-coordinates calibration). sigma is about 2**36 grid units, so the discrete
    Gaussian's CDF equals the normal one to far below the test's resolution, and the rounding
    slack (relative 2**-12) is below it too. alpha = 1e-4 per family (Bonferroni over 2);
    power: sigma * 1.1, and the plain-triangle calibration (off-diagonal noise sigma), are
    rejected."""
    from _gof import ALPHA
    S = _pca._second_moment(_pca._scaled_rows(_spiked(n=50, d=8), 5.0))
    eps, delta, n_draws = 1.0, 1e-5, 1000
    sigma = math.sqrt(2.0) / math.sqrt(2.0 * dpcore.calibration.zcdp_rho_for(eps, delta))
    rng = dpcore.default_rng(11)
    diag, off = [], []
    iu = np.triu_indices(8, 1)
    for _ in range(n_draws):
        E = _pca._sulq_matrix(S, eps, delta, rng) - S
        assert np.array_equal(E, E.T)
        diag.append(np.diag(E))
        off.append(E[iu])
    diag, off = np.concatenate(diag), np.concatenate(off)
    level = ALPHA / 2
    assert _normal_bins_pvalue(diag / sigma) > level
    assert _normal_bins_pvalue(off * math.sqrt(2.0) / sigma) > level
    # power
    assert _normal_bins_pvalue(diag / (1.1 * sigma)) < level
    assert _normal_bins_pvalue(off / sigma) < level


def test_frobenius_coordinates_round_trip():
    S = _pca._second_moment(np.random.default_rng(2).normal(size=(30, 5)))  # insecure-ok: test data
    v = _pca._frobenius_coordinates(S)
    assert v.shape == (15,)
    assert np.linalg.norm(v) == pytest.approx(np.linalg.norm(S))
    assert np.allclose(_pca._from_frobenius_coordinates(v, 5), S)


# ------------------------------------------------------------------------------------------------
# The eigengap allocation of the deflation steps

def test_alignment_against_closed_form():
    from scipy.special import hyp1f1
    for m, a in [(1, 0.5), (2, 3.0), (5, 0.1), (20, 15.0), (99, 40.0), (99, 400.0)]:
        b = (m + 1) / 2.0      # y_1^2 ~ Beta(1/2, m/2) tilted by exp(a y_1^2): Kummer ratio
        exact = (0.5 / b) * hyp1f1(1.5, b + 1, a) / hyp1f1(0.5, b, a)
        assert _pca._alignment(m, a) == pytest.approx(exact, rel=1e-6)
    assert _pca._alignment(9, 0.0) == pytest.approx(0.1)
    assert _pca._alignment(0, 5.0) == 1.0
    assert _pca._alignment(99, 1e6) == pytest.approx(1 - 49.5e-6, rel=1e-6)   # 1 - (m/2) / a


def test_eigengap_allocation():
    d, total = 100, 0.9
    budgets = _pca._eigengap_allocation(np.array([5000.0, 3000.0, 2000.0]), d, total)
    assert budgets.sum() == pytest.approx(total) and np.all(budgets >= 0)
    assert np.all(np.diff(budgets) <= 1e-12)          # larger gaps need less, but pay more here
    # a gap far too small to be found with any budget gets none; its share goes to the others
    b2 = _pca._eigengap_allocation(np.array([2000.0, 1e-3]), d, total)
    assert b2[1] == 0.0 and b2[0] == pytest.approx(total)
    # no gap at all: equal shares
    assert np.allclose(_pca._eigengap_allocation(np.zeros(4), d, total), total / 4)


def test_eigengap_calibration(monkeypatch):
    """The share goes to the top k + 1 eigenvalues (L1 sensitivity 2 / n, Lidskii), the rest to
    the deflation steps, whose concentrations are budget / 2 and sum to (1 - share) epsilon / 2."""
    calls, conc = [], []
    real_laplace, real_deflation = _pca.laplace, _pca._deflation

    def spy_laplace(value, **kw):
        calls.append((np.size(value), kw))
        return real_laplace(value, **kw)

    def spy_deflation(S, concentrations, rng):
        conc.append(np.asarray(concentrations))
        return real_deflation(S, concentrations, rng)

    monkeypatch.setattr(_pca, "laplace", spy_laplace)
    monkeypatch.setattr(_pca, "_deflation", spy_deflation)
    X = _spiked(n=400, d=6)
    pca = PCA(3, epsilon=2.0, data_norm=12.0, variance_share=0.2, random_state=0).fit(X)
    assert len(calls) == 1 and calls[0][0] == 4
    assert calls[0][1]["epsilon"] == pytest.approx(0.4)
    assert calls[0][1]["sensitivity"] == pytest.approx(2.0 / 400, rel=1e-3)
    assert len(conc) == 1 and conc[0].sum() == pytest.approx(0.8)
    assert pca.explained_variance_.shape == (3,) and np.all(pca.explained_variance_ >= 0)


def _circle_cdf(S2, c, u):
    """P(v^T S2 v <= u) for v on the unit circle with density proportional to exp(c v^T S2 v)."""
    th = np.linspace(0.0, np.pi, 20001)[:-1]
    util = np.cos(th) ** 2 * S2[0, 0] + np.sin(th) ** 2 * S2[1, 1] + np.sin(2 * th) * S2[0, 1]
    w = np.exp(c * (util - util.max()))
    return np.sum(w * (util <= u)) / np.sum(w)


@pytest.mark.slow
def test_deflation_law():
    """Each step is the exact vector Bingham with its own concentration: the first column's
    second moments match quadrature (d = 3, C = diag(3, 1, 0), ALGORITHMS.md 3.6), and the second
    column given the first has the law of exp(c2 v^T S v) on the circle orthogonal to it
    (probability integral transform of v^T S v, Kolmogorov-Smirnov). alpha = 1e-4 over the
    checks; power: the equal-share concentration for the second column is rejected."""
    from scipy import stats
    from _gof import ALPHA
    S = np.diag([3.0, 1.0, 0.0])
    c1, c2, n_draws = 1.0, 4.0, 3000
    rng = dpcore.default_rng(21)
    first = np.empty((n_draws, 3))
    pit, pit_wrong = np.empty(n_draws), np.empty(n_draws)
    for i in range(n_draws):
        V = _pca._deflation(S, [c1, c2], rng)
        v1, v2 = V[:, 0], V[:, 1]
        assert abs(v1 @ v2) < 1e-12
        first[i] = v1**2
        N = _pca.null_space(v1[None, :])
        S2 = N.T @ S @ N
        u = v2 @ S @ v2
        pit[i] = _circle_cdf(S2, c2, u)
        pit_wrong[i] = _circle_cdf(S2, c1, u)
    exact = np.array([0.574556, 0.246742, 0.178702])
    se = first.std(axis=0) / math.sqrt(n_draws)
    crit = z_critical(n_checks=4)
    assert np.all(np.abs(first.mean(axis=0) - exact) / se < crit)
    assert stats.kstest(pit, "uniform").pvalue > ALPHA / 4
    assert stats.kstest(pit_wrong, "uniform").pvalue < ALPHA / 4


@pytest.mark.parametrize("symmetric", [False, True])
def test_transpose_product_matches_numpy_for_any_thread_count(threads, symmetric):
    """The panels (ragged last panel included) give A^T B, and the same bits on 1, 2, 8 threads."""
    from dpcore.bingham import transpose_product
    rng = np.random.default_rng(3)  # insecure-ok: test data
    A = rng.standard_normal((700, 150))
    B = A if symmetric else rng.standard_normal((700, 201))
    results = []
    for t in (1, 2, 8):
        threads(t)
        results.append(transpose_product(A, B, symmetric=symmetric))
    assert np.allclose(results[0], A.T @ B, rtol=1e-12, atol=1e-9)
    if symmetric:
        assert np.array_equal(results[0], results[0].T)
    assert all(np.array_equal(results[0], r) for r in results[1:])


@pytest.mark.parametrize("delta", [None, 1e-6])
def test_seeded_fit_identical_for_1_2_8_threads(threads, delta):
    """d = 300: the second moment and the deflation's N^T S N run in panels on the pool; a
    seeded fit gives the same components and variances whatever the thread count."""
    rng = np.random.default_rng(4)  # insecure-ok: test data
    X = rng.standard_normal((400, 300)) * np.linspace(2.0, 0.1, 300)
    fits = []
    for t in (1, 2, 8):
        threads(t)
        pca = PCA(3, epsilon=2.0, delta=delta, data_norm=20.0, random_state=5).fit(X)
        fits.append((pca.components_, pca.explained_variance_))
    for comps, var in fits[1:]:
        assert np.array_equal(comps, fits[0][0]) and np.array_equal(var, fits[0][1])
