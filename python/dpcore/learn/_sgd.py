"""Noisy gradient descent for the linear models: full-batch ``gd`` (Bassily-Smith-Thakurta
2014) and minibatch ``sgd`` (DP-SGD: Song-Chaudhuri-Sarwate 2013, Abadi et al. 2016) with
Poisson subsampling, per-record clipping, gradients summed exactly on an integer lattice
(the kernel ``dpcore._sgd``) and exact discrete Gaussian noise.

The optimisers release a (clipped) loss gradient at every step; everything else they do is
post-processing of those releases. ``sgd`` is planned from public values only
(:func:`sgd_plan`: steps, sampling rate, clipping norm, learning rate, noise) and accounted with
the Poisson-subsampled discrete Gaussian's RDP curve (:mod:`dpcore.curves`).

Privacy
-------
Each function states the sensitivity of the gradient it releases and the guarantee of one step;
the estimator that calls it charges the whole fit once, before the first step. ``sgd``: see
:class:`SGDPlan`.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Callable, Protocol, cast

import numpy as np

from dpcore import _validation as check
from dpcore._floats import round_down
from dpcore._release import Cost
from dpcore.curves import DiscreteGaussian, PoissonSubsampled
from dpcore.mechanisms import discrete_gaussian, gaussian
from dpcore.random import bitgen_handle

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    from dpcore import _sgd
    from dpcore.curves import Repeated

__all__ = ["noisy_gd", "noisy_gd_multinomial", "gd_steps", "SGDPlan", "sgd_plan", "noisy_sgd",
           "LOSSES", "ArrayRows", "LatticeStep", "chunk_lattice_sum", "class_targets",
           "regression_design", "RowSource"]

#: With more than GD_MIN_STEPS steps, ``gd`` averages the iterates from this fraction of the
#: steps on (the early iterates, near the starting point, bias the average); with at most
#: GD_MIN_STEPS it averages all of them, as Bassily-Smith-Thakurta (there, where the noise
#: dominates, the last half lost: -0.006 mean accuracy on the development cells).
GD_TAIL = 0.5
# ``n_steps="auto"`` for gd (:func:`gd_steps`), chosen with `bench/sgd_dev.py gd`:
GD_STEPS_PER_ROOT_N = 2.0
GD_MIN_STEPS = 300
GD_MAX_STEPS = 1000


def gd_steps(n: int, epsilon: float) -> int:
    """``n_steps="auto"`` of ``method="gd"``: GD_STEPS_PER_ROOT_N * sqrt(n epsilon) steps,
    within [GD_MIN_STEPS, GD_MAX_STEPS], from public values only (n is public under
    replace-one neighbours). Each step's noise grows as sqrt(n_steps) / n, but averaging the
    iterates cancels most of it: on the development data (``bench/sgd_dev.py gd``) fewer than
    300 steps lost everywhere (the weakly regularised objective converges slowly), and where
    2 sqrt(n epsilon) > 300 (the adult-like set at epsilon >= 1) more steps with the average of
    the last half (GD_TAIL) gained.

    >>> gd_steps(10**4, 1.0), gd_steps(10**5, 1.0), gd_steps(10**6, 1.0)
    (300, 632, 1000)
    """
    n = check.integer(n, "n", minimum=1)
    epsilon = check.epsilon(epsilon)
    return int(min(GD_MAX_STEPS, max(GD_MIN_STEPS, round(GD_STEPS_PER_ROOT_N
                                                         * math.sqrt(n * epsilon)))))


def _noisy_descent(lattice_gradient: Callable[[np.ndarray], np.ndarray],
                   shape: int | tuple[int, int], unit: float, lam: float, radius: float,
                   rho: float, n_steps: int, step_size: float, rng: np.random.Generator
                   ) -> NDArray[np.float64]:
    """Noisy projected gradient descent from 0 on the averaged objective: each step releases
    the integer lattice sum ``lattice_gradient(W)`` (every record's vector has L2 norm <=
    2**LATTICE_BITS, so replacing one record moves the sum by at most 2**(LATTICE_BITS + 1))
    with the exact discrete Gaussian at rho / n_steps (rounded down), multiplies it by
    ``unit`` (to the mean loss gradient: post-processing), steps by step_size (g + lam W)
    and projects on the ball of radius ``radius``; returns the average of the iterates from
    GD_TAIL * n_steps on (all of them for n_steps <= GD_MIN_STEPS)."""
    rho_step = round_down(Fraction(rho) / n_steps)
    W = np.zeros(shape)
    total = np.zeros(shape)
    start = int(GD_TAIL * n_steps) if n_steps > GD_MIN_STEPS else 0
    for t in range(n_steps):
        g = np.asarray(gaussian(lattice_gradient(W).astype(np.float64).reshape(shape),
                                sensitivity=2.0**(LATTICE_BITS + 1), rho=rho_step,
                                random_state=rng)) * unit
        W = W - step_size * (g + lam * W)
        norm = float(np.linalg.norm(W))
        if norm > radius:
            W *= radius / norm
        if t >= start:
            total += W
    return total / (n_steps - start)


def noisy_gd(rows: RowSource, loss: str, positive: int, lam: float, rho: float, n_steps: int,
             step_size: float, rng: np.random.Generator, *, h: float = 0.5) -> NDArray[np.float64]:
    """Noisy projected gradient descent (Bassily-Smith-Thakurta 2014) for the binary model
    (1/n) sum loss(s_i w.z_i) + (lam/2)||w||^2 (s_i = +1 for the records of class index
    ``positive``, else -1), returning the average iterate. ``rows``: an :class:`ArrayRows`
    (or ``dpcore.learn._dask.DaskRows``) of rows of norm <= 1 with class indices as targets;
    ``loss``: "logistic" or "huber" (width h).

    Every row has ||z_i|| <= 1 and |loss'| <= 1, so a record's gradient has norm <= 1: the
    kernel rounds it to the lattice of step 2**-LATTICE_BITS (its norm checked <= 1 in integer
    arithmetic) and sums the integers exactly, so replacing one record moves the sum by at most
    2 lattice units of 2**LATTICE_BITS, whatever the order or chunking of the sum. Each step
    releases that sum with dpcore's exact discrete Gaussian at ``rho / n_steps`` (rounded
    down); the division by n, the regulariser's gradient, the step, the projection on the ball
    of radius 1/lam (which holds the minimiser: lam ||w*|| = ||mean gradient|| <= 1) and the
    averaging are post-processing.
    """
    step = LatticeStep(LOSSES[loss][0], h, 1.0, None, None, positive)
    return _noisy_descent(lambda w: rows.lattice_sum(w.reshape(1, -1), step), rows.n_columns,
                          2.0**-LATTICE_BITS / rows.n_rows, lam, 1.0 / lam, rho, n_steps,
                          step_size, rng)


def noisy_gd_multinomial(rows: RowSource, k: int, lam: float, rho: float, n_steps: int,
                         step_size: float, rng: np.random.Generator) -> NDArray[np.float64]:
    """Noisy projected gradient descent for the k-class softmax objective
    (1/n) sum_i [logsumexp(W z_i) - (W z_i)_{y_i}] + (lam/2)||W||^2, average iterate
    (``rows`` as in :func:`noisy_gd`, targets the class indices).

    A record's loss gradient (p - e_y) z^T has Frobenius norm <= sqrt 2 (||p - e_y|| <= sqrt 2,
    ||z|| <= 1): it is summed on the lattice of step sqrt(2) 2**-LATTICE_BITS (norm checked
    <= 2**LATTICE_BITS units), so replacing one record moves the integer sum by at most
    2**(LATTICE_BITS + 1) units; each step releases it with the exact discrete Gaussian at
    ``rho / n_steps``; the rest is post-processing (the ball of radius sqrt(2)/lam holds the
    minimiser).
    """
    step = LatticeStep(LOSSES["softmax"][0], 0.5, math.sqrt(2.0), None, None, 0)
    return _noisy_descent(lambda W: rows.lattice_sum(W, step), (k, rows.n_columns),
                          math.sqrt(2.0) * 2.0**-LATTICE_BITS / rows.n_rows, lam,
                          math.sqrt(2.0) / lam, rho, n_steps, step_size, rng)


# --------------------------------------------------------------------------------------------
# sgd: the plan (public values only)
# --------------------------------------------------------------------------------------------

#: The losses of the kernel, by name: the code of ``dpcore._sgd.Loss`` and the smoothness bound
#: of the loss on rows of norm <= 1 (which sets the learning rate).
LOSSES = {"logistic": (0, 0.25), "huber": (1, None), "squared": (2, 1.0), "softmax": (3, 0.5)}

#: Lattice: the clipping norm C is 2**LATTICE_BITS lattice units, so rounding a record's
#: gradient to the lattice moves it by at most sqrt(p) / 2 units, 2**-16 sqrt(p) / 2 of C.
LATTICE_BITS = 16
#: Orders on which the noise is calibrated: a subset of dpcore.curves.DEFAULT_ORDERS (an
#: accountant with method="rdp" and the full grid can only find a smaller epsilon), kept to
#: orders <= 64 so that a calibration takes a fraction of a second.
CALIBRATION_ORDERS = tuple([round(1.0 + x / 10.0, 1) for x in range(1, 100)]
                           + [float(a) for a in range(11, 65)])
# The rule (chosen with `bench/sgd_dev.py` on bench/dev_suite.py's data sets, see sgd_plan):
# Steps: SGD_STEPS_PER_ROOT_N sqrt(n_hint), within [SGD_MIN_STEPS, SGD_MAX_STEPS]. Against a
# fixed 1000 steps: +0.023 mean accuracy over the 64 development cells (50 up, 12 down); a
# fixed 2000 lost too (large sets want more steps, small ones fewer: each step's noise grows as
# sqrt(steps) / n).
SGD_STEPS_PER_ROOT_N = 30
SGD_MIN_STEPS = 250
SGD_MAX_STEPS = 4000
# Target sigma / C: the sampling rate is set to reach it (0.7 and 1.5 changed no median by more
# than 0.02 on the development cells; below about 0.5 subsampling stops amplifying well).
SGD_NOISE_MULTIPLIER = 1.0
#: Clipping norm per loss, in gradient units of the unit-ball rows (every gradient there has
#: norm <= 1, sqrt(2) for the softmax): 1/2 for the logistic and softmax losses (+0.017 mean
#: accuracy over 36 development cells against 1, 25 up / 8 down), 1 for the Huber loss (1/2:
#: -0.001, 12 up / 15 down); 1 for least squares (not measured).
SGD_CLIPS = {"logistic": 0.5, "softmax": 0.5, "huber": 1.0, "squared": 1.0}
SGD_LEARNING_RATE = 1.0      # times 1 / (smoothness of the loss); 2: -0.004 against 1
SGD_MIN_BATCH = 64           # expected batch size at least this (when n_hint allows)
RATE_DIGITS = 4              # significant bits of the sampling rate m / 2**k
MAX_RATE_BITS = 40


def _dyadic_rate(rate: float) -> tuple[int, int]:
    """The largest m / 2**k <= rate with m < 2**RATE_DIGITS (k <= MAX_RATE_BITS), as (m, k) with
    m odd (or (1, 0) for rate 1): the kernel draws Bernoulli(m / 2**k) exactly."""
    if rate >= 1.0:
        return 1, 0
    k = RATE_DIGITS - math.frexp(rate)[1]   # rate * 2**k in [2**(D-1), 2**D)
    k = min(max(k, RATE_DIGITS), MAX_RATE_BITS)
    m = max(1, math.floor(rate * 2**k))
    while m % 2 == 0:
        m //= 2
        k -= 1
    return m, k


def _step_curve(noise_multiplier: float, rate: float) -> PoissonSubsampled:
    sens = 2**LATTICE_BITS
    return PoissonSubsampled(DiscreteGaussian(noise_multiplier * sens, sens, relation="add/remove"),
                             rate)


def _rho_target(epsilon: float, delta: float) -> float:
    """The rho whose zCDP conversion is about (epsilon, delta): a first guess for the rate."""
    log_d = math.log(1.0 / delta)
    return (math.sqrt(log_d + epsilon) - math.sqrt(log_d)) ** 2


@functools.lru_cache(maxsize=256)
def noise_multiplier_for(rate: float, n_steps: int, epsilon: float, delta: float) -> float:
    """The smallest noise multiplier z (sigma / C, to 0.1%) for which n_steps Poisson-subsampled
    discrete Gaussian steps at ``rate`` are (epsilon, delta)-DP by the curve's RDP bound
    (orders :data:`CALIBRATION_ORDERS`), found by bisection and verified."""
    def eps(z: float) -> float:
        return _step_curve(z, rate).repeat(n_steps).epsilon_for(delta, orders=CALIBRATION_ORDERS)

    hi = 1.0
    while eps(hi) > epsilon:
        hi *= 2.0
        if hi > 2.0**20:
            raise ValueError("epsilon and delta are too small for any noise the plan supports "
                             "(noise multiplier above 2**20); raise epsilon or delta")
    lo = hi / 2.0
    if eps(lo) <= epsilon:
        lo = 0.0
        while hi > 2.0**-12 and eps(hi / 2.0) <= epsilon:
            hi /= 2.0
        lo = hi / 2.0
    while hi - lo > 1e-3 * hi:
        mid = (lo + hi) / 2.0
        if eps(mid) <= epsilon:
            hi = mid
        else:
            lo = mid
    return hi


@dataclass(frozen=True)
class SGDPlan:
    """The public plan of a DP-SGD fit: everything is fixed before any data is read.

    Attributes
    ----------
    n_steps : int
        Noisy gradient steps.
    rate_num, rate_bits : int
        Each record enters each step's sample independently with probability
        rate_num / 2**rate_bits (exactly).
    noise_multiplier : float
        sigma / C: the discrete Gaussian's sigma is noise_multiplier * 2**LATTICE_BITS lattice
        units for a per-record bound of 2**LATTICE_BITS units.
    clip : float
        The clipping norm C of a record's gradient (gradient units of the unit-ball rows).
    learning_rate : float
    n_hint : int
        The public size hint the gradient sums are divided by (utility only).
    epsilon, delta : float
        The guarantee, (epsilon, delta)-DP under add/remove neighbours.

    Privacy
    -------
    (epsilon, delta)-DP under add/remove neighbours (the number of records is not used; n_hint
    is a public guess of it). Each step draws a Poisson sample (each record independently with
    probability q = rate), adds each sampled record's gradient, clipped to norm C and rounded
    to the lattice of step C / 2**LATTICE_BITS, as an integer vector whose squared norm is
    checked to be <= 4**LATTICE_BITS in integer arithmetic (``dpcore._sgd``), so adding or
    removing a record moves the integer sum by at most 2**LATTICE_BITS in L2; then adds exact
    discrete Gaussian noise N_Z(0, sigma**2) per coordinate (:func:`dpcore.discrete_gaussian`).
    One step is the discrete Gaussian's proven RDP alpha D**2 / (2 sigma**2) (Canonne-Kamath-
    Steinke 2020) amplified by Poisson subsampling (:class:`dpcore.curves.PoissonSubsampled`:
    the binomial expansion for removal, the Taylor bound for addition), composed over the
    n_steps steps (:meth:`curve`) and converted to (epsilon, delta) on the orders
    :data:`CALIBRATION_ORDERS`; the continuous Gaussian's privacy-loss distribution is never
    used. The learning rate, the regulariser, the division by n_hint and the averaging of the
    iterates are post-processing. The charge is ``Cost(epsilon, delta, curve=curve)``.
    """

    n_steps: int
    rate_num: int
    rate_bits: int
    noise_multiplier: float
    clip: float
    learning_rate: float
    n_hint: int
    epsilon: float
    delta: float

    @property
    def rate(self) -> float:
        return self.rate_num / 2.0**self.rate_bits

    @property
    def sigma(self) -> float:
        """The discrete Gaussian's sigma, in lattice units."""
        return self.noise_multiplier * 2.0**LATTICE_BITS

    @property
    def curve(self) -> Repeated:
        """The fit's privacy curve: n_steps Poisson-subsampled discrete Gaussian steps."""
        return _step_curve(self.noise_multiplier, self.rate).repeat(self.n_steps)

    @property
    def cost(self) -> Cost:
        return Cost(self.epsilon, self.delta, curve=self.curve)


