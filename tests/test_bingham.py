"""dpcore.bingham and the _bingham kernel: moments against quadrature of the Bingham density
(normalising constants by independent quadrature), exact vs Gibbs, invariances, agreement with the naive NumPy chain,
orthonormality, argument errors."""
import numpy as np
import pytest
from scipy import linalg as sla
from scipy import special

from _gof import ALPHA, chisquare_pvalue, z_critical

from dpcore import _bingham
from dpcore._random import bitgen_handle
from dpcore.bingham import _reference_sweep, bingham
from dpcore.random import check_random_state


# ------------------------------------------------------------------------------------------------
# Exact moments by quadrature of exp(x^T C x) on the sphere (d = 2, 3)

def _sphere_nodes(d, n=400):
    """Quadrature nodes and weights on S^{d-1} (uniform measure, weights summing to 1)."""
    if d == 2:
        th = 2 * np.pi * np.arange(4 * n) / (4 * n)               # periodic trapezoid
        return np.stack([np.cos(th), np.sin(th)], axis=1), np.full(th.size, 1.0 / th.size)
    if d == 3:
        u, wu = np.polynomial.legendre.leggauss(n)                 # u = cos(theta)
        ph = 2 * np.pi * np.arange(2 * n) / (2 * n)
        U, P = np.meshgrid(u, ph, indexing="ij")
        s = np.sqrt(1 - U**2)
        X = np.stack([s * np.cos(P), s * np.sin(P), U], axis=-1).reshape(-1, 3)
        W = (wu[:, None] / 2 * np.full(ph.size, 1.0 / ph.size)[None, :]).reshape(-1)
        return X, W
    raise ValueError(d)


def exact_moments(C, sign=1.0):
    """E[x x^T] and E[(x x^T)**2] (entrywise) under density prop. to exp(sign x^T C x)."""
    C = np.asarray(C, float)
    X, W = _sphere_nodes(C.shape[0])
    logf = sign * np.einsum("ni,ij,nj->n", X, C, X)
    f = W * np.exp(logf - logf.max())
    f /= f.sum()
    outer = X[:, :, None] * X[:, None, :]
    m2 = np.einsum("n,nij->ij", f, outer)
    m4 = np.einsum("n,nij->ij", f, outer**2)
    return m2, m4


def _max_z(samples_outer, m2, m4, n_eff=None):
    """Largest |z| over the upper triangle of E[x x^T] (SE from the exact law)."""
    n = samples_outer.shape[0] if n_eff is None else n_eff
    est = samples_outer.mean(axis=0)
    var = m4 - m2**2
    iu = np.triu_indices(m2.shape[0])
    se = np.sqrt(np.maximum(var[iu], 1e-300) / n)
    return np.max(np.abs(est[iu] - m2[iu]) / se), iu[0].size


def _exact_draws(C, n, seed):
    """n exact k = 1 draws through the kernel (one eigendecomposition)."""
    lam, U = np.linalg.eigh(C)
    lam, U = np.ascontiguousarray(lam[::-1]), U[:, ::-1]
    h = bitgen_handle(check_random_state(seed))
    out = np.empty((n, C.shape[0]))
    counters = np.zeros(3)
    Vt = np.zeros((1, C.shape[0]))
    for i in range(n):
        _bingham.sequential(lam, Vt, 0, h, counters)
        out[i] = Vt[0]
    assert counters[2] == 0, "acceptance ratio above the envelope bound"
    return out @ U.T, counters


def _rotation(d, seed):
    Q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((d, d)))
    return Q


def test_quadrature_reproduces_reference_numbers():
    # independently: Bessel closed form for d = 2
    for kappa in (2.0, 10.0):
        m2, _ = exact_moments(np.diag([kappa, 0.0]))
        closed = 0.5 + special.ive(1, kappa / 2) / (2 * special.ive(0, kappa / 2))
        assert abs(m2[0, 0] - closed) < 1e-12
    m2, _ = exact_moments(np.diag([3.0, 1.0, 0.0]))
    assert np.allclose(np.diag(m2), [0.574556, 0.246742, 0.178702], atol=2e-6)
    m2, _ = exact_moments(np.diag([20.0, 5.0, 0.0]))
    assert np.allclose(np.diag(m2), [0.939585, 0.034683, 0.025732], atol=2e-6)


