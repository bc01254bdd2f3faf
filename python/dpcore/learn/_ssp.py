"""Least squares by sufficient-statistics perturbation (SSP), with AdaSSP's adaptive ridge
(Wang 2018) as an option.

The rows are first mapped by :class:`~dpcore.learn.LinearRegression` into a public domain: every
scaled row x has ||x||_2 <= r and |x_j| <= b_j, and every scaled target |y| <= 1. This module
releases, with exact noise on power-of-two grids, the statistics least squares needs:

* ``min_eigenvalue`` (AdaSSP only): the smallest eigenvalue of the Gram matrix of the rows
  [x, c] (c a public constant; without an intercept, of X^T X), the input of the adaptive ridge;
* ``gram``: the upper triangle of X^T X (row-major, diagonal included);
* ``xy``: X^T y; and, with an intercept, ``sum_x`` (X^T 1) and ``sum_y`` (sum y).

Pure epsilon-DP uses the exact discrete Laplace (L1 sensitivities); given delta, rho-zCDP with
rho = :func:`dpcore.calibration.zcdp_rho_for` (epsilon, delta) uses the exact discrete Gaussian
(L2 sensitivities). Each part is one :class:`~dpcore.mechanisms.LaplaceMechanism` or
:class:`~dpcore.mechanisms.GaussianMechanism`, which rounds to its grid and charges that
rounding to the sensitivity. The sums are exact: the scaled rows and targets are rounded to
public power-of-two lattices (:class:`SSPLattice`) on which every record adds an exact multiple of
each sum's grid, the sums are int64 grid units (the same bits in memory and on Dask chunks), and
each release is grid * (sum + the mechanism's integer noise). The grids are 2^-40 of the
discrete Laplace's scale and 2^-38 of the discrete Gaussian's sigma (finer than
``dpcore.laplace``'s 2^-30, so that the rows' lattice is fine too), never finer than
2^(ceil(log2 n) + 1 - SUM_BITS) so that a sum fits in int64. The fit (:func:`ssp_solve`) is post-processing of the released values and public
numbers only.

All functions here read public values only, except :func:`ssp_statistics` (the exact statistics)
and :func:`ssp_release` (which draws); the charge is made once by the caller.

Privacy
-------
Plans and samplers of LinearRegression's sufficient-statistics release (replace-one, n public):
pure epsilon-DP with the discrete Laplace, rho-zCDP with the discrete Gaussian when delta is
given; charged once by LinearRegression.fit, whose Privacy section states it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from dpcore import _validation as check
from dpcore._floats import round_down
from dpcore._learn_sums import lattice_integers, lattice_sums
from dpcore._release import Cost
from dpcore.calibration import zcdp_rho_for
from dpcore.learn._base import laplace_grid
from dpcore.mechanisms import GaussianMechanism, LaplaceMechanism

__all__ = ["SSPDomain", "SSPPlan", "ssp_sensitivities", "ssp_noise_norm", "ssp_plan",
           "ssp_statistics", "ssp_release", "ssp_solve", "gram_from_upper", "SSPLattice",
           "ssp_units", "SSPDesign", "ssp_chunk"]

# Budget of the slope statistics, as fractions of what the intercept's sum y leaves: the
# smallest eigenvalue (AdaSSP only; without it the others are renormalised), X^T X, X^T y,
# X^T 1 (bench/dev_suite.py regression).
SHARES = {"min_eigenvalue": Fraction(1, 10), "gram": Fraction(1, 2), "xy": Fraction(1, 4),
          "sum_x": Fraction(3, 20)}
# sum y gets the share that puts the noise of the released mean at MEAN_NOISE (in the [-1, 1]
# units of y), kept within [MIN_Y_SHARE, MAX_Y_SHARE]: a fixed error for the intercept.
MEAN_NOISE = 0.02
MIN_Y_SHARE = 0.02
MAX_Y_SHARE = 0.8
# The slopes are released only when the 95% bound on the Gram noise's spectral norm (with the
# Gram's share of the whole budget) is at most MAX_NOISE_PER_RECORD * n (discrete Laplace) or
# MAX_NOISE_PER_RECORD_GAUSSIAN * n: beyond it the noise is one or two units of variance per
# record in the [-1, 1] units and the slopes cost the mean more than they bring (measured on
# bench/dev_suite.py); the fit then releases sum y alone (all of epsilon) and predicts its mean.
MAX_NOISE_PER_RECORD = 2.0
MAX_NOISE_PER_RECORD_GAUSSIAN = 1.0
# The constant column of the rows [x, c] whose smallest eigenvalue is released: c = r / 2.
EIGEN_COLUMN = 0.5
# One-sided failure probability of the noisy lower bound on the smallest eigenvalue.
FAILURE = 0.05
# AdaSSP's ridge is max(0, RIDGE_SCALE * tau - lambda_low) (Wang: 1); the eigenvalues of the
# (ridged) matrix are then raised to at least EIGEN_FLOOR * tau (tau: the 95% noise bound).
# Chosen on bench/dev_suite.py regression: the whole bound in either over-shrinks.
RIDGE_SCALE = 0.25
EIGEN_FLOOR = 0.5
# Before the floor, the spread of the noisy eigenvalues around their mean is shrunk by the
# spread the noise adds in expectation (James-Stein on the spectrum; bench/dev_suite.py).
SHRINK_SPECTRUM = True

PARTS = ("min_eigenvalue", "gram", "xy", "sum_x", "sum_y")
# The parts that are sums over the records (released as exact integers in grid units).
SUM_PARTS = ("gram", "xy", "sum_x", "sum_y")
# The scaled rows and targets are rounded to power-of-two lattices (x to h, y to h_y, see
# SSPLattice) never finer than 2^-LATTICE_BITS, so that the products of lattice integers stay
# below 2^53 in blocks of at least 2^13 rows (exact in BLAS's double arithmetic).
LATTICE_BITS = 20
# An exact sum is at most 2^SUM_BITS grid units (the grids are floored for it: _sum_grid_floor).
SUM_BITS = 60
# The grids of the released parts: 2^-SCALE_BITS of the discrete Laplace's scale, 2^-(SCALE_BITS
# - 2) of the discrete Gaussian's sigma (the Gram's grid sets the rows' lattice step h: h^2 >= it).
SCALE_BITS = 40


def _sqrt_up(q):
    """A rational >= sqrt(q) (q a non-negative rational), within a few ulps."""
    s = math.sqrt(float(q))
    while Fraction(s) * Fraction(s) < q:
        s = math.nextafter(s, math.inf)
    return Fraction(s)


def _sqrt_down(q):
    """A double <= sqrt(q) (q a non-negative rational), within a few ulps."""
    s = math.sqrt(float(q))
    while Fraction(s) * Fraction(s) > q:
        s = math.nextafter(s, -math.inf)
    return s


@dataclass(frozen=True)
class SSPDomain:
    """The public domain of the scaled rows: ||x||_2^2 <= ``row_norm_sq`` and |x_j| <= ``coord[j]``
    (and |y| <= 1). ``row_norm_sq`` is lowered to sum_j coord_j^2 when that is smaller."""

    row_norm_sq: Fraction
    coord: tuple

    @classmethod
    def make(cls, row_norm_sq: Any, coord: Any) -> SSPDomain:
        coord = tuple(Fraction(float(b)) for b in coord)
        if not coord or min(coord) <= 0:
            raise ValueError("the scaled domain needs at least one feature and positive bounds")
        r2 = min(Fraction(row_norm_sq), sum(b * b for b in coord))
        return cls(r2, coord)

    @property
    def d(self) -> int:
        return len(self.coord)

    @property
    def eigen_column(self) -> float:
        """The constant c of the rows [x, c] whose smallest eigenvalue is released:
        ``EIGEN_COLUMN`` r, rounded down."""
        return EIGEN_COLUMN * _sqrt_down(self.row_norm_sq)

    @property
    def l1_norm(self) -> Fraction:
        """sup ||x||_1: min(sum_j b_j, sqrt(d) r)."""
        return min(sum(self.coord), _sqrt_up(self.d * self.row_norm_sq))


def _row_norms(X):
    """Euclidean norm of each row of a C-ordered X (a per-row reduction: the same bits for a row
    whatever the other rows, so chunks and the whole array agree)."""
    return np.sqrt(np.einsum("ij,ij->i", X, X))


@dataclass(frozen=True)
class SSPDesign:
    """LinearRegression's public map of a record (x, y) into the SSP domain, row by row.

    Per-feature bounds only (``data_norm`` None): x clipped to [l, u], then (x - m) / h with m, h
    the bounds' midpoint and half-width (without an intercept m = 0, h = max(|l|, |u|)); domain
    the cube [-1, 1]^d. With ``data_norm`` L: x clipped to the bounds if given, rows longer than
    L scaled down to L, divided by L (and by their norm if rounding left it above 1); domain
    the unit ball, intersected with |x_j| <= max(|l_j|, |u_j|) / L. The target is clipped to
    [ly, uy] and mapped to (y - my) / hy in [-1, 1]. Public values only."""

    bounds_x: tuple | None
    data_norm: float | None
    bounds_y: tuple
    y_centre: float
    y_half: float
    x_centre: np.ndarray = field(repr=False)
    x_half: np.ndarray = field(repr=False)
    domain: SSPDomain = field(repr=False)

    @classmethod
    def make(cls, d: int, bounds_x: Any, bounds_y: Any, data_norm: float | None,
             intercept: bool, y_centre: float, y_half: float) -> SSPDesign:
        if data_norm is None:
            lx, ux = bounds_x
            if intercept:
                mx, hx = (lx + ux) / 2.0, (ux - lx) / 2.0
            else:
                mx, hx = np.zeros(d), np.maximum(np.abs(lx), np.abs(ux))
            domain = SSPDomain.make(d, np.ones(d))
        else:
            mx, hx = np.zeros(d), np.full(d, data_norm)
            coord = np.ones(d) if bounds_x is None else np.minimum(
                1.0, np.maximum(np.abs(bounds_x[0]), np.abs(bounds_x[1])) / data_norm)
            domain = SSPDomain.make(1, np.where(coord > 0, coord, 1.0))
        return cls(bounds_x, data_norm, tuple(bounds_y), y_centre, y_half, mx, hx, domain)

    def scale(self, X: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
        """(scaled rows, scaled targets), each row and target on its own."""
        X = np.ascontiguousarray(X, dtype=np.float64)
        Xc = X if self.bounds_x is None else np.clip(X, *self.bounds_x)
        if self.data_norm is None:
            Xs = (Xc - self.x_centre) / self.x_half
        else:
            norms = _row_norms(Xc)
            with np.errstate(divide="ignore", invalid="ignore"):
                shrink = np.where(norms > self.data_norm, self.data_norm / norms, 1.0)
            Xs = Xc * shrink[:, None] / self.data_norm
            Xs /= np.maximum(1.0, _row_norms(Xs))[:, None]   # norm <= 1 after rounding
        ys = (np.clip(np.asarray(y, dtype=np.float64), *self.bounds_y) - self.y_centre) / self.y_half
        return Xs, ys


def ssp_chunk(x: Any, y: Any, design: SSPDesign, lattice: SSPLattice) -> tuple[Any, bool, bool]:
    """On a Dask worker (and in memory, on the whole array): the exact lattice sums
    (:meth:`SSPLattice.sums`) of a chunk's scaled records, whether the chunk's X holds a
    non-finite value and whether its y does (flags checked before the charge). Per-feature
    bounds: scaled and summed in one pass (:meth:`SSPLattice.scaled_sums`)."""
    if design.bounds_x is not None and design.data_norm is None:
        lower, upper = design.bounds_x
        sums, (bad_x, bad_y) = lattice.scaled_sums(
            x, y, lower, upper, design.x_centre, design.x_half, design.bounds_y,
            design.y_centre, design.y_half)
        return sums, bad_x, bad_y
    x = np.ascontiguousarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    bad_x, bad_y = not bool(np.isfinite(x).all()), not bool(np.isfinite(y).all())
    with np.errstate(invalid="ignore", over="ignore"):
        Xs, ys = design.scale(np.nan_to_num(x), np.nan_to_num(y))
    return lattice.sums(Xs, ys), bad_x, bad_y


def ssp_sensitivities(domain: SSPDomain, *, gaussian: bool, intercept: bool
                      ) -> dict[str, Fraction]:
    """Replace-one sensitivities (L1, or L2 when ``gaussian``) of each released part, as exact
    rationals, on the scaled domain (n public).

    With x, x' two rows of the domain and y, y' in [-1, 1] (r^2 = ``row_norm_sq``, b the
    coordinate bounds, L = sup ||x||_1):

    * ``min_eigenvalue`` of sum [x, c][x, c]^T: replacing a row subtracts z z^T and adds z' z'^T
      (z = [x, c]), so by Weyl's inequalities the smallest eigenvalue moves by at most
      max(||z||^2, ||z'||^2) <= r^2 + c^2 (c = 0 without an intercept);
    * ``gram``, L1: the diagonal moves by sum_j |x_j^2 - x'_j^2| <= min(sum b_j^2, 2 r^2), the
      upper triangle by at most sum_{j<k} |x_j x_k| + |x'_j x'_k| <= 2 P with
      P = min(((sum b)^2 - sum b^2) / 2, (d - 1) r^2 / 2);
      L2 (off-diagonal entries released doubled): ||delta||^2 <= 2 ||x x^T - x' x'^T||_F^2
      = 2 (||x||^4 + ||x'||^4 - 2 (x.x')^2) <= 4 r^4, so 2 r^2;
    * ``xy`` and ``sum_x``: 2 L (L1) or 2 r (L2); ``sum_y``: 2.

    >>> s = ssp_sensitivities(SSPDomain.make(3, [1, 1, 1]), gaussian=False, intercept=True)
    >>> {k: float(v) for k, v in s.items()}
    {'min_eigenvalue': 3.75, 'gram': 9.0, 'xy': 6.0, 'sum_x': 6.0, 'sum_y': 2.0}
    """
    r2, b, d = domain.row_norm_sq, domain.coord, domain.d
    c2 = Fraction(domain.eigen_column) ** 2 if intercept else Fraction(0)
    out = {"min_eigenvalue": r2 + c2}
    if gaussian:
        r = _sqrt_up(r2)
        out.update(gram=2 * r2, xy=2 * r)
        if intercept:
            out.update(sum_x=2 * r, sum_y=Fraction(2))
        return out
    sb, sb2 = sum(b), sum(x * x for x in b)
    pairs = min((sb * sb - sb2) / 2, (d - 1) * r2 / 2)
    out.update(gram=min(sb2, 2 * r2) + 2 * pairs, xy=2 * domain.l1_norm)
    if intercept:
        out.update(sum_x=2 * domain.l1_norm, sum_y=Fraction(2))
    return out


def ssp_noise_norm(d: int, sd_diagonal: float, sd_off_diagonal: float) -> float:
    """A 95% bound on the spectral norm of a symmetric d x d noise matrix with independent
    entries on and above the diagonal (Laplace or Gaussian, standard deviations as given).

    tau = 2 sqrt(sd_diag^2 + (d - 1) sd_off^2) + 1.5 max(sd_diag, sd_off): twice the largest
    row's standard deviation is the semicircle edge for large d; the second term covers small d
    and the Laplace tails. Coverage >= 0.95 is simulated in tests/test_learn_ssp.py for d from 1
    to 40, Laplace and Gaussian entries. Public values only.

    >>> round(ssp_noise_norm(4, 1.0, 1.0), 3)
    5.5
    """
    d = check.integer(d, "d", minimum=1)
    sd_d = check.nonnegative(sd_diagonal, "sd_diagonal")
    sd_o = check.nonnegative(sd_off_diagonal, "sd_off_diagonal")
    return 2.0 * math.sqrt(sd_d * sd_d + (d - 1) * sd_o * sd_o) + 1.5 * max(sd_d, sd_o)


def _noise_sd(mech):
    """Standard deviation of one noise draw of a mechanism, in the released (scaled) units
    (discrete laws on grids ~2^30 times finer than the scale: the continuous values)."""
    if isinstance(mech, LaplaceMechanism):
        return math.sqrt(2.0) * mech.scale * mech.grid
    return mech.sigma * mech.grid


def _lower_margin(mech):
    """m with P(noise > m) <= FAILURE for the one-sided lower bound on the eigenvalue."""
    if isinstance(mech, LaplaceMechanism):
        return mech.scale * mech.grid * math.log(1.0 / (2.0 * FAILURE))
    return mech.sigma * mech.grid * math.sqrt(2.0 * math.log(1.0 / FAILURE))


@dataclass(frozen=True)
class SSPPlan:
    """What an SSP fit releases, computed from public values only (n is public).

    ``mechanisms`` maps each released part (``PARTS``, ``min_eigenvalue`` only with
    ``adaptive_ridge``; only ``sum_y`` when ``mean_only``) to its calibrated mechanism; ``cost`` is the charge (epsilon, or rho with delta); the gram's
    off-diagonal entries are released multiplied by ``offdiag_weight`` (2 for the Gaussian).
    """

    n: int
    d: int
    intercept: bool
    gaussian: bool
    mean_only: bool
    adaptive_ridge: bool
    eigen_column: float
    offdiag_weight: float
    cost: Cost
    sensitivities: dict = field(repr=False)
    mechanisms: dict = field(repr=False)

    def noise_sd(self, part: str) -> float:
        return _noise_sd(self.mechanisms[part])

    def gram_noise_norm(self) -> float:
        """:func:`ssp_noise_norm` of the Gram noise (in the scaled units)."""
        sd = self.noise_sd("gram")
        return ssp_noise_norm(self.d, sd, sd / self.offdiag_weight)


def _slope_shares(intercept, adaptive_ridge):
    """The slope statistics' proportions (exact rationals summing to 1)."""
    parts = ["gram", "xy"] + (["sum_x"] if intercept else [])
    if adaptive_ridge:
        parts.append("min_eigenvalue")
    total = sum(SHARES[k] for k in parts)
    return {k: SHARES[k] / total for k in parts if SHARES[k] > 0}