def sgd_plan(n_features: int, epsilon: float, delta: float, n_hint: int, *, smoothness: float,
             n_outputs: int = 1, loss: str = "logistic") -> SGDPlan:
    """The plan of ``method="sgd"`` from public values only: the model size p = n_outputs *
    n_features, epsilon, delta and the size hint.

    The rule (constants of this module, chosen on the development data of
    ``bench/sgd_dev.py``): SGD_STEPS_PER_ROOT_N sqrt(n_hint) steps within [SGD_MIN_STEPS,
    SGD_MAX_STEPS]; the sampling rate q from the zCDP approximation of
    the subsampled Gaussian (rho about T q**2 / z**2) so that the noise multiplier z comes out
    near SGD_NOISE_MULTIPLIER (the regime where subsampling amplifies almost linearly), at least
    SGD_MIN_BATCH / n_hint, rounded down to a dyadic m / 2**k; then z calibrated exactly for
    that q (:func:`noise_multiplier_for`). Clipping norm SGD_CLIPS[loss], learning rate
    SGD_LEARNING_RATE / smoothness. None of it reads the data; ``n_hint`` changes the batch
    size and the scale of the steps (utility), never the guarantee.

    Parameters
    ----------
    n_features : int
        Weights per output (features, plus one with an intercept).
    epsilon : float
        > 0.
    delta : float
        0 < delta < 1.
    n_hint : int
        A public guess of the number of records, >= 1.
    smoothness : float
        Bound on the loss's second derivative on unit-ball rows.
    n_outputs : int, default=1
        Outputs of the model (classes of a softmax or one-vs-rest model).
    loss : str, default="logistic"
        A key of :data:`LOSSES` (sets the clipping norm).

    Returns
    -------
    SGDPlan

    Examples
    --------
    >>> plan = sgd_plan(21, 1.0, 1e-6, 10**6, smoothness=0.25)
    >>> plan.n_steps, plan.curve.epsilon_for(1e-6) <= 1.0
    (4000, True)
    """
    p = check.integer(n_features, "n_features", minimum=1) * check.integer(
        n_outputs, "n_outputs", minimum=1)
    if p > 2**20:
        raise ValueError(f"the model has {p} weights, above the 2**20 that method='sgd' supports")
    epsilon = check.epsilon(epsilon)
    delta = check.probability(delta, "delta")
    n_hint = check.integer(n_hint, "n_hint", minimum=1)
    smoothness = check.positive(smoothness, "smoothness")
    n_steps = int(min(SGD_MAX_STEPS, max(SGD_MIN_STEPS, round(SGD_STEPS_PER_ROOT_N
                                                              * math.sqrt(n_hint)))))
    rate = SGD_NOISE_MULTIPLIER * math.sqrt(_rho_target(epsilon, delta) / n_steps)
    rate = min(1.0, max(rate, SGD_MIN_BATCH / n_hint, 2.0**-MAX_RATE_BITS))
    m, k = _dyadic_rate(rate)
    z = noise_multiplier_for(m / 2.0**k, n_steps, epsilon, delta)
    clip = SGD_CLIPS[check.option(loss, "loss", tuple(LOSSES))]
    return SGDPlan(n_steps, m, k, z, clip, SGD_LEARNING_RATE / smoothness, n_hint, epsilon, delta)


