"""Privacy curves: what one release guarantees, as a descriptor an accountant can compose.

Each curve states its neighbouring relation and gives what is known about it: its Rényi-DP
epsilon(alpha) on a grid of orders (``rdp``), a pessimistic privacy-loss distribution on a grid
(``pld``, None where no dominating pair is known), and a plain (epsilon, delta) or rho-zCDP
guarantee (``fallback``) where one exists.

Privacy
-------
Descriptions of releases' guarantees (RDP bounds, loss distributions, plain guarantees) computed
from public parameters: releases nothing, spends no budget; each curve states the neighbouring
relation it holds for.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from dpcore import _validation as check
from dpcore._floats import round_up
from dpcore.curves import _laws, _rdp

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpcore.curves._pld import PrivacyLossDistribution

#: A plain guarantee: {"epsilon": e, "delta": d} or {"rho": r}.
Plain = dict[str, float]

RELATIONS = ("add/remove", "substitution")
#: Default interval of the privacy-loss grids (that of Google's dp_accounting).
DEFAULT_INTERVAL = 1e-4


def _check_relation(relation):
    if relation is not None and relation not in RELATIONS:
        raise ValueError(f"relation must be None, 'add/remove' or 'substitution', got {relation!r}")
    return relation


def _check_interval(interval):
    interval = check.positive(interval, "interval")
    if interval > 1.0:
        raise ValueError(f"interval must be <= 1, got {interval!r}")
    return interval


class PrivacyCurve:
    """Base class of the privacy curves (frozen dataclasses: hashable, comparable, picklable).

    ``relation`` is the neighbouring relation the guarantee holds for: ``"add/remove"``,
    ``"substitution"``, or None (whichever relation the sensitivity was derived for).
    """

    relation: str | None = None

    def rdp(self, orders: ArrayLike = _rdp.DEFAULT_ORDERS) -> np.ndarray:
        """Upper bounds on the Rényi-DP epsilon(alpha) at ``orders`` (array; inf where none)."""
        return np.full(np.asarray(orders, dtype=np.float64).shape, np.inf)

    def pld(self, interval: float = DEFAULT_INTERVAL) -> PrivacyLossDistribution | None:
        """The pessimistic :class:`~dpcore.curves.PrivacyLossDistribution` on a grid of step
        ``interval``, or None where no dominating pair is known."""
        return _cached_pld(self, _check_interval(interval))

    def _pld(self, interval: float) -> PrivacyLossDistribution | None:
        law = self._law()
        return None if law is None else _laws.discretise(law, interval)

    def _law(self) -> _laws._SymmetricLaw | None:
        """The symmetric dominating pair on the real line (see ``_laws``), or None."""
        return None

    def fallback(self) -> Plain | None:
        """A plain guarantee: ``{"epsilon": e, "delta": d}`` or ``{"rho": r}``, or None."""
        return None

    def gaussian_ratio2(self) -> float | None:
        """(sensitivity / sigma)**2 summed, for curves that compose as one Gaussian; else None."""
        return None

    def implied_rho(self) -> float | None:
        """A rho such that the release is rho-zCDP, known from this curve beyond its plain
        guarantee (e.g. epsilon**2 / 8 for a bounded-range mechanism), or None. The default
        accountant (``method="zcdp"``) counts a pure charge carrying the curve at the smaller
        of this and epsilon**2 / 2 in its zCDP analyses."""
        return None

    def epsilon_for(self, delta: float, *, orders: ArrayLike = _rdp.DEFAULT_ORDERS,
                    interval: float = DEFAULT_INTERVAL) -> float:
        """The smallest epsilon this curve guarantees at ``delta``: the better of its RDP
        conversion, its PLD and its fallback.

        Examples
        --------
        >>> from dpcore.curves import Gaussian
        >>> round(Gaussian(sigma=5.0).epsilon_for(1e-6), 3)
        0.932
        """
        delta = check.probability(delta, "delta", open_low=False)
        best = math.inf
        if delta > 0:
            best = _rdp.epsilon_from_rdp(_rdp.check_orders(orders), self.rdp(
                _rdp.check_orders(orders)), delta)[0]
            pld = self.pld(interval)
            if pld is not None:
                best = min(best, pld.epsilon(delta))
        plain = self.fallback()
        if plain is not None and "epsilon" in plain and plain["delta"] <= delta:
            best = min(best, plain["epsilon"])
        return best

    # constructions
    def repeat(self, count: int) -> Repeated:
        """This curve composed ``count`` times (:class:`Repeated`)."""
        return Repeated(self, count)

    def poisson(self, rate: float) -> PoissonSubsampled:
        """This mechanism on a Poisson sample (:class:`PoissonSubsampled`)."""
        return PoissonSubsampled(self, rate)

    def without_replacement(self, rate: float) -> SampledWithoutReplacement:
        """This mechanism on a sample without replacement (:class:`SampledWithoutReplacement`)."""
        return SampledWithoutReplacement(self, rate)


@functools.lru_cache(maxsize=64)
def _cached_pld(curve, interval):
    return curve._pld(interval)


def _positive(obj, *names):
    for name in names:
        object.__setattr__(obj, name, check.positive(getattr(obj, name), name))


@dataclass(frozen=True)
class PureDP(PrivacyCurve):
    """epsilon-DP: every mechanism with this guarantee is dominated by randomized response
    (Kairouz-Oh-Viswanath), whose RDP and privacy-loss distribution this curve uses."""

    epsilon: float
    relation: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "epsilon", check.privacy_loss(self.epsilon, "epsilon",
                                                               check.MAX_EPSILON))
        _check_relation(self.relation)

    def rdp(self, orders: ArrayLike = _rdp.DEFAULT_ORDERS) -> np.ndarray:
        return _rdp.randomized_response(orders, self.epsilon)

    def _law(self) -> _laws._SymmetricLaw | None:
        return _laws.RandomizedResponseLaw(self.epsilon)

    def fallback(self) -> Plain | None:
        return {"epsilon": self.epsilon, "delta": 0.0}


@dataclass(frozen=True)
class ApproxDP(PrivacyCurve):
    """(epsilon, delta)-DP, dominated by the canonical pair of Kairouz-Oh-Viswanath (mass delta
    that only one data set can produce). No finite RDP when delta > 0."""

    epsilon: float
    delta: float
    relation: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "epsilon", check.privacy_loss(self.epsilon, "epsilon",
                                                               check.MAX_EPSILON))
        object.__setattr__(self, "delta", check.probability(self.delta, "delta", open_low=False))
        _check_relation(self.relation)

    def rdp(self, orders: ArrayLike = _rdp.DEFAULT_ORDERS) -> np.ndarray:
        if self.delta == 0.0:
            return _rdp.randomized_response(orders, self.epsilon)
        return super().rdp(orders)

    def _law(self) -> _laws._SymmetricLaw | None:
        return _laws.RandomizedResponseLaw(self.epsilon, self.delta)

    def fallback(self) -> Plain | None:
        return {"epsilon": self.epsilon, "delta": self.delta}


@dataclass(frozen=True)
class ZCDP(PrivacyCurve):
    """rho-zCDP: RDP epsilon(alpha) = alpha rho at every order (Bun-Steinke). No dominating
    pair is known (a zCDP mechanism need not be dominated by a Gaussian)."""

    rho: float
    relation: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "rho", check.privacy_loss(self.rho, "rho", check.MAX_RHO))
        _check_relation(self.relation)

    def rdp(self, orders: ArrayLike = _rdp.DEFAULT_ORDERS) -> np.ndarray:
        return _rdp.up(np.asarray(orders, dtype=np.float64) * self.rho)

    def fallback(self) -> Plain | None:
        return {"rho": self.rho}


@dataclass(frozen=True)
class Gaussian(PrivacyCurve):
    """The continuous Gaussian mechanism N(0, sigma**2) on a query of L2 sensitivity
    ``sensitivity``: RDP alpha D**2 / (2 sigma**2), and the exact dominating pair
    (N(D, sigma**2), N(0, sigma**2)) (rotation invariance reduces any dimension to one)."""

    sigma: float
    sensitivity: float = 1.0
    relation: str | None = None

    def __post_init__(self):
        _positive(self, "sigma", "sensitivity")
        _check_relation(self.relation)

    def gaussian_ratio2(self) -> float:
        return round_up((Fraction(self.sensitivity) / Fraction(self.sigma)) ** 2)

    def rdp(self, orders: ArrayLike = _rdp.DEFAULT_ORDERS) -> np.ndarray:
        return _rdp.up(np.asarray(orders, dtype=np.float64) * self.gaussian_ratio2() / 2.0)

    def _law(self) -> _laws._SymmetricLaw | None:
        return _laws.GaussianLaw(self.gaussian_ratio2() / 2.0)

    def fallback(self) -> Plain | None:
        return {"rho": self.gaussian_ratio2() / 2.0}


@dataclass(frozen=True)
class Laplace(PrivacyCurve):
    """The continuous Laplace mechanism with scale ``scale`` on a scalar query of sensitivity
    ``sensitivity``: pure (sensitivity / scale)-DP; RDP (Mironov 2017) and the exact dominating
    pair (Lap(D, b), Lap(0, b)) (larger shifts dominate smaller ones: monotone likelihood
    ratio)."""

    scale: float
    sensitivity: float = 1.0
    relation: str | None = None

    def __post_init__(self):
        _positive(self, "scale", "sensitivity")
        _check_relation(self.relation)

    @property
    def e0(self) -> float:
        return round_up(Fraction(self.sensitivity) / Fraction(self.scale))

    def rdp(self, orders: ArrayLike = _rdp.DEFAULT_ORDERS) -> np.ndarray:
        return _rdp.laplace(orders, self.e0)

    def _law(self) -> _laws._SymmetricLaw | None:
        return _laws.LaplaceLaw(self.e0)

    def fallback(self) -> Plain | None:
        return {"epsilon": self.e0, "delta": 0.0}


@dataclass(frozen=True)
class DiscreteLaplace(PrivacyCurve):
    """The discrete Laplace mechanism P(z) ~ exp(-|z| / scale) added to an integer-valued scalar
    query whose neighbours differ by at most the integer ``sensitivity``: pure
    (sensitivity / scale)-DP, exact RDP (a geometric sum) and the exact dominating pair
    (DLap(D), DLap(0)) (monotone likelihood ratio: the largest shift dominates)."""

    scale: float
    sensitivity: int = 1
    relation: str | None = None

    def __post_init__(self):
        _positive(self, "scale")
        object.__setattr__(self, "sensitivity",
                           check.integer(self.sensitivity, "sensitivity", minimum=1))
        if self.sensitivity > 2**53:
            raise ValueError(f"sensitivity must be <= 2**53, got {self.sensitivity!r}")
        _check_relation(self.relation)

    def rdp(self, orders: ArrayLike = _rdp.DEFAULT_ORDERS) -> np.ndarray:
        return _rdp.discrete_laplace(orders, self.scale, self.sensitivity)

    def _law(self) -> _laws._SymmetricLaw | None:
        return _laws.DiscreteLaplaceLaw(self.scale, self.sensitivity)

    def fallback(self) -> Plain | None:
        return {"epsilon": round_up(Fraction(self.sensitivity) / Fraction(self.scale)),
                "delta": 0.0}


@dataclass(frozen=True)
class DiscreteGaussian(PrivacyCurve):
    """The discrete Gaussian N_Z(0, sigma**2) added to an integer-valued query (any dimension)
    of L2 sensitivity ``sensitivity``: rho-zCDP with rho = D**2 / (2 sigma**2), so RDP
    alpha rho (Canonne-Kamath-Steinke 2020, Thm. 14). This is the only bound used: the discrete
    Gaussian is *not* given the continuous Gaussian's privacy-loss distribution (no dominance is
    proven), so it has no PLD."""

    sigma: float
    sensitivity: float = 1.0
    relation: str | None = None

    def __post_init__(self):
        _positive(self, "sigma", "sensitivity")
        _check_relation(self.relation)

    @property
    def rho(self) -> float:
        return round_up(Fraction(self.sensitivity) ** 2 / (2 * Fraction(self.sigma) ** 2))

    def rdp(self, orders: ArrayLike = _rdp.DEFAULT_ORDERS) -> np.ndarray:
        return _rdp.up(np.asarray(orders, dtype=np.float64) * self.rho)

    def fallback(self) -> Plain | None:
        return {"rho": self.rho}


class _Subsampled(PrivacyCurve):
    """Shared by the two samplings: a base curve and a rate; the base must hold for the
    sampling's relation (or for none)."""

    curve: PrivacyCurve
    rate: float
    _RELATION = ""

    def __post_init__(self):
        if not isinstance(self.curve, PrivacyCurve):
            raise TypeError(f"curve must be a PrivacyCurve, got {type(self.curve).__name__}")
        if self.curve.relation not in (None, self._RELATION):
            raise ValueError(f"{type(self).__name__} needs a base curve for {self._RELATION} "
                             f"neighbours, this one holds for {self.curve.relation}")
        object.__setattr__(self, "rate", check.probability(self.rate, "rate", open_high=False))

    @property  # read-only here: set by the construction
    def relation(self) -> str:  # type: ignore[override]
        return self._RELATION

    def fallback(self) -> Plain | None:
        """(log(1 + rate (e^eps - 1)), rate delta) from a base (eps, delta) (Balle-Barthe-
        Gaboardi 2018: Poisson under add/remove, without replacement under substitution)."""
        base = self.curve.fallback()
        if base is None or "epsilon" not in base:
            return None
        eps = _rdp.up(math.log1p(self.rate * math.expm1(base["epsilon"]))).item()
        return {"epsilon": eps, "delta": min(1.0, self.rate * base["delta"] * (1 + 2.0**-50))}