CASES_K1 = [
    np.diag([2.0, 0.0]),
    np.diag([10.0, 0.0]),
    np.diag([3.0, 1.0, 0.0]),
    np.diag([20.0, 5.0, 0.0]),
]


@pytest.mark.parametrize("C", CASES_K1, ids=["d2k2", "d2k10", "d3-310", "d3-20-5-0"])
def test_exact_k1_moments(C):
    d = C.shape[0]
    Q = _rotation(d, 3)                          # rotate so off-diagonal moments are checked too
    C = Q @ C @ Q.T
    n = 20000
    x, _ = _exact_draws(C, n, seed=11)
    m2, m4 = exact_moments(C)
    z, n_checks = _max_z(x[:, :, None] * x[:, None, :], m2, m4)
    assert z < z_critical(n_checks=n_checks), z


def test_exact_k1_power():
    # the same check rejects draws from a 10 % stronger concentration
    C = np.diag([3.0, 1.0, 0.0])
    x, _ = _exact_draws(1.1 * C, 20000, seed=12)
    m2, m4 = exact_moments(C)
    z, n_checks = _max_z(x[:, :, None] * x[:, None, :], m2, m4)
    assert z > z_critical(n_checks=n_checks), z


def test_public_k1_is_exact_sampler_and_gibbs_agrees():
    C = np.diag([20.0, 5.0, 0.0])
    m2, m4 = exact_moments(C)
    n = 4000
    rng = check_random_state(5)
    ex = np.array([bingham(C, 1, random_state=rng)[:, 0] for _ in range(n)])
    gi = np.array([bingham(C, 1, method="gibbs", n_sweeps=3, random_state=rng)[:, 0] for _ in range(n)])
    for x in (ex, gi):
        z, n_checks = _max_z(x[:, :, None] * x[:, None, :], m2, m4)
        assert z < z_critical(n_checks=2 * n_checks), z


# ------------------------------------------------------------------------------------------------
# k = 2, d = 3: reduces to the normal w of span(V), density exp(-w^T C w); E[V V^T] = I - E[w w^T]

def _chain_projections(lam, n_sweeps, seed, k=2):
    """Projections V V^T along one kernel chain in the eigenbasis (diag(lam))."""
    d = lam.size
    h = bitgen_handle(check_random_state(seed))
    Vt = np.ascontiguousarray(_rotation(d, seed)[:k])
    P = np.empty((n_sweeps, d, d))
    counters = np.zeros(3)
    for t in range(n_sweeps):
        _bingham.gibbs(lam, Vt, 1, h, np.empty(0), counters)
        P[t] = Vt.T @ Vt
    assert counters[2] == 0
    return P


def _batch_means_z(series, exact, n_batches=40):
    """|mean - exact| / SE with the SE from batch means (MCMC)."""
    b = series.shape[0] // n_batches
    means = series[: b * n_batches].reshape(n_batches, b, *series.shape[1:]).mean(axis=1)
    se = means.std(axis=0, ddof=1) / np.sqrt(n_batches)
    return np.abs(means.mean(axis=0) - exact) / np.maximum(se, 1e-12)


def test_gibbs_k2_d3_matches_quadrature():
    lam = np.array([3.0, 1.0, 0.0])
    m2w, _ = exact_moments(np.diag(lam), sign=-1.0)
    exact = np.eye(3) - m2w
    assert np.allclose(np.diag(exact), [0.833482, 0.673017, 0.493501], atol=2e-6)
    P = _chain_projections(lam, 20000, seed=21)
    z = _batch_means_z(P, exact)
    iu = np.triu_indices(3)
    # batch means with 40 batches: Student t with 39 df
    from scipy import stats
    crit = stats.t.isf(1e-4 / (2 * iu[0].size), 39)
    assert z[iu].max() < crit, z
    # power: the exact answer for 1.2 * C is rejected
    m2w_wrong, _ = exact_moments(np.diag(1.2 * lam), sign=-1.0)
    assert _batch_means_z(P, np.eye(3) - m2w_wrong)[iu].max() > crit


