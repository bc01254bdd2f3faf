"""Additive noise mechanisms: the thin, validating layer over the noise kernels (``_noise``,
``_noise_grid``, ``_noise_snapping``).

Each mechanism is a small immutable object holding its calibration (noise scale, grid, effective
privacy loss), so the numbers can be inspected and tested without drawing anything; the functions
:func:`laplace` and :func:`gaussian` build one and release with it. Each is a
:class:`dpcore.plans.Plan`: its ``cost`` (with its privacy curve) is known from the calibration
alone, it composes with other plans, and ``release`` charges that cost once.

Real-valued outputs never come from ``value + float_noise`` (Mironov 2012): they are either snapped
to a power-of-two grid (:func:`laplace` with ``method="snapping"``) or computed as ``grid * (integer
+ exact integer noise)`` (the ``"discrete"`` methods), so the set of possible outputs does not depend
on the private value.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, cast
import math
import sys
import warnings
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpcore import _noise, _noise_grid, _noise_snapping
from dpcore import _validation as check
from dpcore import calibration
from dpcore._docstrings import RELATION, fill
from dpcore._release import Cost, public_arithmetic
from dpcore.plans import ADD_REMOVE, Plan, check_relation
from dpcore.curves import DiscreteGaussian, DiscreteLaplace, PrivacyCurve
from dpcore._floats import GRID_BITS, pow2_ceil as _pow2_ceil, pow2_floor as _pow2_floor, round_up as _round_up_to_double

if TYPE_CHECKING:
    from numpy.typing import ArrayLike
    from dpcore.random import RandomStateLike
    from dpcore.accounting import AccountantLike

__all__ = [
    "laplace",
    "gaussian",
    "discrete_laplace",
    "discrete_gaussian",
    "LaplaceMechanism",
    "GaussianMechanism",
    "MAX_DISCRETE_LAPLACE_SCALE",
    "MAX_DISCRETE_GAUSSIAN_SIGMA",
]

#: Largest scale the exact discrete Laplace sampler accepts (its fast path's proven range).
MAX_DISCRETE_LAPLACE_SCALE = _noise.MAX_DLAP_SCALE
#: Largest sigma the exact discrete Gaussian sampler accepts.
MAX_DISCRETE_GAUSSIAN_SIGMA = _noise.MAX_DGAUSS_SIGMA

# Snapping draws U* >= 2**-1074, so its noise is bounded by 744.44 lambda: for bounds beyond half
# of that, outputs near the clamp edge can be reachable from one input and not its neighbour.
SNAPPING_PURE_BOUND_FACTOR = 372.0
SNAPPING_TAIL_DELTA = 2.0**-1070


def _check_granularity(granularity):
    if granularity is None:
        return None
    g = check.positive(granularity, "granularity")
    if _pow2_floor(g) != g:
        raise ValueError(f"granularity must be a power of two (e.g. 2.0**-20), got {g!r}")
    return g


# Values whose grid units stay below this go through the fused int64 kernels; beyond it (huge
# values or very fine grids) the same release is computed in exact integer arithmetic.
_FAST_UNITS = 2.0**62


def _finite_values(value: object) -> tuple[np.ndarray, np.ndarray, float]:
    """(values, flat, largest): ``value`` as a float64 array, its flat C-contiguous copy or view
    and max |value| (0 when empty); a ValueError naming ``value`` if an entry is NaN or
    infinite. The check is one pass of the noise kernel (threaded on large inputs, like the
    draws), made before the release charges anything."""
    values = check.real_array(value, "value").astype(np.float64, copy=False)
    flat = np.ascontiguousarray(values.reshape(-1))
    largest = _noise_grid.finite_magnitude(flat)
    if math.isnan(largest):
        raise ValueError("value must not contain NaN or infinite values")
    return values, flat, largest


def _sized(prepared: tuple[np.ndarray, np.ndarray, float], size: int
           ) -> tuple[np.ndarray, np.ndarray, float]:
    """``prepared`` (from `_finite_values`), after checking it holds ``size`` values."""
    if prepared[0].size != size:
        raise ValueError(f"value has {prepared[0].size} elements, the mechanism was calibrated "
                         f"for {size}")
    return prepared


def _fits_fast_path(largest: float, grid: float, bound: float = math.inf) -> bool:
    """True when every |rint(clip(v, -bound, bound) / grid)| < 2**62 (the fused kernels' int64
    range), given largest = max |v|. rint is monotone and odd and dividing by the power-of-two
    grid is exact, so the largest is rint(min(largest, bound) / grid). Which path runs does not
    change the output's law, only its speed (the releases are not constant-time)."""
    with np.errstate(over="ignore"):
        return bool(np.rint(np.float64(min(largest, bound)) / grid) < _FAST_UNITS)


