"""Private counts, sums, means, variances and standard deviations of bounded records.

How each is released (the derivations and measured errors are in the user guide,
"Statistics"; :class:`dpcore._release.sums.Statistic` holds the constructions):

* n private (the default): the mean and the variance release the degree-1 and degree-2
  Bernstein sums of z = (x - lower) / (upper - lower): non-negative per-record weights that add
  up to one record, so their L1 sensitivity is one record whatever the split between the count
  and the sums, and one Laplace release of the whole budget carries both.
* ``n=`` (a public record count, add/remove kept): the centred sum (mean, sum) or the rotated
  pair of centred sums (variance) with the whole budget; n only divides after the noise.
* ``relation="replace"`` (replace-one neighbours: the size N of the data is invariant, hence
  public): the centred sum with twice the sensitivity, or N times the sum of squared
  deviations (variance).
"""
from __future__ import annotations

from typing import TYPE_CHECKING
import math

from dpcore._release.sums import Statistic, flat_records

if TYPE_CHECKING:
    from numpy.typing import ArrayLike
    from dpcore.random import RandomStateLike
    from dpcore.accounting import AccountantLike

__all__ = ["count", "sum", "mean", "var", "std"]


def _release(kind, x, label, random_state, accountant, **public):
    records = flat_records(x)
    stat = Statistic.make(kind, records=records, **public)
    return stat.release(stat.plan.exact(records), accountant=accountant,
                        random_state=random_state, label=label)


def count(x: ArrayLike, *, epsilon: float, delta: float | None = None, mechanism: str = "laplace",
          random_state: RandomStateLike = None, accountant: AccountantLike | None = None) -> int:
    """Differentially private number of records.

    Parameters
    ----------
    x : array_like of float
        The records (any shape; each element is one record). NaN and infinities are rejected.
    epsilon : float
        Privacy parameter, > 0.
    delta : float, optional
        None (default) or 0 for ``mechanism="laplace"``; 0 < delta < 1 for ``mechanism="gaussian"``.
    mechanism : {"laplace", "gaussian"}, default="laplace"
        Exact discrete Laplace (scale 1/epsilon) or exact discrete Gaussian noise.
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's process-wide cryptographically secure generator. Seeds are for
        tests and reproducibility only.
    accountant : dpcore.Accountant, optional
        Charged ``(epsilon, delta)`` before anything is drawn; if the budget would be overspent
        it raises ``BudgetExceeded`` and nothing is released.

    Returns
    -------
    int
        n + Z with Z exact integer noise; can be negative (clip it yourself if needed: that is
        post-processing).

    Raises
    ------
    ValueError
        NaN or infinite records (naming ``x``), epsilon <= 0, delta out of range for the
        mechanism, an unknown mechanism.

    Privacy
    -------
    Neighbouring relation: add/remove one record (the count then has sensitivity 1; it also has
    sensitivity 0 under replace-one). ``"laplace"``: pure epsilon-DP with discrete Laplace noise
    of scale t = 1/epsilon rounded up to a double, so the loss is 1/t <= epsilon, exactly.
    ``"gaussian"``: (epsilon, delta)-DP with the smallest discrete Gaussian sigma whose exact
    delta at sensitivity 1 is <= delta. No bounds are needed. Charged: ``(epsilon, delta)``.

    Examples
    --------
    >>> from dpcore import stats
    >>> n = stats.count([3.0, 1.0, 4.0, 1.0, 5.0], epsilon=1.0, random_state=0)
    >>> isinstance(n, int)
    True
    """
    return _release("count", x, "stats.count", random_state, accountant, mechanism=mechanism,
                    epsilon=epsilon, delta=delta)