def _shares(intercept, y_share, adaptive_ridge):
    """Part -> its share of the budget (exact rationals summing to 1)."""
    out = {k: (1 - y_share) * v for k, v in _slope_shares(intercept, adaptive_ridge).items()}
    if intercept:
        out["sum_y"] = y_share
    return out


def _sum_grid_floor(n):
    """The finest grid of a released sum over n records: every record moves a sum by at most 2
    (scaled units), so on a grid >= 2^(ceil(log2 n) + 1 - SUM_BITS) the exact integer sum stays
    within 2^SUM_BITS grid units (int64, with room for the noise). Public (n is public)."""
    return 2.0 ** (math.ceil(math.log2(n)) + 1 - SUM_BITS)


def _mechanism(sens, share, epsilon, rho, size, gaussian, n):
    """The part's mechanism on a grid of 2^-SCALE_BITS of its noise scale (floored by
    :func:`_sum_grid_floor`): finer than dpcore.laplace's 2^-30, so that the lattice step of the
    rows, the square root of the Gram's grid, is fine too (the noise scale stays below the
    samplers' limits, 2^44 grid units for the discrete Laplace and 2^40 for the Gaussian)."""
    sens = float(sens)   # sensitivities are rationals of doubles; the float rounds up below
    sens = math.nextafter(sens, math.inf)
    if gaussian:
        rho_share = round_down(Fraction(rho) * share)
        sigma = sens / math.sqrt(2.0 * rho_share)
        grid = max(2.0 ** (math.floor(math.log2(sigma)) - SCALE_BITS + 2), _sum_grid_floor(n))
        return GaussianMechanism.calibrate(sensitivity=sens, rho=rho_share, size=size,
                                           granularity=grid)
    eps = round_down(Fraction(epsilon) * share)
    grid = max(2.0 ** (math.floor(math.log2(sens / eps)) - SCALE_BITS), _sum_grid_floor(n))
    return LaplaceMechanism.calibrate(sensitivity=sens, epsilon=eps, size=size, granularity=grid)