def _exact_grid_release(flat, grid, bound, noise):
    """grid * (rint(clip(v) / grid) + k) for each value v and integer noise k, in exact rational
    arithmetic, rounded once to the nearest double: the same release as the fused kernels, for
    values of any magnitude. Rounding half to even, as rint. A result beyond the double range
    saturates at the largest finite double, with a RuntimeWarning (post-processing of the
    release: it depends on the output only)."""
    g = Fraction(grid)
    out = np.empty(flat.size, dtype=np.float64)
    saturated = 0
    for i, (v, k) in enumerate(zip(flat.tolist(), noise.tolist())):
        units = round(Fraction(min(max(v, -bound), bound)) / g) + k
        try:
            out[i] = float(units * g)
        except OverflowError:  # rounds beyond the largest double
            saturated += 1
            out[i] = math.copysign(sys.float_info.max, units)
    if saturated:
        warnings.warn(f"{saturated} released value(s) beyond the double range saturated at "
                      "+-1.7976931348623157e308", RuntimeWarning, stacklevel=8)
    return out


def _gaussian_sensitivity_units(sensitivity, grid, size):
    """L2 sensitivity in grid units, rounded up: rounding moves each element by < 1 grid unit,
    so the L2 distance grows by < sqrt(size)."""
    return math.nextafter(sensitivity / grid + math.sqrt(size), math.inf)


def _shaped(result, scalar):
    return result[()] if scalar else result


class _GridNoise(Plan):
    """What the grid mechanisms share as plans: the value is checked (finite, ``size``
    elements) before the charge, and released on the calibrated grid (each class's
    ``release`` is ``_release`` of ``_finite_values``)."""

    size: int

    def _prepare(self, data: ArrayLike) -> tuple[np.ndarray, np.ndarray, float]:
        return _sized(_finite_values(data), self.size)

    def _release(self, values: np.ndarray, flat: np.ndarray, largest: float, *,
                 random_state: RandomStateLike, accountant: AccountantLike | None
                 ) -> float | np.ndarray:
        """`release` of values checked by `_finite_values` (flat, largest: its other results)."""
        return self._release_prepared(_sized((values, flat, largest), self.size),
                                      accountant=accountant, random_state=random_state)


# --------------------------------------------------------------------------------------------
# Laplace


