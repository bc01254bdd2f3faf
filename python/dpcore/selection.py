"""Private selection: the exponential mechanism, permute-and-flip and one-shot top-k.

The thin, validating layer over the ``_select`` kernel. Utilities come as a 1-d array or as a
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

from dpcore import _select
from dpcore import _validation as check
from dpcore.random import bitgen_handle
from dpcore._release import Cost, release
from dpcore._floats import round_down as _round_down, round_up as _round_up

if TYPE_CHECKING:
    from numpy.typing import ArrayLike
    from dpcore.random import RandomStateLike
    from dpcore.accounting import AccountantLike

__all__ = ["exponential", "top_k", "ExponentialMechanism", "METHODS", "TOP_K_METHODS",
           "exponential_index"]

#: Methods of :func:`exponential`.
METHODS = ("exact", "gumbel", "permute-and-flip", "inverse-cdf")
#: Methods of :func:`top_k`.
TOP_K_METHODS = ("gumbel",)

# Score scales outside this range are refused: beyond it the kernels' error bounds (and 2 * scale)
# could leave the double range.
_MIN_SCALE = 2.0**-1000
_MAX_SCALE = 2.0**1000


@functools.lru_cache(maxsize=256)
def _scale(epsilon: float, sensitivity: float, factor: int):
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


@dataclass(frozen=True)
class ExponentialMechanism:
    """Calibrated exponential-mechanism-type selection for a utility of known sensitivity.

    Build it with :meth:`calibrate`; :func:`exponential` and :func:`top_k` are the usual entry
    points.

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
    """

    method: str
    sensitivity: float
    epsilon: float
    monotonic: bool
    k: int | None
    scale: float
    epsilon_effective: float

    @classmethod
    def calibrate(cls, *, sensitivity: float, epsilon: float, monotonic: bool = False,
                  method: str = "exact", k: int | None = None) -> ExponentialMechanism:
        """Validate the parameters and compute the score scale and the effective epsilon
        (``k=None``: one selection, :func:`exponential`; an int: top-k)."""
        sensitivity = check.positive(sensitivity, "sensitivity")
        epsilon = check.epsilon(epsilon)
        if not isinstance(monotonic, (bool, np.bool_)):
            raise TypeError(f"monotonic must be True or False, got {type(monotonic).__name__} {monotonic!r}")
        monotonic = bool(monotonic)
        if k is not None:
            k = check.integer(k, "k", minimum=1)
        methods = METHODS if k is None else TOP_K_METHODS
        if method not in methods:
            raise ValueError(f"method must be one of {', '.join(repr(m) for m in methods)}, got {method!r}")
        scale, eps_eff = _scale(epsilon, sensitivity, (k or 1) * (1 if monotonic else 2))
        return cls(method, sensitivity, epsilon, monotonic, k, scale, eps_eff)

    def privacy_loss(self, distance: float) -> float:
        """Epsilon of this release for neighbours whose utilities differ by at most ``distance``
        (per candidate, in the same units as the sensitivity)."""
        distance = check.nonnegative(distance, "distance")
        factor = (self.k or 1) * (1 if self.monotonic else 2)
        return _round_up(factor * Fraction(distance) * Fraction(self.scale)) if distance else 0.0

    # ------------------------------------------------------------------------------------------

    def select(self, utility: Any, *, random_state: RandomStateLike = None,
               accountant: AccountantLike | None = None) -> int:
        """Select one candidate; see :func:`exponential`."""
        if self.k is not None:
            raise ValueError("this mechanism was calibrated for top-k; use select_top_k")
        source = _Source(utility)
        if self.method == "inverse-cdf":
            source.require_rereadable("method='inverse-cdf'")  # before anything is charged

        def draw(rng):
            handle = bitgen_handle(rng)
            if self.method == "inverse-cdf":
                return _inverse_cdf(source, self.scale, handle)
            if self.method == "exact":
                state = _select.ExactState(self.scale)
            else:
                noise: Literal["gumbel", "exponential"] = (
                    "gumbel" if self.method == "gumbel" else "exponential")
                state = _select.ArgmaxState(self.scale, noise)
            for chunk, top in source.chunks():
                state.feed(chunk, top, handle)
            return state.index

        index = release(draw, cost=Cost(self.epsilon_effective), accountant=accountant,
                        random_state=random_state, label=f"exponential/{self.method}")
        if index < 0:
            raise source.nothing_selectable()
        return int(index)

    def select_top_k(self, utility: Any, *, random_state: RandomStateLike = None,
                     accountant: AccountantLike | None = None) -> np.ndarray:
        """Select ``k`` candidates, best first; see :func:`top_k`."""
        if self.k is None:
            raise ValueError("this mechanism was calibrated for one selection; use select")
        source = _Source(utility)
        if source.array is not None:
            available = int(np.count_nonzero(source.array != -np.inf))
            if available < self.k:
                raise ValueError(
                    f"k must be at most the number of candidates not excluded (-inf), got "
                    f"k={self.k} with {available} available"
                )

        k = self.k

        def draw(rng):
            handle = bitgen_handle(rng)
            state = _select.TopKState(self.scale, k)
            for chunk, top in source.chunks():
                state.feed(chunk, top, handle)
            return state

        state = release(draw, cost=Cost(self.epsilon_effective), accountant=accountant,
                        random_state=random_state, label=f"top_k/{self.method}")
        if state.size < self.k:
            raise ValueError(
                f"k must be at most the number of candidates not excluded (-inf): the stream gave "
                f"{state.size} of them, k={self.k}; nothing was released"
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
# Public functions


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
    sensitivity : float
        Public bound Delta > 0 on |u(D, r) - u(D', r)| over neighbouring data sets D, D' and all
        candidates r.
    epsilon : float
        Privacy parameter, > 0.
    monotonic : bool, default=False
        Declare that between any two neighbours all utilities move in the same direction (e.g.
        counts under add/remove). Halves the noise (scale epsilon / sensitivity). Never inferred:
        a wrong declaration voids the guarantee.
    method : {"exact", "gumbel", "permute-and-flip", "inverse-cdf"}, default="exact"
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
    charged to the accountant, as one pure (epsilon, 0) release. (An exponential mechanism is
    also epsilon-bounded-range, hence epsilon**2/8-zCDP, a better rate for long compositions
    than the accountant's generic conversion.)

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
    sensitivity : float
        Public bound > 0 on how much one candidate's utility changes between neighbours.
    epsilon : float
        Total privacy parameter of the k selections, > 0.
    monotonic : bool, default=False
        As in :func:`exponential`.
    method : {"gumbel"}, default="gumbel"
        One-shot Gumbel top-k in double precision: one pass, O(k) memory.
    random_state : None, int, numpy Generator or BitGenerator, optional
        As in :func:`exponential`.
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
    (epsilon, 0) release.

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
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's cryptographically secure generator. Seeds are for tests only.

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