# --------------------------------------------------------------------------------------------
# sgd: the optimiser
# --------------------------------------------------------------------------------------------

NOISE_CHUNK = 64   # steps whose noise is drawn in one call (batch first)


@dataclass(frozen=True)
class LatticeStep:
    """What a chunk of rows needs to add its part of one step's lattice gradient sum: the loss
    (a code of :data:`LOSSES`), the Huber width, the clipping norm, the sampling rate as
    (rate_num, rate_bits) or None for every record, the step's 4-word key (with a rate) and,
    for one binary head, the class index scored +1."""

    loss: int
    h: float
    clip: float
    rate: tuple[int, int] | None
    key: np.ndarray | None
    positive: int


@functools.lru_cache(maxsize=64)
def _poisson_rate(num: int, bits: int) -> _sgd.PoissonRate:
    from dpcore import _sgd   # the kernel is imported on first use, as the other learners do

    return _sgd.PoissonRate(num, bits)


def chunk_lattice_sum(Z: NDArray[np.float64], target: NDArray[np.float64], offset: int,
                      W: np.ndarray, step: LatticeStep) -> NDArray[np.int64]:
    """The integer lattice sum (int64, W.size) of one step over rows Z (global indices offset,
    offset + 1, ...) with targets ``target``: the kernel's sample of those rows, each record's
    clipped gradient at W on the lattice (see :class:`SGDPlan`). Not a release."""
    from dpcore import _sgd

    out = np.zeros(W.size, dtype=np.int64)
    rate = None if step.rate is None else _poisson_rate(*step.rate)
    _sgd.lattice_gradient_sum(Z, target, np.ascontiguousarray(W, dtype=np.float64), step.loss,
                              step.h, step.clip, LATTICE_BITS, rate, step.key, offset,
                              step.positive, out)
    return out