@fill(relation=RELATION)
@dataclass(frozen=True)
class LaplaceMechanism(_GridNoise):
    """Calibrated Laplace-type mechanism for a query of known L1 sensitivity.

    Build it with :meth:`calibrate`; :func:`laplace` is the usual entry point. A
    :class:`dpcore.plans.Plan`: ``cost`` is ``epsilon_effective`` and ``delta_effective`` with
    ``curve``, under ``relation``.

    Attributes
    ----------
    method : {"discrete", "snapping"}
    sensitivity : float
        The caller's sensitivity (L1 for ``"discrete"``; per element for ``"snapping"``).
    epsilon : float
        The requested privacy parameter (per element for ``"snapping"``).
    size : int
        Number of released elements.
    grid : float
        Output granularity: every output is a multiple of ``grid`` (or the clamp bound).
    scale : float
        ``"discrete"``: the discrete Laplace scale in grid units. ``"snapping"``: Mironov's lambda in
        units of ``unit`` (the sensitivity rounded up to a power of two).
    bound : float or None
        Clamp bound B (values are clamped to [-B, B]).
    unit : float
        ``"snapping"`` only: the power of two the value is divided by before snapping.
    epsilon_effective : float
        The privacy loss actually guaranteed for the whole release (<= ``epsilon`` times the
        number of elements for snapping, <= ``epsilon`` for discrete), slack terms included.
    delta_effective : float
        0, except for snapping with a bound beyond 372 lambda (see :func:`laplace`).
    {relation}
    """

    method: str
    sensitivity: float
    epsilon: float
    size: int
    grid: float
    scale: float
    bound: float | None
    unit: float
    epsilon_effective: float
    delta_effective: float
    relation: str = ADD_REMOVE

    @classmethod
    def calibrate(cls, *, sensitivity: float, epsilon: float, size: int = 1,
                  bound: float | None = None, method: str = "discrete",
                  granularity: float | None = None,
                  relation: str = ADD_REMOVE) -> LaplaceMechanism:
        """Validate the parameters and compute the noise scale and the effective guarantee
        (``relation``: the neighbouring relation ``sensitivity`` was derived for, which the
        plan states)."""
        relation = check_relation(relation)
        sensitivity = check.positive(sensitivity, "sensitivity")
        epsilon = check.positive(epsilon, "epsilon")
        size = check.integer(size, "size", minimum=1)
        if bound is not None:
            bound = check.positive(bound, "bound")
        granularity = _check_granularity(granularity)
        if method == "discrete":
            return cls._calibrate_discrete(sensitivity, epsilon, size, bound, granularity,
                                           relation)
        if method == "snapping":
            if bound is None:
                raise ValueError(
                    "bound is required for method='snapping' (values are clamped to [-bound, bound]); "
                    "use method='discrete' for unbounded values"
                )
            if granularity is not None:
                raise ValueError("granularity applies to method='discrete' only; snapping picks its grid")
            return cls._calibrate_snapping(sensitivity, epsilon, size, bound, relation)
        raise ValueError(f"method must be 'discrete' or 'snapping', got {method!r}")

    @classmethod
    def _calibrate_discrete(cls, sensitivity, epsilon, size, bound, granularity, relation):
        grid = granularity or _pow2_floor(sensitivity / epsilon * 2.0**-GRID_BITS)
        # Rounding to the grid moves each coordinate by < 1 unit, so the L1 distance in grid
        # units grows by < size (the grid is charged in the sensitivity).
        sens_units = Fraction(sensitivity) / Fraction(grid) + size
        scale = _round_up_to_double(sens_units / Fraction(epsilon))
        if scale > MAX_DISCRETE_LAPLACE_SCALE:
            raise ValueError(
                f"the noise scale is {scale:.3g} grid units, above the supported "
                f"{MAX_DISCRETE_LAPLACE_SCALE:.3g}: epsilon is too small for this sensitivity and "
                "grid (use a larger epsilon, or a coarser granularity where the release takes one)"
            )
        eps_eff = float(sens_units / Fraction(scale))
        return cls("discrete", sensitivity, epsilon, size, grid, scale, bound, 1.0, eps_eff, 0.0,
                   relation)

    @classmethod
    def _calibrate_snapping(cls, sensitivity, epsilon, size, bound, relation):
        # Dividing by a power of two is exact, so Mironov's sensitivity-1 theorem applies as is.
        unit = _pow2_ceil(sensitivity)
        bound_units = bound / unit
        lam = calibration.snapping_scale(epsilon, bound_units)
        grid_units = calibration.snapping_grid(lam)
        per_element = calibration.snapping_epsilon(lam, bound_units)
        delta = 0.0
        if bound_units > SNAPPING_PURE_BOUND_FACTOR * lam:
            delta = min(1.0, size * SNAPPING_TAIL_DELTA)
        return cls(
            "snapping", sensitivity, epsilon, size, grid_units * unit, lam, bound, unit,
            per_element * size, delta, relation,
        )

    @property
    def curve(self) -> PrivacyCurve | None:
        """The release's privacy curve (:mod:`dpcore.curves`), or None when it is just
        ``epsilon_effective``-DP. A scalar ``"discrete"`` release is the discrete Laplace
        mechanism with integer sensitivity floor(sensitivity/grid + 1) grid units (rounding
        moves each value by < 1 unit) and scale ``scale``: :class:`~dpcore.curves.DiscreteLaplace`
        (exact RDP and privacy-loss distribution). Vectors (an L1 sensitivity spread over
        coordinates), snapping and shifts beyond 2**53 grid units keep the pure epsilon
        guarantee."""
        if self.method != "discrete" or self.size != 1:
            return None
        shift = math.floor(Fraction(self.sensitivity) / Fraction(self.grid) + 1)
        if shift > 2**53:  # beyond the curve's exact integer range (a very fine granularity)
            return None
        return DiscreteLaplace(self.scale, shift)

    def privacy_loss(self, distance: float) -> float:
        """Epsilon of this release for neighbours whose query values are ``distance`` apart
        (L1 distance for ``"discrete"``; the number of elements that differ, each by at most
        the sensitivity, for ``"snapping"``)."""
        distance = check.nonnegative(distance, "distance")
        if self.method == "discrete":
            return float(
                (Fraction(distance) / Fraction(self.grid) + self.size) / Fraction(self.scale)
            ) if distance else 0.0
        return self.epsilon_effective / self.size * math.ceil(distance)

    @property
    def label(self) -> str:
        return f"laplace/{self.method}"

    @property
    def cost(self) -> Cost:
        """What :meth:`release` charges: ``epsilon_effective`` and ``delta_effective``, with
        ``curve`` (known from the calibration alone)."""
        return Cost(self.epsilon_effective, self.delta_effective, curve=self.curve)

    def release(self, value: ArrayLike, *, random_state: RandomStateLike = None,
                accountant: AccountantLike | None = None) -> float | np.ndarray:
        """Add the calibrated noise to ``value`` (same shape as the one calibrated for),
        charging :attr:`cost` once (a bad value raises before the charge)."""
        return self._release(*_finite_values(value), random_state=random_state,
                             accountant=accountant)

    def _draw(self, prepared: tuple[np.ndarray, np.ndarray, float], rng: np.random.Generator
              ) -> float | np.ndarray:
        values, flat, largest = prepared
        bound = math.inf if self.bound is None else self.bound
        if self.method == "discrete":
            if not _fits_fast_path(largest, self.grid, bound):
                noise = np.empty(flat.shape, dtype=np.int64)
                _noise.discrete_laplace_into(noise, self.scale, rng)
                out = _exact_grid_release(flat, self.grid, bound, noise)
            else:
                # One fused pass: clip, round to the grid, add the exact noise, convert back
                # (the same values as _exact_grid_release).
                out = np.empty(flat.shape, dtype=np.float64)
                _noise_grid.discrete_laplace_grid_into(out, flat, self.grid, bound, self.scale, rng)
        else:
            # No np.clip pass and no scaled copy: snapping_into divides each value by the power
            # of two unit (exact barring overflow: |x| near DBL_MAX, unit < 1 gives inf, then
            # clamped) and clamps to bound/unit; clamping commutes with that division (exact and
            # monotone), so this is clip(x, -B, B) / unit. It multiplies the result back by unit.
            out = np.empty_like(flat)
            grid_units = self.grid / self.unit
            clamp = cast(float, self.bound) / self.unit  # snapping is always calibrated bounded
            _noise_snapping.snapping_into(out, flat, self.scale, grid_units, clamp, rng,
                                          unit=self.unit)
        return _shaped(out.reshape(values.shape), values.ndim == 0)


