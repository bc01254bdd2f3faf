"""Advanced composition (Dwork-Rothblum-Vadhan 2010) of k adaptively chosen (epsilon, delta)-DP
releases.

Privacy
-------
Arithmetic on public parameters only: releases nothing, spends no budget.
"""
from __future__ import annotations

import math
from fractions import Fraction

from dpcore import _validation as check
from dpcore._floats import round_up as _round_up
from dpcore.calibration._common import _inflate

__all__ = ["advanced_composition"]


def advanced_composition(epsilon: float, delta: float, k: int, delta_prime: float
                         ) -> tuple[float, float]:
    """Advanced composition of k adaptively chosen (eps, delta)-DP mechanisms (DRV 2010).

    Parameters
    ----------
    epsilon : float
        Per-mechanism epsilon, >= 0.
    delta : float
        Per-mechanism delta, 0 <= delta < 1.
    k : int
        Number of mechanisms, >= 1.
    delta_prime : float
        Extra failure probability of the composition, 0 < delta_prime < 1.

    Returns
    -------
    (float, float)
        (eps sqrt(2 k ln(1/delta')) + k eps (e^eps - 1), k delta + delta'), both rounded up
        (delta capped at 1). Basic composition, (k eps, k delta), may be smaller for few or large
        epsilons; the accountant takes the better one.

    Examples
    --------
    >>> from dpcore import calibration
    >>> eps, delta = calibration.advanced_composition(0.1, 0.0, 100, 1e-6)
    >>> round(eps, 3), delta
    (6.308, 1e-06)
    """
    epsilon = check.nonnegative(epsilon, "epsilon")
    delta = check.probability(delta, "delta", open_low=False)
    k = check.integer(k, "k", minimum=1)
    delta_prime = check.probability(delta_prime, "delta_prime")
    eps_total = epsilon * math.sqrt(2.0 * k * math.log(1.0 / delta_prime)) + k * epsilon * math.expm1(epsilon)
    delta_total = min(1.0, _round_up(k * Fraction(delta) + Fraction(delta_prime)))
    return (_inflate(eps_total) if eps_total > 0 else 0.0), delta_total
