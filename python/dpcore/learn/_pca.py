"""Differentially private principal component analysis (Chaudhuri-Sarwate-Sinha 2013; Blum-Dwork-McSherry-Nissim 2005; Hardt-Price 2014)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.integrate import quad
from scipy.linalg import null_space
from sklearn.base import BaseEstimator, TransformerMixin

from dpcore import _validation as check
from dpcore._release import Cost, release
from dpcore.bingham import bingham, bingham_sequential, transpose_product, uniform_frame
from dpcore.learn import _base
from dpcore.calibration import zcdp_rho_for
from dpcore.mechanisms import gaussian, laplace

__all__ = ["PCA"]

_METHODS = ("auto", "ppca", "sulq", "power")
_SAMPLERS = ("gibbs", "deflation")
_ALLOCATIONS = ("eigengap", "equal")
# Budget units of the eigengap allocation (a grid of (1 - variance_share) epsilon / _BUDGET_UNITS).
_BUDGET_UNITS = 60
# Rounding slack for float sums of n clipped terms (Casacuberta et al. 2022): the computed sum of n
# terms of size <= 1 is within n * 2**-52 * n of the real one; we inflate sensitivities by this
# relative factor, ample for n <= 10**6 rows.
_SUM_SLACK = 1.0 + 2.0**-12
# Frobenius sensitivity of A Y (A = sum of x x^T over rows of norm <= 1, Y with orthonormal
# columns) under replace-one. With u = Y^T x, p = x - Y u (and u', p' for x'), the squared change
# |x u^T - x' u'^T|^2 = |x|^2 |u|^2 + |x'|^2 |u'|^2 - 2 (u.u' + p.p')(u.u') is at most
# a^2 + b^2 - 2 c^2 + 2 c sqrt((1 - a^2)(1 - b^2)) with a = |u|, b = |u'|, c = |u.u'|, whose
# maximum over c is (1 + a^2)(1 + b^2) / 2 <= 2; two orthogonal unit rows in span(Y) attain it.
_POWER_SENSITIVITY = math.sqrt(2.0)
# Largest eigenvalue spreads of the sampled matrix accepted before the charge (public bounds, see
# PCA._check_spread): a margin of 15-20x below where the kernel's samplers were measured to fail.
_MAX_SPREAD_GIBBS = 1e7
_MAX_SPREAD_EXACT = 1e12


def _scaled_rows(X, norm):
    """X / norm with every row of norm above ``norm`` first scaled down to it: rows of norm <= 1
    (to rounding)."""
    sq = np.einsum("ij,ij->i", X, X)
    return X * (1.0 / np.maximum(norm, np.sqrt(sq)))[:, None]


def _second_moment(Xs):
    """Xs^T Xs (symmetric): the upper triangle's column panels on dpcore's threads (half the
    flops of a general product; the same bits for any thread count)."""
    return transpose_product(Xs, Xs, symmetric=True)


def _frobenius_coordinates(S):
    """The upper triangle of the symmetric S (row by row), off-diagonal entries times sqrt(2): its
    Euclidean norm is S's Frobenius norm, so SuLQ's noise can be calibrated to |D|_F <= sqrt(2)
    and each off-diagonal entry of the matrix gets sqrt(2) less noise than on the plain triangle."""
    iu = np.triu_indices(S.shape[0])
    v = S[iu]
    v[iu[0] != iu[1]] *= math.sqrt(2.0)
    return v


def _from_frobenius_coordinates(v, d):
    """The symmetric d x d matrix whose `_frobenius_coordinates` are v (post-processing)."""
    iu = np.triu_indices(d)
    w = np.array(v, dtype=float)
    w[iu[0] != iu[1]] /= math.sqrt(2.0)
    M = np.zeros((d, d))
    M[iu] = w
    return M + np.triu(M, 1).T


def _sulq_matrix(S, epsilon, delta, rng):
    """S plus symmetric discrete Gaussian noise calibrated on the Frobenius coordinates: L2
    sensitivity sqrt(2) (|x x^T - x' x'^T|_F^2 = |x|^4 + |x'|^4 - 2 (x.x')^2 <= 2 for rows of norm
    <= 1), inflated for rounding; off-diagonal entries get 1 / sqrt(2) of the diagonal's noise."""
    noisy = gaussian(_frobenius_coordinates(S), sensitivity=_SUM_SLACK * math.sqrt(2.0),
                     epsilon=epsilon, delta=delta, random_state=rng)
    return _from_frobenius_coordinates(noisy, S.shape[0])


