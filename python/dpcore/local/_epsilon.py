"""The local epsilon: its range check and exact rational lower bounds of e^epsilon.

Every law of the frequency oracles (:mod:`dpcore.local._frequency`) and of Duchi's mechanism
(:mod:`dpcore.local._numeric`) is calibrated against a rigorous rational lower bound L <=
e^epsilon computed here, so the likelihood ratio the kernels draw never exceeds e^epsilon (see
the :mod:`dpcore.local` docstring).

Privacy
-------
Exact lower bounds of e^epsilon and the epsilon check of the local randomizers: arithmetic on
public values only, releases nothing, spends no budget.
"""
from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

from dpcore import _validation as check

#: The neighbouring relation of the local randomizers' plans: one user's input replaced by any
#: other (the local model's guarantee holds per user, whatever the other users hold).
LOCAL_RELATION = "one user's value replaced (local DP)"

#: Smallest local epsilon accepted: below it the 64-bit thresholds cannot separate the laws.
MIN_EPSILON = 2.0**-24

# e^90 > 2**128 exceeds every likelihood ratio the 64-bit thresholds can express, so epsilon is
# capped there for the calibration (a lower bound of e^90 is a lower bound of e^epsilon).
_EXP_CAP = Fraction(90)
_EXP_BITS = 192  # working precision of the lower bound of e^x


@lru_cache(maxsize=256)
def _exp_lower(x: Fraction) -> Fraction:
    """A rational L with L <= e^x (x >= 0 rational), within a relative 2**-170 for x <= 90.

    e^x = (e^y)^(2**s) with y = x / 2**s <= 1/2. The Taylor polynomial of e^y has positive
    terms, so truncating it gives a lower bound; every rounding (to a multiple of
    2**-_EXP_BITS) rounds down, and squaring a lower bound of a positive number gives a lower
    bound of its square.
    """
    s = 0
    while x > Fraction(1, 2) * 2**s:
        s += 1
    y = x / 2**s
    term = Fraction(1)
    total = Fraction(1)
    for j in range(1, 40):  # remainder < 2**-190 for y <= 1/2
        term = term * y / j
        total += term
    scale = 2**_EXP_BITS
    t = total.numerator * scale // total.denominator
    for _ in range(s):
        t = t * t // scale
    return Fraction(t, scale)


def _check_epsilon(epsilon):
    return check.epsilon(epsilon, minimum=MIN_EPSILON)  # the exact e^epsilon bounds need it


def _e_lower(epsilon):
    return _exp_lower(min(Fraction(epsilon), _EXP_CAP))


def _ratio_epsilon(ratio: Fraction, epsilon: float) -> float:
    """The effective local epsilon: a double proven >= log(ratio), the exact privacy loss of a
    law whose largest likelihood ratio is the rational ``ratio`` > 1, and at most ``epsilon``.

    x is proven when a rational lower bound of e^x (``_exp_lower``) is >= ratio; the first
    double tried is log1p(ratio - 1) as a float (within a few ulps), then the next ones up.
    ``epsilon`` itself is proven by every calibration (ratio <= a lower bound of e^epsilon),
    so it caps the answer.
    """
    x = math.log1p(float(ratio - 1))
    for _ in range(64):  # a few steps at most: the float estimate is within a few ulps
        if x >= epsilon:
            return epsilon
        if x > 0 and _exp_lower(Fraction(x)) >= ratio:
            return x
        x = math.nextafter(x, math.inf)
    return epsilon  # unreachable; still sound (see above)


def _nominal_label(release: str, epsilon: float) -> str:
    """A local randomizer's label: its name and the requested (nominal) epsilon, the cost
    charged being the effective epsilon (at most the nominal)."""
    return f"{release}(epsilon={epsilon!r})"