@dataclass(frozen=True)
class PoissonSubsampled(_Subsampled):
    """``curve``'s mechanism run on a Poisson sample: each record kept independently with
    probability ``rate``. Add/remove neighbours (the base must hold for add/remove, or for
    whatever relation its sensitivity was derived for).

    * RDP: the binomial expansion for removal (exact for the Gaussian, Mironov-Talwar-Zhang
      2019), a Taylor bound for addition, joint convexity, see ``_rdp.poisson_subsampled``.
    * PLD: for bases with a dominating pair (P, Q) on the line, the pairs (q P + (1-q) Q, Q)
      (removal) and (Q, q P + (1-q) Q) (addition) dominate (Zhu-Dong-Wang 2022, Thm. 11).
    * Fallback: (log(1 + q (e^eps - 1)), q delta) from a base (eps, delta) (Balle-Barthe-
      Gaboardi 2018).
    """

    curve: PrivacyCurve
    rate: float
    _RELATION = "add/remove"

    def rdp(self, orders: ArrayLike = _rdp.DEFAULT_ORDERS) -> np.ndarray:
        orders = np.asarray(orders, dtype=np.float64)
        if isinstance(self.curve, Gaussian):  # Mironov-Talwar-Zhang: removal dominates
            ratio = math.sqrt(self.curve.gaussian_ratio2())
            return _rdp.poisson_subsampled(self.curve.rdp, self.rate, orders,
                                           remove_dominates=True, gaussian_ratio=ratio)
        return _rdp.poisson_subsampled(self.curve.rdp, self.rate, orders)

    def _pld(self, interval: float) -> PrivacyLossDistribution | None:
        law = self.curve._law()
        return None if law is None else _laws.discretise(law, interval, self.rate)


