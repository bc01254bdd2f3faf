"""The composition analyses an accountant runs over its history.

Each analysis is an immutable state (``add`` returns a new one, so a refused charge changes
nothing) that evaluates to the (epsilon, delta) the history totals at the budget's delta, or
None when it has no valid answer. The accountant reports the smallest over its analyses: each
is valid for the same releases, and which one wins depends only on public parameters.

* :class:`ZcdpComposition`: (epsilon, delta) charges summed (basic composition), rho summed and
  converted once (tight conversion), pure charges optionally counted as zCDP (eps**2/2, or
  their curve's smaller bound: eps**2/8 when bounded-range). Exact rational sums.
* :class:`RdpComposition`: Rényi-DP curves summed order by order, converted with the improved
  conversion; charges with no RDP bound (delta > 0) summed as (epsilon, delta) beside.
* :class:`PldComposition`: privacy-loss distributions composed by FFT; charges with no
  dominating pair (zCDP, the discrete Gaussian) composed in RDP and joined by splitting delta.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, cast

import numpy as np

from dpcore import calibration
from dpcore.curves import (ApproxDP, PureDP, ZCDP, epsilon_from_rdp, gaussian_pld)
from dpcore._floats import round_down as _down, round_up as _up

if TYPE_CHECKING:
    from dpcore.accounting._entries import Charge
    from dpcore.curves import PrivacyCurve, PrivacyLossDistribution

_ZERO = Fraction(0)


@dataclass(frozen=True)
class Spent:
    """What an analysis found: the total (epsilon, delta) as exact rationals, its rho (the
    zCDP total of the zcdp analysis; None for the others), and how many charges it counted at
    their curve's zCDP bound (``Charge.rho_from_curve``)."""

    analysis: str
    epsilon: Fraction
    delta: Fraction
    rho: Fraction | None
    from_curves: int = 0


def curve_of(entry: Charge) -> PrivacyCurve:
    """The curve an entry composes as: its own, else its (epsilon, delta) or rho."""
    if entry.curve is not None:
        return entry.curve
    if entry.rho is not None:
        return ZCDP(entry.rho)
    epsilon = cast(float, entry.epsilon)  # a charge holds a curve, a rho or an epsilon
    if entry.delta == 0.0:
        return PureDP(epsilon)
    return ApproxDP(epsilon, cast(float, entry.delta))


# ---------------------------------------------------------------------------------------------
# zCDP and basic composition (the default analysis)


@dataclass(frozen=True)
class _Sums:
    """Exact totals over the history (Fractions)."""

    eps: Fraction = _ZERO  # sum of epsilon over (epsilon, delta) charges
    delta: Fraction = _ZERO
    rho: Fraction = _ZERO  # sum of rho over zCDP charges
    conv_eps: Fraction = _ZERO  # the part of eps/delta/rho_implied from pure-DP charges
    conv_delta: Fraction = _ZERO
    conv_rho: Fraction = _ZERO
    opaque: int = 0  # charges with a curve only (no plain guarantee): this analysis cannot count them
    # the part of conv_* from the charges counted at their curve's bound (rho_from_curve)
    curve_eps: Fraction = _ZERO
    curve_delta: Fraction = _ZERO
    curve_rho: Fraction = _ZERO
    curves: int = 0

    def add(self, c, sign: int = 1) -> _Sums:
        eps, delta, rho = self.eps, self.delta, self.rho
        ce, cd, cr = self.conv_eps, self.conv_delta, self.conv_rho
        ke, kd, kr, curves = self.curve_eps, self.curve_delta, self.curve_rho, self.curves
        opaque = self.opaque
        if c.rho is not None:
            rho += sign * Fraction(c.rho)
        elif c.epsilon is None:
            opaque += sign
        else:
            c_eps, c_delta = Fraction(cast(float, c.epsilon)), Fraction(cast(float, c.delta))
            eps += sign * c_eps
            delta += sign * c_delta
            if c.rho_implied is not None:
                c_rho = Fraction(c.rho_implied)
                ce, cd, cr = ce + sign * c_eps, cd + sign * c_delta, cr + sign * c_rho
                if c.rho_from_curve:
                    ke, kd, kr = ke + sign * c_eps, kd + sign * c_delta, kr + sign * c_rho
                    curves += sign
        return _Sums(eps, delta, rho, ce, cd, cr, opaque, ke, kd, kr, curves)