def laplace(value: ArrayLike, *, sensitivity: float, epsilon: float, bound: float | None = None,
            method: str = "discrete", granularity: float | None = None,
            random_state: RandomStateLike = None, accountant: AccountantLike | None = None
            ) -> float | np.ndarray:
    """Release ``value`` with Laplace-type noise, safely in floating point.

    Parameters
    ----------
    value : float or array_like of float
        The exact query answer (any shape). NaN and infinities are rejected.
    sensitivity : float
        Public bound on how much the query can change between neighbouring data sets, > 0.
        ``"discrete"``: the L1 sensitivity of the whole array. ``"snapping"``: the bound for each
        element separately.
    epsilon : float
        Privacy parameter, > 0 (for ``"snapping"``: per element).
    bound : float, optional
        Public clamp bound B > 0: values are clamped to [-B, B] before noise is added. Required
        for ``"snapping"``, optional for ``"discrete"``.
    method : {"discrete", "snapping"}, default="discrete"
        ``"discrete"``: the value is rounded to a power-of-two grid and exact discrete Laplace noise
        (integer arithmetic only) is added in grid units; the rounding is charged to the
        sensitivity. ``"snapping"``: Mironov's snapping mechanism: clamp, add
        ``lambda * ln(U*)`` with a full-precision uniform and a correctly rounded log, round to the
        power-of-two grid Lambda >= lambda (ties towards +inf), clamp again.
        ``"discrete"`` is the default because its law is exactly the discrete Laplace law (pure
        epsilon-DP with no floating-point slack beyond the rounding it charges), it needs no clamp
        bound, works for vectors with an L1 sensitivity, and adds less noise near the bounds.
    granularity : float, optional
        ``"discrete"`` only: the output grid, a power of two. Default: the largest power of two
        <= sensitivity / epsilon * 2**-36 (``GRID_BITS``), so the rounding slack is about 2**-36 of the noise.
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default) uses dpcore's process-wide cryptographically secure ChaCha20 generator
        (unlike numpy and scikit-learn, where None means an insecure global generator). A seed or
        generator is for tests and reproducibility only, never for production releases.
    accountant : dpcore.Accountant, optional
        Charged with the effective guarantee before anything is drawn; if the budget would be
        overspent it raises ``BudgetExceeded`` and nothing is released.

    Returns
    -------
    float or ndarray
        Noisy value(s), same shape as ``value``. ``"discrete"`` outputs are multiples of the
        grid; ``"snapping"`` outputs are multiples of Lambda (times the power of two unit) or +-B.
        A ``"discrete"`` output beyond the double range saturates at +-1.7976931348623157e308
        with a RuntimeWarning (post-processing), never +-inf.

    Raises
    ------
    ValueError
        Non-finite value, epsilon/sensitivity/bound <= 0, a missing bound for snapping, or a
        parameter range the snapping theorem does not cover (bound <= lambda or bound >= 2**46
        lambda, in units of the sensitivity).
    TypeError
        Non-numeric arguments.

    Privacy
    -------
    Neighbouring relation: whichever relation ``sensitivity`` was derived for (add/remove or
    replace-one); the guarantee holds for all neighbours whose query values differ by at most
    ``sensitivity``.

    * ``"discrete"``: pure epsilon-DP, exactly. In grid units the L1 sensitivity is
      sensitivity/grid + n (rounding each of the n elements to the grid moves it by < 1 unit)
      and the discrete Laplace scale is that divided by epsilon (rounded up), so
      ``LaplaceMechanism.calibrate(...).epsilon_effective <= epsilon``. Outputs are
      post-processing of exact integers.
    * ``"snapping"``: the sensitivity is first rounded up to a power of two u (dividing by it is
      exact), then each element is an independent snapping mechanism with lambda calibrated so
      that Mironov's bound (1 + 12 B' eta)/lambda + 2 eta <= epsilon (B' = bound/u, eta = 2**-53,
      exact rational arithmetic), valid for lambda < B' < 2**46 lambda. An array of n elements
      composes to n times that (charged as such); use ``"discrete"`` for L1-bounded vectors.
      U* never goes below 2**-1074, so the noise is bounded; when B' > 372 lambda the guarantee
      is (epsilon, delta) with delta = n * 2**-1070 instead of pure.

    The accountant is charged ``epsilon_effective`` (and ``delta_effective``); a scalar
    ``"discrete"`` release also states its curve, the discrete Laplace mechanism
    (``LaplaceMechanism.curve``), which ``Accountant(method="rdp" | "pld")`` composes.

    References
    ----------
    .. [Mir12] I. Mironov, "On significance of the least significant bits for differential
       privacy", CCS 2012.
    .. [CKS20] C. Canonne, G. Kamath, T. Steinke, "The discrete Gaussian for differential
       privacy", NeurIPS 2020.

    Examples
    --------
    >>> import dpcore
    >>> noisy = dpcore.laplace(42.0, sensitivity=1.0, epsilon=1.0, random_state=0)
    >>> bool(abs(noisy - 42.0) < 50)
    True
    """
    values, flat, largest = _finite_values(value)
    with public_arithmetic("sensitivity, epsilon and bound"):
        mech = LaplaceMechanism.calibrate(
            sensitivity=sensitivity, epsilon=epsilon, size=max(values.size, 1), bound=bound,
            method=method, granularity=granularity,
        )
    if values.size == 0:
        return values.copy()
    return mech._release(values, flat, largest, random_state=random_state, accountant=accountant)


