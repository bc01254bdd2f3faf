"""Planar Laplace on a grid (geo-indistinguishability, [ABCP13]), sampled exactly.

The offsets are exact discrete Laplace proposals accepted by an exact Bernoulli(exp(-gamma))
with gamma irrational, all in the planar noise kernel (`dpcore._noise_planar`): proven
floating-point bounds decide nearly every acceptance, exact rational arithmetic the rest.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from dpcore import _validation as check
from dpcore import _noise_planar
from dpcore._floats import round_up
from dpcore._release import Cost, release
from dpcore.accounting import AccountantLike
from dpcore.local._epsilon import LOCAL_RELATION
from dpcore.plans import Plan
from dpcore.random import RandomStateLike

__all__ = ["planar_laplace", "PlanarLaplaceMechanism"]

#: Largest |coordinate| / grid accepted (grid indices and outputs stay exact in doubles).
MAX_GRID_INDEX = 2.0**50

Box = tuple[tuple[float, float], tuple[float, float]]


@dataclass(frozen=True)
class PlanarLaplaceMechanism(Plan):
    """Calibration of the planar Laplace mechanism on a grid.

    A :class:`dpcore.plans.Plan` when calibrated with ``bounds``: ``cost`` is ``epsilon_ldp``
    (pure), known from the calibration alone, under ``relation`` (one user's location replaced
    by any other in the box); ``release(points)`` privatises one location per user
    (:func:`planar_laplace`). Without ``bounds`` there is no finite plain epsilon: ``cost``
    raises, the mechanism does not compose with plans, and ``release`` refuses an accountant.

    Attributes
    ----------
    epsilon : float
        Geo-indistinguishability parameter (per unit of distance).
    grid : float
        Grid spacing u (a power of two); outputs are u * (integer, integer).
    decay : fractions.Fraction
        lambda = epsilon * u: P(offset d) is proportional to exp(-lambda ||d||_2) on Z^2.
    proposal_scale : float
        The discrete Laplace scale s >= sqrt(2) / lambda of the rejection sampler's proposal.
    epsilon_ldp : float or None
        With ``bounds``: epsilon * (diameter + sqrt(2) u) rounded up, the plain epsilon-LDP
        guarantee over the box (what an accountant is charged).
    bounds : ((x_min, x_max), (y_min, y_max)) or None
        The public box every location must lie in (checked), as floats.
    relation : str
        The local model's neighbouring relation: one user's location replaced by any other.
    """

    epsilon: float
    grid: float
    decay: Fraction
    proposal_scale: float
    epsilon_ldp: float | None
    bounds: Box | None = None
    relation: str = LOCAL_RELATION

    @classmethod
    def calibrate(cls, *, epsilon: float, grid: float, bounds: Box | None = None
                  ) -> PlanarLaplaceMechanism:
        """Validate the parameters; compute lambda, the proposal scale and the LDP epsilon."""
        epsilon = check.positive(epsilon, "epsilon")
        if epsilon > check.MAX_EPSILON:
            raise ValueError(f"epsilon must be <= {check.MAX_EPSILON!r}, got {epsilon!r}")
        grid = check.positive(grid, "grid")
        if math.frexp(grid)[0] != 0.5:
            raise ValueError(f"grid must be a power of two (e.g. 2.0**-10), got {grid!r}")
        lam = Fraction(epsilon) * Fraction(grid)
        # s: the smallest double with s**2 lam**2 >= 2, i.e. 1/s <= lam / sqrt(2).
        s = math.sqrt(2.0) / float(lam) if lam > 2**-1000 else math.inf
        if not (math.isfinite(s) and s <= 2.0**40):
            raise ValueError(
                "epsilon * grid is too small (the noise would span more than 2**40 grid cells); "
                "use a coarser grid or a larger epsilon"
            )
        while Fraction(s) ** 2 * lam**2 < 2:
            s = math.nextafter(s, math.inf)
        s = max(s, 2.0**-30)  # a tiny scale only means almost no noise in grid units
        eps_ldp = box = None
        if bounds is not None:
            box = _check_box(bounds)
            (x0, x1), (y0, y1) = box
            d2 = (Fraction(x1) - Fraction(x0)) ** 2 + (Fraction(y1) - Fraction(y0)) ** 2
            num, den = d2.numerator, d2.denominator
            diameter_up = Fraction(math.isqrt(num * den * 4**64) + 1, den * 2**64)  # >= sqrt(d2)
            root2_up = Fraction(math.isqrt(2 * 4**64) + 1, 2**64)
            eps_ldp = round_up(Fraction(epsilon) * (diameter_up + root2_up * Fraction(grid)))
        return cls(epsilon, grid, lam, s, eps_ldp, box)

    label = "local.planar_laplace"

    @property
    def cost(self) -> Cost:
        """What a release charges: ``epsilon_ldp``, pure. Without ``bounds`` there is none (a
        ValueError: geo-indistinguishability has no finite plain epsilon over the plane)."""
        if self.epsilon_ldp is None:
            raise _no_plain_epsilon()
        return Cost(epsilon=self.epsilon_ldp)

    def release(self, data: Any, *, accountant: AccountantLike | None = None,
                random_state: RandomStateLike = None) -> Any:
        """Privatise ``data`` (one location per user, shape (n, 2) or (2,)), charging
        :attr:`cost` once (bad points raise before the charge; an empty input charges nothing);
        see :func:`planar_laplace`."""
        prepared = self._prepare(data)
        if self.bounds is None and accountant is not None:
            raise _no_plain_epsilon()
        if prepared[0].size == 0:
            return np.zeros((0, 2))
        if self.bounds is None:
            # Geo-indistinguishability only, which no accountant composes: nothing is charged.
            return release(lambda rng: self._draw(prepared, rng), cost=Cost(epsilon=0.0),
                           accountant=None, random_state=random_state, label=self.label)
        return self._release_prepared(prepared, accountant=accountant, random_state=random_state)

    def _prepare(self, data: Any) -> tuple[np.ndarray, bool]:
        """(grid centres as int64 indices, shape (n, 2); whether one point was given)."""
        pts = check.finite_array(data, "points")
        single = pts.shape == (2,)
        if single:
            pts = pts.reshape(1, 2)
        elif pts.ndim != 2 or pts.shape[1] != 2:
            raise ValueError(f"points must have shape (n, 2) or (2,), got {pts.ndim} dimensions / "
                             f"{pts.shape[-1] if pts.ndim else 0} columns")
        if self.bounds is not None:
            (x0, x1), (y0, y1) = self.bounds
            inside = (pts[:, 0] >= x0) & (pts[:, 0] <= x1) & (pts[:, 1] >= y0) & (pts[:, 1] <= y1)
            if not inside.all():
                raise ValueError("every point must lie inside bounds; some point is outside")
        scaled = pts / self.grid  # exact: the grid is a power of two (barring underflow, checked)
        if np.abs(scaled).max(initial=0.0) >= MAX_GRID_INDEX:
            raise ValueError("points must lie within 2**50 grid steps of the origin; some point is farther")
        if np.any((pts != 0) & (scaled * self.grid != pts)):
            raise ValueError("grid is too fine for these coordinates (points / grid is not exact)")
        return np.rint(scaled).astype(np.int64), single

    def _draw(self, prepared: tuple[np.ndarray, bool], rng: np.random.Generator) -> np.ndarray:
        centres, single = prepared
        offsets = _planar_offsets(centres.shape[0], self, rng)
        out = (centres + offsets).astype(np.float64) * self.grid  # exact: |index| < 2**51
        return out[0] if single else out


def _no_plain_epsilon() -> ValueError:
    return ValueError(
        "an accountant needs bounds: geo-indistinguishability has no finite plain epsilon "
        "over the unbounded plane (give the public box the locations lie in)"
    )


def _check_box(bounds: Any) -> Box:
    try:
        bx, by = bounds
    except (TypeError, ValueError):
        raise TypeError("bounds must be ((x_min, x_max), (y_min, y_max))") from None
    return check.bounds_pair(bx, "bounds[0]"), check.bounds_pair(by, "bounds[1]")


def planar_laplace(points: ArrayLike, *, epsilon: float, grid: float,
                   bounds: tuple[tuple[float, float], tuple[float, float]] | None = None,
                   random_state: RandomStateLike = None, accountant: AccountantLike | None = None
                   ) -> np.ndarray:
    """Privatise one location per user with the planar Laplace mechanism on a public grid.

    Each location is snapped to the nearest point of the grid u Z^2 and moved by a random
    offset d in Z^2 (in grid units) with P(d) proportional to exp(-epsilon u ||d||_2): the
    planar Laplace of Andres et al. restricted to the grid, drawn exactly. Outputs are grid
    points, so no low-order bit depends on the input.

    Parameters
    ----------
    points : array_like of float, shape (n, 2) or (2,)
        One location per user (Euclidean coordinates, e.g. metres in a local projection).
        NaN, infinities and coordinates beyond 2**50 grid steps are an error.
    epsilon : float
        Geo-indistinguishability level per unit of distance, > 0 (e.g. ln(4) / 200 for
        "ln 4 within 200 m").
    grid : float
        Public grid spacing u, a power of two (e.g. 2.0**3 metres). Smaller is more accurate;
        the snapping adds sqrt(2) u to the distances in the guarantee.
    bounds : ((x_min, x_max), (y_min, y_max)), optional
        A public box every location lies in (points outside are an error). Needed for a plain
        epsilon-LDP statement and for charging an accountant.
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's cryptographically secure generator. Seeds are for tests only.
    accountant : dpcore.Accountant, optional
        Requires ``bounds``; charged ``epsilon_ldp`` once (see Privacy) before anything is drawn.

    Returns
    -------
    ndarray of float, shape (n, 2) or (2,)
        Grid points u * (i, j), exact doubles.

    Raises
    ------
    ValueError
        Bad shapes, non-finite or out-of-range coordinates, points outside ``bounds``,
        epsilon or grid out of range, an accountant without ``bounds``.
    TypeError
        Non-numeric arguments, a bad ``random_state`` or ``accountant``.

    Privacy
    -------
    epsilon geo-indistinguishability (epsilon d-privacy) per user, up to the snapping: for any
    two locations x, x' of one user and every output z, P(z | x) <= exp(epsilon (d(x, x') +
    sqrt(2) u)) P(z | x'), d the Euclidean distance; exactly exp(epsilon d(x, x')) for locations
    on the grid. Proof: the law of z - c (c = u rint(x / u), exact since u is a power of two) is
    the same for every c, so the ratio is exp(epsilon u (||z/u - c'/u|| - ||z/u - c/u||)) <=
    exp(epsilon ||c - c'||), and ||c - c'|| <= d(x, x') + sqrt(2) u. With ``bounds`` of
    diameter D this is epsilon (D + sqrt(2) u)-LDP (rounded up: ``epsilon_ldp``), and that is
    what an accountant is charged, once (the per-user local epsilon; parallel composition across
    users). Without ``bounds`` there is no finite plain epsilon, and an accountant is refused.

    Notes
    -----
    Sampling is exact: proposals are two independent exact discrete Laplace integers of scale
    s >= sqrt(2) / (epsilon u) (P proportional to exp(-(|d1| + |d2|) / s)), accepted with
    probability exp(-gamma), gamma = epsilon u ||d|| - (|d1| + |d2|) / s >= 0 (||d||_1 <=
    sqrt(2) ||d||_2): accept iff -ln(U) > gamma for a full-precision uniform U, decided in the
    compiled kernel on proven enclosures of -ln(U) and gamma, and in exact rational arithmetic
    (integer square roots, correctly rounded logarithms, U's cell refined with fresh bits) when
    those do not decide. About 1.3 proposals per point. Not constant-time.

    References
    ----------
    .. [ABCP13] M. E. Andres, N. E. Bordenabe, K. Chatzikokolakis, C. Palamidessi,
       "Geo-indistinguishability: differential privacy for location-based systems", CCS 2013.

    Examples
    --------
    >>> from dpcore import local
    >>> z = local.planar_laplace([[100.0, 250.0], [3.0, 4.0]], epsilon=0.01, grid=8.0,
    ...                          random_state=0)
    >>> z.shape, bool((z % 8.0 == 0).all())
    ((2, 2), True)
    """
    mech = PlanarLaplaceMechanism.calibrate(epsilon=epsilon, grid=grid, bounds=bounds)
    return mech.release(points, accountant=accountant, random_state=random_state)


def _planar_offsets(n: int, mech: PlanarLaplaceMechanism, rng: np.random.Generator
                    ) -> np.ndarray:
    """n exact draws of d in Z^2 with P(d) proportional to exp(-lambda ||d||_2)."""
    out = np.empty((n, 2), dtype=np.int64)
    _noise_planar.planar_laplace_into(out, mech.decay, mech.proposal_scale, rng)
    return out