class RowSource(Protocol):
    """Where ``gd`` and ``sgd`` get their lattice gradient sums: :class:`ArrayRows` (in
    memory) or ``dpcore.learn._dask.DaskRows`` (the chunks of a Dask collection)."""

    @property
    def n_rows(self) -> int: ...
    @property
    def n_columns(self) -> int: ...
    def lattice_sum(self, W: np.ndarray, step: LatticeStep) -> np.ndarray:
        """The integer lattice sum (int64, W.size) of one step over every row."""
        ...


class ArrayRows:
    """Rows of norm <= 1 and their targets (class indices, or the regression target) in
    memory: the source of the lattice gradient sums of ``sgd`` and ``gd``
    (``dpcore.learn._dask.DaskRows`` is the same over the chunks of a Dask collection)."""

    def __init__(self, Z: ArrayLike, target: ArrayLike) -> None:
        self.Z = np.ascontiguousarray(Z, dtype=np.float64)
        self.target = np.ascontiguousarray(target, dtype=np.float64)
        self.n_rows, self.n_columns = self.Z.shape

    def lattice_sum(self, W: np.ndarray, step: LatticeStep) -> NDArray[np.int64]:
        return chunk_lattice_sum(self.Z, self.target, 0, W, step)


def class_targets(y: ArrayLike, classes: np.ndarray) -> tuple[NDArray[np.float64], bool]:
    """Class indices of y in ``classes`` as float64 (the kernel's targets), and whether some
    label is outside ``classes``."""
    y = np.asarray(y)
    target = np.zeros(y.shape[0])
    for j in range(1, len(classes)):
        target[y == classes[j]] = j
    return target, not bool(np.all(np.isin(y, classes)))