def ssp_plan(n: int, domain: SSPDomain, *, epsilon: float, delta: float | None = None,
             intercept: bool = True, adaptive_ridge: bool = False) -> SSPPlan:
    """The public plan of an SSP fit: which parts are released, with which mechanism each,
    and the cost (``adaptive_ridge``: AdaSSP, with the smallest eigenvalue). Nothing here reads
    the data.

    The budget (epsilon, or rho = zcdp_rho_for(epsilon, delta)) is split: sum y (with an
    intercept) gets the share that puts the noise of the released mean at ``MEAN_NOISE``,
    within [``MIN_Y_SHARE``, ``MAX_Y_SHARE``]; the rest goes to the other parts in the
    proportions ``SHARES`` (renormalised over the parts released). When even the Gram's share of
    the whole budget leaves a Gram noise
    bound above ``MAX_NOISE_PER_RECORD * n``, only sum y is released (discrete Laplace with all
    of epsilon, pure epsilon-DP also when delta is given) and the model predicts its mean.

    >>> plan = ssp_plan(1000, SSPDomain.make(2, [1, 1]), epsilon=1.0, adaptive_ridge=True)
    >>> sorted(plan.mechanisms), plan.mean_only, plan.cost.epsilon
    (['gram', 'min_eigenvalue', 'sum_x', 'sum_y', 'xy'], False, 1.0)
    >>> sorted(ssp_plan(1000, SSPDomain.make(2, [1, 1]), epsilon=1.0).mechanisms)
    ['gram', 'sum_x', 'sum_y', 'xy']
    >>> ssp_plan(20, SSPDomain.make(2, [1, 1]), epsilon=1.0).mean_only
    True
    """
    n = check.integer(n, "n", minimum=1)
    epsilon = check.positive(epsilon, "epsilon")
    gaussian = delta is not None
    rho = zcdp_rho_for(epsilon, check.probability(delta, "delta")) if gaussian else None
    d = domain.d
    sens = ssp_sensitivities(domain, gaussian=gaussian, intercept=intercept)
    weight = 2.0 if gaussian else 1.0
    size = {"min_eigenvalue": 1, "gram": d * (d + 1) // 2, "xy": d, "sum_x": d, "sum_y": 1}
    if intercept:
        # the slopes' fate at the Gram's share of the whole budget (public)
        gram_share = _slope_shares(True, adaptive_ridge)["gram"]
        probe = _mechanism(sens["gram"], gram_share, epsilon, rho, size["gram"], gaussian,
                           n)
        sd = _noise_sd(probe)
        gate = MAX_NOISE_PER_RECORD_GAUSSIAN if gaussian else MAX_NOISE_PER_RECORD
        if ssp_noise_norm(d, sd, sd / weight) > gate * n:
            # the mean alone, with the whole budget; with delta under the same rho-zCDP charge
            # as the full release, so the cost does not depend on which branch n selects
            if gaussian:
                mech = GaussianMechanism.calibrate(sensitivity=2.0, rho=rho)
            else:
                mech = LaplaceMechanism.calibrate(sensitivity=2.0, epsilon=epsilon,
                                                  granularity=laplace_grid(2.0, epsilon))
            cost = Cost(rho=rho) if gaussian else Cost(epsilon)
            return SSPPlan(n, d, True, gaussian, True, adaptive_ridge, 0.0, weight, cost,
                           {"sum_y": Fraction(2)}, {"sum_y": mech})
        if gaussian:
            assert rho is not None
            y_share = 2.0 / (MEAN_NOISE ** 2 * float(n) ** 2 * rho)
        else:
            y_share = 2.0 * math.sqrt(2.0) / (MEAN_NOISE * epsilon * n)
        y_share = Fraction(min(MAX_Y_SHARE, max(MIN_Y_SHARE, y_share)))
    else:
        y_share = Fraction(0)
    shares = _shares(intercept, y_share, adaptive_ridge)
    mechs = {k: _mechanism(sens[k], shares[k], epsilon, rho, size[k], gaussian, n)
             for k in shares}
    cost = Cost(rho=rho) if gaussian else Cost(epsilon)
    column = domain.eigen_column if intercept else 0.0
    return SSPPlan(n, d, intercept, gaussian, False, adaptive_ridge, column, weight, cost, sens,
                   mechs)


def _exponent(grid):
    """e with grid = 2^e (every grid here is a power of two)."""
    mantissa, e = math.frexp(grid)
    assert mantissa == 0.5, grid
    return e - 1


@dataclass(frozen=True)
class SSPLattice:
    """The public lattices of the scaled rows (step h = 2^``x_exponent``) and targets (h_y =
    2^``y_exponent``), chosen from the plan's grids so that every record's contribution to every
    released sum is an exact multiple of that sum's grid: h^2 of the Gram's (times the
    off-diagonal weight), h h_y of X^T y's, h of X^T 1's, h_y of sum y's, each as fine as that
    allows but never finer than 2^-LATTICE_BITS. A row x in the domain becomes the integers
    a = rint(x / h) when a h is still in the domain (|a_j h| <= b_j, ||a h||^2 <= r^2, checked in
    integers), else trunc(x / h) toward zero (|a_j h| <= |x_j|: in the domain); the target
    c = rint(y / h_y) (|c h_y| <= 1). The sums are then exact integers: the Gram's sum_i a_ij a_ik
    by BLAS on blocks of ``block_rows`` rows, all of whose partial sums are integers below 2^53
    (exact in double precision), added in int64."""

    x_exponent: int
    y_exponent: int
    coord_units: tuple
    norm_units: int
    multipliers: dict = field(repr=False)
    block_rows: int = 2**13

    @classmethod
    def make(cls, plan: SSPPlan, domain: SSPDomain) -> SSPLattice:
        grids = {k: _exponent(plan.mechanisms[k].grid) for k in SUM_PARTS
                 if k in plan.mechanisms}
        floor = -LATTICE_BITS
        ex = floor
        if "gram" in grids:
            ex = max(ex, -((-grids["gram"]) // 2))          # h^2 >= the Gram's grid
        if "sum_x" in grids:
            ex = max(ex, grids["sum_x"])
        ey = max([floor] + ([grids["xy"] - ex] if "xy" in grids else [])
                 + ([grids["sum_y"]] if "sum_y" in grids else []))
        weight = int(plan.offdiag_weight)
        mult = {}
        if "gram" in grids:
            mult["gram"] = 2 ** (2 * ex - grids["gram"])
            mult["gram_offdiag"] = weight * mult["gram"]
            mult["xy"] = 2 ** (ex + ey - grids["xy"])
        if "sum_x" in grids:
            mult["sum_x"] = 2 ** (ex - grids["sum_x"])
        if "sum_y" in grids:
            mult["sum_y"] = 2 ** (ey - grids["sum_y"])
        h = Fraction(2) ** ex
        coord = tuple(math.floor(b / h) for b in domain.coord)
        norm = math.floor(domain.row_norm_sq / (h * h))
        largest = max(-2 * ex, -ex - ey)        # log2 of the largest |a_j a_k| or |a_j c|
        return cls(ex, ey, coord, norm, mult, 2 ** max(0, 53 - largest))

    def integers(self, Xs: np.ndarray, ys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(a, c): the lattice integers of the scaled rows and targets, as float64 arrays
        (exact integers). Row by row: the same integers whatever the chunking, and the same
        rounding as :meth:`sums` (``dpcore._learn_sums``)."""
        Xs = np.ascontiguousarray(Xs, dtype=np.float64)
        a = np.empty_like(Xs)
        c = np.empty(Xs.shape[0])
        x_scale, y_scale, limit, norm = self._steps()
        lattice_integers(Xs, np.ascontiguousarray(ys, dtype=np.float64), x_scale, y_scale, limit,
                         norm, a, c)
        return a, c

    def _steps(self) -> tuple[float, float, np.ndarray, int]:
        """(x scale, y scale, coordinate limits, norm bound) of the kernels: 2^-x_exponent,
        2^-y_exponent (exact powers of two), the limits in lattice units as float64."""
        return (2.0 ** -self.x_exponent, 2.0 ** -self.y_exponent,
                np.array(self.coord_units, dtype=np.float64), min(self.norm_units, 2**63 - 1))

    def sums(self, Xs: np.ndarray, ys: np.ndarray) -> tuple[np.ndarray, ...]:
        """The exact integer sums of the lattice rows and targets of scaled rows and targets:
        (sum_i a_i a_i^T (d x d), sum_i a_i c_i, sum_i a_i, [sum_i c_i]) as int64 arrays."""
        d = np.shape(Xs)[1]
        sums, _ = self.scaled_sums(Xs, ys, np.full(d, -np.inf), np.full(d, np.inf),
                                   np.zeros(d), np.ones(d), (-np.inf, np.inf), 0.0, 1.0)
        return sums

    def scaled_sums(self, X: Any, y: Any, lower: np.ndarray, upper: np.ndarray,
                    centre: np.ndarray, half: np.ndarray, bounds_y: tuple, y_centre: float,
                    y_half: float) -> tuple[tuple[np.ndarray, ...], tuple[bool, bool]]:
        """:meth:`sums` of raw records, scaled on the fly: x_j clipped to [lower_j, upper_j],
        then (x_j - centre_j) / half_j; y clipped to ``bounds_y``, then (y - y_centre) /
        y_half (one pass, ``dpcore._learn_sums.lattice_sums``: the Gram matrix by BLAS on
        blocks of ``block_rows`` rows, all of whose partial sums are integers below 2^53,
        exact in double precision, added in int64). Also whether X, and y, hold a non-finite
        value (mapped as numpy.nan_to_num maps it)."""
        X = np.ascontiguousarray(X, dtype=np.float64)
        d = X.shape[1]
        gram = np.zeros((d, d), dtype=np.int64)
        xy, sx, sy = np.zeros(d, dtype=np.int64), np.zeros(d, dtype=np.int64), np.zeros(
            1, dtype=np.int64)
        lo, hi, mid, width = (np.ascontiguousarray(np.broadcast_to(v, (d,)), dtype=np.float64)
                              for v in (lower, upper, centre, half))
        x_scale, y_scale, limit, norm = self._steps()
        flags = lattice_sums(X, np.ascontiguousarray(y, dtype=np.float64), lo, hi, mid, width,
                             float(bounds_y[0]), float(bounds_y[1]), float(y_centre),
                             float(y_half), x_scale, y_scale, limit, norm, self.block_rows,
                             gram, xy, sx, sy)
        return (gram, xy, sx, sy), (bool(flags & 1), bool(flags & 2))


def ssp_units(plan: SSPPlan, lattice: SSPLattice, sums: tuple[np.ndarray, ...]
              ) -> dict[str, np.ndarray]:
    """The exact statistics from the lattice sums: each released sum as int64 grid units of its
    mechanism (``"gram"``: the upper triangle, row-major, off-diagonal entries times the
    weight), and AdaSSP's smallest eigenvalue (a float) of the lattice rows' [x, c] Gram."""
    gram, xy, sx, sy = sums
    out = {}
    if "sum_y" in plan.mechanisms:
        out["sum_y"] = sy * lattice.multipliers["sum_y"]
    if plan.mean_only:
        return out
    d = plan.d
    iu = np.triu_indices(d)
    upper = gram[iu] * lattice.multipliers["gram"]
    upper[iu[0] != iu[1]] = gram[iu][iu[0] != iu[1]] * lattice.multipliers["gram_offdiag"]
    out.update(gram=upper, xy=xy * lattice.multipliers["xy"])
    if plan.intercept:
        out["sum_x"] = sx * lattice.multipliers["sum_x"]
    if "min_eigenvalue" in plan.mechanisms:
        h = 2.0 ** lattice.x_exponent
        G = gram.astype(np.float64) * (h * h)
        if plan.intercept:
            c = plan.eigen_column
            aug = np.empty((d + 1, d + 1))   # the Gram matrix of the rows [x, c]
            aug[:d, :d] = G
            aug[:d, d] = aug[d, :d] = c * (sx.astype(np.float64) * h)
            aug[d, d] = c * c * plan.n
            G = aug
        out["min_eigenvalue"] = np.array([np.linalg.eigvalsh(G)[0]])
    return out


def ssp_statistics(Xs: Any, ys: Any, plan: SSPPlan, domain: SSPDomain | None = None
                   ) -> dict[str, np.ndarray]:
    """The exact statistics of the scaled rows and targets, on their lattices
    (:class:`SSPLattice`), in the layout the plan releases them, as floats (grid units times
    the grid; tests and diagnostics). ``domain``: the scaled domain (default: the unit cube)."""
    if domain is None:
        domain = SSPDomain.make(plan.d, np.ones(plan.d))
    lattice = SSPLattice.make(plan, domain)
    units = ssp_units(plan, lattice, lattice.sums(np.asarray(Xs, dtype=float),
                                                  np.asarray(ys, dtype=float)))
    return {k: v if k == "min_eigenvalue" else v.astype(np.float64) * plan.mechanisms[k].grid
            for k, v in units.items()}


def ssp_release(plan: SSPPlan, stats: dict[str, Any], rng: np.random.Generator
                ) -> dict[str, np.ndarray]:
    """Draw every part of the plan (no validation, no charge: the caller charged plan.cost).

    ``stats``: the exact statistics, a sum as int64 grid units (:func:`ssp_units`) or as a float
    on its grid (:func:`ssp_statistics`). A sum's release is grid * (T + K), T its exact
    integer and K the mechanism's integer noise (the mechanism's release of zeros, divided by
    its grid: exact), added in int64; so the noise has exactly the mechanism's law whatever the
    size of T. The smallest eigenvalue is released by its mechanism as is."""
    out = {}
    for k, m in plan.mechanisms.items():
        value = np.asarray(stats[k])
        if k == "min_eigenvalue":
            out[k] = np.asarray(m.release(value, random_state=rng), dtype=float)
            continue
        units = value if value.dtype.kind == "i" else np.rint(value / m.grid).astype(np.int64)
        noise = np.asarray(m.release(np.zeros(units.size), random_state=rng), dtype=float)
        out[k] = (units + np.rint(noise / m.grid).astype(np.int64)).astype(np.float64) * m.grid
    return out


def gram_from_upper(upper: np.ndarray, d: int, offdiag_weight: float = 1.0) -> np.ndarray:
    """The symmetric d x d matrix from its released upper triangle (row-major, diagonal
    included, off-diagonal entries multiplied by ``offdiag_weight``)."""
    iu = np.triu_indices(d)
    out = np.zeros((d, d))
    out[iu] = upper
    off = np.triu_indices(d, k=1)
    out[off] /= offdiag_weight
    return out + np.triu(out, 1).T


def _shrink_spectrum(vals, plan):
    """The eigenvalues pulled towards their mean m by the factor k = max(0, 1 - N / S): S the
    observed spread sum (lambda_i - m)^2, N = (d - 1)(sd_diag^2 + d sd_off^2) the spread that
    symmetric noise with those entry standard deviations adds in expectation (E ||E||_F^2 -
    E (tr E)^2 / d, whatever the matrix). Noise spreads clustered eigenvalues apart (a
    semicircle of radius ~tau around each cluster) and makes the smallest ones too small."""
    d = vals.size
    sd_d = plan.noise_sd("gram")
    sd_o = sd_d / plan.offdiag_weight
    noise_spread = (d - 1) * (sd_d ** 2 + d * sd_o ** 2)
    m = float(vals.mean())
    spread = float(np.sum((vals - m) ** 2))
    keep = max(0.0, 1.0 - noise_spread / spread) if spread > 0 else 0.0
    return m + keep * (vals - m)


@dataclass(frozen=True)
class SSPSolution:
    coef: np.ndarray      # slopes in the scaled units
    intercept: float      # in the scaled units
    ridge: float
    noise_norm: float


def ssp_solve(plan: SSPPlan, noisy: dict[str, np.ndarray], domain: SSPDomain,
              alpha: float = 0.0) -> SSPSolution:
    """The least-squares fit from the released statistics (post-processing only).

    With an intercept the released means are first projected onto the public domain
    (|mean x_j| <= b_j, ||mean x|| <= r, |mean y| <= 1) and the intercept profiled out:
    C = X^T X~ - n xbar xbar^T, g = X^T y~ - n xbar ybar. The noise bound tau is
    :func:`ssp_noise_norm` of the Gram noise plus 2 ||xbar|| times a bound on the noise of
    X^T 1 (the centring's share). With the adaptive ridge (AdaSSP), lambda =
    max(0, RIDGE_SCALE tau - lambda_low), lambda_low = max(0, released smallest eigenvalue - its
    one-sided 95% noise margin), a lower bound on the smallest eigenvalue of C (C is the Schur
    complement of the Gram matrix of [x, c], whose eigenvalues bound C's from below); else
    lambda = 0. The eigenvalues of C + lambda I are pulled towards their mean by the spread the
    noise adds (:func:`_shrink_spectrum`), then raised to at least EIGEN_FLOOR tau, so no
    direction is trusted more than the noise allows, and w = V diag(1 / eigenvalues) V^T g; the
    intercept is ybar - w . xbar. ``alpha`` (public, >= 0) is a ridge added to C first.
    """
    d, n = plan.d, plan.n
    if plan.mean_only:
        ybar = float(np.clip(noisy["sum_y"][0] / n, -1.0, 1.0))
        return SSPSolution(np.zeros(d), ybar, math.inf, math.inf)
    A = gram_from_upper(noisy["gram"], d, plan.offdiag_weight)
    g = noisy["xy"].copy()
    tau = plan.gram_noise_norm()
    if plan.intercept:
        b = np.array([float(x) for x in domain.coord])
        xbar = np.clip(noisy["sum_x"] / n, -b, b)
        r = math.sqrt(float(domain.row_norm_sq))
        norm = float(np.linalg.norm(xbar))
        if norm > r:
            xbar *= r / norm
        ybar = float(np.clip(noisy["sum_y"][0] / n, -1.0, 1.0))
        A -= n * np.outer(xbar, xbar)
        g -= n * xbar * ybar
        tau += 2.0 * float(np.linalg.norm(xbar)) * 2.0 * math.sqrt(d) * plan.noise_sd("sum_x")
    if "min_eigenvalue" in noisy:
        low = max(0.0, float(noisy["min_eigenvalue"][0])
                  - _lower_margin(plan.mechanisms["min_eigenvalue"]))
        ridge = max(0.0, RIDGE_SCALE * tau - low)
    else:
        ridge = 0.0
    vals, vecs = np.linalg.eigh(A + (alpha + ridge) * np.eye(d))
    if SHRINK_SPECTRUM and d > 1:
        vals = _shrink_spectrum(vals, plan)
    vals = np.maximum(vals, EIGEN_FLOOR * tau)
    w = vecs @ ((vecs.T @ g) / vals)
    c0 = ybar - float(w @ xbar) if plan.intercept else 0.0
    return SSPSolution(w, c0, ridge, tau)