@dataclass(frozen=True)
class SampledWithoutReplacement(_Subsampled):
    """``curve``'s mechanism run on m records drawn uniformly without replacement from n,
    ``rate`` = m / n. Substitution neighbours (the base must hold for substitution).

    * RDP: a binomial bound on the coupled pair ((1-g) R + g P, (1-g) R + g P'), see
      ``_rdp.without_replacement``.
    * No PLD (the coupled pair involves three outputs); the accountant uses the RDP.
    * Fallback: (log(1 + g (e^eps - 1)), g delta) (Balle-Barthe-Gaboardi 2018).
    """

    curve: PrivacyCurve
    rate: float
    _RELATION = "substitution"

    def rdp(self, orders: ArrayLike = _rdp.DEFAULT_ORDERS) -> np.ndarray:
        return _rdp.without_replacement(self.curve.rdp, self.rate,
                                        np.asarray(orders, dtype=np.float64))

    def _pld(self, interval: float) -> PrivacyLossDistribution | None:
        return None


@dataclass(frozen=True)
class Repeated(PrivacyCurve):
    """``curve`` composed ``count`` times (adaptively): RDP times count, the PLD's count-fold
    convolution (by repeated squaring), the fallback composed by summation."""

    curve: PrivacyCurve
    count: int

    def __post_init__(self):
        if not isinstance(self.curve, PrivacyCurve):
            raise TypeError(f"curve must be a PrivacyCurve, got {type(self.curve).__name__}")
        object.__setattr__(self, "count", check.integer(self.count, "count", minimum=1))

    @property  # read-only here: the base curve's
    def relation(self) -> str | None:  # type: ignore[override]
        return self.curve.relation

    def gaussian_ratio2(self) -> float | None:
        base = self.curve.gaussian_ratio2()
        return None if base is None else round_up(Fraction(base) * self.count)

    def implied_rho(self) -> float | None:
        """``count`` times one release's zCDP bound (zCDP composes adaptively by summation,
        Bun-Steinke 2016, Lemma 2.3): the base curve's ``implied_rho``, else epsilon**2 / 2 of
        a pure fallback (Bun-Steinke, Prop. 1.4) or the rho of a zCDP one; rounded up."""
        base = zcdp_bound(self.curve)
        return None if base is None else round_up(Fraction(base) * self.count)

    def rdp(self, orders: ArrayLike = _rdp.DEFAULT_ORDERS) -> np.ndarray:
        return _rdp.up(self.curve.rdp(orders) * self.count)

    def _pld(self, interval: float) -> PrivacyLossDistribution | None:
        ratio2 = self.gaussian_ratio2()
        if ratio2 is not None:  # a Gaussian composed is a Gaussian: no discretisation error
            return _laws.discretise(_laws.GaussianLaw(ratio2 / 2.0), interval)
        base = self.curve.pld(interval)
        return None if base is None else base.self_compose(self.count)

    def fallback(self) -> Plain | None:
        base = self.curve.fallback()
        if base is None:
            return None
        if "rho" in base:
            return {"rho": round_up(Fraction(base["rho"]) * self.count)}
        return {"epsilon": round_up(Fraction(base["epsilon"]) * self.count),
                "delta": min(1.0, base["delta"] * self.count * (1 + 2.0**-50))}