# --------------------------------------------------------------------------------------------
# Gaussian


@fill(relation=RELATION)
@dataclass(frozen=True)
class GaussianMechanism(_GridNoise):
    """Calibrated discrete Gaussian mechanism on a power-of-two grid (L2 sensitivity).

    Build it with :meth:`calibrate`; :func:`gaussian` is the usual entry point. A
    :class:`dpcore.plans.Plan`: ``cost`` is ``rho`` or (``epsilon``, ``delta``) with ``curve``.

    Attributes
    ----------
    sensitivity : float
        L2 sensitivity of the whole array (the caller's).
    size : int
        Number of released elements.
    grid : float
        Output granularity (power of two).
    sigma : float
        Standard deviation parameter of the discrete Gaussian, in grid units.
    rho : float
        zCDP parameter guaranteed (D**2 / (2 sigma**2), D the sensitivity in grid units).
    epsilon, delta : float or None
        The (epsilon, delta) guarantee when calibrated from them, else None.
    {relation}
    """

    sensitivity: float
    size: int
    grid: float
    sigma: float
    rho: float
    epsilon: float | None
    delta: float | None
    relation: str = ADD_REMOVE

    @classmethod
    def calibrate(cls, *, sensitivity: float, epsilon: float | None = None,
                  delta: float | None = None, rho: float | None = None, size: int = 1,
                  granularity: float | None = None,
                  relation: str = ADD_REMOVE) -> GaussianMechanism:
        """Validate the parameters and compute sigma, the grid and the guarantee
        (``relation``: the neighbouring relation ``sensitivity`` was derived for, which the
        plan states)."""
        relation = check_relation(relation)
        sensitivity = check.positive(sensitivity, "sensitivity")
        size = check.integer(size, "size", minimum=1)
        granularity = _check_granularity(granularity)
        if rho is not None:
            if epsilon is not None or delta is not None:
                raise ValueError("give either rho or (epsilon, delta), not both")
            rho = check.positive(rho, "rho")
            sigma_real = sensitivity / math.sqrt(2.0 * rho)
        else:
            if epsilon is None or delta is None:
                raise ValueError("give either rho, or both epsilon and delta")
            epsilon = check.positive(epsilon, "epsilon")
            delta = check.probability(delta, "delta")
            sigma_real = calibration.analytic_gaussian_sigma(epsilon, delta, sensitivity)
        grid = granularity or _pow2_floor(sigma_real * 2.0**-GRID_BITS)
        sens_units = _gaussian_sensitivity_units(sensitivity, grid, size)
        if rho is not None:
            sigma = math.nextafter(sens_units / math.sqrt(2.0 * rho), math.inf)
        elif size == 1:
            # Exact CKS delta: the shift between neighbours is an integer <= floor(sens_units).
            # (epsilon, delta) were given: rho is None
            sigma = calibration.discrete_gaussian_sigma(cast(float, epsilon), cast(float, delta),
                                                        math.floor(sens_units))
        else:
            rho_target = calibration.zcdp_rho_for(cast(float, epsilon), cast(float, delta))
            sigma = math.nextafter(sens_units / math.sqrt(2.0 * rho_target), math.inf)
        if sigma > MAX_DISCRETE_GAUSSIAN_SIGMA:
            raise ValueError(
                f"sigma is {sigma:.3g} grid units, above the supported {MAX_DISCRETE_GAUSSIAN_SIGMA:.3g}: "
                "the privacy parameters are too small for this sensitivity and grid (use a larger "
                "epsilon or rho, or a coarser granularity where the release takes one)"
            )
        rho_eff = sens_units**2 / (2.0 * sigma**2)
        return cls(sensitivity, size, grid, sigma, rho_eff, epsilon, delta, relation)

    @property
    def curve(self) -> PrivacyCurve:
        """The release's privacy curve: the discrete Gaussian with sigma ``sigma`` on an integer
        query of L2 sensitivity sensitivity/grid + sqrt(size) grid units,
        :class:`~dpcore.curves.DiscreteGaussian` (its zCDP/RDP bound)."""
        return DiscreteGaussian(self.sigma, _gaussian_sensitivity_units(
            self.sensitivity, self.grid, self.size))

    label = "gaussian"

    @property
    def cost(self) -> Cost:
        """What :meth:`release` charges, with ``curve``: ``rho`` (the effective rho_eff <= the
        rho asked for) when calibrated from rho, else the (epsilon, delta) it was calibrated to
        (the effective guarantee is at least as good)."""
        if self.epsilon is None:
            return Cost(rho=self.rho, curve=self.curve)
        return Cost(self.epsilon, cast(float, self.delta), curve=self.curve)

    def release(self, value: ArrayLike, *, random_state: RandomStateLike = None,
                accountant: AccountantLike | None = None) -> float | np.ndarray:
        """Add the calibrated noise to ``value``, charging :attr:`cost` once (a bad value
        raises before the charge)."""
        return self._release(*_finite_values(value), random_state=random_state,
                             accountant=accountant)

    def _draw(self, prepared: tuple[np.ndarray, np.ndarray, float], rng: np.random.Generator
              ) -> float | np.ndarray:
        values, flat, largest = prepared
        if not _fits_fast_path(largest, self.grid):
            noise = np.empty(flat.shape, dtype=np.int64)
            _noise.discrete_gaussian_into(noise, self.sigma, rng)
            out = _exact_grid_release(flat, self.grid, math.inf, noise)
        else:
            # One fused pass (the same values as _exact_grid_release).
            out = np.empty(flat.shape, dtype=np.float64)
            _noise_grid.discrete_gaussian_grid_into(out, flat, self.grid, self.sigma, rng)
        return _shaped(out.reshape(values.shape), values.ndim == 0)