def sum(x: ArrayLike, *, bounds: ArrayLike | None = None, epsilon: float, delta: float | None = None,
        mechanism: str = "laplace", n: int | None = None, relation: str = "add_remove",
        random_state: RandomStateLike = None, accountant: AccountantLike | None = None) -> float:
    """Differentially private sum of records clipped to ``bounds``.

    Parameters
    ----------
    x : array_like of float
        The records (any shape; each element is one record). NaN and infinities are rejected.
    bounds : (float, float)
        Public (lower, upper), lower < upper. Required (None raises a ValueError naming
        ``bounds``), never inferred from the data. Records are clipped to it.
    epsilon : float
        Privacy parameter, > 0.
    delta : float, optional
        None (default) or 0 for ``mechanism="laplace"``; 0 < delta < 1 for ``mechanism="gaussian"``.
    mechanism : {"laplace", "gaussian"}, default="laplace"
        Exact discrete Laplace or exact discrete Gaussian noise (see Privacy).
    n : int, optional
        A public number of records (see :func:`mean`): the sum is then n c + the noisy sum of
        (x - c), c = (lower + upper)/2, whose sensitivity is half the width of the bounds.
    relation : {"add_remove", "replace"}, default="add_remove"
        See :func:`mean`.
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's process-wide cryptographically secure generator. Seeds are for
        tests and reproducibility only.
    accountant : dpcore.Accountant, optional
        Charged ``(epsilon, delta)`` before anything is drawn; if the budget would be overspent
        it raises ``BudgetExceeded`` and nothing is released.

    Returns
    -------
    float
        Default: gamma * (sum_i round(clip(x_i) / gamma) + Z): a multiple of the grid gamma (a
        power of two about 2**-36 of the noise scale), Z exact integer noise. Unbiased for the
        sum of the clipped records rounded to the grid (each record moves by <= gamma/2). With
        ``n`` (or ``relation="replace"``): n c + h (sum_i k_i + Z) / D, k_i = round(D (x_i -
        c) / h), h = (upper - lower)/2, D a power of two, clipped to [n lower, n upper].

    Raises
    ------
    ValueError
        Missing or invalid ``bounds``, NaN or infinite records (naming ``x``), epsilon <= 0,
        delta out of range for the mechanism, n < 1, an unknown relation, n with
        relation="replace".

    Privacy
    -------
    Default: neighbouring relation add/remove one record. Records are clipped to ``bounds``;
    one record then changes the sum by at most M = max(|lower|, |upper|). The sum is computed
    exactly: each clipped record is rounded to the grid gamma (a power of two, so the division
    is exact) and the integers are added without rounding, so in grid units the sensitivity is
    exactly D = max(|round(lower/gamma)|, |round(upper/gamma)|) <= M/gamma + 1/2, whatever the
    number of records (floating-point sums can exceed their nominal sensitivity; Casacuberta et
    al. 2022). ``"laplace"``: discrete Laplace noise with scale D/epsilon rounded up: pure
    epsilon-DP, exactly. ``"gaussian"``: discrete Gaussian with the exact CKS delta at
    (epsilon, D) <= delta: (epsilon, delta)-DP. The float output is post-processing of an
    integer. Under replace-one neighbours the sensitivity is upper - lower instead; this
    function is then (upper - lower) / M epsilon-DP (at most 2 epsilon).

    With ``n``: add/remove; each record adds an integer k with |k| <= D (its centred position
    in units of h / D), so the integer sum has sensitivity D: epsilon-DP (or (epsilon,
    delta)-DP) for data of any size, n being public and used only after the noise.
    With ``relation="replace"``: replace-one (the size N of the data is public under it); one
    replacement moves the integer sum by at most 2 D, and the noise is calibrated to 2 D.

    Charged: ``(epsilon, delta)``.

    References
    ----------
    .. [CSVW22] C. Casacuberta, M. Shoemate, S. Vadhan, C. Wagaman, "Widespread underestimation
       of sensitivity in differentially private libraries and how to fix it", CCS 2022.

    Examples
    --------
    >>> from dpcore import stats
    >>> s = stats.sum([0.5, 2.0, 7.5, 100.0], bounds=(0.0, 10.0), epsilon=1.0, random_state=0)
    >>> abs(s - 20.0) < 100        # 100.0 is clipped to 10.0; noise scale 10
    True
    """
    return _release("sum", x, "stats.sum", random_state, accountant, bounds=bounds,
                    mechanism=mechanism, epsilon=epsilon, delta=delta, n=n, relation=relation)