class ZcdpComposition:
    """Basic composition of (epsilon, delta) charges plus zCDP for rho (see the module)."""

    def __init__(self, sums: _Sums = _Sums()) -> None:
        self.sums = sums

    def add(self, entry: Charge) -> ZcdpComposition:
        return ZcdpComposition(self.sums.add(entry))

    def replace(self, old: Charge, new: Charge, entries: list[Charge]) -> ZcdpComposition:
        return ZcdpComposition(self.sums.add(new).add(old, sign=-1))

    @staticmethod
    def _analysis(name, eps, delta, rho, budget_delta, from_curves=0):
        if rho == 0:
            return Spent(name, eps, delta, rho, from_curves)
        room = _down(budget_delta - delta)
        if not room > 0.0:
            return None
        eps_rho = calibration.zcdp_epsilon(_up(rho), room)
        # delta + room <= the delta budget; report the budget (an upper bound, and what the
        # analysis is entitled to use) rather than a value an ulp below it.
        return Spent(name, eps + Fraction(eps_rho), budget_delta, rho, from_curves)

    def evaluate(self, budget_delta: Fraction) -> Spent | None:
        """The best of three partitions of the pure charges (each valid for the same releases,
        chosen on public parameters only): all summed as epsilon ("basic"); all moved into
        zCDP at their rho_implied ("pure-as-zcdp"); only those whose rho_implied comes from
        their curve moved, the other pure charges summed ("curves-as-zcdp": e.g. exponential
        mechanisms at eps**2/8 beside one large Laplace release, which eps**2/2 would count
        worse than its epsilon)."""
        sums = self.sums
        if sums.opaque:
            return None
        options = [self._analysis("basic", sums.eps, sums.delta, sums.rho, budget_delta)]
        if sums.conv_rho > 0 and budget_delta > 0:
            options.append(self._analysis(
                "pure-as-zcdp", sums.eps - sums.conv_eps, sums.delta - sums.conv_delta,
                sums.rho + sums.conv_rho, budget_delta, sums.curves,
            ))
            if sums.curves and (sums.curve_eps, sums.curve_rho) != (sums.conv_eps, sums.conv_rho):
                options.append(self._analysis(
                    "curves-as-zcdp", sums.eps - sums.curve_eps, sums.delta - sums.curve_delta,
                    sums.rho + sums.curve_rho, budget_delta, sums.curves,
                ))
        found = [o for o in options if o is not None]
        return min(found, key=lambda o: (o.epsilon, o.delta)) if found else None

    def why_none(self, budget_delta: Fraction) -> str:
        """Why :meth:`evaluate` found nothing (for the refusal message)."""
        if self.sums.opaque:
            return "a charge with a curve only needs method='rdp' or 'pld'"
        if budget_delta > self.sums.delta:
            return "zCDP charges need a delta budget left for the conversion to (epsilon, delta)"
        return "the delta budget is exhausted"


# ---------------------------------------------------------------------------------------------
# Rényi DP


def _add_up(a, b):
    """a + b rounded up (each sum is at most half an ulp off: one step up covers it)."""
    return np.nextafter(a + b, np.inf)


class _CurveCache:
    """RDP arrays and PLDs of the curves seen, shared by the states of one accountant."""

    def __init__(self, orders, interval):
        self.orders = orders
        self.interval = interval
        self._rdp = {}

    def rdp(self, curve):
        key = curve
        if key not in self._rdp:
            if len(self._rdp) > 4096:
                self._rdp.clear()
            values = np.asarray(curve.rdp(self.orders), dtype=np.float64)
            self._rdp[key] = np.where(np.isnan(values), np.inf, values)
        return self._rdp[key]


@dataclass(frozen=True)
class _RdpState:
    rdp_other: np.ndarray  # RDP summed over the charges that are not plain pure DP
    rdp_pure: np.ndarray  # RDP summed over the plain pure-DP charges
    basic_eps: Fraction = _ZERO  # charges with no RDP bound, composed by summation
    basic_delta: Fraction = _ZERO
    pure_eps: Fraction = _ZERO  # epsilon of the plain pure-DP charges
    opaque: int = 0  # charges with neither an RDP bound nor an (epsilon, delta)