def gaussian(value: ArrayLike, *, sensitivity: float, epsilon: float | None = None,
             delta: float | None = None, rho: float | None = None, granularity: float | None = None,
             random_state: RandomStateLike = None, accountant: AccountantLike | None = None
             ) -> float | np.ndarray:
    """Release ``value`` with discrete Gaussian noise on a power-of-two grid.

    Parameters
    ----------
    value : float or array_like of float
        The exact query answer (any shape), finite.
    sensitivity : float
        Public L2 sensitivity of the whole array, > 0.
    epsilon, delta : float, optional
        Target (epsilon, delta)-DP, epsilon > 0, 0 < delta < 1. Give both, or ``rho``.
    rho : float, optional
        Target rho-zCDP, > 0.
    granularity : float, optional
        Output grid (a power of two). Default: the largest power of two <= sigma * 2**-36.
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's process-wide cryptographically secure generator. Seeds are for
        tests only.
    accountant : dpcore.Accountant, optional
        Charged (rho, or (epsilon, delta)) before anything is drawn.

    Returns
    -------
    float or ndarray
        Same shape as ``value``; every output is a multiple of the grid. An output beyond the
        double range saturates at +-1.7976931348623157e308 with a RuntimeWarning, never +-inf.

    Raises
    ------
    ValueError
        Non-finite values, non-positive parameters, both or neither of rho and (epsilon, delta).
    TypeError
        Non-numeric arguments.

    Privacy
    -------
    Neighbouring relation: whichever relation ``sensitivity`` (an L2 bound) was derived for.
    Values are rounded to the grid, which adds less than sqrt(n) grid units to the L2
    sensitivity for n elements (charged); exact discrete Gaussian noise N_Z(0, sigma**2) (integer
    and rational arithmetic, Canonne-Kamath-Steinke) is added in grid units.

    * ``rho``: rho-zCDP, with rho_eff = D**2 / (2 sigma**2) <= rho (D the sensitivity in grid
      units).
    * ``(epsilon, delta)`` for a scalar: (epsilon, delta)-DP by the exact discrete-Gaussian
      privacy curve (CKS Theorem 7); for arrays, via the tight zCDP to (epsilon, delta)
      conversion. The classical sqrt(2 ln(1.25/delta))/epsilon formula is never used.

    The accountant is charged rho or (epsilon, delta), with the release's curve
    (``GaussianMechanism.curve``: the discrete Gaussian's rho_eff-zCDP bound, never the
    continuous Gaussian's privacy-loss distribution) for ``Accountant(method="rdp" | "pld")``.

    References
    ----------
    .. [CKS20] C. Canonne, G. Kamath, T. Steinke, "The discrete Gaussian for differential
       privacy", NeurIPS 2020.
    .. [BW18] B. Balle, Y.-X. Wang, "Improving the Gaussian mechanism for differential privacy",
       ICML 2018.

    Examples
    --------
    >>> import dpcore
    >>> noisy = dpcore.gaussian([1.0, 2.0], sensitivity=1.0, rho=0.5, random_state=0)
    >>> noisy.shape
    (2,)
    """
    values, flat, largest = _finite_values(value)
    with public_arithmetic("sensitivity, epsilon, delta and rho"):
        mech = GaussianMechanism.calibrate(
            sensitivity=sensitivity, epsilon=epsilon, delta=delta, rho=rho,
            size=max(values.size, 1), granularity=granularity,
        )
    if values.size == 0:
        return values.copy()
    return mech._release(values, flat, largest, random_state=random_state, accountant=accountant)