def mean(x: ArrayLike, *, bounds: ArrayLike | None = None, epsilon: float, delta: float | None = None,
         mechanism: str = "laplace", n: int | None = None, relation: str = "add_remove",
         random_state: RandomStateLike = None, accountant: AccountantLike | None = None) -> float:
    """Differentially private mean of records clipped to ``bounds``.

    n private (default, Laplace): one release of the pair (sum of (1 - z_i), sum of z_i),
    z_i = (x_i - lower) / (upper - lower), whose total is the count: the mean is
    lower + (upper - lower) * (second / total). With ``n``: the noisy centred sum / n.

    Parameters
    ----------
    x : array_like of float
        The records (any shape; each element is one record). NaN and infinities are rejected.
    bounds : (float, float)
        Public (lower, upper), lower < upper. Required (None raises a ValueError naming
        ``bounds``), never inferred from the data. Records are clipped to it.
    epsilon : float
        Privacy parameter, > 0 (the whole of it on one release; the Gaussian with n private
        splits it between a count and a sum).
    delta : float, optional
        None (default) or 0 for ``mechanism="laplace"``; 0 < delta < 1 for ``mechanism="gaussian"``.
    mechanism : {"laplace", "gaussian"}, default="laplace"
        Exact discrete Laplace or exact discrete Gaussian noise.
    n : int, optional
        A public number of records (>= 1), never computed from ``x``. None (default): n is
        private. Given: the release does not estimate n and spends the whole budget on the
        centred sum; n is used only after the noise (as the divisor), so the guarantee holds
        whatever the size of ``x``, and a wrong n only biases the answer (as OpenDP's
        ``resize`` does when it pads with the centre).
    relation : {"add_remove", "replace"}, default="add_remove"
        The neighbouring relation the noise is calibrated for. ``"replace"``: replace-one
        neighbours have the same size, so the size of ``x`` is public and is the divisor
        (``n`` must be None); the centred sum's sensitivity doubles.
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's process-wide cryptographically secure generator. Seeds are for
        tests and reproducibility only.
    accountant : dpcore.Accountant, optional
        Charged ``(epsilon, delta)`` before anything is drawn; if the budget would be overspent
        it raises ``BudgetExceeded`` and nothing is released.

    Returns
    -------
    float
        In [lower, upper]. Default: c + h (B1 - B0) / max(B0 + B1, D), c = (lower + upper)/2,
        h = (upper - lower)/2, B0 and B1 the noisy sums of D - b_i and b_i, b_i = round(D z_i)
        (``"gaussian"``: c + S / max(N, 1), noisy centred sum S and noisy count N). With ``n``
        or replace-one: c + h (sum_i k_i + Z) / (D n), k_i = round(D (x_i - c) / h). Clipped
        to the bounds (post-processing).

    Raises
    ------
    ValueError
        Missing or invalid ``bounds``, NaN or infinite records (naming ``x``), epsilon <= 0,
        delta out of range for the mechanism, n < 1, an unknown relation, n with
        relation="replace".

    Privacy
    -------
    Default: neighbouring relation add/remove one record; the number of records is private.
    Records are clipped to ``bounds``. ``"laplace"``: each record adds the non-negative
    integers (D - b, b), D a power of two about 2**36 epsilon, whose sum is exactly D, so the
    pair of exact integer sums has L1 sensitivity D and independent discrete Laplace noise of
    scale D/epsilon (rounded up) on each is pure epsilon-DP; the mean is post-processing. The
    pair carries both the count (B0 + B1 = D n) and the sum: this costs half the variance of
    releasing a count and a centred sum with half the budget each, at every mean, and its
    worst case equals that of an oracle that knows the data's mean (see the user guide).
    ``"gaussian"``: a count (sensitivity 1) and a centred sum (sensitivity (upper - lower)/2 on
    a power-of-two grid, exactly) with epsilon/2 and delta/2 each (shares rounded down), exact
    discrete Gaussian noise: (epsilon, delta)-DP by basic composition.

    With ``n``: add/remove; the integers k_i (|k_i| <= D) have an exact sum of sensitivity D:
    epsilon-DP for data of any size, n being public. With ``relation="replace"``: replace-one;
    one replacement moves that sum by at most 2 D, and the noise is calibrated to 2 D.
    Under replace-one, the add/remove releases are 2 epsilon-DP.

    Charged: ``(epsilon, delta)``, once.

    Notes
    -----
    First-order RMSE (n records, mean m, c and h as above, Laplace): n private
    2 sqrt(h**2 + (m - c)**2) / (epsilon n); ``n=``: sqrt(2) h / (epsilon n);
    replace-one: 2 sqrt(2) h / (epsilon n), which is also OpenDP's clamp-resize-mean-Laplace
    at the same epsilon (add/remove: its resize maps one added record to a replacement).

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore import stats
    >>> x = np.linspace(0.0, 10.0, 1001)
    >>> m = stats.mean(x, bounds=(0.0, 10.0), epsilon=1.0, random_state=0)
    >>> abs(m - 5.0) < 0.5
    True
    >>> m = stats.mean(x, bounds=(0.0, 10.0), epsilon=1.0, n=1001, random_state=0)
    >>> abs(m - 5.0) < 0.5
    True
    """
    return _release("mean", x, "stats.mean", random_state, accountant, bounds=bounds,
                    mechanism=mechanism, epsilon=epsilon, delta=delta, n=n, relation=relation)


