"""Private selection: the exponential mechanism, permute-and-flip and one-shot top-k.

The thin, validating layer over the ``_select`` kernel, and the exact permute-and-flip
(:func:`permute_and_flip`, every coin an exact Bernoulli(exp(-gamma)) draw). Utilities come as a 1-d array or as a
stream of 1-d chunks (for candidate sets that do not fit in memory); every sampler makes one pass
with O(1) extra memory (O(k) for top-k), except inverse-CDF sampling, which needs two.

:class:`ExponentialMechanism` holds the calibration (the score scale and the effective epsilon) so
it can be inspected without drawing; :func:`exponential` and :func:`top_k` build one and release
with it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal
import functools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from dpcore import _exact
from dpcore import _select
from dpcore import _validation as check
from dpcore._docstrings import RANDOM_STATE, RELATION, fill
from dpcore.random import Words64, bitgen_handle
from dpcore._release import Cost
from dpcore.curves import BoundedRange, PrivacyCurve
from dpcore.plans import ADD_REMOVE, Plan, check_relation
from dpcore._floats import round_down as _round_down, round_up as _round_up

if TYPE_CHECKING:
    from numpy.typing import ArrayLike
    from dpcore.random import RandomStateLike
    from dpcore.accounting import AccountantLike

__all__ = ["exponential", "top_k", "ExponentialMechanism", "METHODS", "TOP_K_METHODS",
           "exponential_index", "permute_and_flip", "EXACT_PERMUTE_AND_FLIP"]

#: Methods of :func:`exponential`.
METHODS = ("exact", "gumbel", "permute-and-flip", "inverse-cdf")
#: The method of :func:`permute_and_flip` (exact; in-memory utilities only).
EXACT_PERMUTE_AND_FLIP = "exact-permute-and-flip"
#: Methods of :func:`top_k`.
TOP_K_METHODS = ("gumbel",)
# The methods whose law is the exponential mechanism's (bounded-range); permute-and-flip's is not.
_EXPONENTIAL_LAW = ("exact", "gumbel", "inverse-cdf")

# The parameters the selections share (docstring pieces, :func:`dpcore._docstrings.fill`).
_SENSITIVITY = """\
sensitivity : float
    Public bound Delta > 0 on |u(D, r) - u(D', r)| over neighbouring data sets D, D' and all
    candidates r."""
_MONOTONIC = """\
monotonic : bool, default=False
    Declare that between any two neighbours all utilities move in the same direction (e.g.
    counts under add/remove): scale epsilon / sensitivity, half the noise. Never inferred: a
    wrong declaration voids the guarantee."""

# Score scales outside this range are refused: beyond it the kernels' error bounds (and 2 * scale)
# could leave the double range.
_MIN_SCALE = 2.0**-1000
_MAX_SCALE = 2.0**1000


@functools.lru_cache(maxsize=256)
def _scale(epsilon: float, sensitivity: float, factor: int) -> tuple[float, float]:
    """(scale, epsilon_effective): the largest double <= epsilon / (factor sensitivity), and
    factor sensitivity scale rounded up (exact rational arithmetic; cached, it is pure)."""
    exact = Fraction(epsilon) / (factor * Fraction(sensitivity))
    scale = _round_down(exact)
    if not _MIN_SCALE <= scale <= _MAX_SCALE:
        raise ValueError(
            f"epsilon / sensitivity must give a score scale in [2**-1000, 2**1000], got "
            f"epsilon={epsilon!r}, sensitivity={sensitivity!r} (scale {float(exact):.3g})"
        )
    return scale, _round_up(factor * Fraction(sensitivity) * Fraction(scale))


@fill(relation=RELATION)
@dataclass(frozen=True)
class ExponentialMechanism(Plan):
    """Calibrated exponential-mechanism-type selection for a utility of known sensitivity.

    Build it with :meth:`calibrate`; :func:`exponential` and :func:`top_k` are the usual entry
    points. A :class:`dpcore.plans.Plan`: ``cost`` is ``epsilon_effective`` (pure) with the
    bounded-range ``curve`` of the exponential-law methods, known from the calibration alone,
    under ``relation``; ``release(utility)`` selects one candidate (``k=None``) or the top
    ``k``.

    Attributes
    ----------
    method : str
        One of :data:`METHODS` (:data:`TOP_K_METHODS` for top-k).
    sensitivity : float
        The caller's bound on how much one candidate's utility can change between neighbours.
    epsilon : float
        The requested privacy parameter (for top-k: the total over the k selections).
    monotonic : bool
        Whether the caller declared the utilities monotone (see :func:`exponential`).
    k : int or None
        None for :func:`exponential` (one candidate); the number of candidates for top-k.
    scale : float
        The score scale c: candidate r gets score c * u_r. The largest double at most
        epsilon / (k * 2 * sensitivity), or epsilon / (k * sensitivity) when monotonic (k = 1
        for a single selection).
    epsilon_effective : float
        The guarantee that scale gives: k * 2 * sensitivity * scale (k * sensitivity * scale when
        monotonic), rounded up; at most ``epsilon``. This is what is charged.
    {relation}
    """

    method: str
    sensitivity: float
    epsilon: float
    monotonic: bool
    k: int | None
    scale: float
    epsilon_effective: float
    relation: str = ADD_REMOVE

    @classmethod
    def calibrate(cls, *, sensitivity: float, epsilon: float, monotonic: bool = False,
                  method: str = "exact", k: int | None = None,
                  relation: str = ADD_REMOVE) -> ExponentialMechanism:
        """Validate the parameters and compute the score scale and the effective epsilon
        (``k=None``: one selection, :func:`exponential`; an int: top-k; ``relation``: the
        neighbouring relation ``sensitivity`` was derived for, which the plan states)."""
        relation = check_relation(relation)
        sensitivity = check.positive(sensitivity, "sensitivity")
        epsilon = check.epsilon(epsilon)
        if not isinstance(monotonic, (bool, np.bool_)):
            raise TypeError(f"monotonic must be True or False, got {type(monotonic).__name__} {monotonic!r}")
        monotonic = bool(monotonic)
        if k is not None:
            k = check.integer(k, "k", minimum=1)
        methods = METHODS + (EXACT_PERMUTE_AND_FLIP,) if k is None else TOP_K_METHODS
        if method not in methods:
            raise ValueError(f"method must be one of {', '.join(repr(m) for m in methods)}, got {method!r}")
        scale, eps_eff = _scale(epsilon, sensitivity, (k or 1) * (1 if monotonic else 2))
        return cls(method, sensitivity, epsilon, monotonic, k, scale, eps_eff, relation)

    def privacy_loss(self, distance: float) -> float:
        """Epsilon of this release for neighbours whose utilities differ by at most ``distance``
        (per candidate, in the same units as the sensitivity)."""
        distance = check.nonnegative(distance, "distance")
        factor = (self.k or 1) * (1 if self.monotonic else 2)
        return _round_up(factor * Fraction(distance) * Fraction(self.scale)) if distance else 0.0

    @property
    def label(self) -> str:
        return f"exponential/{self.method}" if self.k is None else f"top_k/{self.method}"

    @property
    def curve(self) -> PrivacyCurve | None:
        """The release's privacy curve (:mod:`dpcore.curves`), or None for permute-and-flip
        (composed as pure ``epsilon_effective``-DP). An exponential mechanism with score scale c
        is (2 sensitivity c)-bounded-range (sensitivity c when monotonic), rounded up:
        :class:`~dpcore.curves.BoundedRange`, epsilon**2/8-zCDP; top-k is k such rounds
        (peeling), composed. Every dpcore accountant uses it: the default ``"zcdp"`` counts
        the charge at the curve's rho (epsilon**2/8 per round) in its zCDP analyses, the RDP
        and PLD accountants compose the curve."""
        if self.method not in _EXPONENTIAL_LAW:
            return None
        # one round's loss range: c times the width of u_r - u'_r's range, rounded up
        width = Fraction(self.sensitivity) * (1 if self.monotonic else 2)
        per_round = BoundedRange(_round_up(width * Fraction(self.scale)))
        rounds = self.k or 1
        return per_round if rounds == 1 else per_round.repeat(rounds)

    @property
    def cost(self) -> Cost:
        """What a release charges: ``epsilon_effective``, pure, with ``curve`` (from the
        calibration alone)."""
        return Cost(self.epsilon_effective, curve=self.curve)

    # ------------------------------------------------------------------------------------------

    def select(self, utility: Any, *, random_state: RandomStateLike = None,
               accountant: AccountantLike | None = None) -> int:
        """Select one candidate; see :func:`exponential`."""
        if self.k is not None:
            raise ValueError("this mechanism was calibrated for top-k; use select_top_k")
        return self.release(utility, accountant=accountant, random_state=random_state)

    def select_top_k(self, utility: Any, *, random_state: RandomStateLike = None,
                     accountant: AccountantLike | None = None) -> np.ndarray:
        """Select ``k`` candidates, best first; see :func:`top_k`."""
        if self.k is None:
            raise ValueError("this mechanism was calibrated for one selection; use select")
        return self.release(utility, accountant=accountant, random_state=random_state)

    def _prepare(self, data: Any) -> _Source:
        source = _Source(data)
        if self.k is not None:
            if source.array is not None:
                available = int(np.count_nonzero(source.array != -np.inf))
                if available < self.k:
                    raise ValueError(
                        f"k must be at most the number of candidates not excluded (-inf), got "
                        f"k={self.k} with {available} available"
                    )
        elif self.method == "inverse-cdf":
            source.require_rereadable("method='inverse-cdf'")  # before anything is charged
        elif self.method == EXACT_PERMUTE_AND_FLIP and source.array is None:
            raise ValueError("utility must be an array for method 'exact-permute-and-flip' "
                             "(it flips one exact coin per candidate), got a stream")
        return source

    def _draw(self, prepared: _Source, rng: np.random.Generator) -> int | np.ndarray:
        """One index (``k=None``) or the top-k indices, best first. A stream is read here,
        after the charge: one found invalid raises with nothing released."""
        source = prepared
        if self.k is not None:
            return self._draw_top_k(source, self.k, rng)
        if self.method == EXACT_PERMUTE_AND_FLIP:
            assert source.array is not None  # checked by _prepare
            return flip_coins(source.array, self.scale, rng)
        handle = bitgen_handle(rng)
        if self.method == "inverse-cdf":
            index = _inverse_cdf(source, self.scale, handle)
        else:
            state: Any
            if self.method == "exact":
                state = _select.ExactState(self.scale)
            else:
                noise: Literal["gumbel", "exponential"] = (
                    "gumbel" if self.method == "gumbel" else "exponential")
                state = _select.ArgmaxState(self.scale, noise)
            for chunk, top in source.chunks():
                state.feed(chunk, top, handle)
            index = state.index
        if index < 0:
            raise source.nothing_selectable()
        return int(index)

    def _draw_top_k(self, source: _Source, k: int, rng: np.random.Generator) -> np.ndarray:
        state = _select.TopKState(self.scale, k)
        handle = bitgen_handle(rng)
        for chunk, top in source.chunks():
            state.feed(chunk, top, handle)
        if state.size < k:
            raise ValueError(
                f"k must be at most the number of candidates not excluded (-inf): the stream gave "
                f"{state.size} of them, k={k}; nothing was released"
            )
        return state.indices()


# ------------------------------------------------------------------------------------------------
# Utility sources


def _chunk(value, what):
    """A 1-d float64 contiguous array and its maximum (-inf when empty); NaN and +inf rejected."""
    arr = check.real_array(value, what)
    if arr.ndim != 1:
        raise ValueError(f"{what} must be one-dimensional, got shape {arr.shape}")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if arr.size == 0:
        return arr, -math.inf
    top = float(arr.max())  # NaN if any element is NaN
    if math.isnan(top):
        raise ValueError(f"{what} must not contain NaN")
    if top == math.inf:
        raise ValueError(f"{what} must not contain +inf (use -inf to exclude a candidate)")
    return arr, top


class _Source:
    """The utilities: one in-memory array, or a stream of chunks (an iterator, or a callable
    returning a fresh iterable each time it is called)."""

    def __init__(self, utility):
        self.array: np.ndarray | None = None
        self.factory: Any = None  # a callable returning an iterable of chunks
        self.iterator: Iterator[Any] | None = None
        if callable(utility) and not isinstance(utility, np.ndarray):
            self.factory = utility
        elif isinstance(utility, Iterator):
            self.iterator = utility
        else:
            arr, top = _chunk(utility, "utility")
            if arr.size == 0:
                raise ValueError("utility must contain at least one candidate, got an empty array")
            if top == -math.inf:
                raise ValueError("utility: every candidate is excluded (all utilities are -inf)")
            self.array, self.top = arr, top

    def chunks(self):
        """Yield (chunk, its maximum) in order."""
        if self.array is not None:
            yield self.array, self.top
            return
        if self.iterator is not None:
            iterable, self.iterator = self.iterator, None
        else:
            iterable = self.factory()
        try:
            iterator = iter(iterable)
        except TypeError:
            raise TypeError(
                "utility: the callable must return an iterable of 1-d arrays, got "
                f"{type(iterable).__name__}"
            ) from None
        for i, chunk in enumerate(iterator):
            yield _chunk(chunk, f"utility (chunk {i} of the stream)")

    def require_rereadable(self, what):
        if self.iterator is not None:
            raise ValueError(
                f"{what} reads the utilities twice: pass an array or a callable returning a "
                "fresh iterable of chunks, not an iterator (or use a one-pass method)"
            )

    def nothing_selectable(self):
        return ValueError(
            "utility must contain at least one candidate that is not excluded (-inf); the "
            "stream was empty or excluded every candidate; nothing was released"
        )


def _inverse_cdf(source, scale, handle):
    state = _select.InverseCDFState(scale)
    for chunk, top in source.chunks():
        state.feed(chunk, top)
    if not state.start_search(handle):
        return -1
    for chunk, top in source.chunks():
        if state.feed(chunk, top):
            break
    return state.index


# ------------------------------------------------------------------------------------------------
# Exact permute-and-flip

# The fast path compares a uniform's first 53 bits with a double enclosure of exp(-gamma):
# relative half-width 2**-30 (the double gap is within a relative 2**-51 of gamma when
# gamma <= 700, and np.exp is accurate to a few units in the last place); above 700,
# exp(-gamma) < 2**-1000 and only "tails" can be decided there.
_FAST_MARGIN = 2.0**-30
_FAST_LIMIT = 700.0


def flip_coins(utility: np.ndarray, scale: float, rng: np.random.Generator) -> int:
    """The index that permute-and-flip with scores ``scale * utility`` selects, exactly.

    ``utility``: a validated 1-d float64 array (``-inf`` excludes a candidate, at least one
    finite); ``scale``: the score scale c > 0 (a double); ``rng``: a numpy Generator. Nothing
    is validated or charged here (:func:`permute_and_flip` does both).

    Every finite candidate r flips an independent coin, heads with probability exp(-gamma_r),
    gamma_r = c (max u - u_r) (an exact rational; the best candidates always come up heads),
    and the answer is a uniform candidate among the heads. That is permute-and-flip (McKenna,
    Sheldon 2020): visiting the candidates in a uniformly random order and returning the first
    head returns a uniform head, because the order is independent of the coins. Each coin
    compares a real uniform U with exp(-gamma_r) exactly: U's first 53 bits settle all but about
    2**-29 of the comparisons against a double enclosure of exp(-gamma_r) (see
    ``_FAST_MARGIN``), the rest are refined with fresh 64-bit words and decided on exact
    rationals (:func:`dpcore._exact.uniform_below_exp`). The uniform head is an exact uniform
    integer. O(number of candidates) work and memory; not constant-time.
    """
    return int(flip_coins_rows(utility[None, :], scale, rng)[0])


def flip_coins_rows(utility: np.ndarray, scale: float, rng: np.random.Generator) -> np.ndarray:
    """:func:`flip_coins` for each row of ``utility`` (2-d float64, at least one finite value
    per row), independently: the index each row's permute-and-flip selects (int64). The coins
    of all rows are drawn in one batch (fresh words for every coin, refinement and head), so
    the rows' selections are independent, each with :func:`flip_coins`' law."""
    word = Words64(rng)
    with np.errstate(invalid="ignore"):
        top = np.max(utility, axis=1, keepdims=True)
    finite = utility != -math.inf
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        gap = np.where(finite, (top - utility) * scale, math.inf)  # may overflow to inf
        e = np.exp(-gap)
    small = gap <= _FAST_LIMIT
    e_lo = np.where(small, e * (1.0 - _FAST_MARGIN), 0.0)
    e_hi = np.where(small, e * (1.0 + _FAST_MARGIN), 2.0**-1000)
    rows, cols = np.nonzero(finite)   # the coins, row by row
    cells = word.batch(rows.size) >> np.uint64(11)  # U's first 53 bits: U in [k, k + 1) 2**-53
    k = cells.astype(np.float64)  # exact: k < 2**53
    heads = (utility[rows, cols] == top[rows, 0]) | ((k + 1.0) * 2.0**-53 <= e_lo[rows, cols])
    tails = ~heads & (k * 2.0**-53 >= e_hi[rows, cols])
    if not np.all(heads | tails):
        exact_scale = Fraction(scale)
        for i in np.flatnonzero(~(heads | tails)):
            cell = int(cells[i])
            if cell == 0:  # U < 2**-53: refine past 0 (the uniform on the cell, rescaled)
                lo, hi = _exact.positive_cell(word)
                lo, hi = lo / 2**53, hi / 2**53
            else:
                lo, hi = Fraction(cell, 2**53), Fraction(cell + 1, 2**53)
            r, c = rows[i], cols[i]
            gamma = exact_scale * (Fraction(float(top[r, 0])) - Fraction(float(utility[r, c])))
            heads[i] = _exact.uniform_below_exp(lo, hi, gamma, word)
    chosen = np.empty(utility.shape[0], dtype=np.int64)
    head_rows, head_cols = rows[heads], cols[heads]
    starts = np.searchsorted(head_rows, np.arange(utility.shape[0] + 1))
    for r in range(utility.shape[0]):
        winners = head_cols[starts[r]:starts[r + 1]]
        chosen[r] = winners[_exact.uniform_integer(int(winners.size), word)]
    return chosen


# ------------------------------------------------------------------------------------------------
# Public functions


@fill(sensitivity=_SENSITIVITY, monotonic=_MONOTONIC)
def exponential(utility: ArrayLike, *, sensitivity: float, epsilon: float, monotonic: bool = False,
                method: str = "exact", random_state: RandomStateLike = None,
                accountant: AccountantLike | None = None) -> int:
    """Select one candidate with the exponential mechanism (or permute-and-flip).

    Candidate r is chosen with probability proportional to exp(c u_r), c = epsilon /
    (2 sensitivity) (epsilon / sensitivity with ``monotonic=True``).

    Parameters
    ----------
    utility : array_like of float (1-d), iterator of arrays, or callable
        The utility u_r of each candidate (larger is better). ``-inf`` excludes a candidate;
        NaN and ``+inf`` are errors. Huge and tiny values are fine: only differences to the
        largest utility matter, and they are never exponentiated directly.
        For candidate sets that do not fit in memory pass a *stream*: an iterator yielding 1-d
        chunks, or a callable returning a fresh iterable of chunks each time it is called
        (``"inverse-cdf"`` reads the stream twice and needs the callable, which must give the
        same chunks both times). The index returned counts across chunks. Lists, tuples and
        arrays are in-memory utilities.
    {sensitivity}
    epsilon : float
        Privacy parameter, > 0.
    {monotonic}
    method : str, default="exact"
        One of :data:`METHODS`, or ``"exact-permute-and-flip"``:
        ``"exact"``: exactly the exponential mechanism's law, in floating point too
        (report-noisy-max with Gumbel noise, every comparison decided exactly for real-valued
        uniforms: a cheap bound, then a proven double-double logarithm, then exact rational
        arithmetic for the rare undecided ones). One pass, O(1) memory; not constant-time.
        ``"gumbel"``: report-noisy-max with Gumbel noise computed in double precision. One pass,
        fixed work per candidate (branch-free maximum): its time does not depend on the
        utilities' values.
        ``"permute-and-flip"``: McKenna and Sheldon's mechanism, run as report-noisy-max with
        exponential noise (Ding et al.: the same law), in double precision. Its law is *not* the
        exponential mechanism's: it never has lower expected utility.
        ``"exact-permute-and-flip"`` (:func:`permute_and_flip`): the same law exactly, in
        floating point too (one exact coin per candidate; in-memory utilities only).
        ``"inverse-cdf"``: a streaming log-sum-exp pass, then a second pass to the candidate
        where the cumulative weight crosses a uniform threshold; double precision.
        ``"exact"`` is the default because only its law is exactly the one the privacy proof is
        about; on typical utilities it is also the fastest method (most candidates are
        rejected by a bound on their word's leading zeros). Its time grows when many candidates
        each beat every earlier one (e.g. utilities rising by several noise scales at every
        step along the array), up to about ten times that of ``"gumbel"``.
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default) uses dpcore's process-wide cryptographically secure ChaCha20 generator
        (unlike numpy and scikit-learn, where None means an insecure global generator). A seed or
        generator is for tests and reproducibility only.
    accountant : dpcore.Accountant, optional
        Charged with ``epsilon_effective`` before anything is drawn; if the budget would be
        overspent it raises ``BudgetExceeded`` and nothing is drawn or released. In-memory
        utilities are validated before the charge; a stream is charged before its first chunk is
        read, so a stream that turns out invalid raises (nothing is released) with the charge
        made.

    Returns
    -------
    int
        The index of the selected candidate (position in the array, or across the stream's
        chunks).

    Raises
    ------
    ValueError
        Empty utilities, NaN or +inf in them, every candidate excluded, epsilon or sensitivity
        <= 0, an unknown method, a one-shot iterator with ``"inverse-cdf"``.
    TypeError
        Non-numeric utilities or parameters.

    Privacy
    -------
    Guarantee: pure epsilon-DP for utilities whose sensitivity is at most ``sensitivity``
    (McSherry-Talwar). Neighbouring relation: whichever relation the sensitivity was derived for
    (add/remove or replace-one); it must hold for every candidate. Utilities that are -inf must
    be -inf on every data set (a public exclusion), or the sensitivity is infinite.

    The factor 2: without ``monotonic`` the scores are epsilon u / (2 sensitivity), since a
    change of the data moves both the candidate's weight and the normaliser. With
    ``monotonic=True`` they are epsilon u / sensitivity, valid only when for every pair of
    neighbours the differences u(D', r) - u(D, r) have the same sign for all r. The same holds
    for permute-and-flip.

    The scale c = epsilon / (2 sensitivity) is rounded down to a double, so the guarantee is
    ``epsilon_effective`` = 2 sensitivity c <= epsilon (exact rational arithmetic); that is
    charged to the accountant, as one pure (epsilon, 0) release, with its privacy curve: an
    exponential mechanism is also ``epsilon_effective``-bounded-range (Durfee-Rogers 2019),
    hence epsilon**2/8-zCDP (Cesar-Rogers 2021), a better rate for long compositions, which
    every accountant uses (the default ``"zcdp"`` counts epsilon**2/8 instead of
    epsilon**2/2 in its zCDP analyses; ``"rdp"`` and ``"pld"`` compose the curve)
    (:class:`~dpcore.curves.BoundedRange`; not for permute-and-flip, which is not
    bounded-range, and is counted at epsilon**2/2). For ``"gumbel"`` and ``"inverse-cdf"`` both hold for the idealised
    algorithm, as below.

    Which methods are exact:

    * ``"exact"``: the output law is exactly P(r) = exp(c u_r) / sum_r' exp(c u_r') for the
      given doubles u (read as exact rationals) and the double c; the guarantee holds in
      floating point. Its run time depends on the data and the draws (how many comparisons need
      the slower paths); it is not constant-time (its run time is observable; timing channels: Haeberlen, Pierce, Narayan, USENIX Security 2011).
    * ``"gumbel"`` and ``"inverse-cdf"``: the same law up to floating-point rounding (relative
      errors near 1e-16 in the noise or weights), except that candidates whose score is more than
      about 708 below the best are never selected (the noise is bounded, the weights underflow),
      although their exact probability (below e**-708) is positive. The pure guarantee holds
      for the idealised real-arithmetic algorithm only (Ilvento 2020 shows such gaps can be
      exploited with chosen utilities); use ``"exact"`` when that matters.
    * ``"permute-and-flip"``: pure epsilon-DP for its own law in real arithmetic, with the same
      floating-point caveats as ``"gumbel"``.
    * ``"exact-permute-and-flip"``: exactly permute-and-flip's law for the given doubles; the
      guarantee holds in floating point (see :func:`permute_and_flip`).

    Notes
    -----
    Report-noisy-max: argmax_r (c u_r + G_r) with G_r iid Gumbel(0, 1) has exactly the
    exponential mechanism's law; with G_r iid Exponential(1) it has permute-and-flip's. The kernel
    computes c (u_r - max u) + G_r, so no utility is exponentiated and huge utilities neither
    overflow nor absorb the noise of the candidates that matter.

    References
    ----------
    .. [MT07] F. McSherry, K. Talwar, "Mechanism design via differential privacy", FOCS 2007.
    .. [MS20] R. McKenna, D. Sheldon, "Permute-and-Flip: a new mechanism for differentially
       private selection", NeurIPS 2020.
    .. [DKSSWXZ21] Z. Ding, D. Kifer, S. Saghaian, T. Steinke, Y. Wang, Y. Xiao, D. Zhang,
       "The permute-and-flip mechanism is identical to report-noisy-max with exponential noise",
       arXiv 2105.07260.
    .. [Ilv20] C. Ilvento, "Implementing the exponential mechanism with base-2 differential
       privacy", CCS 2020.

    Examples
    --------
    >>> import dpcore
    >>> counts = [3.0, 120.0, 7.0, 118.0]
    >>> i = dpcore.exponential(counts, sensitivity=1.0, epsilon=1.0, random_state=0)
    >>> i in (1, 3)
    True
    >>> def chunks():                          # a stream: 10**6 candidates in 10 chunks
    ...     for j in range(10):
    ...         yield -abs(np.arange(j * 10**5, (j + 1) * 10**5) - 123456.0)
    >>> i = dpcore.exponential(chunks(), sensitivity=1.0, epsilon=1.0, random_state=0)
    >>> abs(i - 123456) < 50
    True
    """
    mech = ExponentialMechanism.calibrate(
        sensitivity=sensitivity, epsilon=epsilon, monotonic=monotonic, method=method
    )
    return mech.select(utility, random_state=random_state, accountant=accountant)


@fill(sensitivity=_SENSITIVITY, monotonic=_MONOTONIC, random_state=RANDOM_STATE)
def top_k(utility: ArrayLike, k: int, *, sensitivity: float, epsilon: float,
          monotonic: bool = False, method: str = "gumbel", random_state: RandomStateLike = None,
          accountant: AccountantLike | None = None) -> np.ndarray:
    """Select the top k candidates with one-shot Gumbel noise (Durfee and Rogers).

    Adds one Gumbel(0, 1) variable to each score c u_r, c = epsilon / (2 k sensitivity)
    (epsilon / (k sensitivity) with ``monotonic=True``), and returns the k largest, best first.

    Parameters
    ----------
    utility : array_like of float (1-d), iterator of arrays, or callable
        As in :func:`exponential` (``-inf`` excludes a candidate; NaN and +inf are errors;
        streams of chunks for large candidate sets).
    k : int
        Number of candidates to select, >= 1 and at most the number not excluded.
    {sensitivity}
    epsilon : float
        Total privacy parameter of the k selections, > 0.
    {monotonic}
    method : {"gumbel"}, default="gumbel"
        One-shot Gumbel top-k in double precision: one pass, O(k) memory.
    {random_state}
    accountant : dpcore.Accountant, optional
        Charged with ``epsilon_effective`` before anything is drawn, as in :func:`exponential`
        (streams are charged before their first chunk is read).

    Returns
    -------
    ndarray of int64, shape (k,)
        Indices of the selected candidates, in order of selection (largest noisy score first).

    Raises
    ------
    ValueError
        As for :func:`exponential`, and k larger than the number of candidates not excluded.
    TypeError
        Non-numeric utilities or parameters, a non-integer k.

    Privacy
    -------
    Guarantee: pure epsilon-DP in total, for utilities whose sensitivity is at most
    ``sensitivity``, under the neighbouring relation the sensitivity was derived for (add/remove
    or replace-one).

    Durfee and Rogers (2019): the ordered output of one-shot Gumbel top-k has exactly the law of
    k rounds of "peeling" exponential mechanisms with the same scores (select with scale c,
    remove the winner, repeat). Each round is (2 sensitivity c)-DP, so by composition the whole
    release is 2 k sensitivity c = ``epsilon_effective`` <= epsilon (c rounded down to a double;
    without the 2 for ``monotonic=True``, valid only for utilities that move in the same
    direction for every pair of neighbours). Each round is also bounded-range, so the release is
    k (epsilon/k)**2 / 8-zCDP as well. ``epsilon_effective`` is charged as one pure
    (epsilon, 0) release, with the curve of k bounded-range rounds
    (``ExponentialMechanism.curve``), which every accountant uses (the default ``"zcdp"``
    counts k (epsilon/k)**2/8 instead of epsilon**2/2).

    Floating point: the Gumbel noise is computed in double precision, so the law matches
    peeling up to rounding, and candidates whose score is more than about 712 below the
    k-th best are never selected although their exact probability is positive (below
    e**-708 each); see :func:`exponential`. Run time is the same for all utilities of a given
    size (fixed work per candidate), except for the O(log k) heap updates.

    References
    ----------
    .. [DR19] D. Durfee, R. Rogers, "Practical differentially private top-k selection with
       pay-what-you-get composition", NeurIPS 2019.

    Examples
    --------
    >>> import dpcore
    >>> counts = [5.0, 300.0, 2.0, 290.0, 8.0, 310.0]
    >>> picks = dpcore.top_k(counts, 3, sensitivity=1.0, epsilon=3.0, random_state=1)
    >>> sorted(picks.tolist())
    [1, 3, 5]
    """
    mech = ExponentialMechanism.calibrate(
        sensitivity=sensitivity, epsilon=epsilon, monotonic=monotonic, method=method, k=k
    )
    return mech.select_top_k(utility, random_state=random_state, accountant=accountant)


@fill(random_state=RANDOM_STATE)
def exponential_index(utility: ArrayLike, scale: float, *,
                      random_state: RandomStateLike = None) -> int:
    """Draw index r with probability exactly proportional to exp(scale * utility[r]).

    The sampler behind ``method="exact"`` (the Gumbel race decided exactly, see
    :func:`exponential`), for a caller that calibrated ``scale`` itself: e.g. a rejection
    sampler over an exponential-mechanism proposal (``dpcore.graph_stats``' ladder functions).

    Parameters
    ----------
    utility : array_like of float (1-d)
        ``-inf`` excludes a candidate (at least one must remain); NaN and ``+inf`` are errors.
    scale : float
        The score scale c > 0.
    {random_state}

    Returns
    -------
    int

    Privacy
    -------
    A sampler, not a release: nothing is charged. With ``scale = epsilon / (2 sensitivity)`` it
    is the epsilon-DP exponential mechanism of :func:`exponential` (use that to release).

    Examples
    --------
    >>> from dpcore import selection
    >>> selection.exponential_index([0.0, 50.0, -float("inf")], 1.0, random_state=3)
    1
    """
    scale = check.positive(scale, "scale")
    values, top = _chunk(utility, "utility")
    state = _select.ExactState(scale)
    state.feed(values, top, bitgen_handle(random_state))
    if state.index < 0:
        raise ValueError("utility must contain at least one candidate that is not excluded (-inf)")
    return int(state.index)


@fill(sensitivity=_SENSITIVITY, monotonic=_MONOTONIC, random_state=RANDOM_STATE)
def permute_and_flip(utility: ArrayLike, *, sensitivity: float, epsilon: float,
                     monotonic: bool = False, random_state: RandomStateLike = None,
                     accountant: AccountantLike | None = None) -> int:
    """Select one candidate with permute-and-flip (McKenna and Sheldon), exactly.

    Visit the candidates in a uniformly random order and return the first one accepted, where
    candidate r is accepted with probability exp(c (u_r - max u)) (the best always is),
    c = epsilon / (2 sensitivity) (epsilon / sensitivity with ``monotonic=True``). Its expected
    utility is never below the exponential mechanism's at the same epsilon, and it is up to
    twice as likely to return the best candidate when few candidates are near the top.

    Parameters
    ----------
    utility : array_like of float (1-d)
        The utility u_r of each candidate (larger is better), in memory (one coin per
        candidate; streams are not accepted). ``-inf`` excludes a candidate; NaN and ``+inf``
        are errors.
    {sensitivity}
    epsilon : float
        Privacy parameter, > 0.
    {monotonic}
    {random_state}
    accountant : dpcore.Accountant, optional
        Charged with ``epsilon_effective`` (see :class:`ExponentialMechanism`) before anything
        is drawn; a refusal releases nothing.

    Returns
    -------
    int
        The index of the selected candidate.

    Raises
    ------
    ValueError
        Empty utilities, NaN or +inf in them, every candidate excluded, epsilon or sensitivity
        <= 0, a stream instead of an array.
    TypeError
        Non-numeric utilities or parameters.

    Privacy
    -------
    Guarantee: pure epsilon-DP for utilities whose sensitivity is at most ``sensitivity``
    (McKenna and Sheldon 2020, Theorem 1), under the neighbouring relation the sensitivity was
    derived for (add/remove or replace-one), for every candidate; -inf must be a public
    exclusion. With ``monotonic=True`` the scale doubles, valid only when for every pair of
    neighbours all utilities move in the same direction.

    The scale c is the largest double at most epsilon / (2 sensitivity) (epsilon /
    sensitivity when monotonic), so the guarantee is ``epsilon_effective`` = 2 sensitivity c
    <= epsilon (exact rational arithmetic), which is charged as one pure (epsilon, 0) release.

    Floating point: none of the law depends on rounding. The utilities are read as the exact
    rationals the doubles are; each acceptance is an exact Bernoulli(exp(-gamma_r)) draw,
    gamma_r = c (max u - u_r) exactly (a real uniform compared with exp(-gamma_r), decided on
    its first 53 bits when a double enclosure allows, else refined and decided with exact
    rational arithmetic); the random order is replaced by the equivalent uniform choice among
    the accepted candidates (the order is independent of the coins), an exact uniform integer.
    So the output law is exactly permute-and-flip's for the given doubles, and the guarantee
    holds in floating point. Not constant-time: the rare refinements take longer.

    References
    ----------
    .. [MS20] R. McKenna, D. Sheldon, "Permute-and-Flip: a new mechanism for differentially
       private selection", NeurIPS 2020.
    .. [CKS20] C. Canonne, G. Kamath, T. Steinke, "The discrete Gaussian for differential
       privacy", NeurIPS 2020 (exact Bernoulli(exp(-gamma)) sampling).

    Examples
    --------
    >>> import dpcore
    >>> counts = [3.0, 120.0, 7.0, 118.0]
    >>> i = dpcore.selection.permute_and_flip(counts, sensitivity=1.0, epsilon=1.0,
    ...                                       monotonic=True, random_state=0)
    >>> i in (1, 3)
    True
    """
    mech = ExponentialMechanism.calibrate(sensitivity=sensitivity, epsilon=epsilon,
                                          monotonic=monotonic, method=EXACT_PERMUTE_AND_FLIP)
    return mech.select(utility, random_state=random_state, accountant=accountant)