def _alignment(m, a):
    """E[cos^2 phi] for a unit vector of R^(m+1) with density proportional to exp(a cos^2 phi),
    phi its angle to a fixed axis: the share of a spike that one vector Bingham draw captures when
    the other m directions are flat and a is the spike's gap times the draw's concentration.
    Quadrature over phi, whose density is proportional to sin^(m-1)(phi) exp(a cos^2 phi)."""
    if m == 0:
        return 1.0
    if a <= 0.0:
        return 1.0 / (m + 1)
    if a >= 1e4 * (m + 2):
        # sin^2 phi is about Gamma(m / 2, a) (times (1 - s)^(-1/2)): quadrature of a too narrow
        # peak loses precision here, the expansion's error is O((m / a)^3)
        return 1.0 - (m / 2.0) / a * (1.0 + 0.5 / a)
    mode = math.asin(math.sqrt(min(1.0, (m - 1) / (2.0 * a)))) if m > 1 else 0.0

    def log_density(p):
        return (m - 1) * math.log(math.sin(p)) + a * math.cos(p) ** 2

    top = log_density(mode) if mode > 0 else a
    points = [mode] if 0.0 < mode < math.pi / 2 else None

    def moment(power):
        def f(p):
            return math.exp(log_density(p) - top) * math.cos(p) ** (2 * power) if p > 0 else 0.0
        return quad(f, 0.0, math.pi / 2, points=points, limit=200, epsabs=0.0, epsrel=1e-7)[0]

    return min(1.0, moment(1) / moment(0))


def _eigengap_allocation(gaps, d, total, units=_BUDGET_UNITS):
    """Budgets (summing to ``total``) for the k deflation steps, maximising the modelled captured
    variance sum_j gap_j * _alignment(d - j, budget_j * gap_j / 2) over multiples of
    total / units (dynamic programming). Step j (from 1) draws on the unit sphere of the
    (d - j + 1)-dimensional complement of the earlier components, with concentration budget_j / 2;
    gap_j is its (released) eigenvalue above the bulk. A step whose gap is too small for any
    affordable budget gets none (a uniform draw) and its share goes where it pays. Post-processing
    of released values and public d, total: the allocation reveals nothing more."""
    k = len(gaps)
    step = total / units
    value = np.array([[g * _alignment(d - j - 1, u * step * g / 2.0) for u in range(units + 1)]
                      for j, g in enumerate(gaps)])
    best = np.full(units + 1, -np.inf)
    best[0] = 0.0
    choice = np.zeros((k, units + 1), dtype=int)
    for j in range(k):
        new = np.empty(units + 1)
        for used in range(units + 1):
            candidates = best[used::-1] + value[j, : used + 1]     # best[used - u] + value[j, u]
            choice[j, used] = int(np.argmax(candidates))
            new[used] = candidates[choice[j, used]]
        best = new
    if not best[units] > 0.0:                                  # no gap at all: equal shares
        return np.full(k, total / k)
    out = np.zeros(k, dtype=int)
    used = units
    for j in range(k - 1, -1, -1):
        out[j] = choice[j, used]
        used -= out[j]
    return out * step


def _noisy_values(values, n, epsilon, rng):
    """Laplace release of values of L1 sensitivity 2 / n under replace-one (inflated for rounding):
    the variances of the clipped rows along k fixed orthonormal directions, or the top
    eigenvalues of their second moment (Lidskii: replacing a row moves the whole eigenvalue
    vector by at most |x x^T - x' x'^T|_nuclear / n <= 2 / n in L1)."""
    sens = _SUM_SLACK * 2.0 / n
    # grid: 2**-30 of the noise scale, but no finer than 2**-60 (values are <= 1)
    grid = 2.0 ** max(math.floor(math.log2(sens / epsilon)) - 30, -60)
    out = laplace(values, sensitivity=sens, epsilon=epsilon, granularity=grid, random_state=rng)
    return np.asarray(out, dtype=float).reshape(len(values))