def var(x: ArrayLike, *, bounds: ArrayLike | None = None, epsilon: float, ddof: int = 0,
        delta: float | None = None, mechanism: str = "laplace", n: int | None = None,
        relation: str = "add_remove", random_state: RandomStateLike = None,
        accountant: AccountantLike | None = None) -> float:
    """Differentially private variance of records clipped to ``bounds``.

    n private (default, Laplace): one release of the degree-2 Bernstein sums of
    z = (x - lower) / (upper - lower): sum (1 - z)**2, sum 2 z (1 - z), sum z**2 (their total is
    the count). With ``n``: the rotated pair of centred sums ((t**2 + t)/2, (t**2 - t)/2),
    t = (x - c) / h. With ``relation="replace"``: N times the sum of squared deviations.

    Parameters
    ----------
    x : array_like of float
        The records (any shape; each element is one record). NaN and infinities are rejected.
    bounds : (float, float)
        Public (lower, upper), lower < upper. Required (None raises a ValueError naming
        ``bounds``), never inferred from the data. Records are clipped to it.
    epsilon : float
        Privacy parameter, > 0 (the whole of it on one release; with the Gaussian it is split:
        thirds for n private, halves with ``n``).
    ddof : int, default=0
        As in numpy: the divisor is n - ddof (n the noisy, public or known count), at least 1.
    delta : float, optional
        None (default) or 0 for ``mechanism="laplace"``; 0 < delta < 1 for ``mechanism="gaussian"``.
    mechanism : {"laplace", "gaussian"}, default="laplace"
        Exact discrete Laplace or exact discrete Gaussian noise.
    n : int, optional
        A public number of records, used only after the noise; see :func:`mean`.
    relation : {"add_remove", "replace"}, default="add_remove"
        See :func:`mean`.
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's process-wide cryptographically secure generator. Seeds are for
        tests and reproducibility only.
    accountant : dpcore.Accountant, optional
        Charged ``(epsilon, delta)`` before anything is drawn; if the budget would be overspent
        it raises ``BudgetExceeded`` and nothing is released.

    Returns
    -------
    float
        The population variance of the clipped records times n / max(n - ddof, 1), estimated
        from the noisy sums and clipped to [0, ((upper - lower)/2)**2 n / max(n - ddof, 1)].

    Raises
    ------
    ValueError
        Missing or invalid ``bounds``, NaN or infinite records (naming ``x``), epsilon <= 0,
        delta out of range, ddof < 0, n < 1, an unknown relation, n with relation="replace".

    Privacy
    -------
    Default: neighbouring relation add/remove one record; the number of records is private.
    Records are clipped to ``bounds``. ``"laplace"``: each record adds three non-negative
    integers (the Bernstein weights D (1 - z)**2, 2 D z (1 - z), D z**2 rounded so that they
    add up to exactly D), so the three exact integer sums have L1 sensitivity D and discrete
    Laplace noise of scale D/epsilon on each is pure epsilon-DP; the variance is
    post-processing. ``"gaussian"``: a count and the centred sums of (x - c) and (x - c)**2
    (sensitivities 1, h and h**2 on power-of-two grids), epsilon/3 and delta/3 each, exact
    discrete Gaussian noise: (epsilon, delta)-DP by basic composition.

    With ``n``: add/remove; each record adds the integers (r, l), rounded from D (t**2 + t)/2
    and D (t**2 - t)/2 and shrunk so that |r| + |l| <= D (exactly |r| + |l| = D |t|), so the
    pair of sums has L1 sensitivity D: epsilon-DP for data of any size (``"gaussian"``: the
    sums of round(D t) and round(D t**2), sensitivity D each, halves of the budget). With
    ``relation="replace"``: replace-one, N = the size of ``x``; the integer T = N sum(k**2) -
    (sum k)**2, k = round(D t), is N times the sum of squared deviations, which one
    replacement moves by at most (N - 1)/N (2 D)**2; T (floored to a power-of-two unit G, one
    more unit of sensitivity) gets noise calibrated to (N - 1) (2 D)**2 / G + 1.
    Under replace-one, the add/remove releases are 2 epsilon-DP.

    Charged: ``(epsilon, delta)``, once.

    Notes
    -----
    First-order RMSE (Laplace, n records, z-mean m and z-variance v of the clipped records,
    W = upper - lower): n private W**2 sqrt(2 [(m**2 - v)**2 + (m**2 - m - v)**2 +
    ((1 - m)**2 - v)**2]) / (epsilon n), at most sqrt(2) W**2 / (epsilon n), which is OpenDP's
    clamp-resize-variance-Laplace RMSE with a public n; ``n=``: h**2 sqrt(2 (2 + 8 m_t**2)) /
    (epsilon n), m_t the mean of t; replace-one: 4 sqrt(2) h**2 / (epsilon n).

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore import stats
    >>> x = np.tile([0.0, 10.0], 500)                 # variance 25
    >>> v = stats.var(x, bounds=(0.0, 10.0), epsilon=1.0, random_state=0)
    >>> abs(v - 25.0) < 2.0
    True
    """
    return _release("var", x, "stats.var", random_state, accountant, bounds=bounds,
                    mechanism=mechanism, epsilon=epsilon, delta=delta, ddof=ddof, n=n,
                    relation=relation)


