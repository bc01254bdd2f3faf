"""Minimise a strongly convex ERM objective to a certified tolerance, never failing on the data.

:func:`newton` is a damped Newton method that returns only a point whose float64 gradient
norm, plus the rounding allowance of its final sum, is at most ``tol * lam``; on a
``lam``-strongly convex objective that point is within ``tol`` of the unique minimiser, which
is what the privacy analyses of the linear classifiers in :mod:`dpcore.learn._erm` rely on.
When Newton does not certify its point within ``max_iter`` steps (or stalls), it returns None
and :func:`accelerated_gradient` takes over from the best point: Nesterov's method for
strongly convex, smooth objectives, run for a number of steps that provably (in exact
arithmetic) brings it within ``tol`` of the minimiser, so the optimiser never raises after the
budget is charged and whether it returns never depends on the data (issue 25).
:func:`certified_tol` is the public pre-check: it raises ``tol`` to a floor (from public
values only) at which the float64 certificate is attainable. :func:`minimise_binary` and
:func:`minimise_multinomial` supply the objectives (the losses themselves live in ``_erm``).

Only the gradient and the objective value must be exact; the Newton steps need not be. So
both objectives start from the minimiser of a subsample of the rows (when n is large), the
binary one builds its Hessian in float32 (when the regularisation dominates the rounding),
and the multinomial one solves its Newton systems by conjugate gradients no more accurately
than the tolerance needs. Both evaluate the objective, and the multinomial Hessian-vector
products, in row blocks that stay in cache. Only the stopping test must be exact, and it
reads the float64 gradient.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy import linalg

# value_grad(x) -> (objective, gradient, rounding allowance of the gradient's norm)
ValueGrad = Callable[[np.ndarray], tuple[float, np.ndarray, float]]

# Rows per block: a float64 block of about 1 MiB stays in a core's L2 cache between the
# margin product, the loss and the gradient product.
_BLOCK_BYTES = 2**20
# The Hessian is built in float32 when lam >= this times the trace of Z^T diag(d2/n) Z
# (exact, from the row norms). Its rounding error (measured at most 2e-7 of that trace in the
# spectral norm, n up to 1e6, d up to 500) is then at most 2e-7 * 2^16 = 1/76 of lam, the
# smallest eigenvalue of the exact Hessian, so each inexact Newton step near the minimiser
# still shrinks the error by about that factor.
_FLOAT32_MIN_RATIO = 2.0**-16
# Warm start: a subsample of about this many rows per weight (the fastest of 8, 16, 32 at
# n = 1e5, d = 51; k = 3, 10), taken when it is at most 1/8 of the data; its minimiser is
# solved to ||grad|| <= lam (closer than its sampling error).
_WARM_ROWS_BINARY = 32
_WARM_ROWS_MULTINOMIAL = 16
_WARM_MIN_STRIDE = 8


def newton(value_grad: ValueGrad, newton_step: Callable[[np.ndarray, np.ndarray], np.ndarray],
           x: np.ndarray, lam: float, tol: float, max_iter: int) -> np.ndarray | None:
    """Damped Newton on a ``lam``-strongly convex objective until ||grad|| <= tol * lam.

    Then ||x - x*|| <= tol. A step is accepted when it lowers the objective (Armijo), or,
    once the objective's change is lost in its rounding (near the minimiser), when it lowers
    the gradient norm; the step may come from an inexact Hessian, the test uses the exact
    gradient. The test is ||g|| + e <= tol * lam, with e the rounding allowance of the
    gradient's final sum: when its terms are large and cancel (a huge linear term against
    lam x), the float64 norm alone could pass far from the minimiser.

    Parameters
    ----------
    value_grad : callable
        ``value_grad(x) -> (f, g, e)``: objective value and gradient (float64) at x, and a
        bound e on the rounding error of ||g|| from adding its terms.
    newton_step : callable
        ``newton_step(x, g) -> s``: a descent direction at x, about H(x)^-1 g.
    x : ndarray
        Starting point.
    lam : float
        The strong convexity constant, > 0.
    tol : float
        Certified distance to the minimiser, > 0.
    max_iter : int
        Maximum number of Newton steps.

    Returns
    -------
    ndarray or None
        A point with ||grad|| + e <= tol * lam, or None when tol is not reached within
        ``max_iter`` steps or no step is accepted (the caller then runs
        :func:`accelerated_gradient`).
    """
    f, g, err = value_grad(x)
    gnorm = float(np.linalg.norm(g))
    for _ in range(max_iter):
        if gnorm + err <= tol * lam:
            return x
        step = newton_step(x, g)
        t = 1.0
        while True:
            x_new = x - t * step
            f_new, g_new, err_new = value_grad(x_new)
            gnorm_new = float(np.linalg.norm(g_new))
            if f_new <= f - 1e-4 * t * (g @ step):
                break
            # A gradient-norm decrease alone could cycle (it did with Huber margins on the
            # linear pieces): it counts only once f no longer tells the points apart.
            if abs(f_new - f) <= 2.0**-46 * max(abs(f), 1.0) and gnorm_new < gnorm:
                break
            t *= 0.5
            if t < 1e-10:
                return None   # stalled
        x, f, g, gnorm, err = x_new, f_new, g_new, gnorm_new, err_new
    if gnorm + err <= tol * lam:
        return x
    return None


#: The certificate needs tol * lam at least this many times the bound G on the loss
#: gradient's norm: 2^10 times the certificate's own rounding allowance (2^-50 G at the
#: minimiser of an unperturbed objective), so float64 gradients can pass it.
ROUNDING_FLOOR = 2.0**-40


def certified_tol(tol: float, lam: float, lipschitz: float) -> float:
    """The tolerance the optimiser certifies: ``tol``, or the floor ROUNDING_FLOOR * G / lam
    when tol * lam is below it (G = ``lipschitz``, the public bound on the loss gradient's
    norm). A function of public values only, computed before anything is charged; output
    perturbation charges 2 * this in its sensitivity.

    >>> certified_tol(1e-6, 1e-3, 1.0)
    1e-06
    >>> certified_tol(1e-6, 1e-9, 1.0) == 2.0**-40 / 1e-9
    True
    """
    return max(float(tol), ROUNDING_FLOOR * lipschitz / lam)


#: Most steps the accelerated-gradient fallback takes (a public cap; output perturbation
#: refuses, before the charge, a regularisation whose provable count exceeds it).
MAX_FALLBACK_STEPS = 10**5


def fallback_steps(g0: float, lam: float, smooth: float, tol: float) -> int:
    """Steps of :func:`accelerated_gradient` that provably bring a start with gradient norm
    <= g0 within tol of the minimiser: ceil(log(2 (g0 / (lam tol))^2) / -log(1 - q)), q =
    sqrt(lam / smooth) (0 when g0 <= tol * lam). From public values only when g0 is a public
    bound (the loss gradient's norm bound at the start 0, plus the perturbation's norm / n).

    >>> fallback_steps(1.0, 0.25, 0.25, 1e-6)
    1
    >>> fallback_steps(1.0, 1e-4, 0.25, 1e-6)
    2314
    """
    if g0 <= tol * lam:
        return 0
    q = math.sqrt(lam / smooth)
    if q >= 1.0:
        return 1
    return math.ceil(math.log(2.0 * (g0 / (lam * tol)) ** 2) / -math.log1p(-q))


def accelerated_gradient(value_grad: ValueGrad, x: np.ndarray, lam: float, smooth: float,
                         tol: float, max_steps: int = MAX_FALLBACK_STEPS) -> np.ndarray:
    """Nesterov's accelerated gradient method from x, for a ``lam``-strongly convex,
    ``smooth``-smooth objective; returns a point within ``tol`` of the minimiser x* (when
    :func:`fallback_steps` is at most ``max_steps``).

    With q = sqrt(lam / smooth) and constant momentum (1 - q) / (1 + q), the iterates satisfy
    f(x_k) - f* <= (1 - q)^k A0 with A0 = f(x_0) - f* + (lam / 2) ||x_0 - x*||^2 (Nesterov 2004,
    Theorem 2.2.3), and ||x_k - x*||^2 <= 2 (f(x_k) - f*) / lam. From the gradient g_0 at x_0,
    strong convexity gives f(x_0) - f* <= ||g_0||^2 / (2 lam) and ||x_0 - x*|| <= ||g_0|| / lam,
    so A0 <= ||g_0||^2 / lam and :func:`fallback_steps` (||g_0|| taken with its rounding
    allowance) steps suffice. The method returns earlier at a point whose own gradient passes
    the certificate of :func:`newton`. The bound is for exact arithmetic; :func:`certified_tol`
    keeps tol * lam far above the float64 rounding of the gradients.

    Parameters
    ----------
    value_grad : callable
        As in :func:`newton`.
    x : ndarray
        Starting point.
    lam : float
        Strong convexity constant, > 0.
    smooth : float
        Bound on the largest eigenvalue of the Hessian (loss curvature times the squared row
        norm bound, plus lam), >= lam.
    tol : float
        Distance to the minimiser, > 0.
    max_steps : int, default=MAX_FALLBACK_STEPS
        Cap on the steps (output perturbation checks before the charge that its count is
        below it; objective perturbation, whose guarantee does not involve tol, may hit it
        after a huge noise draw).

    Returns
    -------
    ndarray
    """
    _, g, err = value_grad(x)
    steps = min(fallback_steps(float(np.linalg.norm(g)) + err, lam, smooth, tol), max_steps)
    if steps == 0:
        return x
    q = math.sqrt(min(lam / smooth, 1.0))
    momentum = (1.0 - q) / (1.0 + q)
    previous = x
    y = x
    for _ in range(steps):
        _, g, err = value_grad(y)
        if float(np.linalg.norm(g)) + err <= tol * lam:
            return y
        x_new = y - g / smooth
        y = x_new + momentum * (x_new - previous)
        previous = x_new
    return previous


def _certified(value_grad, newton_step, x, lam, smooth, tol, max_iter):
    """Newton from x, then (when it does not certify) accelerated gradient from 0, whose
    gradient norm has a public bound (so has its step count)."""
    out = newton(value_grad, newton_step, x, lam, tol, max_iter)
    if out is not None:
        return out
    return accelerated_gradient(value_grad, np.zeros_like(x), lam, smooth, tol)


def _sum_rounding(*terms):
    """A bound on the rounding error, in L2 norm, of adding the float64 vectors ``terms``
    elementwise: 4u times the sum of their norms (u = 2^-53; each sum of three is within
    2u (|a| + |b| + |c|) elementwise), so a certificate cannot pass on cancellation alone.
    The rounding inside each term (the loss gradient's sum over the rows) is far smaller at
    any practical n and is not included."""
    return 2.0**-51 * sum(float(np.linalg.norm(t)) for t in terms)


def _weighted_gram(Z, r, rows):
    """Z^T diag(r^2) Z in float64, each block's product computed in Z's dtype."""
    n, d = Z.shape
    r = r.astype(Z.dtype, copy=False)
    H = np.zeros((d, d))
    buf = np.empty((min(rows, n), d), dtype=Z.dtype)
    for i in range(0, n, rows):
        Zr = np.multiply(Z[i:i + rows], r[i:i + rows, None], out=buf[:min(rows, n - i)])
        H += Zr.T @ Zr   # numpy computes A.T @ A as a symmetric rank-k update
    return H


def _binary_objective(loss_fn, Z, lam, b):
    """``value_grad`` and ``newton_step`` of (1/n) sum loss(Z w) + (lam/2)||w||^2 + b^T w / n."""
    n, d = Z.shape
    rows = max(256, _BLOCK_BYTES // (8 * d))
    Z32 = Z.astype(np.float32)   # half the memory traffic of the Hessian's passes
    row_sq = np.einsum("ij,ij->i", Z, Z)   # trace Z^T diag(d2) Z = d2 @ row_sq
    d2 = np.empty(n)
    last: dict[str, Any] = {}   # the last point evaluated, its value, gradient and (in d2) curvatures

    def value_grad(w):
        if last.get("w") is w:
            return last["f"], last["g"], last["err"]
        f = 0.0
        g = np.zeros(d)
        # One pass over Z: the block is still in cache for the gradient product.
        for i in range(0, n, rows):
            Zb = Z[i:i + rows]
            loss, d1, d2[i:i + rows] = loss_fn(Zb @ w)
            f += float(loss.sum())
            g += d1 @ Zb
        g /= n
        last.update(w=w, f=f / n + 0.5 * lam * (w @ w) + (b @ w) / n, g=g + lam * w + b / n,
                    err=_sum_rounding(g, lam * w, b / n))
        return last["f"], last["g"], last["err"]

    def newton_step(w, g):
        # newton evaluates every point it steps from, so d2 is normally already w's
        if last.get("w") is not w:
            value_grad(w)
        # einsum, not a BLAS dot: OpenBLAS threads a dot of length n, which then waits
        # for a busy core (+50 ms per fit measured on a loaded 2-core machine)
        float32 = lam >= _FLOAT32_MIN_RATIO * float(np.einsum("i,i->", d2, row_sq)) / n
        H = _weighted_gram(Z32 if float32 else Z, np.sqrt(d2 / n), rows)
        H[np.diag_indices_from(H)] += lam
        return linalg.solve(H, g, assume_a="pos")

    return value_grad, newton_step


def _warm_start(loss_fn, Z, lam, b, max_iter):
    """The minimiser of the objective on every k-th row, or None (n too small, or not solved).

    The subsample keeps the full objective's linear term b^T w / n, so its minimiser is close
    to the full one and the Newton steps on all rows start in their fast phase.
    """
    n, d = Z.shape
    stride = n // (_WARM_ROWS_BINARY * d)
    if stride < _WARM_MIN_STRIDE:
        return None
    sub = np.ascontiguousarray(Z[::stride])
    value_grad, newton_step = _binary_objective(loss_fn, sub, lam, b * (sub.shape[0] / n))
    return newton(value_grad, newton_step, np.zeros(d), lam, 1.0, max_iter)


def minimise_binary(loss_fn: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]],
                    Z: np.ndarray, lam: float, b: np.ndarray, tol: float, max_iter: int, *,
                    curvature: float) -> np.ndarray:
    """Minimise (1/n) sum loss(Z w) + (lam/2)||w||^2 + b^T w / n by damped Newton (then, if
    it does not certify, accelerated gradient: never raises).

    Parameters
    ----------
    loss_fn : callable
        ``loss_fn(z) -> (loss, d1, d2)``: a convex loss of the margins and its first two
        derivatives, elementwise.
    Z : ndarray, shape (n, d)
        The rows y_i x_i, of norm <= 1.
    lam : float
        Regularisation, > 0.
    b : ndarray, shape (d,)
        Linear perturbation.
    tol : float
        Certified distance to the minimiser, > 0.
    max_iter : int
        Maximum Newton steps (on all rows).
    curvature : float
        Bound on loss'' (1/4 logistic, 1/(2h) Huber): the objective is (curvature +
        lam)-smooth on rows of norm <= 1 (for the fallback's step count).

    Returns
    -------
    ndarray, shape (d,)
        w with ||w - w*|| <= tol (certified by the gradient, or by the fallback's count).
    """
    value_grad, newton_step = _binary_objective(loss_fn, Z, lam, b)
    x = _warm_start(loss_fn, Z, lam, b, max_iter)
    # Never start above the objective at 0, loss(0) (a subsample can be unrepresentative,
    # e.g. rows ordered with the stride's period); value_grad keeps its value for newton.
    if x is None or value_grad(x)[0] > float(loss_fn(np.zeros(1))[0][0]):
        x = np.zeros(Z.shape[1])
    return _certified(value_grad, newton_step, x, lam, curvature + lam, tol, max_iter)


def softmax_rows(S: np.ndarray) -> np.ndarray:
    """Row-wise softmax of the scores S, shape (n, k) (a new array)."""
    S = S - S.max(axis=1, keepdims=True)
    np.exp(S, out=S)
    S /= S.sum(axis=1, keepdims=True)
    return S


def conjugate_gradient(matvec: Callable[[np.ndarray], np.ndarray], g: np.ndarray, rtol: float,
                       max_iter: int) -> np.ndarray:
    """Solve H s = g for a symmetric positive definite H given by ``matvec``.

    Parameters
    ----------
    matvec : callable
        ``matvec(v) -> H v``.
    g : ndarray
        Right-hand side.
    rtol : float
        Stop when ||g - H s|| <= rtol * ||g||.
    max_iter : int
        Maximum iterations.

    Returns
    -------
    ndarray
        The approximate solution s.
    """
    s = np.zeros_like(g)
    r = g.copy()
    p = r.copy()
    rr = r @ r
    stop = (rtol * np.linalg.norm(g)) ** 2
    for _ in range(max_iter):
        if rr <= stop:
            break
        Hp = matvec(p)
        step = rr / (p @ Hp)
        s += step * p
        r -= step * Hp
        rr_new = r @ r
        p = r + (rr_new / rr) * p
        rr = rr_new
    return s


def minimise_multinomial(Xs: np.ndarray, labels: np.ndarray, k: int, lam: float, B: np.ndarray,
                         tol: float, max_iter: int) -> np.ndarray:
    """Minimise the k-class softmax objective by Newton steps solved with conjugate gradients.

    The objective is (1/n) sum_i [logsumexp(W x_i) - (W x_i)_{y_i}] + (lam/2)||W||^2
    + <B, W>/n over W in R^(k x d).

    Parameters
    ----------
    Xs : ndarray, shape (n, d)
        Rows of norm <= 1.
    labels : ndarray of int, shape (n,)
        Class indices in 0 .. k-1.
    k : int
        Number of classes.
    lam : float
        Regularisation, > 0.
    B : ndarray, shape (k, d) or (k * d,)
        Linear perturbation.
    tol : float
        Certified distance to the minimiser, > 0.
    max_iter : int
        Maximum Newton steps.

    Returns
    -------
    ndarray, shape (k, d)
        W with ||W - W*|| <= tol (certified by the gradient, or by the fallback's count: the
        softmax loss is 1/2-smooth on rows of norm <= 1; never raises).
    """
    n, d = Xs.shape
    rows = max(256, _BLOCK_BYTES // (8 * d))
    onehot = np.zeros((n, k))
    onehot[np.arange(n), labels] = 1.0
    Bn = B.ravel() / n
    P = np.empty((n, k))
    last: dict[str, Any] = {}   # the last point evaluated, its value and gradient (P holds its probabilities)

    def value_grad(wflat):
        if last.get("w") is wflat:
            return last["f"], last["g"], last["err"]
        W = wflat.reshape(k, d)
        f = 0.0
        G = np.zeros((k, d))
        # One pass over Xs in blocks that stay in cache (as in the binary objective).
        for i in range(0, n, rows):
            Xb = Xs[i:i + rows]
            S = Xb @ W.T
            lse = np.logaddexp.reduce(S, axis=1)
            Pb = P[i:i + rows]
            np.exp(S - lse[:, None], out=Pb)
            f += float(lse.sum() - np.sum(S * onehot[i:i + rows]))
            G += (Pb - onehot[i:i + rows]).T @ Xb
        G = G.ravel() / n
        last.update(w=wflat, f=f / n + 0.5 * lam * (wflat @ wflat) + Bn @ wflat,
                    g=G + lam * wflat + Bn, err=_sum_rounding(G, lam * wflat, Bn))
        return last["f"], last["g"], last["err"]

    def newton_step(wflat, g):
        # newton evaluates every point it steps from, so P is normally already wflat's
        if last.get("w") is not wflat:
            value_grad(wflat)

        def hessp(vflat):
            V = vflat.reshape(k, d).T
            HV = np.zeros((k, d))
            for i in range(0, n, rows):
                Xb = Xs[i:i + rows]
                Pb = P[i:i + rows]
                PU = Pb * (Xb @ V)
                HV += (PU - Pb * PU.sum(axis=1, keepdims=True)).T @ Xb
            return HV.ravel() / n + lam * vflat

        # forcing term min(0.1, ||g||): superlinear convergence of the inexact Newton steps;
        # but a residual below tol * lam / 10 is never needed (the last step's solve)
        gnorm = float(np.linalg.norm(g))
        rtol = min(0.1, max(gnorm, 0.1 * tol * lam / gnorm))
        return conjugate_gradient(hessp, g, rtol, 2 * k * d)

    # Warm start from a subsample's minimiser, as for the binary objective (and also only
    # when it is below the objective at 0, log k).
    W = None
    stride = n // (_WARM_ROWS_MULTINOMIAL * k * d)
    if stride >= _WARM_MIN_STRIDE:
        sub = slice(None, None, stride)
        W = minimise_multinomial(np.ascontiguousarray(Xs[sub]), labels[sub], k, lam,
                                 B * (len(labels[sub]) / n), 1.0, max_iter).ravel()
    if W is None or value_grad(W)[0] > math.log(k):
        W = np.zeros(k * d)
    return _certified(value_grad, newton_step, W, lam, 0.5 + lam, tol, max_iter).reshape(k, d)