@dataclass(frozen=True)
class Composed(PrivacyCurve):
    """Different releases composed (adaptively) into one charge, e.g. a tree's split choices
    (bounded-range) and its leaf labels (pure DP): RDP summed order by order (each release's
    bound composes, Mironov 2017, Prop. 1), the PLDs composed when every part has one, the
    plain guarantees summed when they are all (epsilon, delta) or all rho (None when they
    mix), and the zCDP bound (``implied_rho``) summed when every part has one. The parts must
    state the same neighbouring relation (or none).

    Examples
    --------
    >>> from dpcore.curves import BoundedRange, Composed, PureDP
    >>> tree = Composed((BoundedRange(0.125).repeat(4), PureDP(0.5)))  # 4 splits, the leaves
    >>> tree.fallback()["epsilon"], tree.implied_rho()  # 4 * 0.125**2 / 8 + 0.5**2 / 2
    (1.0, 0.1328125)
    """

    parts: tuple[PrivacyCurve, ...]

    def __post_init__(self):
        parts = tuple(self.parts)
        if not parts:
            raise ValueError("parts must hold at least one curve")
        for part in parts:
            if not isinstance(part, PrivacyCurve):
                raise TypeError(f"parts must be PrivacyCurves, got {type(part).__name__}")
        if len({part.relation for part in parts} - {None}) > 1:
            raise ValueError("the parts of a Composed curve must state the same relation")
        object.__setattr__(self, "parts", parts)

    @property  # read-only here: the parts'
    def relation(self) -> str | None:  # type: ignore[override]
        return next((part.relation for part in self.parts if part.relation is not None), None)

    def gaussian_ratio2(self) -> float | None:
        ratios = [part.gaussian_ratio2() for part in self.parts]
        if any(r is None for r in ratios):
            return None
        return round_up(sum((Fraction(r) for r in ratios if r is not None), Fraction(0)))

    def rdp(self, orders: ArrayLike = _rdp.DEFAULT_ORDERS) -> np.ndarray:
        total = np.zeros(np.asarray(orders, dtype=np.float64).shape)
        for part in self.parts:
            total = _rdp.up(total + part.rdp(orders))  # each sum rounded up
        return total

    def _pld(self, interval: float) -> PrivacyLossDistribution | None:
        composed = None
        for part in self.parts:
            pld = part.pld(interval)
            if pld is None:
                return None
            composed = pld if composed is None else composed.compose(pld)
        return composed

    def fallback(self) -> Plain | None:
        plain = [part.fallback() for part in self.parts]
        if any(p is None for p in plain):
            return None
        if all("rho" in p for p in plain if p is not None):
            return {"rho": round_up(sum((Fraction(p["rho"]) for p in plain if p is not None),
                                        Fraction(0)))}
        if all("epsilon" in p for p in plain if p is not None):
            return {"epsilon": round_up(sum((Fraction(p["epsilon"]) for p in plain
                                             if p is not None), Fraction(0))),
                    "delta": min(1.0, math.fsum(p["delta"] for p in plain if p is not None)
                                 * (1 + 2.0**-50))}
        return None

    def implied_rho(self) -> float | None:
        """The parts' zCDP bounds summed (zCDP composes adaptively by summation, Bun-Steinke
        2016, Lemma 2.3), each its ``implied_rho`` or what its plain guarantee gives; None
        when a part has none."""
        bounds = [zcdp_bound(part) for part in self.parts]
        if any(b is None for b in bounds):
            return None
        return round_up(sum((Fraction(b) for b in bounds if b is not None), Fraction(0)))


def zcdp_bound(curve: PrivacyCurve) -> float | None:
    """The smallest rho-zCDP bound the curve states: its ``implied_rho``, or what its plain
    guarantee gives (epsilon**2 / 2 when pure, Bun-Steinke 2016, Prop. 1.4; its rho when
    zCDP), whichever is smaller; None when neither exists. Rounded up."""
    found = []
    plain = curve.fallback()
    if plain is not None:
        if "rho" in plain:
            found.append(Fraction(plain["rho"]))
        elif plain["delta"] == 0.0:
            found.append(Fraction(plain["epsilon"]) ** 2 / 2)
    implied = curve.implied_rho()
    if implied is not None:
        found.append(Fraction(implied))
    return round_up(min(found)) if found else None


def gaussian_pld(ratio2: float, interval: float) -> PrivacyLossDistribution:
    """The PLD of a Gaussian with (sensitivity / sigma)**2 = ``ratio2``."""
    return _laws.discretise(_laws.GaussianLaw(ratio2 / 2.0), interval)