def test_rotation_equivariance_and_sign_symmetry():
    C = np.diag([3.0, 1.0, 0.0])
    Q = _rotation(3, 7)
    m2w, m4w = exact_moments(C, sign=-1.0)
    rng = check_random_state(8)
    n = 3000
    Vs = np.array([bingham(Q @ C @ Q.T, 2, n_sweeps=10, random_state=rng) for _ in range(n)])
    # E[Q^T V V^T Q] = I - E[w w^T] for the unrotated problem (independent draws)
    Ps = np.einsum("ji,njk,lk->nil", Q, Vs @ np.transpose(Vs, (0, 2, 1)), Q.T)
    exact = np.eye(3) - m2w
    iu = np.triu_indices(3)
    se = Ps.std(axis=0, ddof=1) / np.sqrt(n)
    z = np.abs(Ps.mean(axis=0) - exact)[iu] / se[iu]
    assert z.max() < z_critical(n_checks=iu[0].size + 6), z
    # the density is even in each column: E[V] = 0
    zv = np.abs(Vs.mean(axis=0)) / (Vs.std(axis=0, ddof=1) / np.sqrt(n))
    assert zv.max() < z_critical(n_checks=iu[0].size + 6), zv


def test_kernel_chain_agrees_with_naive_numpy_chain():
    d, k = 5, 2
    A = np.diag([4.0, 3.0, 1.5, 0.5, 0.0])
    Q = _rotation(d, 31)
    A = Q @ A @ Q.T
    n = 4000
    rng = np.random.default_rng(32)
    V = np.linalg.qr(rng.standard_normal((d, k)))[0]
    P_naive = np.empty((n, d, d))
    for t in range(n):
        V = _reference_sweep(V, A, rng)
        P_naive[t] = V @ V.T
    lam, U = np.linalg.eigh(A)
    lam, U = np.ascontiguousarray(lam[::-1]), U[:, ::-1]
    P_kernel = np.einsum("ij,njk,lk->nil", U, _chain_projections(lam, n, seed=33, k=k), U)
    # two-sample comparison of E[P] with batch-means standard errors
    nb = 40
    mb = lambda s: s.reshape(nb, -1, d, d).mean(axis=1)
    a, b = mb(P_naive), mb(P_kernel)
    se = np.sqrt(a.var(axis=0, ddof=1) / nb + b.var(axis=0, ddof=1) / nb)
    iu = np.triu_indices(d)
    z = (np.abs(a.mean(0) - b.mean(0)) / np.maximum(se, 1e-12))[iu]
    from scipy import stats
    assert z.max() < stats.t.isf(1e-4 / (2 * iu[0].size), 2 * nb - 2), z


def test_uniform_limit():
    # A = 0: the matrix Bingham is uniform, E[V V^T] = (k / d) I
    d, k, n = 4, 2, 2000
    rng = check_random_state(41)
    Ps = np.array([(lambda V: V @ V.T)(bingham(np.zeros((d, d)), k, n_sweeps=5, random_state=rng))
                   for _ in range(n)])
    se = Ps.std(axis=0, ddof=1) / np.sqrt(n)
    iu = np.triu_indices(d)
    z = (np.abs(Ps.mean(0) - (k / d) * np.eye(d)) / se)[iu]
    assert z.max() < z_critical(n_checks=iu[0].size), z


def test_mode_for_large_concentration():
    A = 1e4 * np.diag([5.0, 4.0, 3.0, 1.0, 0.5, 0.0])
    V = bingham(A, 3, n_sweeps=30, random_state=2)
    P = V @ V.T
    top = np.zeros((6, 6))
    top[:3, :3] = np.eye(3)
    assert np.abs(P - top).max() < 0.05


