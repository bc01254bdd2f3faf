"""Calibration of the private ERM classifiers (CMS 2011), from public values only.

Small pure functions that tests check against hand-derived values: the output-perturbation
rate (:func:`output_perturbation_beta`), the objective-perturbation split of epsilon between the
noise and the log-determinant term (:func:`objective_perturbation_calibration`, and
:func:`multinomial_perturbation_calibration` for the softmax model), and the regularisation
``alpha="auto"`` picks (:func:`auto_alpha`). The classifiers that use them are in
:mod:`dpcore.learn._erm`.

Privacy
-------
Arithmetic on public values only (noise scales, budget splits, regularisation): releases
nothing, spends no budget; the guarantees are stated by the learners that use it.
"""
from __future__ import annotations

import math

from dpcore import _validation as check

__all__ = [
    "auto_alpha",
    "output_perturbation_beta",
    "objective_perturbation_calibration",
    "multinomial_perturbation_calibration",
]


def output_perturbation_beta(n: int, alpha: float, epsilon: float) -> float:
    """Rate beta of the output-perturbation noise density ~ exp(-beta ||b||) (CMS 2011, Alg. 1).

    The exact minimiser of (1/n) sum ell + (alpha/2)||w||^2 with a 1-Lipschitz loss and
    ||x|| <= 1 has L2 sensitivity 2 / (n alpha) under replace-one neighbours, so
    beta = n alpha epsilon / 2 (the norm of the noise vector is Gamma(d, 1/beta)).

    >>> output_perturbation_beta(100, 0.1, 1.0)
    5.0
    """
    n = check.integer(n, "n", minimum=1)
    alpha = check.positive(alpha, "alpha")
    epsilon = check.epsilon(epsilon)
    return n * alpha * epsilon / 2.0


def _leftover(epsilon, log_term):
    """epsilon - log_term, one ulp lower if the float subtraction rounded it up (so that
    epsilon' + log_term <= epsilon as evaluated)."""
    eps_p = epsilon - log_term
    return math.nextafter(eps_p, -math.inf) if eps_p + log_term > epsilon else eps_p


def _split_with_delta(epsilon, alpha, log_term, lam_half):
    """(epsilon', Delta) given the log-determinant term as a function of the regulariser and
    ``lam_half()``, the regulariser at which that term is epsilon / 2 (called only when needed:
    it overflows for huge epsilon): Delta = 0 while the term leaves epsilon' >= epsilon / 2,
    else Delta = lam_half() - alpha and epsilon' = epsilon / 2."""
    eps_p = _leftover(epsilon, log_term(alpha))
    if eps_p >= epsilon / 2.0:
        return eps_p, 0.0
    try:
        delta = max(lam_half() - alpha, 0.0)
    except OverflowError:   # exp(epsilon / 2) overflows: the regulariser needed is ~0
        delta = 0.0
    # the log term as evaluated, so that epsilon' + log term <= epsilon in floating point too
    eps_p = min(epsilon / 2.0, epsilon - log_term(alpha + delta))
    if not eps_p > 0.0:
        raise ValueError("objective perturbation cannot be calibrated: the curvature bound "
                         "over n alpha leaves no epsilon for the noise; raise alpha (or h)")
    return eps_p, delta


def objective_perturbation_calibration(epsilon: float, n: int, alpha: float,
                                       c: float) -> tuple[float, float]:
    """(epsilon', Delta) of objective perturbation (CMS 2011, Algorithm 2, tighter log term).

    The minimiser f of the perturbed objective determines the noise, b(f) = -n grad J(f), so
    the output density is the noise density at b(f) times |det grad b(f)| = det A(f), with
    A(f) = n (alpha + Delta) I + sum_i ell''(z_i^T f) z_i z_i^T. Replacing one record changes
    ||b(f)|| by at most 2 (|ell'| <= 1, rows of norm <= 1), which costs epsilon' with noise
    density ~ exp(-(epsilon'/2) ||b||), and changes A(f) from A0 + H to A0 + H' with A0 the
    common part (>= n (alpha + Delta) I) and H, H' positive semi-definite of rank one and norm
    <= c. As det(A0 + H') >= det(A0), the ratio of determinants is at most
    det(A0 + H) / det(A0) = 1 + ell'' z^T A0^-1 z <= 1 + c / (n (alpha + Delta)) (matrix
    determinant lemma). So epsilon' = epsilon - log(1 + c/(n alpha)) with Delta = 0. CMS 2011
    (proof of Theorem 9) bound the same ratio by the square, (1 + c/(n alpha))^2, through the
    two eigenvalues of H - H'; the single factor is exact for this one-sided comparison.
    When that leaves epsilon' < epsilon / 2, Delta = c / (n (exp(epsilon/2) - 1)) - alpha (> 0
    then) brings the log term down to epsilon / 2 and epsilon' = epsilon / 2 (CMS switch only
    when epsilon' <= 0, which leaves a tiny epsilon', hence huge noise, when the log term is
    just below epsilon). ||b|| ~ Gamma(d, 2/epsilon'), direction uniform.

    Parameters
    ----------
    epsilon : float
        Target privacy parameter, > 0.
    n : int
        Number of records (public under replace-one neighbours), >= 1.
    alpha : float
        Regularisation strength Lambda of the averaged objective, > 0.
    c : float
        Bound on the second derivative of the loss, > 0 (1/4 logistic, 1/(2h) Huber).

    Returns
    -------
    (float, float)
        epsilon' and Delta.

    Examples
    --------
    >>> eps_p, delta = objective_perturbation_calibration(1.0, 1000, 0.01, 0.25)
    >>> round(eps_p, 6), delta
    (0.975307, 0.0)
    """
    epsilon = check.epsilon(epsilon)
    n = check.integer(n, "n", minimum=1)
    alpha = check.positive(alpha, "alpha")
    c = check.positive(c, "c")
    return _split_with_delta(epsilon, alpha, lambda lam: math.log1p(c / (n * lam)),
                             lambda: c / (n * math.expm1(epsilon / 2.0)))


