"""The entries of an accountant's history and its exceptions."""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from dpcore.curves import PrivacyCurve

_ZERO = Fraction(0)
#: Relative amount by which a total may exceed the budget: the binary representation error of
#: decimal fractions such as 0.1, summed over up to ~10**4 charges (see Accountant).
BUDGET_TOLERANCE = Fraction(1, 2**40)


class PrivacyWarning(UserWarning):
    """A release reads something from the private data that its guarantee does not cover
    (e.g. a classifier's label set when ``classes`` is not given). The release still happens;
    give the public value the message names to get the stated guarantee."""


class BudgetExceeded(RuntimeError):
    """A charge would overspend the accountant's budget; nothing was charged.

    A subclass of ``RuntimeError`` rather than ``ValueError``: the charge's parameters are
    valid, it is refused because of the accountant's state (what was spent before), and code that
    catches ``ValueError`` for bad arguments should not silently swallow a refusal.

    Attributes
    ----------
    charge : Charge
        The refused charge (as it would have been recorded).
    spent : tuple of float
        (epsilon, delta) the history would total with the charge (epsilon may be ``inf`` when
        no valid analysis exists, e.g. a zCDP charge with no delta budget).
    budget : tuple of float
        The accountant's (epsilon, delta) budget.
    """

    def __init__(self, message: str, *, charge: Charge | None = None,
                 spent: tuple[float, float] | None = None,
                 budget: tuple[float, float] | None = None) -> None:
        super().__init__(message)
        self.charge = charge
        self.spent = spent
        self.budget = budget


@dataclass(frozen=True)
class Charge:
    """One entry of an accountant's history.

    Attributes
    ----------
    epsilon, delta : float or None
        The (epsilon, delta)-DP guarantee charged; None for a zCDP charge.
    rho : float or None
        The rho-zCDP guarantee charged; None for an (epsilon, delta) charge.
    label : str or None
        Free text naming the release.
    kind : {"single", "parallel", "repeated"}
        One release; the maximum over disjoint partitions (``count`` partitions, each the sum
        of its own charges); or ``count`` repetitions composed (basic or advanced, see
        ``composition``).
    count : int
        Number of partitions charged (parallel) or repetitions (repeated); 1 for a single
        release.
    composition : {"basic", "advanced"} or None
        For a repeated charge: which composition theorem gave its (epsilon, delta).
    rho_implied : float or None
        For charges that are pure DP release by release (delta = 0 for each release): the zCDP
        parameter they also satisfy, summed over repetitions and over the charges of one
        partition, max over partitions. Per release: epsilon**2 / 2, or the smaller bound its
        curve states (``curve.implied_rho()``, e.g. epsilon**2 / 8 for a bounded-range curve:
        the exponential mechanism, top-k). The zCDP analyses of every accountant may count the
        charge this way when it is tighter.
    curve : dpcore.curves.PrivacyCurve or None
        The release's privacy curve, when it stated one: accountants with ``method="rdp"`` or
        ``"pld"`` compose it instead of (epsilon, delta) or rho (which then hold the curve's
        plain guarantee, or are None when it has none).
    rho_from_curve : bool
        True when ``rho_implied`` counts at least one release at its curve's bound, below its
        epsilon**2 / 2.
    """

    epsilon: float | None
    delta: float | None
    rho: float | None
    label: str | None = None
    kind: str = "single"
    count: int = 1
    composition: str | None = None
    rho_implied: float | None = None
    curve: PrivacyCurve | None = None
    rho_from_curve: bool = False

    @property
    def is_zcdp(self) -> bool:
        return self.rho is not None

    def describe(self) -> str:
        """Short text naming what was charged (for messages)."""
        if self.rho is not None:
            what = f"rho={self.rho!r}"
        elif self.epsilon is not None:
            what = f"epsilon={self.epsilon!r}, delta={self.delta!r}"
        else:
            what = f"curve={self.curve!r}"
        return what + (f" ({self.label})" if self.label else "")


def implied_rho(epsilon: float | None, delta: float | None,
                curve: PrivacyCurve | None) -> tuple[Fraction | None, bool]:
    """(rho, from the curve) of one pure release, exactly: epsilon**2 / 2 (a pure epsilon-DP
    release is epsilon**2/2-zCDP, Bun-Steinke 2016, Prop. 1.4), or the curve's ``implied_rho``
    when smaller (True); (None, False) for a release that is not pure (delta > 0, or rho)."""
    if epsilon is None or delta != 0.0:
        return None, False
    rho = Fraction(epsilon) ** 2 / 2
    if curve is not None:
        bound = curve.implied_rho()
        if bound is not None and Fraction(bound) < rho:
            return Fraction(bound), True
    return rho, False