def test_k_equals_d_is_haar_and_orthogonal():
    V = bingham(np.diag([1.0, 2.0, 3.0]), 3, random_state=3)
    assert np.allclose(V.T @ V, np.eye(3), atol=1e-12)


def test_orthonormal_after_many_sweeps():
    d, k = 12, 4
    A = np.diag(np.linspace(30.0, 0.0, d))
    V, trace = bingham(A, k, n_sweeps=10_000, random_state=4, return_trace=True)
    assert np.abs(V.T @ V - np.eye(k)).max() < 1e-10
    assert trace.shape == (10_000,) and np.all(np.isfinite(trace))
    # also without the final polish: the kernel state itself stays orthonormal
    h = bitgen_handle(check_random_state(5))
    lam = np.ascontiguousarray(np.diag(A).copy())
    Vt = np.ascontiguousarray(np.eye(d)[:k])
    _bingham.gibbs(lam, Vt, 10_000, h, np.empty(0), np.zeros(3))
    assert np.abs(Vt @ Vt.T - np.eye(k)).max() < 1e-10


def test_trace_is_tr_VtAV():
    A = np.diag([5.0, 2.0, 1.0, 0.0])
    Q = _rotation(4, 9)
    A = Q @ A @ Q.T
    V, trace = bingham(A, 2, n_sweeps=7, random_state=6, return_trace=True)
    assert trace[-1] == pytest.approx(np.trace(V.T @ A @ V), rel=1e-10)


def test_seed_reproducible():
    A = np.diag([5.0, 2.0, 1.0, 0.0])
    assert np.array_equal(bingham(A, 2, n_sweeps=20, random_state=7),
                          bingham(A, 2, n_sweeps=20, random_state=7))


def test_init_options():
    A = np.diag([5.0, 2.0, 1.0, 0.0])
    V = bingham(A, 2, n_sweeps=2, init="mode", random_state=1)
    assert V.shape == (4, 2)
    V = bingham(A, 2, n_sweeps=2, init=np.eye(4)[:, 1:3], random_state=1)
    assert np.allclose(V.T @ V, np.eye(2))


def test_progress_prints_to_stderr(capsys):
    bingham(np.diag([3.0, 1.0, 0.0]), 2, n_sweeps=40, progress=True, random_state=1)
    err = capsys.readouterr().err
    assert "bingham sweeps: 40/40 (100%)" in err


def test_inertia_count_matches_eigenvalues():
    rng = np.random.default_rng(0)
    d, r = 30, 4
    lam = np.sort(rng.gamma(1.0, 10.0, d))[::-1].copy()
    W = np.ascontiguousarray(np.linalg.qr(rng.standard_normal((d, r)))[0].T)
    N = sla.null_space(W)
    mu = np.linalg.eigvalsh(N.T @ np.diag(lam) @ N)
    for m in np.concatenate([mu + 1e-3, mu - 1e-3, [lam[0] + 1, lam[-1] - 1]]):
        assert _bingham._test_count_above(lam, W, m) == np.sum(mu > m)


def _envelope_stat(Y, Sigma):
    """Largest |z| of the empirical covariance of Gaussian rows Y against Sigma (upper
    triangle; SE sqrt((S_ii S_jj + S_ij^2) / n) under the hypothesis)."""
    n = Y.shape[0]
    est = Y.T @ Y / n
    iu = np.triu_indices(Sigma.shape[0])
    se = np.sqrt((np.outer(np.diag(Sigma), np.diag(Sigma)) + Sigma**2)[iu] / n)
    return np.max(np.abs(est[iu] - Sigma[iu]) / se), iu[0].size


