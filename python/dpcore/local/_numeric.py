"""Numeric values: Duchi et al.'s one-bit randomizer for values in [-1, 1] and the mean
estimate decoded from its reports ([DJW13]; see the :mod:`dpcore.local` docstring for the exact
laws and the accounting rule).
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

import dpcore._local as _local  # compiled kernel (no stub: mypy treats it as Any)
from dpcore import _validation as check
from dpcore._floats import round_up
from dpcore._release import Cost
from dpcore.accounting import AccountantLike
from dpcore.local._epsilon import (
    LOCAL_RELATION,
    _check_epsilon,
    _e_lower,
    _nominal_label,
    _ratio_epsilon,
)
from dpcore.plans import Plan
from dpcore.random import RandomStateLike

__all__ = ["duchi", "estimate_mean", "DuchiMechanism", "MeanEstimate"]


@dataclass(frozen=True)
class DuchiMechanism(Plan):
    """Calibration of Duchi et al.'s one-dimensional randomizer.

    A :class:`dpcore.plans.Plan`: ``cost`` is ``epsilon_effective`` (see the :mod:`dpcore.local`
    accounting rule), known from the calibration alone, under ``relation`` (one user's value
    replaced); ``release(values)`` privatises one value in [-1, 1] per user (:func:`duchi`).

    Attributes
    ----------
    epsilon : float
        Requested local epsilon.
    bound : float
        B: every report is +B or -B (a double), B >= (e^epsilon + 1) / (e^epsilon - 1).
    keep : fractions.Fraction
        (B + 1) / (2 B): the probability that the randomized-response step keeps the sign.
    epsilon_effective : float
        log((B + 1) / (B - 1)), the exact privacy loss, rounded up (a double proven >= it),
        <= epsilon: what a release charges.
    relation : str
        The local model's neighbouring relation: one user's value replaced by any other.
    """

    epsilon: float
    bound: float
    keep: Fraction
    epsilon_effective: float
    relation: str = LOCAL_RELATION

    @classmethod
    def calibrate(cls, epsilon: float) -> DuchiMechanism:
        """Validate epsilon and compute B (rounded up to a double) and the exact keep law."""
        epsilon = _check_epsilon(epsilon)
        return _duchi(epsilon)

    def probability_plus(self, x: float) -> Fraction:
        """P(report = +B | x) = (1 + x / B) / 2, exactly (as a Fraction) for a double x."""
        return (1 + Fraction(x) / Fraction(self.bound)) / 2

    @property
    def label(self) -> str:
        """``"local.duchi(epsilon=...)"``: the nominal epsilon (the cost is the effective one)."""
        return _nominal_label("local.duchi", self.epsilon)

    @property
    def cost(self) -> Cost:
        """What a release charges: ``epsilon_effective``, pure (<= the requested epsilon). An
        empty input is charged nothing."""
        return Cost(epsilon=self.epsilon_effective)

    def release(self, data: Any, *, accountant: AccountantLike | None = None,
                random_state: RandomStateLike = None) -> Any:
        """Privatise ``data`` (one value in [-1, 1] per user), charging :attr:`cost` once (a bad
        value raises before the charge; an empty input charges nothing); see :func:`duchi`."""
        shape, flat = self._prepare(data)
        if flat.size == 0:
            return flat.reshape(shape).copy()
        return self._release_prepared((shape, flat), accountant=accountant,
                                      random_state=random_state)

    def _prepare(self, data: Any) -> tuple[tuple[int, ...], np.ndarray]:
        x = check.finite_array(data, "values")
        if x.ndim > 1:
            raise ValueError(f"values must be one-dimensional (one value per user), got {x.ndim} dimensions")
        if x.size and (x.min() < -1.0 or x.max() > 1.0):
            raise ValueError("values must lie in [-1, 1] (rescale the public range first); some value is outside")
        return x.shape, np.ascontiguousarray(x.reshape(-1))

    def _draw(self, prepared: tuple[tuple[int, ...], np.ndarray], rng: np.random.Generator
              ) -> Any:
        shape, flat = prepared
        signs = np.empty(flat.size, dtype=np.int8)
        _local.duchi_into(signs, flat, self.keep.numerator, self.keep.denominator, rng)
        out = np.where(signs > 0, self.bound, -self.bound).reshape(shape)
        return out[()] if len(shape) == 0 else out


@lru_cache(maxsize=64)
def _duchi(epsilon: float) -> DuchiMechanism:
    lower = _e_lower(epsilon)
    bound = round_up((lower + 1) / (lower - 1))
    b = Fraction(bound)
    keep = (b + 1) / (2 * b)
    ratio = (b + 1) / (b - 1)
    if not (1 < bound < 2.0**52 and keep.denominator < 2**64):  # unreachable: B <= ~2 / 2**-24
        raise ValueError(f"epsilon={epsilon!r} is outside the range the one-bit mechanism supports")
    return DuchiMechanism(epsilon, bound, keep, _ratio_epsilon(ratio, epsilon))


def duchi(values: ArrayLike, *, epsilon: float, random_state: RandomStateLike = None,
          accountant: AccountantLike | None = None) -> np.ndarray:
    """Privatise one value in [-1, 1] per user with Duchi et al.'s one-bit mechanism.

    Each user reports +B with probability (1 + x / B) / 2 and -B otherwise, where
    B ~ (e^epsilon + 1) / (e^epsilon - 1); the report is an unbiased estimate of x.

    Parameters
    ----------
    values : array_like of float, shape (n,) or scalar
        One value per user in [-1, 1] (rescale your public range to it first). NaN,
        infinities and values outside [-1, 1] are an error (never clipped silently).
    epsilon : float
        Local epsilon, 2**-24 <= epsilon <= 2**40.
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's cryptographically secure generator. Seeds are for tests only.
    accountant : dpcore.Accountant, optional
        Charged the effective epsilon (<= ``epsilon``) once before anything is drawn.

    Returns
    -------
    ndarray of float or float
        Reports in {-B, +B} (B = ``DuchiMechanism.calibrate(epsilon).bound``), same shape.

    Raises
    ------
    ValueError
        Values outside [-1, 1] or not finite; more than one dimension; epsilon out of range.
    TypeError
        Non-numeric values or parameters.

    Privacy
    -------
    epsilon-LDP per user: for any two values x, x' in [-1, 1] of one user, P(y | x) <=
    e^epsilon P(y | x') for y = +-B; the worst ratio is (B + 1) / (B - 1). B is a double
    rounded up from (L + 1) / (L - 1), L a rational lower bound of e^epsilon, so the ratio is
    at most L <= e^epsilon. The law drawn is exactly P(+B | x) = (1 + x / B) / 2: a sign s
    with P(s = +1) = (1 + x) / 2 (a full-precision uniform compared with the double |x|,
    exact) followed by randomized response keeping s with probability (B + 1) / (2 B)
    (an exact integer ratio). Outputs are the two public doubles +-B: no low-order bits. If
    an accountant is given it is charged ``epsilon_effective`` (<= epsilon, see the
    :mod:`dpcore.local` accounting rule) once.

    References
    ----------
    .. [DJW13] J. C. Duchi, M. I. Jordan, M. J. Wainwright, FOCS 2013; JASA 2018.

    Examples
    --------
    >>> from dpcore import local
    >>> y = local.duchi([0.5, -1.0, 0.0], epsilon=1.0, random_state=0)
    >>> B = local.DuchiMechanism.calibrate(1.0).bound
    >>> bool(((y == B) | (y == -B)).all())
    True
    """
    return DuchiMechanism.calibrate(epsilon).release(values, accountant=accountant,
                                                     random_state=random_state)


@dataclass(frozen=True)
class MeanEstimate:
    """The mean of Duchi reports.

    Attributes
    ----------
    mean : float
        Unbiased estimate of the users' mean.
    variance_bound : float
        B**2 / n, an upper bound on the estimate's variance (the exact variance is
        (B**2 - mean of x**2) / n).
    n : int
    """

    mean: float
    variance_bound: float
    n: int


def estimate_mean(reports: ArrayLike, *, epsilon: float) -> MeanEstimate:
    """Unbiased estimate of the mean from :func:`duchi` reports (post-processing).

    Parameters
    ----------
    reports : array_like of float, shape (n,)
        The reports, each exactly +B or -B for this epsilon.
    epsilon : float
        The epsilon the reports were privatised with.

    Returns
    -------
    MeanEstimate

    Raises
    ------
    ValueError
        Empty reports or entries other than +-B.

    Privacy
    -------
    Post-processing of the reports only: no privacy cost, nothing charged.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore import local
    >>> y = local.duchi(np.full(20000, 0.3), epsilon=2.0, random_state=0)
    >>> est = local.estimate_mean(y, epsilon=2.0)
    >>> bool(abs(est.mean - 0.3) < 5 * est.variance_bound ** 0.5)
    True
    """
    mech = DuchiMechanism.calibrate(epsilon)
    y = check.finite_array(reports, "reports").reshape(-1)
    if y.size == 0:
        raise ValueError("reports is empty")
    plus = y == mech.bound
    if not np.all(plus | (y == -mech.bound)):
        raise ValueError("reports must be the +-B outputs of duchi() for this epsilon")
    n = int(y.size)
    n_plus = int(np.count_nonzero(plus))
    mean = float(Fraction(mech.bound) * (2 * n_plus - n) / n)
    return MeanEstimate(mean, mech.bound**2 / n, n)