class RdpComposition:
    """RDP of every charge that has one, summed per order; the others by basic composition;
    delta to the conversion (see the module). Two ways are tried: pure-DP charges in the RDP sum,
    or summed as epsilon beside it."""

    name = "rdp"

    def __init__(self, cache: _CurveCache, state: _RdpState | None = None) -> None:
        self.cache = cache
        zeros = np.zeros(cache.orders.size)
        self.state = state or _RdpState(zeros, zeros)

    def add(self, entry: Charge) -> RdpComposition:
        s = self.state
        values = self.cache.rdp(curve_of(entry))
        if np.all(np.isinf(values)):
            if entry.epsilon is None:
                return RdpComposition(self.cache, _RdpState(
                    s.rdp_other, s.rdp_pure, s.basic_eps, s.basic_delta, s.pure_eps,
                    s.opaque + 1))
            return RdpComposition(self.cache, _RdpState(
                s.rdp_other, s.rdp_pure, s.basic_eps + Fraction(entry.epsilon),
                s.basic_delta + Fraction(cast(float, entry.delta)), s.pure_eps, s.opaque))
        if entry.epsilon is not None and entry.delta == 0.0:
            return RdpComposition(self.cache, _RdpState(
                s.rdp_other, _add_up(s.rdp_pure, values), s.basic_eps, s.basic_delta,
                s.pure_eps + Fraction(entry.epsilon), s.opaque))
        return RdpComposition(self.cache, _RdpState(
            _add_up(s.rdp_other, values), s.rdp_pure, s.basic_eps, s.basic_delta, s.pure_eps,
            s.opaque))

    def replace(self, old: Charge, new: Charge, entries: list[Charge]) -> RdpComposition:
        fresh = RdpComposition(self.cache)
        for e in entries:
            fresh = fresh.add(e)
        return fresh

    def _convert(self, values, room):
        if not np.any(values > 0):
            return 0.0
        if not room > 0.0:
            return math.inf
        return epsilon_from_rdp(self.cache.orders, values, room)[0]

    def evaluate(self, budget_delta: Fraction) -> Spent | None:
        s = self.state
        if s.opaque:
            return None
        room = _down(budget_delta - s.basic_delta)
        # pure charges in the RDP sum, or summed as epsilon beside the rest
        options = [(s.basic_eps, _add_up(s.rdp_other, s.rdp_pure))]
        if s.pure_eps > 0:
            options.append((s.basic_eps + s.pure_eps, s.rdp_other))
        found = []
        for plain, values in options:
            eps = self._convert(values, room)
            if math.isfinite(eps):
                delta = budget_delta if np.any(values > 0) else s.basic_delta
                found.append(Spent(self.name, plain + Fraction(eps), delta, None))
        return min(found, key=lambda o: (o.epsilon, o.delta)) if found else None


# ---------------------------------------------------------------------------------------------
# privacy-loss distributions

# fractions of delta given to the PLD part when joining it with an RDP part
_SPLITS = np.concatenate([2.0 ** -np.arange(1, 31), 1.0 - 2.0 ** -np.arange(2, 31),
                          np.linspace(0.05, 0.95, 19)])


@dataclass(frozen=True)
class _PldState:
    pld: PrivacyLossDistribution | None = None  # composed PLD of the charges with a dominating pair (Gaussians apart)
    gauss_ratio2: float = 0.0  # Gaussian charges: (sensitivity / sigma)**2 summed
    rdp: np.ndarray | None = None  # charges with an RDP bound but no PLD
    opaque: int = 0


