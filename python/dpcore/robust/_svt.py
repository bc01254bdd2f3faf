"""The sparse vector technique (Lyu, Su, Li 2017): report which query answers over a stream are
above a threshold, paying only for the positives."""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from dpcore import _validation as check
from dpcore._floats import pow2_floor as _pow2_floor
from dpcore._floats import round_down as _round_down
from dpcore._floats import round_up as _round_up
from dpcore._release import Cost, release
from dpcore._smooth import MAX_SMOOTH_EPSILON
from dpcore.mechanisms import MAX_DISCRETE_LAPLACE_SCALE, discrete_laplace

if TYPE_CHECKING:
    from dpcore.accounting import AccountantLike
    from dpcore.random import RandomStateLike

__all__ = ["sparse_vector", "above_threshold", "SparseVectorPlan"]


@dataclass(frozen=True)
class SparseVectorPlan:
    """Calibration of :func:`sparse_vector` (public values only).

    Attributes
    ----------
    epsilon, epsilon1, epsilon2 : float
        Total; threshold share epsilon / (1 + (2c)**(2/3)) rounded down; queries' share
        epsilon - epsilon1 rounded down (Lyu, Su, Li's allocation).
    max_positives : int
        c.
    grid : float
        Power of two; query answers and the threshold are rounded to it (integers below).
    sensitivity_units : int
        D = floor(sensitivity / grid) + 1: the largest change of a rounded answer.
    threshold_scale, query_scale : float
        Discrete Laplace scales t1 = D / epsilon1 and t2 = 2 c D / epsilon2, rounded up.
    """

    epsilon: float
    epsilon1: float
    epsilon2: float
    max_positives: int
    grid: float
    sensitivity_units: int
    threshold_scale: float
    query_scale: float

    @classmethod
    def calibrate(cls, *, epsilon: float, max_positives: int, sensitivity: float = 1.0,
                  granularity: float | None = None) -> SparseVectorPlan:
        epsilon = check.epsilon(epsilon)
        if epsilon > MAX_SMOOTH_EPSILON:
            raise ValueError(f"epsilon must be <= 2**10, got {epsilon!r}")
        c = check.integer(max_positives, "max_positives", minimum=1, maximum=2**20)
        sensitivity = check.positive(sensitivity, "sensitivity")
        if granularity is None:
            grid = _pow2_floor(sensitivity * 2.0**-20)
        else:
            grid = check.positive(granularity, "granularity")
            if _pow2_floor(grid) != grid:
                raise ValueError(f"granularity must be a power of two, got {grid!r}")
        units = Fraction(sensitivity) / Fraction(grid)
        if units > 2**40:
            raise ValueError("granularity is too fine for this sensitivity (more than 2**40 "
                             "grid units)")
        d = math.floor(units) + 1
        eps1 = _round_down(Fraction(epsilon) / (1 + (2 * c) ** (2 / 3)))
        eps2 = _round_down(Fraction(epsilon) - Fraction(eps1))
        t1 = _round_up(Fraction(d) / Fraction(eps1))
        t2 = _round_up(Fraction(2 * c * d) / Fraction(eps2))
        if max(t1, t2) > MAX_DISCRETE_LAPLACE_SCALE:
            raise ValueError("epsilon is too small for max_positives and the granularity: the "
                             "noise scale exceeds the exact sampler's range; pass a coarser "
                             "granularity")
        return cls(epsilon, eps1, eps2, c, grid, d, t1, t2)

    def units(self, value: object, name: str) -> int:
        """A query answer (or the threshold) in grid units: rint(value / grid), exactly (in
        rationals: no overflow for huge answers)."""
        value = check.real(value, name)
        return round(Fraction(value) / Fraction(self.grid))  # half to even, as rint