def noisy_sgd(Z: ArrayLike | RowSource, target: ArrayLike | None, n_outputs: int, loss: str,
              plan: SGDPlan, alpha: float, rng: np.random.Generator, *,
              h: float = 0.5) -> NDArray[np.float64]:
    """DP-SGD on rows Z of norm <= 1: returns the average of the iterates of the last half of
    the steps, shape (n_outputs, Z.shape[1]).

    ``Z``: the rows (an array, with ``target``) or a row source (:class:`ArrayRows`, or
    ``dpcore.learn._dask.DaskRows``; ``target`` is then ignored). ``target``: per row, the
    class index (0/1 for a binary model, 0..k-1 for softmax and one-vs-rest heads) or the
    regression target; ``loss`` a key of :data:`LOSSES`. Each step draws a 4-word key from
    the generator (the Poisson sample is a function of it and of the records' indices), and
    releases the lattice sum of the clipped gradients of the sample plus discrete Gaussian
    noise (see :class:`SGDPlan`); the update w <- w - lr (g / (q n_hint) + alpha w) and the
    averaging are post-processing. The generator is read in the same order whatever the row
    source, so a seeded fit on a Dask collection equals the in-memory one.
    """
    from dpcore import _sgd

    if hasattr(Z, "lattice_sum"):
        rows = cast("RowSource", Z)
    else:   # an array of rows, with its targets
        rows = ArrayRows(cast("ArrayLike", Z), cast("ArrayLike", target))
    d = rows.n_columns
    W = np.zeros((n_outputs, d))
    total = np.zeros_like(W)
    handle = bitgen_handle(rng)
    code = LOSSES[loss][0]
    units = plan.clip / 2.0**LATTICE_BITS / (plan.rate * plan.n_hint)
    start = plan.n_steps // 2
    noise = np.empty((0, n_outputs * d), dtype=np.int64)   # drawn at t = 0
    for t in range(plan.n_steps):
        if t % NOISE_CHUNK == 0:
            count = min(NOISE_CHUNK, plan.n_steps - t)
            noise = np.asarray(discrete_gaussian(plan.sigma, size=(count, n_outputs * d),
                                                 random_state=rng))
        step = LatticeStep(code, h, plan.clip, (plan.rate_num, plan.rate_bits),
                           _sgd.draw_key(handle), 1)
        acc = rows.lattice_sum(W, step)
        g = (acc + noise[t % NOISE_CHUNK]).reshape(n_outputs, d) * units
        W = W - plan.learning_rate * (g + alpha * W)
        if t >= start:
            total += W
    return total / (plan.n_steps - start)