def _deflation(S, concentrations, rng):
    """Exact draws, one column at a time: column j from the vector Bingham density proportional to
    exp(concentrations[j] v^T S v) on the unit vectors orthogonal to the columns before it."""
    d = S.shape[0]
    V = np.zeros((d, 0))
    for c in concentrations:
        N = np.eye(d) if V.shape[1] == 0 else null_space(V.T)      # complement, orthonormal
        A = c * transpose_product(N, transpose_product(S, N), symmetric=True)   # N^T S N
        V = np.hstack([V, N @ bingham(0.5 * (A + A.T), 1, random_state=rng)])
    return V


class PCA(_base.SharedStateCloneMixin, TransformerMixin, BaseEstimator):
    """Principal component analysis with differential privacy.

    Parameters
    ----------
    n_components : int
        Number of components k, 1 <= k < n_features for "ppca" (and "auto" without delta),
        <= n_features otherwise. Required (None raises in `fit`).
    epsilon : float, default=1.0
        Privacy parameter, > 0: the total for the fit (components and explained variances).
    delta : float, optional
        0 < delta < 1. With "auto", giving delta selects "sulq" ((epsilon, delta)-DP) and leaving
        it None selects "ppca" (pure epsilon-DP). Required for "sulq" and "power"; must be None
        for "ppca".
    data_norm : float
        Public bound L on the Euclidean norm of each (centred) row; rows above it are scaled down
        to it. Required (never inferred from the data).
    method : {"auto", "ppca", "sulq", "power"}, default="auto"
        "auto": a rule on public inputs only, chosen on development data (bench/pca_utility.py
        ``--dev``): "sulq" when ``delta`` is given, else "ppca" (with the ``sampler`` and
        ``allocation`` given, by default the exact deflation sampler with the eigengap
        allocation). The method that ran is ``method_``.
        "ppca": the exponential mechanism over subspaces (Chaudhuri-Sarwate-Sinha), sampled from
        the matrix Bingham distribution. "sulq": Gaussian noise on the second-moment matrix, then
        its eigenvectors (Blum-Dwork-McSherry-Nissim / Analyze Gauss). "power": the noisy power
        method (Hardt-Price).
    sampler : {"deflation", "gibbs"}, default="deflation"
        "ppca" only. "deflation" (default): k exact draws, one component at a time from the
        vector Bingham on the complement of the components already drawn, with the budgets of
        ``allocation`` (exactly epsilon-DP, at the cost of more noise per component). "gibbs":
        one draw of the k-dimensional subspace from the matrix Bingham by the Gibbs chain, whose
        guarantee is proven only for the chain's stationary law when k > 1 (see Privacy); only
        on request.
    allocation : {"eigengap", "equal"}, default="eigengap"
        "ppca" with the deflation sampler only: how (1 - variance_share) epsilon is split over
        the k steps. "equal": epsilon' / k each. "eigengap": the ``variance_share`` is spent
        first on the top k + 1 eigenvalues of the second moment (Laplace), and the budgets are
        then fitted to the released gaps: they maximise the modelled captured variance
        sum_j gap_j E[cos^2] of one vector Bingham draw per step (a grid of 60 budget units,
        dynamic programming), so a component whose gap is too small to be found gets no budget
        and its share goes to the others. With ``variance_share=0`` or k = 1 the shares are
        equal.
    n_sweeps : int, default=200
        Gibbs sweeps for "ppca" with the "gibbs" sampler (k > 1).
    n_iter : int, default=10
        Iterations of the noisy power method.
    variance_share : float, default=0.1
        "ppca" only: the share of epsilon spent on releasing ``explained_variance_`` (Laplace),
        0 <= share < 1; with 0 the attribute is NaN. With the eigengap allocation these are the
        released top eigenvalues, which also set the budgets.
    mean : array_like of shape (n_features,), optional
        A public centre, subtracted before clipping (never estimated from the data here). None
        (default): no centring, unlike scikit-learn's PCA; centre with a public or separately
        released mean (e.g. `dpcore.stats`) if needed.
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's secure generator (unlike scikit-learn, where None means numpy's
        global generator). Seeds are for tests only.
    accountant : dpcore.Accountant, optional
        Charged with the fit's total guarantee before anything is drawn.
    progress : bool, default=False
        Show the Gibbs chain's progress bar on stderr: sweep counters and times only (public),
        never a value computed from the data.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Orthonormal rows (principal axes).
    explained_variance_ : ndarray of shape (n_components,)
        Private estimates of the variance (second moment about ``mean_``, divided by n) of the
        clipped rows along each component; for "ppca" with the eigengap allocation, of the top
        k eigenvalues of that second moment (the variance along the exact principal axes).
    method_ : str
        The method that ran ("ppca", "sulq" or "power"; "auto" resolved).
    mean_ : ndarray of shape (n_features,)
        The public centre used (zeros when ``mean`` is None).
    n_components_, n_features_in_ : int

    Privacy
    -------
    Neighbouring relation: replace-one (n is public), each row clipped to ``data_norm`` = L
    after subtracting the public ``mean``. The whole fit is charged to ``accountant`` before any
    draw.

    * "auto": exactly the guarantee of the method it runs (below): "sulq"'s
      (epsilon, delta)-DP when delta is given, else "ppca"'s epsilon-DP. The choice reads
      only delta (public), never the data.
    * "ppca", sampler "deflation", allocation "equal": epsilon-DP, exactly (up to
      floating-point rounding in the samplers). Component j is the exponential mechanism with
      utility sum_i (v^T x_i)^2 / L^2 (sensitivity 1) over unit vectors orthogonal to the
      components already released, at (1 - variance_share) epsilon / k each, drawn exactly
      (Kent-Ganeiber-Mardia); the explained variances are one Laplace release with
      variance_share * epsilon (L1 sensitivity 2 L^2 / n, inflated for rounding); basic
      composition.
    * "ppca", sampler "deflation", allocation "eigengap" (the default): epsilon-DP, exactly (up
      to floating-point rounding). First the top k + 1 eigenvalues of X^T X / (n L^2), one
      Laplace release with variance_share * epsilon (L1 sensitivity 2 / n: replacing a row
      changes the matrix by at most 2 in nuclear norm, which bounds the L1 change of its
      eigenvalue vector, Lidskii; inflated for rounding). The step budgets epsilon_j >= 0 are a
      function of that release and of public d, k, epsilon only (post-processing) and sum to
      (1 - variance_share) epsilon; step j is the exponential mechanism above at epsilon_j
      (concentration epsilon_j / 2), drawn exactly. Adaptive basic composition: every output
      sequence's privacy loss is at most variance_share * epsilon + sum_j epsilon_j = epsilon.
    * "ppca", sampler "gibbs": the target law is the Chaudhuri-Sarwate-Sinha mechanism, the
      matrix Bingham with C = (epsilon' / 2) X^T X / L^2, epsilon' = (1 - variance_share)
      epsilon, which is epsilon'-DP for the released subspace. **That guarantee holds for the
      chain's stationary distribution.** For k = 1 the draw is exact. For k > 1 the output of a
      finite chain of ``n_sweeps`` sweeps has a law that approaches the target as the chain
      mixes, with no known bound on the rate: no DP guarantee is proved for the finite run, and
      the stated epsilon holds only to the extent the chain has converged (the default
      deflation sampler is exact). For k = 1 both samplers make one exact draw.
    * "sulq": (epsilon, delta)-DP. The upper triangle of X^T X / L^2 with its off-diagonal
      entries times sqrt(2) (Euclidean norm = Frobenius norm of the matrix, so L2 sensitivity
      sqrt(2) under replace-one: |x x^T - x' x'^T|_F^2 = |x|^4 + |x'|^4 - 2 (x.x')^2 <= 2) gets
      exact discrete Gaussian noise calibrated by `dpcore.gaussian` (rho-zCDP with rho the
      largest level whose tight conversion is (epsilon, delta)-DP); dividing the off-diagonal
      entries back by sqrt(2) leaves them sqrt(2) less noise than the diagonal. The components
      and variances are post-processing.
    * "power": (epsilon, delta)-DP. Each of the ``n_iter`` iterations releases A Y + G with
      A = X^T X / L^2 and orthonormal Y; replacing a row moves A Y by at most sqrt(2) in
      Frobenius norm (attained for k >= 2; the proof is at ``_POWER_SENSITIVITY``), so each
      release gets exact discrete Gaussian noise for rho / n_iter-zCDP, where rho is the largest
      zCDP level whose tight conversion is (epsilon, delta)-DP; zCDP composition.

    Every argument (X, the parameters, ``random_state``, ``accountant``) is checked before the
    charge, and the fitted model holds only released values and public parameters: no trace of
    the chain (it is the exact, un-noised utility) and no acceptance counts. For "ppca" the
    public bound epsilon' n / 2 (epsilon' n / (2 k) for the equal-share exact draws: deflation
    with allocation "equal", or k = 1) on the sampled matrix's eigenvalue spread must be at
    most 1e7 for the Gibbs chain and 1e12 for the exact draws; beyond that the samplers lose
    their precision, so the fit is refused before the charge (lower epsilon). A RuntimeError from the sampler itself (no proposal accepted within
    its bound) propagates after the charge, with nothing released.

    Clipping biases the components towards rows of small norm; choose L from domain knowledge.
    Run time is data-dependent (rejection sampling): not constant-time. The second moment
    X^T X and the deflation's products N^T S N run on ``dpcore.get_num_threads()`` threads
    (:func:`dpcore.bingham.transpose_product`, BLAS pinned to one thread meanwhile); a
    seeded fit is the same for any thread count.

    References
    ----------
    .. [CSS13] K. Chaudhuri, A. D. Sarwate, K. Sinha, "A near-optimal algorithm for
       differentially-private principal components", JMLR 14, 2013.
    .. [BDMN05] A. Blum, C. Dwork, F. McSherry, K. Nissim, "Practical privacy: the SuLQ
       framework", PODS 2005.
    .. [HP14] M. Hardt, E. Price, "The noisy power method", NIPS 2014.
    .. [DTTZ14] C. Dwork, K. Talwar, A. Thakurta, L. Zhang, "Analyze Gauss: optimal bounds for
       privacy-preserving principal component analysis", STOC 2014.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore.learn import PCA
    >>> rng = np.random.default_rng(0)  # insecure-ok: example data, not noise
    >>> X = rng.standard_normal((500, 4)) * [3.0, 1.0, 0.5, 0.1]
    >>> pca = PCA(2, epsilon=1.0, data_norm=8.0, random_state=0).fit(X)
    >>> pca.components_.shape
    (2, 4)
    >>> pca.method_
    'ppca'
    >>> PCA(2, epsilon=1.0, delta=1e-6, data_norm=8.0, random_state=0).fit(X).method_
    'sulq'
    >>> PCA(2, epsilon=1.0, delta=1e-6, data_norm=8.0, method="power",
    ...     random_state=0).fit_transform(X).shape
    (500, 2)
    """

    def __init__(self, n_components: int | None = None, *, epsilon: float = 1.0,
                 delta: float | None = None, data_norm: float | None = None, method: str = "auto",
                 sampler: str = "deflation", allocation: str = "eigengap", n_sweeps: int = 200,
                 n_iter: int = 10, variance_share: float = 0.1, mean: Any = None,
                 random_state: Any = None, accountant: Any = None,
                 progress: bool = False) -> None:
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.data_norm = data_norm
        self.method = method
        self.sampler = sampler
        self.allocation = allocation
        self.n_sweeps = n_sweeps
        self.n_iter = n_iter
        self.variance_share = variance_share
        self.mean = mean
        self.random_state = random_state
        self.accountant = accountant
        self.progress = progress

    # -- validation ----------------------------------------------------------------------------
    def _resolved_method(self):
        """The method that runs: "auto" is "sulq" when delta is given, else "ppca" (public
        inputs only)."""
        if self.method not in _METHODS:
            raise ValueError(f"method must be one of {_METHODS}, got {self.method!r}")
        if self.method == "auto":
            return "ppca" if self.delta is None else "sulq"
        return self.method

    def _check_params(self, n_samples=None, n_features=None):
        """Every parameter, checked before anything is charged (also for a step of a grid search
        candidate, where the shape may be unknown). Returns (k, eps, delta, norm, share, mean)."""
        method = self._resolved_method()
        if self.n_components is None:
            raise ValueError("n_components is required (an int >= 1)")
        k = check.integer(self.n_components, "n_components", minimum=1)
        d = n_features
        if d is not None:
            kmax = d - 1 if method == "ppca" else d
            if k > kmax:
                raise ValueError(f"n_components must be <= {kmax} for method {method!r} "
                                 f"with n_features = {d}, got {k}")
        eps = _base.check_epsilon(self.epsilon)
        if self.data_norm is None:
            raise ValueError("data_norm is required: a public bound on the row norms; it is "
                             "never inferred from the data")
        norm = check.positive(self.data_norm, "data_norm")
        if method == "ppca":
            if self.delta is not None:
                raise ValueError("delta must be None for method 'ppca' (pure epsilon-DP); "
                                 "method 'auto' with delta runs 'sulq'")
            if self.sampler not in _SAMPLERS:
                raise ValueError(f"sampler must be one of {_SAMPLERS}, got {self.sampler!r}")
            if self.allocation not in _ALLOCATIONS:
                raise ValueError(f"allocation must be one of {_ALLOCATIONS}, "
                                 f"got {self.allocation!r}")
            share = check.real(self.variance_share, "variance_share")
            if not 0.0 <= share < 1.0:
                raise ValueError(f"variance_share must be in [0, 1), got {share!r}")
            delta = 0.0
        else:
            if self.delta is None:
                raise ValueError(f"delta is required for method {method!r} (0 < delta < 1)")
            delta = check.probability(self.delta, "delta")
            share = 0.0
        check.integer(self.n_sweeps, "n_sweeps", minimum=1)
        check.integer(self.n_iter, "n_iter", minimum=1)
        _base.check_bool(self.progress, "progress")
        if self.mean is None:
            mean = None if d is None else np.zeros(d)
        else:
            mean = check.finite_array(self.mean, "mean")
            if mean.ndim != 1 or (d is not None and mean.shape != (d,)):
                raise ValueError(f"mean must have shape (n_features,) = ({d},), got {mean.shape}")
        _base.check_n(n_samples)
        if method == "ppca" and n_samples is not None:
            self._check_spread(n_samples, k, eps * (1.0 - share), share)
        return k, eps, delta, norm, share, mean

    def _uneven_shares(self, k, share):
        """True when the deflation steps may get unequal budgets (eigengap allocation, k > 1)."""
        return self.allocation == "eigengap" and share > 0.0 and k > 1

    def _check_spread(self, n, k, eps_c, share):
        """Refuse, before the charge, a sampler whose matrix could be beyond what it handles in
        floating point. Rows have norm <= 1, so the eigenvalues of X^T X lie in [0, n] and the
        eigenvalue spread of the sampler's matrix is at most its factor times n: a public bound
        (n is public under replace-one), so the refusal reveals nothing about the data. Beyond
        these spreads the kernel's rejection loops lose their precision and would fail after
        the charge (measured: Gibbs from about 1.5e8, the exact draw from about 2e13)."""
        gibbs = self.sampler == "gibbs" and k > 1
        whole = gibbs or self._uneven_shares(k, share)    # one step may get all of epsilon'
        factor = eps_c / 2.0 if whole else eps_c / (2.0 * k)
        limit = _MAX_SPREAD_GIBBS if gibbs else _MAX_SPREAD_EXACT
        if factor * n * _SUM_SLACK > limit:
            which = "the Gibbs sampler" if gibbs else "the exact sampler"
            hint = " (or use sampler='deflation')" if gibbs else ""
            raise ValueError(
                f"epsilon is too large for {which} at this number of rows: the public bound "
                f"epsilon' * n_samples / 2{'' if whole else ' / n_components'} on the eigenvalue "
                f"spread must be <= {limit:.0e} (epsilon' = (1 - variance_share) * epsilon); "
                f"lower epsilon{hint}"
            )

    def _n_features_out(self, n_features):
        """Width of transform's output (public): n_components."""
        return check.integer(self.n_components, "n_components", minimum=1)

    # -- fitting ---------------------------------------------------------------------------------
    def _cost(self):
        _, eps, delta, *_ = self._check_params()
        return Cost(eps, delta)

    def fit(self, X: Any, y: Any = None) -> PCA:
        """Fit the private components on X (n_samples, n_features); y is ignored.

        Every argument is checked before the accountant is charged; the kernel's errors (a
        RuntimeError for a matrix it cannot sample in floating point) propagate unchanged."""
        self._check_params()
        X = _base.validate_data(self, X, reset=True, dtype=np.float64)
        X = check.finite_array(X, "X")
        n, d = X.shape
        k, eps, delta, norm, share, mean = self._check_params(n, d)
        method = self._resolved_method()
        Xc = _scaled_rows(X if self.mean is None else X - mean, norm)   # rows of norm <= 1
        S = _second_moment(Xc)

        def draw(rng):
            if method == "ppca":
                return self._fit_ppca(S, n, d, k, eps, share, rng)
            if method == "sulq":
                return self._fit_sulq(S, n, d, k, eps, delta, rng)
            return self._fit_power(S, n, d, k, eps, delta, rng)

        V, var = release(draw, cost=Cost(eps, delta), accountant=self.accountant,
                         random_state=self.random_state, label=f"PCA/{method}")
        self.components_ = V.T.copy()
        self.explained_variance_ = var * norm**2
        self.mean_ = mean
        self.n_components_ = k
        self.method_ = method
        return self

    def _fit_ppca(self, S, n, d, k, eps, share, rng):
        eps_c = eps * (1.0 - share)
        if self.sampler == "deflation" and self._uneven_shares(k, share):
            # first the top k + 1 eigenvalues (share * epsilon), then budgets fitted to their gaps
            lam = _noisy_values(np.linalg.eigvalsh(S)[::-1][: k + 1] / n, n, share * eps, rng)
            gaps = np.maximum(lam[:k] - lam[k], 0.0) * n
            budgets = _eigengap_allocation(gaps, d, eps_c)
            V = _deflation(S, budgets / 2.0, rng)
            return V, np.maximum(lam[:k], 0.0)
        if self.sampler == "gibbs":
            V = bingham((eps_c / 2.0) * S, k, n_sweeps=self.n_sweeps, random_state=rng,
                        progress=self.progress)
        else:
            V = bingham_sequential((eps_c / (2.0 * k)) * S, k, random_state=rng)
        if share > 0:
            values = np.einsum("ij,ij->j", V, S @ V) / n          # |Xc v_j|^2 / n
            var = np.maximum(_noisy_values(values, n, share * eps, rng), 0.0)
        else:
            var = np.full(k, np.nan)
        return V, var

    def _fit_sulq(self, S, n, d, k, eps, delta, rng):
        lam, U = np.linalg.eigh(_sulq_matrix(S, eps, delta, rng))
        order = np.argsort(lam)[::-1][:k]
        return U[:, order], np.maximum(lam[order], 0.0) / n

    def _fit_power(self, S, n, d, k, eps, delta, rng):
        T = int(self.n_iter)
        rho = zcdp_rho_for(eps, delta) / T
        Y = uniform_frame(d, k, random_state=rng)
        Z = None
        for _ in range(T):
            Z = gaussian(S @ Y, sensitivity=_SUM_SLACK * _POWER_SENSITIVITY, rho=rho,
                         random_state=rng)
            Z = np.asarray(Z, dtype=float).reshape(d, k)
            Y_prev = Y
            Q, R = np.linalg.qr(Z)
            Y = Q * np.where(np.diag(R) < 0, -1.0, 1.0)
        assert Z is not None   # n_iter >= 1 (checked)
        # post-processing of the last release: Rayleigh-type estimates Y_prev^T (S Y_prev + G)
        var = np.maximum(np.einsum("ij,ij->j", Y_prev, Z), 0.0) / n
        order = np.argsort(var)[::-1]
        # rotate to the eigenbasis of the small k x k estimate (post-processing) for ordering
        return Y[:, order], var[order]

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """Output column names ("pca0", ...), which also enables ``set_output``."""
        from sklearn.utils.validation import check_is_fitted
        check_is_fitted(self, "components_")
        return np.array([f"pca{i}" for i in range(self.components_.shape[0])], dtype=object)

    def transform(self, X: Any) -> np.ndarray:
        """Project X on the components: (X - mean_) @ components_.T."""
        from sklearn.utils.validation import check_is_fitted
        check_is_fitted(self, "components_")
        X = _base.validate_data(self, X, reset=False, dtype=np.float64)
        return (X - self.mean_) @ self.components_.T

    def inverse_transform(self, Z: Any) -> np.ndarray:
        """Map projections back to feature space."""
        Z = check.finite_array(Z, "Z")
        return Z @ self.components_ + self.mean_