def multinomial_perturbation_calibration(epsilon: float, n: int, alpha: float,
                                         k: int) -> tuple[float, float]:
    """(epsilon', Delta) of objective perturbation for the k-class softmax (multinomial) model.

    Same argument as :func:`objective_perturbation_calibration`, for W in R^(k x d) and
    ell(W; x, y) = logsumexp(W x) - (W x)_y on rows of norm <= 1:

    * the gradient (p - e_y) x^T has Frobenius norm <= ||p - e_y|| <= sqrt(2), so replacing a
      record moves b(W) by at most 2 sqrt(2): noise density ~ exp(-epsilon' ||B|| / (2 sqrt 2))
      costs epsilon';
    * the Hessian (diag(p) - p p^T) kron x x^T is positive semi-definite with rank <= k - 1 and
      trace (1 - ||p||^2) ||x||^2 <= 1 - 1/k, so with A0 >= n (alpha + Delta) I the ratio of
      determinants is at most the product of (1 + mu_a) over <= k - 1 eigenvalues mu_a summing
      to <= (1 - 1/k) / (n (alpha + Delta)), hence (AM-GM) at most
      (1 + 1 / (k n (alpha + Delta)))^(k - 1); it is attained at W = 0 (uniform p).

    epsilon' = epsilon - (k - 1) log(1 + 1/(k n alpha)) with Delta = 0 when that is at least
    epsilon / 2; otherwise Delta = 1 / (k n (exp(epsilon / (2 (k - 1))) - 1)) - alpha makes the
    log term epsilon / 2 and epsilon' = epsilon / 2. ||B|| ~ Gamma(k d, 2 sqrt(2) / epsilon').
    Compared with k one-vs-rest models at epsilon / k each, the per-class noise is about
    sqrt(k / 2) times smaller.

    Parameters
    ----------
    epsilon : float
        Target privacy parameter, > 0.
    n : int
        Number of records (public under replace-one neighbours), >= 1.
    alpha : float
        Regularisation strength Lambda of the averaged objective, > 0.
    k : int
        Number of classes, >= 2.

    Returns
    -------
    (float, float)
        epsilon' and Delta.

    Examples
    --------
    >>> eps_p, delta = multinomial_perturbation_calibration(5.0, 1000, 0.001, 10)
    >>> round(eps_p, 4), delta
    (4.1422, 0.0)
    """
    epsilon = check.epsilon(epsilon)
    n = check.integer(n, "n", minimum=1)
    alpha = check.positive(alpha, "alpha")
    k = check.integer(k, "k", minimum=2)

    return _split_with_delta(epsilon, alpha, lambda lam: (k - 1) * math.log1p(1.0 / (k * n * lam)),
                             lambda: 1.0 / (k * n * math.expm1(epsilon / (2.0 * (k - 1)))))


# The squared norm of a typical weight vector (per class) on unit-ball rows: margins up to
# about 2, probabilities 0.12-0.88. It sets how hard "auto" shrinks against the perturbation;
# chosen with `bench/dev_suite.py alpha` (data sets disjoint from the bench's test splits), where
# 3 to 5 did best and equally well.
WEIGHT_NORM_PRIOR_SQ = 4.0