def std(x: ArrayLike, *, bounds: ArrayLike | None = None, epsilon: float, ddof: int = 0,
        delta: float | None = None, mechanism: str = "laplace", n: int | None = None,
        relation: str = "add_remove", random_state: RandomStateLike = None,
        accountant: AccountantLike | None = None) -> float:
    """Differentially private standard deviation: the square root of :func:`var`.

    Parameters
    ----------
    x : array_like of float
        The records (any shape; each element is one record). NaN and infinities are rejected.
    bounds : (float, float)
        Public (lower, upper), lower < upper. Required; records are clipped to it.
    epsilon : float
        Privacy parameter, > 0 (as in :func:`var`).
    ddof : int, default=0
        As in numpy.
    delta : float, optional
        None (default) or 0 for ``mechanism="laplace"``; 0 < delta < 1 for ``mechanism="gaussian"``.
    mechanism : {"laplace", "gaussian"}, default="laplace"
        Exact discrete Laplace or exact discrete Gaussian noise.
    n : int, optional
        A public number of records, used only after the noise; see :func:`mean`.
    relation : {"add_remove", "replace"}, default="add_remove"
        See :func:`mean`.
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's process-wide cryptographically secure generator. Seeds are for
        tests and reproducibility only.
    accountant : dpcore.Accountant, optional
        Charged ``(epsilon, delta)`` before anything is drawn; if the budget would be overspent
        it raises ``BudgetExceeded`` and nothing is released.

    Returns
    -------
    float
        sqrt of the private variance, in [0, (upper - lower)/2] for ddof=0.

    Raises
    ------
    ValueError
        As :func:`var`.

    Privacy
    -------
    Exactly that of :func:`var` (the square root is post-processing): add/remove neighbours by
    default (replace-one with ``relation="replace"``), records clipped to ``bounds``,
    epsilon-DP (``"laplace"``) or (epsilon, delta)-DP (``"gaussian"``). Charged:
    ``(epsilon, delta)``, once.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore import stats
    >>> s = stats.std(np.tile([0.0, 10.0], 500), bounds=(0.0, 10.0), epsilon=1.0, random_state=0)
    >>> abs(s - 5.0) < 0.5
    True
    """
    return math.sqrt(_release("var", x, "stats.std", random_state, accountant, bounds=bounds,
                              mechanism=mechanism, epsilon=epsilon, delta=delta, ddof=ddof, n=n,
                              relation=relation))