@pytest.mark.parametrize("r", [1, 2, 3])
def test_envelope_proposals_are_the_acg_gaussian_on_the_complement(r):
    # The envelope's Gaussian must be N(0, N (N^T Omega N)^-1 N^T) on W^perp, including when
    # Omega has entries below 1 (the Woodbury correction of _setup).
    rng = np.random.default_rng(r)  # insecure-ok: test inputs
    d = 7
    lam = np.array([12.0, 9.0, 5.0, 3.0, 1.0, 0.5, -2.0])
    W = np.ascontiguousarray(np.linalg.qr(rng.standard_normal((d, r)))[0].T)
    h = bitgen_handle(check_random_state(10 + r))
    n = 200_000
    rc, s, b, omega, Y = _bingham._test_envelope(lam, W, -np.inf, n, h)
    assert rc == 0
    assert np.sum(omega < 1.0) >= 1                     # the correction is exercised
    N = sla.null_space(W)
    mu1 = np.linalg.eigvalsh(N.T @ np.diag(lam) @ N).max()
    assert mu1 <= s <= mu1 + 0.25 * max(b, 1.0) + 1e-9
    assert np.abs(Y @ W.T).max() < 1e-10 * np.abs(Y).max()
    Sigma = N @ np.linalg.inv(N.T @ np.diag(omega) @ N) @ N.T
    zc = z_critical(n_checks=d * (d + 1) // 2)
    z, _ = _envelope_stat(Y, Sigma)
    assert z < zc
    # power: the uncorrected covariance (Omega raised to 1 where below) is rejected
    wrong = N @ np.linalg.inv(N.T @ np.diag(np.maximum(omega, 1.0)) @ N) @ N.T
    assert _envelope_stat(Y, wrong)[0] > zc


def test_positive_count_matches_eigenvalue_signs():
    rng = np.random.default_rng(5)  # insecure-ok: test inputs
    cases = [np.array([[0.0, 1.0], [1.0, 0.0]]),             # zero pivot: LAPACK fallback
             np.array([[1e-20, 1.0], [1.0, 1.0]]),            # tiny pivot: fallback
             np.array([[1.0, 1e5], [1e5, 1.0]]),              # large multiplier: fallback
             np.diag([3.0, -1.0, 2.0, -4.0])]
    for _ in range(200):
        r = int(rng.integers(1, 7))
        A = rng.standard_normal((r, r))
        cases.append(A + A.T)
    for G in cases:
        expect = int(np.sum(np.linalg.eigvalsh(G) > 0))
        assert _bingham._test_positive_count(np.ascontiguousarray(G)) == expect, G


def _normal_bins_pvalue(z, edges):
    from scipy import stats
    cdf = stats.norm.cdf(np.concatenate([[-np.inf], edges, [np.inf]]))
    counts = np.bincount(np.searchsorted(edges, z), minlength=edges.size + 1)
    return chisquare_pvalue(counts, np.diff(cdf))


def test_kernel_normals():
    # the ziggurat: bins through every layer boundary region and both tails (beyond r = 3.654,
    # where the tail sampler takes over), plus the tables' closure
    x = np.array(_bingham._ziggurat_tables())
    assert x.size == 257 and x[-1] == 0.0 and np.all(np.diff(x[1:]) < 0)
    assert abs(x[1] - 3.6541528853610088) < 1e-12          # Marsaglia-Tsang's r for 256 layers
    f = np.exp(-0.5 * x**2)
    v = x[0] * f[1]                                       # the base strip (tail included)
    areas = x[1:-1] * (f[2:] - f[1:-1])                   # layers 1..255
    assert np.max(np.abs(areas / v - 1.0)) < 2e-12        # the docstring's 1.4e-12 claim
    h = bitgen_handle(check_random_state(0))
    z = _bingham._test_normals(2_000_000, h)
    edges = np.concatenate([np.linspace(-4.5, 4.5, 181), [-3.6541528853610088, 3.6541528853610088]])
    edges = np.sort(edges)
    assert _normal_bins_pvalue(z, edges) > ALPHA
    assert _normal_bins_pvalue(z * 1.005, edges) < ALPHA   # power: 0.5% too wide is rejected


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(A=[[1.0, 2.0], [0.0, 1.0]], k=1), ValueError, "symmetric"),
    (dict(A=np.eye(3), k=4), ValueError, "k must be <= d"),
    (dict(A=np.eye(3), k=0), ValueError, "k must be >= 1"),
    (dict(A=[[np.nan, 0.0], [0.0, 1.0]], k=1), ValueError, "NaN"),
    (dict(A=np.ones((2, 3)), k=1), ValueError, "square"),
    (dict(A=np.eye(3), k=1.5), TypeError, "k must be an integer"),
    (dict(A=np.eye(3), k=2, method="exact"), ValueError, "exact"),
    (dict(A=np.eye(3), k=2, method="nope"), ValueError, "method"),
    (dict(A=np.eye(3), k=2, n_sweeps=0), ValueError, "n_sweeps"),
    (dict(A=np.eye(3), k=2, init=np.ones((3, 2))), ValueError, "orthonormal"),
    (dict(A=np.eye(3), k=2, init=np.eye(3)), ValueError, "shape"),
    (dict(A=np.eye(3), k=2, init="top"), ValueError, "init"),
    (dict(A="abc", k=1), TypeError, "A"),
])
def test_errors(kwargs, exc, match):
    A = kwargs.pop("A")
    k = kwargs.pop("k")
    with pytest.raises(exc, match=match):
        bingham(A, k, **kwargs)