def auto_alpha(method: str, n: int, d: int, epsilon: float, *, row_scale: float = 1.0,
               curvature: float = 0.25, k: int = 1) -> float:
    """The regularisation ``alpha="auto"`` picks, from public values only (no data).

    ``"objective"``: alpha = 1 / (n s^2) + E||b||^2 / (n^2 4 m). The first term is
    scikit-learn's default C = 1 (penalty (1/2)||w||^2 against the summed loss) in the units
    where rows are divided by s = ``row_scale`` to reach the unit ball. The learners pass
    s = sqrt(1 + (t / data_norm)^2) for the intercept column t (1 without it): C = 1 on the
    unit-ball rows, so that alpha does not depend on the caller's units (issue 28: C = 1 in
    the caller's own units, s = sqrt(data_norm^2 + t^2), gave min-max rows divided by sqrt(d)
    with data_norm = 1 a ridge d times stronger than the same rows with data_norm = sqrt(d);
    on `bench/dev_suite.py scaling` this rule led C = 1 at data_norm = sqrt(d) and at d^(1/4)
    by +0.004 and +0.003 mean accuracy). The
    second is the ridge shrinkage against the perturbation: the noise adds b^T w / n to the
    averaged objective, a per-coordinate variance sigma^2 = E||b||^2 / (p n^2) over p
    coordinates, and for a prior of variance tau^2 per coordinate the risk-minimising ridge is
    sigma^2 / tau^2; with tau^2 = 4 m / p, i.e. squared weight norm 4 for each of the m weight
    vectors (:data:`WEIGHT_NORM_PRIOR_SQ`), that is the term above. E||b||^2 = p (p + 1) theta^2
    for the Gamma(p, theta) noise norm, with epsilon' from the calibration at the first term:
    binary, p = d, theta = 2 / epsilon', m = 1; softmax, p = k d, theta = 2 sqrt(2) /
    epsilon', m = k. The second term fades as 1 / n^2, so large data sets get C = 1.
    ``"gd"``: alpha = 1/n (C = 1 on the unit-ball rows), which keeps the projection radius
    1 / alpha, and with it the iterates, moderate.
    ``"output"``: the released minimiser moves by a uniform-direction vector of norm about
    2 d / (n alpha epsilon) (Gamma(d, 2 / (n alpha epsilon))), i.e. about
    2 sqrt(d) / (n alpha epsilon) along the unit-norm row of a record; alpha =
    2 sqrt(d) / (n epsilon) keeps that change of a margin at about 1. For the softmax model
    the noise on W is Gamma(k d, 2 sqrt(2) / (n alpha epsilon)) in Frobenius norm, and the
    same reasoning gives alpha = 2 sqrt(2) sqrt(k d) / (n epsilon).

    Parameters
    ----------
    method : {"objective", "output", "gd"}
    n : int
        Number of records (public under replace-one neighbours).
    d : int
        Number of weights per class (features, plus one with an intercept).
    epsilon : float
        Epsilon of one model (epsilon / k for k one-vs-rest models).
    row_scale : float, default=1.0
        The public row scale s of the C = 1 term (the learners: sqrt(1 + (t / data_norm)^2),
        see above).
    curvature : float, default=0.25
        Bound c on the loss's second derivative (1/4 logistic, 1/(2h) Huber); binary only.
    k : int, default=1
        1 for a binary model, else the number of classes of one softmax model.

    >>> round(auto_alpha("objective", 400, 31, 1.0, row_scale=2 ** 0.5) * 400, 3)
    7.516
    >>> round(auto_alpha("objective", 10 ** 6, 31, 1.0, row_scale=2 ** 0.5) * 10 ** 6, 3)
    0.503
    >>> round(auto_alpha("output", 400, 31, 1.0), 4)
    0.0278
    """
    if method == "output":
        lipschitz, p = (1.0, d) if k == 1 else (math.sqrt(2.0), k * d)
        alpha = 2.0 * lipschitz * math.sqrt(p) / n / epsilon
    elif method == "gd":
        alpha = 1.0 / n
    else:
        stat = 1.0 / n / row_scale / row_scale   # not n s^2: that overflows for huge s
        if not 0.0 < stat < math.inf:
            raise ValueError(f"alpha='auto' is not representable for row scale {row_scale!r} "
                             "(data_norm): pass alpha")
        if k == 1:
            eps_p, _ = objective_perturbation_calibration(epsilon, n, stat, curvature)
            p, theta = d, 2.0 / eps_p
        else:
            eps_p, _ = multinomial_perturbation_calibration(epsilon, n, stat, k)
            p, theta = k * d, 2.0 * math.sqrt(2.0) / eps_p
        t = theta / n   # a product, not ** 2, so that an overflow is inf (refused below)
        alpha = stat + p * (p + 1) * (t * t) / (WEIGHT_NORM_PRIOR_SQ * k)
    if not 0.0 < alpha < math.inf:
        raise ValueError(f"alpha='auto' is not representable for epsilon={epsilon!r} with "
                         f"n={n}: pass alpha")
    return alpha