# --------------------------------------------------------------------------------------------
# Integer samplers


_INT64 = np.dtype(np.int64)


def _int64_target(array: object, name: str) -> np.ndarray:
    """``array`` (an ``out=`` or ``add_to=`` argument) as a flat int64 view, after checking that
    the kernel can write into it in place."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{name} must be a numpy array of dtype int64, got {type(array).__name__}")
    if array.dtype != _INT64:  # also refuses non-native byte order
        raise TypeError(f"{name} must have dtype int64 (native byte order), got {array.dtype}")
    flags = array.flags
    if not flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous (e.g. numpy.ascontiguousarray)")
    if not flags.writeable:
        raise ValueError(f"{name} must be writeable")
    return array if array.ndim == 1 else array.reshape(-1)


def _draw_integers(fill, add, parameter, size, out, add_to, random_state):
    """The integer samplers' common part, ``parameter`` validated: fill a new array of shape
    ``size`` (one integer when size is None) or ``out`` with ``fill``, or add to ``add_to`` with
    ``add`` (the kernel's in-place adder); returns what the sampler returns."""
    if out is not None and add_to is not None:
        raise TypeError("give out or add_to, not both")
    shape = check.size_shape(size)
    given, name = (out, "out") if out is not None else (add_to, "add_to")
    if given is None:
        result = np.empty(shape if shape is not None else (1,), dtype=np.int64)
        fill(result.reshape(-1), parameter, random_state)
        return result if shape is not None else result[0]
    flat = _int64_target(given, name)
    if shape is not None and shape != given.shape:
        raise ValueError(f"size {shape} disagrees with {name}.shape {given.shape}")
    (add if add_to is not None else fill)(flat, parameter, random_state)
    return given


def discrete_laplace(scale: float, size: int | tuple[int, ...] | None = None, *,
                     out: np.ndarray | None = None, add_to: np.ndarray | None = None,
                     random_state: RandomStateLike = None) -> int | np.ndarray:
    """Draw exact discrete Laplace integers: P(z) proportional to exp(-|z| / scale).

    Parameters
    ----------
    scale : float
        0 < scale <= ``MAX_DISCRETE_LAPLACE_SCALE`` (2**44). The float is used as the exact
        rational it represents.
    size : int or tuple of ints, optional
        Output shape; None returns a single integer (or, with ``out`` or ``add_to``, must equal
        that array's shape).
    out : ndarray of int64, optional
        A writeable, C-contiguous int64 array to fill with the draws (returned).
    add_to : ndarray of int64, optional
        A writeable, C-contiguous int64 array to which independent draws are added in place
        (returned), without a temporary of its size (e.g. noise on a large histogram). Give at
        most one of ``out`` and ``add_to``; a wrong dtype is a TypeError, a non-contiguous or
        read-only array a ValueError. The sum is not checked for int64 overflow.
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's cryptographically secure generator. Seeds are for tests only.

    Returns
    -------
    numpy.int64 or ndarray of int64
        The draws; with ``out`` or ``add_to``, that array.

    Notes
    -----
    The law is exact: |z| is floor(E * scale) with E = -ln(u) for a real uniform u, decided in
    double-double arithmetic with a proven error bound, and in the rare undecided cases by exact
    rational comparison (``dpcore._exact``). A negative sign on zero is rejected so that zero is
    not counted twice. The running time depends on the output (not constant-time).

    Privacy
    -------
    A sampler, not a release: adding it to an integer query of L1 sensitivity D with
    ``scale = D / epsilon`` is epsilon-DP (use :func:`laplace` for real values).

    Examples
    --------
    >>> import dpcore
    >>> dpcore.discrete_laplace(2.0, size=3, random_state=1).dtype
    dtype('int64')
    """
    scale = check.positive(scale, "scale")
    if scale > MAX_DISCRETE_LAPLACE_SCALE:
        raise ValueError(f"scale must be <= {MAX_DISCRETE_LAPLACE_SCALE!r} (2**44), got {scale!r}")
    return _draw_integers(_noise.discrete_laplace_into, _noise.discrete_laplace_add_into, scale,
                          size, out, add_to, random_state)


def discrete_gaussian(sigma: float, size: int | tuple[int, ...] | None = None, *,
                      out: np.ndarray | None = None, add_to: np.ndarray | None = None,
                      random_state: RandomStateLike = None) -> int | np.ndarray:
    """Draw exact discrete Gaussian integers: P(z) proportional to exp(-z**2 / (2 sigma**2)).

    Parameters
    ----------
    sigma : float
        0 < sigma <= ``MAX_DISCRETE_GAUSSIAN_SIGMA``; the float is used as the exact rational it
        represents (so sigma**2 is exact).
    size, out, add_to, random_state
        As for :func:`discrete_laplace`.

    Returns
    -------
    numpy.int64 or ndarray of int64
        The draws; with ``out`` or ``add_to``, that array.

    Notes
    -----
    Exact rejection sampling. Calls of fewer than 1024 draws (or sigma < 1/16) use
    Canonne-Kamath-Steinke rejection from a discrete Laplace proposal with t = floor(sigma) + 1,
    accepting with probability exp(-(|y| - sigma**2/t)**2 / (2 sigma**2)). Larger calls propose
    |y| from an exact integer alias table over blocks of a power-of-two width (uniform inside a
    block) with an exact geometric tail beyond about 7.9 sigma, and accept with probability at
    most 1 (the table's entries are proven when it is built). Acceptance tests are decided on
    proven floating-point bounds when they suffice, otherwise exactly in rational arithmetic, so
    the law is exactly the discrete Gaussian. Not constant-time.

    Privacy
    -------
    A sampler, not a release: added to an integer query of L2 sensitivity D it gives
    D**2 / (2 sigma**2)-zCDP (use :func:`gaussian` for real values).

    Examples
    --------
    >>> import dpcore
    >>> dpcore.discrete_gaussian(3.0, size=(2, 2), random_state=1).shape
    (2, 2)
    """
    sigma = check.positive(sigma, "sigma")
    if sigma > MAX_DISCRETE_GAUSSIAN_SIGMA:
        raise ValueError(f"sigma must be <= {MAX_DISCRETE_GAUSSIAN_SIGMA!r}, got {sigma!r}")
    return _draw_integers(_noise.discrete_gaussian_into, _noise.discrete_gaussian_add_into, sigma,
                          size, out, add_to, random_state)