def _run_script(code, timeout):
    """Run ``code`` in a fresh interpreter that imports the same dpcore; (stdout, stderr, seconds)."""
    import os
    import subprocess
    import sys
    import textwrap
    import time

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, env=env)
    return proc.stdout, proc.stderr, time.monotonic() - start


def test_ill_conditioned_bingham_returns_or_raises_within_seconds():
    """bingham(diag(1e10, 0, 0), 2) ran > 300 s (an unbounded rejection loop): a column draw now
    makes at most MAX_PROPOSALS proposals, then raises a clear error (issue 14)."""
    out, err, seconds = _run_script("""
        import numpy as np, dpcore
        try:
            V = dpcore.bingham(np.diag([1e10, 0.0, 0.0]), 2, random_state=0)
            print("returned", V.shape)
        except RuntimeError as exc:
            print("raised", exc)
    """, timeout=120)
    assert out.startswith(("returned (3, 2)", "raised")), err
    if out.startswith("raised"):
        assert "did not accept a proposal within 10000000 tries" in out
        assert "rescale A or lower epsilon" in out
    assert seconds < 60


def test_bingham_kernel_is_interruptible():
    """A long Gibbs run stops at Ctrl-C (SIGINT) with KeyboardInterrupt, the generator's lock
    released (the kernel runs signal handlers every SIGNAL_EVERY proposals)."""
    out, err, _ = _run_script("""
        import os, signal, subprocess, sys
        # KeyboardInterrupt on SIGINT even if this process inherited SIGINT ignored
        # (background jobs of a non-interactive shell do)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        import numpy as np
        from dpcore import _bingham
        from dpcore._random import bitgen_handle
        lam = np.array([3.0, 1.0, 0.0])
        Vt = np.ascontiguousarray(np.eye(3)[:2])
        h = bitgen_handle(0)
        c = np.zeros(3)
        # a separate process sends SIGINT every 0.5 s, 10 times (a timer thread
        # here would need the GIL of this busy process; one signal could be lost under load)
        subprocess.Popen([sys.executable, "-c", "import os, signal, time; "
                          "[time.sleep(0.5) or os.kill(%d, signal.SIGINT) "
                          "for _ in range(10)]" % os.getpid()],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _bingham.gibbs(lam, Vt, 10**12, h, np.empty(0), c)
            print("finished")
        except KeyboardInterrupt:
            signal.signal(signal.SIGINT, signal.SIG_IGN)   # the killer's later signals
            _bingham.gibbs(lam, Vt, 10, h, np.empty(0), c)   # the lock was released
            print("interrupted", c[0] > 0, np.allclose(Vt @ Vt.T, np.eye(2)))
    """, timeout=60)
    assert out.strip() == "interrupted True True", err