class PldComposition:
    """PLDs composed by FFT (Gaussians merged in closed form first); charges without a
    dominating pair composed in RDP and joined by splitting delta, eps = eps_pld(f delta) +
    eps_rdp((1 - f) delta), the best f of a fixed grid (see the module)."""

    name = "pld"

    def __init__(self, cache: _CurveCache, state: _PldState | None = None) -> None:
        self.cache = cache
        self.state = state or _PldState()

    def add(self, entry: Charge) -> PldComposition:
        return self._add_curve(self._effective_curve(entry))

    def _effective_curve(self, entry):
        """The entry's curve, or its plain (epsilon, delta) when the curve has neither a PLD
        nor an RDP bound (e.g. sampling without replacement of an (epsilon, delta) mechanism)."""
        curve = curve_of(entry)
        if (entry.epsilon is not None and curve.gaussian_ratio2() is None
                and _pld_or_none(curve, self.cache.interval) is None
                and np.all(np.isinf(self.cache.rdp(curve)))):
            return ApproxDP(entry.epsilon, entry.delta)
        return curve

    def _add_curve(self, curve):
        s = self.state
        ratio2 = curve.gaussian_ratio2()
        if ratio2 is not None:
            return PldComposition(self.cache, _PldState(
                s.pld, float(_add_up(s.gauss_ratio2, ratio2)), s.rdp, s.opaque))
        joined = _joined(s.pld, curve, self.cache.interval)
        if joined is not None:
            return PldComposition(self.cache, _PldState(joined, s.gauss_ratio2, s.rdp, s.opaque))
        values = self.cache.rdp(curve)
        if np.all(np.isinf(values)):
            return PldComposition(self.cache, _PldState(s.pld, s.gauss_ratio2, s.rdp,
                                                        s.opaque + 1))
        rdp = values if s.rdp is None else _add_up(s.rdp, values)
        return PldComposition(self.cache, _PldState(s.pld, s.gauss_ratio2, rdp, s.opaque))

    def replace(self, old: Charge, new: Charge, entries: list[Charge]) -> PldComposition:
        """Rebuilt from the history, equal curves grouped (one k-fold composition each)."""
        fresh = PldComposition(self.cache)
        groups = Counter(self._effective_curve(e) for e in entries)
        for curve, count in groups.items():
            fresh = fresh._add_curve(curve if count == 1 else curve.repeat(count))
        return fresh

    def evaluate(self, budget_delta: Fraction) -> Spent | None:
        s = self.state
        if s.opaque:
            return None
        delta = float(_down(budget_delta))
        if s.pld is None and s.rdp is None:
            if s.gauss_ratio2 == 0:
                return Spent(self.name, _ZERO, _ZERO, None)
            if not delta > 0.0:
                return None
            # only Gaussians: the exact curve (Balle-Wang), no grid; sigma rounded down (a
            # smaller sigma loses more privacy)
            sigma = math.nextafter(_down(1 / Fraction(s.gauss_ratio2)) ** 0.5, 0.0)
            eps = _gaussian_epsilon(sigma, delta)
            return Spent(self.name, Fraction(eps), budget_delta, None)
        pld = s.pld
        if s.gauss_ratio2 > 0:
            try:
                gauss = gaussian_pld(s.gauss_ratio2, self.cache.interval)
                pld = gauss if pld is None else pld.compose(gauss)
            except ValueError:  # too wide for the grid: no PLD analysis
                return None
        if not delta > 0.0:
            return None
        if s.rdp is None:  # then s.pld is not None (both None returned above)
            eps = cast("PrivacyLossDistribution", pld).epsilon(delta)
        else:
            orders = self.cache.orders
            if pld is None:
                eps = epsilon_from_rdp(orders, s.rdp, delta)[0]
            else:
                solve = pld.epsilon_solver()
                eps = min(solve(f * delta) + epsilon_from_rdp(orders, s.rdp, (1.0 - f) * delta)[0]
                          for f in _SPLITS)
        if not math.isfinite(eps):
            return None
        return Spent(self.name, Fraction(eps), budget_delta, None)


def _gaussian_epsilon(sigma, delta):
    """The smallest epsilon (to a relative 2**-40, on the safe side) at which the Gaussian with
    sensitivity 1 and ``sigma`` is (epsilon, delta)-DP: bisection on the rigorous upper bound
    :func:`dpcore.calibration.analytic_gaussian_delta`."""
    def holds(eps):
        return calibration.analytic_gaussian_delta(sigma, eps, 1.0) <= delta

    if holds(0.0):
        return 0.0
    hi = 1.0
    while not holds(hi):
        hi *= 2.0
    lo = 0.0
    while hi - lo > 2.0**-40 * hi:
        mid = (lo + hi) / 2.0
        if holds(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _pld_or_none(curve, interval):
    """The curve's PLD, or None when it has none or it would not fit the grid (a huge epsilon
    at a fine interval): the charge then composes in RDP, or the PLD analysis steps aside."""
    try:
        return curve.pld(interval)
    except ValueError:
        return None


def _joined(pld, curve, interval):
    """``pld`` composed with the curve's, or None when the curve has none or the result would
    not fit the grid."""
    other = _pld_or_none(curve, interval)
    if other is None:
        return None
    if pld is None:
        return other
    try:
        return pld.compose(other)
    except ValueError:
        return None