def sparse_vector(queries: Any, threshold: float, *, epsilon: float, max_positives: int,
                  sensitivity: float = 1.0, granularity: float | None = None,
                  random_state: RandomStateLike = None,
                  accountant: AccountantLike | None = None) -> np.ndarray:
    """Report which query answers are above a threshold, paying only for the positives.

    The sparse vector technique in the variant of Lyu, Su and Li (2017, Algorithm 1): one noisy
    threshold T + rho for the whole run, fresh noise nu_i for each query, output
    ``q_i + nu_i >= T + rho`` for each query in turn, and stop after ``max_positives`` True
    answers (or when ``queries`` ends). Nothing else is released: not the noisy values, not the
    answers. Works on a stream: the next answer is read only when needed.

    Parameters
    ----------
    queries : iterable of float
        The query answers q_1, q_2, ... on the private data, each of sensitivity
        ``sensitivity``; a list or array is checked entirely before the charge, an iterator
        (a stream) item by item.
    threshold : float
        Public threshold T.
    epsilon : float
        Total privacy parameter, 0 < epsilon <= 2**10.
    max_positives : int
        c >= 1: the run stops after c True answers.
    sensitivity : float, default=1.0
        Public bound on how much each query answer can change between neighbours, > 0.
    granularity : float, optional
        Power of two the answers and the threshold are rounded to (default: the largest power of
        two <= sensitivity * 2**-20).
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's cryptographically secure generator. Seeds are for tests only.
    accountant : dpcore.Accountant, optional
        Charged ``epsilon`` once, after the arguments (and a finite list of answers) are
        validated and before any noise is drawn.

    Returns
    -------
    ndarray of bool
        One entry per query read: True for "above". Its length is where the run stopped.

    Raises
    ------
    ValueError, TypeError
        Invalid epsilon, max_positives, sensitivity, granularity, threshold, or (for a list or
        array) a non-finite answer, before the charge. A non-finite answer from an iterator
        raises when it is reached, after the charge (the answers so far are not returned).

    Privacy
    -------
    Pure epsilon-DP for the whole run, under the neighbouring relation ``sensitivity`` was
    derived for (add/remove or replace-one): every answer changes by at most ``sensitivity``
    between neighbours, whatever the other answers; the queries may be chosen adaptively.
    Answers and threshold are rounded to the grid, so a rounded answer moves by at most
    D = floor(sensitivity / grid) + 1 units. The noises are exact discrete Laplace:
    rho ~ DLap(D / epsilon1), nu_i ~ DLap(2 c D / epsilon2), epsilon1 = epsilon /
    (1 + (2c)**(2/3)) and epsilon2 = epsilon - epsilon1 (shares rounded down, scales up). Lyu
    et al.'s proof shifts rho by D (a below-threshold answer stays below) and each positive's
    nu_i by 2D (it stays above), which holds verbatim for integer shifts of the discrete
    Laplace: epsilon1 + epsilon2 <= epsilon. The comparisons are exact integer comparisons, so
    floating point plays no part. (Variants that also add noise to the count, reuse rho after a
    positive without it, or release the noisy answers are not private; this is not one.)
    Charged: ``epsilon``, once, also when the run stops early.

    References
    ----------
    .. [LSL17] M. Lyu, D. Su, N. Li, "Understanding the sparse vector technique for
       differential privacy", PVLDB 2017.
    .. [DR14] C. Dwork, A. Roth, "The algorithmic foundations of differential privacy", 2014,
       Section 3.6.

    Examples
    --------
    >>> from dpcore import robust
    >>> out = robust.sparse_vector([1.0, 2.0, 500.0, 3.0, 800.0], 100.0, epsilon=1.0,
    ...                            max_positives=1, random_state=0)
    >>> out.tolist()
    [False, False, True]
    """
    plan = SparseVectorPlan.calibrate(epsilon=epsilon, max_positives=max_positives,
                                      sensitivity=sensitivity, granularity=granularity)
    t_units = plan.units(threshold, "threshold")
    if isinstance(queries, (str, bytes)) or not hasattr(queries, "__iter__"):
        raise TypeError(f"queries must be an iterable of numbers, got {type(queries).__name__}")
    if isinstance(queries, (list, tuple, np.ndarray)):
        answers = check.finite_array(queries, "queries")
        if answers.ndim != 1:
            raise ValueError(f"queries must be one-dimensional, got {answers.ndim} dimensions")
        queries = answers.tolist()

    def draw(rng):
        noisy_threshold = t_units + int(discrete_laplace(plan.threshold_scale, random_state=rng))
        out = []
        positives = 0
        for q in queries:
            if not (isinstance(q, (int, float, np.integer, np.floating)) and math.isfinite(q)):
                raise ValueError("queries must be finite numbers (the budget of this run was "
                                 "charged)")
            nu = int(discrete_laplace(plan.query_scale, random_state=rng))
            above = plan.units(q, "queries") + nu >= noisy_threshold
            out.append(above)
            positives += above
            if positives >= plan.max_positives:
                break  # stop reading the stream
        return np.array(out, dtype=bool)

    return release(draw, cost=Cost(plan.epsilon), accountant=accountant, random_state=random_state,
                   label="robust.sparse_vector")


def above_threshold(queries: Any, threshold: float, *, epsilon: float, sensitivity: float = 1.0,
                    granularity: float | None = None, random_state: RandomStateLike = None,
                    accountant: AccountantLike | None = None) -> np.ndarray:
    """:func:`sparse_vector` with ``max_positives=1``: read queries until the first one found
    above the threshold.

    Parameters
    ----------
    queries, threshold, epsilon, sensitivity, granularity, random_state, accountant
        As in :func:`sparse_vector`.

    Returns
    -------
    ndarray of bool
        False for every query read but the last, which is True if one was found above.

    Privacy
    -------
    As :func:`sparse_vector` with c = 1: pure epsilon-DP under the neighbouring relation the
    sensitivity was derived for (add/remove or replace-one): rho ~ DLap(D / epsilon1),
    nu_i ~ DLap(2 D / epsilon2), epsilon1 = epsilon / (1 + 2**(2/3)). Charged: ``epsilon``, once.

    Examples
    --------
    >>> from dpcore import robust
    >>> robust.above_threshold([3.0, 900.0], 100.0, epsilon=1.0, random_state=0).tolist()
    [False, True]
    """
    return sparse_vector(queries, threshold, epsilon=epsilon, max_positives=1,
                         sensitivity=sensitivity, granularity=granularity,
                         random_state=random_state, accountant=accountant)