def regression_design(X: np.ndarray, bounds_X: tuple[np.ndarray, np.ndarray] | None,
                      data_norm: float | None, intercept: bool) -> NDArray[np.float64]:
    """The rows Z of :func:`regression_rows` alone (row by row: a chunk of X gives the matching
    chunk of Z)."""
    return regression_rows(X, bounds_X, data_norm, intercept)[0]


def regression_rows(X: np.ndarray, bounds_X: tuple[np.ndarray, np.ndarray] | None,
                    data_norm: float | None, intercept: bool
                    ) -> tuple[NDArray[np.float64], np.ndarray, np.ndarray, float]:
    """Rows of norm <= 1 for least squares by ``sgd``, and the affine map back: returns
    (Z, centre, half_width, scale) with Z = [(x - centre) / half_width, 1] / scale (no constant
    column without an intercept). Features are clipped to ``bounds_X`` (mapped to [-1, 1],
    centred with an intercept) and/or rows scaled down to ``data_norm`` (then divided by it);
    scale is the public bound on the norm of the row before the division."""
    n, d = X.shape
    centre, half = np.zeros(d), np.ones(d)
    Xs = X
    if bounds_X is not None:
        low, high = bounds_X
        if intercept:
            centre, half = (low + high) / 2.0, (high - low) / 2.0
        else:
            half = np.maximum(np.abs(low), np.abs(high))
        Xs = (np.clip(X, low, high) - centre) / half
        bound = math.sqrt(d)
    if data_norm is not None:
        raw = np.clip(X, *bounds_X) if bounds_X is not None else X
        norms = np.sqrt(np.einsum("ij,ij->i", raw, raw))
        Xs = raw * (1.0 / np.maximum(norms, data_norm))[:, None]   # norm <= 1
        centre, half = np.zeros(d), np.full(d, data_norm)
        bound = 1.0
    scale = math.hypot(bound, 1.0) if intercept else bound
    Z = np.empty((n, d + 1 if intercept else d))
    np.divide(Xs, scale, out=Z[:, :d])
    if intercept:
        Z[:, d] = 1.0 / scale
    # rounding may leave a norm a few ulps above 1; the kernel's clipping makes that harmless
    return Z, centre, half, scale
