"""Differentially private principal component analysis (Chaudhuri-Sarwate-Sinha 2013; Blum-Dwork-McSherry-Nissim 2005; Hardt-Price 2014)."""
from __future__ import annotations

import math

import numpy as np
from scipy.linalg.blas import dsyrk
from sklearn.base import BaseEstimator, TransformerMixin

from dpcore import _validation as check
from dpcore._release import Cost, release
from dpcore.bingham import bingham, bingham_sequential, uniform_frame
from dpcore.learn import _base
from dpcore.calibration import zcdp_rho_for
from dpcore.mechanisms import gaussian, laplace

__all__ = ["PCA"]

_METHODS = ("ppca", "sulq", "power")
_SAMPLERS = ("gibbs", "deflation")
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
    """Xs^T Xs (symmetric), by BLAS syrk: half the flops of a general product."""
    upper = dsyrk(1.0, Xs.T, trans=0)       # Xs.T is Fortran-ordered when Xs is C-ordered
    return np.triu(upper) + np.triu(upper, 1).T


class PCA(_base.SharedStateCloneMixin, TransformerMixin, BaseEstimator):
    """Principal component analysis with differential privacy.

    Parameters
    ----------
    n_components : int
        Number of components k, 1 <= k < n_features for "ppca", <= n_features otherwise.
        Required (None raises in `fit`).
    epsilon : float, default=1.0
        Privacy parameter, > 0: the total for the fit (components and explained variances).
    delta : float, optional
        Required for "sulq" and "power" ((epsilon, delta)-DP), 0 < delta < 1; must be None for
        "ppca" (pure epsilon-DP).
    data_norm : float
        Public bound L on the Euclidean norm of each (centred) row; rows above it are scaled down
        to it. Required (never inferred from the data).
    method : {"ppca", "sulq", "power"}, default="ppca"
        "ppca": the exponential mechanism over subspaces (Chaudhuri-Sarwate-Sinha), sampled from
        the matrix Bingham distribution. "sulq": Gaussian noise on the second-moment matrix, then
        its eigenvectors (Blum-Dwork-McSherry-Nissim / Analyze Gauss). "power": the noisy power
        method (Hardt-Price).
    sampler : {"deflation", "gibbs"}, default="deflation"
        "ppca" only. "deflation" (default): k exact draws, one component at a time from the
        vector Bingham on the complement of the components already drawn, each with epsilon / k
        (exactly epsilon-DP, at the cost of more noise per component). "gibbs": one draw of the
        k-dimensional subspace from the matrix Bingham by the Gibbs chain, whose guarantee is
        proven only for the chain's stationary law when k > 1 (see Privacy); only on request.
    n_sweeps : int, default=200
        Gibbs sweeps for "ppca" with the "gibbs" sampler (k > 1).
    n_iter : int, default=10
        Iterations of the noisy power method.
    variance_share : float, default=0.1
        "ppca" only: the share of epsilon spent on releasing ``explained_variance_`` (Laplace),
        0 <= share < 1; with 0 the attribute is NaN.
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
        clipped rows along each component.
    mean_ : ndarray of shape (n_features,)
        The public centre used (zeros when ``mean`` is None).
    n_components_, n_features_in_ : int

    Privacy
    -------
    Neighbouring relation: replace-one (n is public), each row clipped to ``data_norm`` = L
    after subtracting the public ``mean``. The whole fit is charged to ``accountant`` before any
    draw.

    * "ppca", sampler "deflation": epsilon-DP, exactly (up to floating-point rounding in the
      samplers). Component j is the exponential mechanism with utility
      sum_i (v^T x_i)^2 / L^2 (sensitivity 1) over unit vectors orthogonal to the components
      already released, at (1 - variance_share) epsilon / k each, drawn exactly
      (Kent-Ganeiber-Mardia); the explained variances are one Laplace release with
      variance_share * epsilon (L1 sensitivity 2 L^2 / n, inflated for rounding); basic
      composition.
    * "ppca", sampler "gibbs": the target law is the Chaudhuri-Sarwate-Sinha mechanism, the
      matrix Bingham with C = (epsilon' / 2) X^T X / L^2, epsilon' = (1 - variance_share)
      epsilon, which is epsilon'-DP for the released subspace. **That guarantee holds for the
      chain's stationary distribution.** For k = 1 the draw is exact. For k > 1 the output of a
      finite chain of ``n_sweeps`` sweeps has a law that approaches the target as the chain
      mixes, with no known bound on the rate: no DP guarantee is proved for the finite run, and
      the stated epsilon holds only to the extent the chain has converged (the default
      deflation sampler is exact). For k = 1 both samplers make one exact draw.
    * "sulq": (epsilon, delta)-DP. The upper triangle of X^T X / L^2 (L2 sensitivity sqrt(2) under
      replace-one) gets exact discrete Gaussian noise calibrated by `dpcore.gaussian`; the
      components and variances are post-processing.
    * "power": (epsilon, delta)-DP. Each of the ``n_iter`` iterations releases A Y + G with
      A = X^T X / L^2 and orthonormal Y; replacing a row moves A Y by at most sqrt(2) in
      Frobenius norm (attained for k >= 2; the proof is at ``_POWER_SENSITIVITY``), so each
      release gets exact discrete Gaussian noise for rho / n_iter-zCDP, where rho is the largest
      zCDP level whose tight conversion is (epsilon, delta)-DP; zCDP composition.

    Every argument (X, the parameters, ``random_state``, ``accountant``) is checked before the
    charge, and the fitted model holds only released values and public parameters: no trace of
    the chain (it is the exact, un-noised utility) and no acceptance counts. For "ppca" the
    public bound epsilon' n / 2 (epsilon' n / (2 k) for the exact draws: deflation, or k = 1)
    on the sampled matrix's eigenvalue spread must be at most 1e7 for the Gibbs chain and 1e12
    for the exact draws; beyond that the samplers lose their precision, so the fit is refused
    before the charge (lower epsilon). A RuntimeError from the sampler itself (no proposal accepted within
    its bound) propagates after the charge, with nothing released.

    Clipping biases the components towards rows of small norm; choose L from domain knowledge.
    Run time is data-dependent (rejection sampling): not constant-time.

    References
    ----------
    .. [CSS13] K. Chaudhuri, A. D. Sarwate, K. Sinha, "A near-optimal algorithm for
       differentially-private principal components", JMLR 14, 2013.
    .. [BDMN05] A. Blum, C. Dwork, F. McSherry, K. Nissim, "Practical privacy: the SuLQ
       framework", PODS 2005.
    .. [HP14] M. Hardt, E. Price, "The noisy power method", NIPS 2014.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore.learn import PCA
    >>> rng = np.random.default_rng(0)  # insecure-ok: example data, not noise
    >>> X = rng.standard_normal((500, 4)) * [3.0, 1.0, 0.5, 0.1]
    >>> pca = PCA(2, epsilon=1.0, data_norm=8.0, random_state=0).fit(X)
    >>> pca.components_.shape
    (2, 4)
    >>> PCA(2, epsilon=1.0, delta=1e-6, data_norm=8.0, method="sulq",
    ...     random_state=0).fit_transform(X).shape
    (500, 2)
    """

    def __init__(self, n_components=None, *, epsilon=1.0, delta=None, data_norm=None,
                 method="ppca", sampler="deflation", n_sweeps=200, n_iter=10, variance_share=0.1,
                 mean=None, random_state=None, accountant=None, progress=False):
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.data_norm = data_norm
        self.method = method
        self.sampler = sampler
        self.n_sweeps = n_sweeps
        self.n_iter = n_iter
        self.variance_share = variance_share
        self.mean = mean
        self.random_state = random_state
        self.accountant = accountant
        self.progress = progress

    # -- validation ----------------------------------------------------------------------------
    def _check_params(self, n_samples=None, n_features=None):
        """Every parameter, checked before anything is charged (also for a step of a grid search
        candidate, where the shape may be unknown). Returns (k, eps, delta, norm, share, mean)."""
        if self.method not in _METHODS:
            raise ValueError(f"method must be one of {_METHODS}, got {self.method!r}")
        if self.n_components is None:
            raise ValueError("n_components is required (an int >= 1)")
        k = check.integer(self.n_components, "n_components", minimum=1)
        d = n_features
        if d is not None:
            kmax = d - 1 if self.method == "ppca" else d
            if k > kmax:
                raise ValueError(f"n_components must be <= {kmax} for method {self.method!r} "
                                 f"with n_features = {d}, got {k}")
        eps = _base.check_epsilon(self.epsilon)
        if self.data_norm is None:
            raise ValueError("data_norm is required: a public bound on the row norms; it is "
                             "never inferred from the data")
        norm = check.positive(self.data_norm, "data_norm")
        if self.method == "ppca":
            if self.delta is not None:
                raise ValueError("delta must be None for method 'ppca' (pure epsilon-DP)")
            if self.sampler not in _SAMPLERS:
                raise ValueError(f"sampler must be one of {_SAMPLERS}, got {self.sampler!r}")
            share = check.real(self.variance_share, "variance_share")
            if not 0.0 <= share < 1.0:
                raise ValueError(f"variance_share must be in [0, 1), got {share!r}")
            delta = 0.0
        else:
            if self.delta is None:
                raise ValueError(f"delta is required for method {self.method!r} (0 < delta < 1)")
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
        if self.method == "ppca" and n_samples is not None:
            self._check_spread(n_samples, k, eps * (1.0 - share))
        return k, eps, delta, norm, share, mean

    def _check_spread(self, n, k, eps_c):
        """Refuse, before the charge, a sampler whose matrix could be beyond what it handles in
        floating point. Rows have norm <= 1, so the eigenvalues of X^T X lie in [0, n] and the
        eigenvalue spread of the sampler's matrix is at most its factor times n: a public bound
        (n is public under replace-one), so the refusal reveals nothing about the data. Beyond
        these spreads the kernel's rejection loops lose their precision and would fail after
        the charge (measured: Gibbs from about 1.5e8, the exact draw from about 2e13)."""
        gibbs = self.sampler == "gibbs" and k > 1
        factor = eps_c / 2.0 if gibbs else eps_c / (2.0 * k)
        limit = _MAX_SPREAD_GIBBS if gibbs else _MAX_SPREAD_EXACT
        if factor * n * _SUM_SLACK > limit:
            which = "the Gibbs sampler" if gibbs else "the exact sampler"
            hint = " (or use sampler='deflation')" if gibbs else ""
            raise ValueError(
                f"epsilon is too large for {which} at this number of rows: the public bound "
                f"epsilon' * n_samples / 2{'' if gibbs else ' / n_components'} on the eigenvalue "
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

    def fit(self, X, y=None):
        """Fit the private components on X (n_samples, n_features); y is ignored.

        Every argument is checked before the accountant is charged; the kernel's errors (a
        RuntimeError for a matrix it cannot sample in floating point) propagate unchanged."""
        self._check_params()
        X = _base.validate_data(self, X, reset=True, dtype=np.float64)
        X = check.finite_array(X, "X")
        n, d = X.shape
        k, eps, delta, norm, share, mean = self._check_params(n, d)
        Xc = _scaled_rows(X if self.mean is None else X - mean, norm)   # rows of norm <= 1
        S = _second_moment(Xc)

        def draw(rng):
            if self.method == "ppca":
                return self._fit_ppca(S, n, d, k, eps, share, rng)
            if self.method == "sulq":
                return self._fit_sulq(S, n, d, k, eps, delta, rng)
            return self._fit_power(S, n, d, k, eps, delta, rng)

        V, var = release(draw, cost=Cost(eps, delta), accountant=self.accountant,
                         random_state=self.random_state, label=f"PCA/{self.method}")
        self.components_ = V.T.copy()
        self.explained_variance_ = var * norm**2
        self.mean_ = mean
        self.n_components_ = k
        return self

    def _fit_ppca(self, S, n, d, k, eps, share, rng):
        eps_c = eps * (1.0 - share)
        if self.sampler == "gibbs":
            V = bingham((eps_c / 2.0) * S, k, n_sweeps=self.n_sweeps, random_state=rng,
                        progress=self.progress)
        else:
            V = bingham_sequential((eps_c / (2.0 * k)) * S, k, random_state=rng)
        if share > 0:
            values = np.einsum("ij,ij->j", V, S @ V) / n          # |Xc v_j|^2 / n
            sens = _SUM_SLACK * 2.0 / n
            # grid: 2**-30 of the noise scale, but no finer than 2**-60 (values are <= 1)
            grid = 2.0 ** max(math.floor(math.log2(sens / (share * eps))) - 30, -60)
            var = laplace(values, sensitivity=sens, epsilon=share * eps, granularity=grid,
                          random_state=rng)
            var = np.maximum(np.asarray(var, dtype=float).reshape(k), 0.0)
        else:
            var = np.full(k, np.nan)
        return V, var

    def _fit_sulq(self, S, n, d, k, eps, delta, rng):
        iu = np.triu_indices(d)
        noisy = gaussian(S[iu], sensitivity=_SUM_SLACK * math.sqrt(2.0), epsilon=eps,
                         delta=delta, random_state=rng)
        M = np.zeros((d, d))
        M[iu] = noisy
        M = M + np.triu(M, 1).T
        lam, U = np.linalg.eigh(M)
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
        # post-processing of the last release: Rayleigh-type estimates Y_prev^T (S Y_prev + G)
        var = np.maximum(np.einsum("ij,ij->j", Y_prev, Z), 0.0) / n
        order = np.argsort(var)[::-1]
        # rotate to the eigenbasis of the small k x k estimate (post-processing) for ordering
        return Y[:, order], var[order]

    def get_feature_names_out(self, input_features=None):
        """Output column names ("pca0", ...), which also enables ``set_output``."""
        from sklearn.utils.validation import check_is_fitted
        check_is_fitted(self, "components_")
        return np.array([f"pca{i}" for i in range(self.components_.shape[0])], dtype=object)

    def transform(self, X):
        """Project X on the components: (X - mean_) @ components_.T."""
        from sklearn.utils.validation import check_is_fitted
        check_is_fitted(self, "components_")
        X = _base.validate_data(self, X, reset=False, dtype=np.float64)
        return (X - self.mean_) @ self.components_.T

    def inverse_transform(self, Z):
        """Map projections back to feature space."""
        Z = check.finite_array(Z, "Z")
        return Z @ self.components_ + self.mean_
