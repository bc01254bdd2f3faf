"""Frequency oracles: randomized response, unary encoding, local hashing and their decoder.

Each randomizer privatises one categorical value per user with an exact rational law calibrated
by :func:`frequency_oracle`; :func:`estimate_frequencies` decodes the reports (post-processing).
The exact laws and the accounting rule are described in the :mod:`dpcore.local` docstring.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

import dpcore._local as _local  # compiled kernel (no stub: mypy treats it as Any)
from dpcore import _validation as check
from dpcore._release import Cost
from dpcore.accounting import AccountantLike
from dpcore.local._epsilon import (
    _EXP_CAP,
    LOCAL_RELATION,
    _check_epsilon,
    _e_lower,
    _exp_lower,
    _nominal_label,
    _ratio_epsilon,
)
from dpcore.plans import Plan
from dpcore.random import RandomStateLike

__all__ = [
    "randomized_response",
    "unary_encoding",
    "local_hashing",
    "estimate_frequencies",
    "frequency_oracle",
    "FrequencyOracle",
    "FrequencyEstimate",
    "LocalHashingReports",
    "MAX_CATEGORIES",
]

#: Largest domain size k (values are 0 .. k - 1).
MAX_CATEGORIES = 2**32
#: Largest hash range g of local hashing (products of two residues stay below 2**64).
MAX_HASH_RANGE = 2**31 - 1

_WORD = 2**64  # thresholds are out of 2**64: P = threshold / 2**64

_MECHANISMS = ("randomized_response", "symmetric_unary", "optimized_unary", "local_hashing")
#: The public randomizer releasing each mechanism's reports (its plan's label).
_RELEASES = {"randomized_response": "local.randomized_response",
             "symmetric_unary": "local.unary_encoding", "optimized_unary": "local.unary_encoding",
             "local_hashing": "local.local_hashing"}


# ------------------------------------------------------------------------------------------
# Exact calibration (public arithmetic only)


def _grr_threshold(k, lower):
    """The largest A with A (k - 1) / (2**64 - A) <= lower, capped at 2**64 - 1."""
    a = _WORD * lower.numerator // (lower.numerator + (k - 1) * lower.denominator)
    return min(a, _WORD - 1)


def _is_prime(n):
    """Deterministic Miller-Rabin for n < 3.3e24 (the first 12 prime bases suffice)."""
    if n < 2:
        return False
    bases = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)
    for p in bases:
        if n % p == 0:
            return n == p
    d, r = n - 1, 0
    while d % 2 == 0:
        d //= 2
        r += 1
    for a in bases:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(r - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def _hash_digits(k, g):
    """Number m >= 1 of base-g digits needed for 0 .. k - 1."""
    m, span = 1, g
    while span < k:
        m += 1
        span *= g
    return m


@dataclass(frozen=True)
class FrequencyOracle(Plan):
    """The exact law of a pure frequency oracle ([WBLJ17]) for a domain {0, ..., k - 1}.

    A report *supports* value j (RR: the report is j; unary: bit j is 1; local hashing: the
    reported hash equals h(j)) with probability ``p`` when the user's value is j and ``q``
    otherwise, independently across users.

    A :class:`dpcore.plans.Plan`: ``cost`` is known from the calibration alone (see the
    :mod:`dpcore.local` accounting rule), under ``relation`` (one user's value replaced);
    ``release(values)`` privatises one value in [0, k) per user exactly as
    :func:`randomized_response`, :func:`unary_encoding` or :func:`local_hashing` does with ``k``
    (the same draws for the same generator).

    Attributes
    ----------
    mechanism : str
        One of "randomized_response", "symmetric_unary", "optimized_unary", "local_hashing".
    k : int
        Domain size.
    epsilon : float
        The requested local epsilon.
    p, q : fractions.Fraction
        The exact support probabilities drawn by the kernel.
    ratio : fractions.Fraction
        The largest likelihood ratio P(y | v) / P(y | v') of the reports (exact), proven <=
        e^epsilon: its log is the exact privacy loss of the randomizer.
    epsilon_effective : float
        log(ratio) rounded up (a double proven >= log(ratio)), <= ``epsilon``: what a release
        charges.
    g : int or None
        Hash range (a prime) for "local_hashing".
    thresholds : tuple of int
        The kernel's integer thresholds (probabilities are threshold / 2**64).
    relation : str
        The local model's neighbouring relation: one user's value replaced by any other.
    """

    mechanism: str
    k: int
    epsilon: float
    p: Fraction
    q: Fraction
    ratio: Fraction
    epsilon_effective: float
    g: int | None
    thresholds: tuple
    relation: str = LOCAL_RELATION

    def variance(self, n: int, frequencies: ArrayLike) -> np.ndarray:
        """Exact variance of each estimated frequency from ``n`` reports when the true
        frequencies are ``frequencies``: (f p (1 - p) + (1 - f) q (1 - q)) / (n (p - q)**2)."""
        n = check.integer(n, "n", minimum=1)
        f = np.asarray(frequencies, dtype=np.float64)
        p, q = float(self.p), float(self.q)
        gap = float(self.p - self.q)
        return (f * p * (1 - p) + (1 - f) * q * (1 - q)) / (n * gap * gap)

    @property
    def label(self) -> str:
        """The public randomizer's name and the nominal epsilon, e.g.
        ``"local.randomized_response(epsilon=1.0)"``."""
        return _nominal_label(_RELEASES[self.mechanism], self.epsilon)

    @property
    def cost(self) -> Cost:
        """``epsilon_effective`` (pure): a double proven >= log(``ratio``), the exact privacy
        loss of the law drawn, and <= ``epsilon``. Charged once per non-empty release."""
        return Cost(epsilon=self.epsilon_effective)

    def release(self, data: Any, *, accountant: AccountantLike | None = None,
                random_state: RandomStateLike = None) -> Any:
        """Privatise ``data`` (one integer in [0, k) per user; bools for randomized response
        with k = 2), charging :attr:`cost` once (a bad value raises before the charge; an empty
        input charges nothing). Returns what the public randomizer returns for ``k``."""
        return self._release_codes(self._prepare(data), accountant, random_state)

    def _prepare(self, data: Any) -> tuple[np.ndarray, tuple[int, ...]]:
        """(codes, the input's shape): int64 codes in [0, k), or 0/1 bytes for boolean input
        to randomized response (its byte kernel)."""
        rr = self.mechanism == "randomized_response"
        codes, _, shape, _ = _encode(data, self.k, None, as_bytes=rr)
        if len(shape) != 1 and not rr:
            raise ValueError("values must be one-dimensional (one value per user), got a scalar")
        return codes, shape

    def _release_codes(self, prepared: tuple[np.ndarray, tuple[int, ...]],
                       accountant: AccountantLike | None, random_state: RandomStateLike) -> Any:
        """`release` of checked codes: an empty input draws nothing and is charged nothing."""
        if prepared[0].size == 0:
            return self._draw(prepared, None)
        return self._release_prepared(prepared, accountant=accountant, random_state=random_state)

    def _draw(self, prepared: tuple[np.ndarray, tuple[int, ...]], rng: Any) -> Any:
        codes, shape = prepared
        if self.mechanism == "randomized_response":
            out = np.empty_like(codes)
            if codes.size and codes.dtype == np.uint8:  # bytes in, bytes out: same draws as k = 2
                _local.binary_rr_u8_into(out, codes, self.thresholds[0], rng)
            elif codes.size:
                _local.grr_into(out, codes, self.k, self.thresholds[0], rng)
            out = (out.view(np.bool_) if codes.dtype == np.uint8 else out).reshape(shape)
            return out[()] if len(shape) == 0 else out
        if self.mechanism == "local_hashing":
            assert self.g is not None  # set by the calibration
            seeds = np.empty((codes.size, _hash_digits(self.k, self.g) + 1), dtype=np.int64)
            values = np.empty(codes.size, dtype=np.int64)
            if codes.size:
                _local.olh_into(seeds, values, codes, self.g, self.thresholds[0], rng)
            return LocalHashingReports(seeds, values, self.g, self.k)
        bits = np.empty((codes.size, self.k), dtype=np.uint8)
        if codes.size:
            _local.unary_into(bits, codes, self.thresholds[0], self.thresholds[1], rng)
        return bits


def frequency_oracle(mechanism: str, *, k: int, epsilon: float, g: int | None = None) -> FrequencyOracle:
    """Calibrate a frequency oracle: its exact support probabilities and effective epsilon.

    Parameters
    ----------
    mechanism : {"randomized_response", "symmetric_unary", "optimized_unary", "local_hashing"}
    k : int
        Domain size, 2 <= k <= ``MAX_CATEGORIES``.
    epsilon : float
        Local epsilon, ``MIN_EPSILON`` <= epsilon <= 2**40.
    g : int, optional
        "local_hashing" only: the hash range, a prime in [2, 2**31 - 1]. Default: the prime
        next to e^epsilon + 1 (the optimum of [WBLJ17]) with the smaller variance.

    Returns
    -------
    FrequencyOracle

    Raises
    ------
    ValueError, TypeError
        For an unknown mechanism or out-of-range parameters (each named).

    Privacy
    -------
    Calibration on public parameters only: it reads no data, releases nothing and charges
    nothing. The randomizer it describes is ``epsilon_effective``-LDP (<= ``epsilon``).

    Notes
    -----
    With L a rational lower bound of e^epsilon (exact series, see ``_exp_lower``) and
    D = 2**64:

    * randomized response: A = min(floor(D L / (L + k - 1)), D - 1); p = A / D, q = (1 - p) /
      (k - 1); ratio A (k - 1) / (D - A) <= L. p differs from e^epsilon / (e^epsilon + k - 1)
      by less than about 2**-63 (for epsilon below ~44; beyond, p = 1 - 2**-64).
    * symmetric unary (RAPPOR): with L' <= e^(epsilon/2), p = A / D with A as above for k = 2
      and L', q = 1 - p; ratio (p / q)**2 <= L' ** 2.
    * optimized unary (OUE): p = 1/2, q = ceil(D / (L + 1)) / D; ratio (1 - q) / q <= L.
    * local hashing (OLH): randomized response on Z_g of the hash of the value (p as for
      randomized response with k = g), q = 1/g exactly (the hash family is pairwise
      independent: see :func:`local_hashing`).

    Examples
    --------
    >>> from dpcore.local import frequency_oracle
    >>> rr = frequency_oracle("randomized_response", k=2, epsilon=1.0)
    >>> round(float(rr.p), 6)   # e / (e + 1)
    0.731059
    >>> rr.epsilon_effective <= 1.0
    True
    """
    if mechanism not in _MECHANISMS:
        raise ValueError(f"mechanism must be one of {', '.join(map(repr, _MECHANISMS))}, got {mechanism!r}")
    k = check.integer(k, "k", minimum=2, maximum=MAX_CATEGORIES)
    epsilon = _check_epsilon(epsilon)
    if g is not None and mechanism != "local_hashing":
        raise ValueError("g applies to mechanism='local_hashing' only")
    return _oracle(mechanism, k, epsilon, None if g is None else _check_g(g))


def _check_g(g):
    g = check.integer(g, "g", minimum=2, maximum=MAX_HASH_RANGE)
    if not _is_prime(g):
        raise ValueError(f"g must be a prime (the hash family needs the field Z_g), got {g!r}")
    return g


@lru_cache(maxsize=256)
def _oracle(mechanism, k, epsilon, g):
    lower = _e_lower(epsilon)
    if mechanism == "randomized_response":
        a = _grr_threshold(k, lower)
        p = Fraction(a, _WORD)
        q = (1 - p) / (k - 1)
        ratio = Fraction(a * (k - 1), _WORD - a)
        thresholds = (a,)
    elif mechanism == "symmetric_unary":
        a = _grr_threshold(2, _exp_lower(min(Fraction(epsilon) / 2, _EXP_CAP)))
        p = Fraction(a, _WORD)
        q = 1 - p
        ratio = Fraction(a, _WORD - a) ** 2
        thresholds = (a, _WORD - a)
    elif mechanism == "optimized_unary":
        a0 = -(-_WORD * lower.denominator // (lower.numerator + lower.denominator))  # ceil
        p = Fraction(1, 2)
        q = Fraction(a0, _WORD)
        ratio = Fraction(_WORD - a0, a0)
        thresholds = (_WORD // 2, a0)
    else:
        if g is None:
            g = _best_hash_range(epsilon)
        a = _grr_threshold(g, lower)
        p = Fraction(a, _WORD)
        q = Fraction(1, g)
        ratio = Fraction(a * (g - 1), _WORD - a)
        thresholds = (a,)
    if not (p > q and 1 <= ratio <= lower):
        # Unreachable for epsilon >= MIN_EPSILON and k <= MAX_CATEGORIES; kept as a guard.
        raise ValueError(f"epsilon is too small for a domain of k={k} values (p <= q)")
    return FrequencyOracle(
        mechanism, k, epsilon, p, q, ratio, _ratio_epsilon(ratio, epsilon), g, thresholds
    )


def _olh_variance(epsilon, g):
    """The leading variance factor q (1 - q) / (p - q)**2 of OLH with hash range g."""
    lower = _e_lower(epsilon)
    p = Fraction(_grr_threshold(g, lower), _WORD)
    q = Fraction(1, g)
    return q * (1 - q) / (p - q) ** 2


def _best_hash_range(epsilon):
    """The prime g next to e^epsilon + 1 (below or above) with the smaller OLH variance."""
    target = min(math.exp(min(epsilon, 30.0)) + 1.0, float(MAX_HASH_RANGE))
    below = max(2, math.floor(target))
    while below > 2 and not _is_prime(below):
        below -= 1
    above = max(2, math.ceil(target))
    while above < MAX_HASH_RANGE and not _is_prime(above):
        above += 1
    candidates = sorted({below, above})
    return min(candidates, key=lambda g: (_olh_variance(epsilon, g), g))


# ------------------------------------------------------------------------------------------
# Input checks


def _encode(values, k, categories, name="values", as_bytes=False):
    """(codes as a 1-d int64 array, k, the input's shape, the categories array or None);
    booleans as 0/1 uint8 bytes instead when ``as_bytes``.

    Error messages never quote a value: they may be private.
    """
    if (k is None) == (categories is None):
        raise ValueError("give exactly one of k (values are 0 .. k - 1) and categories")
    if isinstance(values, (str, bytes)):
        raise TypeError(f"{name} must be an array of values (one per user), got a string")
    try:
        arr = np.asarray(values)
    except Exception:  # ragged input and the like
        raise TypeError(f"{name} must be an array of values (one per user)") from None
    if arr.ndim > 1:
        raise ValueError(f"{name} must be one-dimensional (one value per user), got {arr.ndim} dimensions")
    shape = arr.shape
    flat = arr.reshape(-1)
    if categories is None:
        k = check.integer(k, "k", minimum=2, maximum=MAX_CATEGORIES)
        if flat.size == 0:  # np.asarray([]) is float64
            return np.zeros(0, dtype=np.int64), k, shape, None
        if not (np.issubdtype(flat.dtype, np.integer) or flat.dtype == np.bool_):
            raise TypeError(f"{name} must be integers in [0, k) (or bools for k=2), got dtype {flat.dtype}")
        if flat.dtype == np.bool_:
            if k != 2:
                raise ValueError(f"boolean {name} need k=2, got k={k}")
            if as_bytes:
                return np.ascontiguousarray(flat).view(np.uint8), k, shape, None  # 0/1 bytes
        if flat.size and (flat.min() < 0 or flat.max() >= k):
            raise ValueError(f"{name} must lie in [0, k) = [0, {k}); some value is outside")
        return np.ascontiguousarray(flat, dtype=np.int64), k, shape, None
    cats = _check_categories(categories)
    try:
        order = np.argsort(cats, kind="stable")
        sorted_cats = cats[order]
        idx = np.searchsorted(sorted_cats, flat)
    except TypeError:
        raise TypeError(f"{name} are not comparable with categories") from None
    idx = np.minimum(idx, cats.size - 1)
    if flat.size and not np.all(sorted_cats[idx] == flat):
        raise ValueError(f"every entry of {name} must be one of categories; some value is not")
    return np.ascontiguousarray(order[idx], dtype=np.int64), int(cats.size), shape, cats


def _check_categories(categories):
    if isinstance(categories, (str, bytes)):
        raise TypeError("categories must be a sequence of category labels, not a string")
    cats = np.asarray(categories)
    if cats.ndim != 1:
        raise ValueError(f"categories must be one-dimensional, got {cats.ndim} dimensions")
    if not 2 <= cats.size <= MAX_CATEGORIES:
        raise ValueError(f"categories must hold 2 .. {MAX_CATEGORIES} labels, got {cats.size}")
    if cats.dtype.kind == "f" and not np.all(np.isfinite(cats)):
        raise ValueError("categories must not contain NaN or infinite labels")
    if np.unique(cats).size != cats.size:
        raise ValueError("categories must be distinct")
    return cats


# ------------------------------------------------------------------------------------------
# Randomized response


def randomized_response(values: ArrayLike, *, k: int | None = None, categories: ArrayLike | None = None,
                        epsilon: float, random_state: RandomStateLike = None,
                        accountant: AccountantLike | None = None) -> np.ndarray:
    """Privatise one value per user with k-ary (generalized) randomized response.

    Each user reports their true value with probability p ~ e^epsilon / (e^epsilon + k - 1)
    and each of the other k - 1 values with probability q = (1 - p) / (k - 1). With k = 2 this
    is Warner's randomized response (each bit flipped with probability 1 / (e^epsilon + 1)).

    Parameters
    ----------
    values : array_like, shape (n,) or scalar
        One value per user: integers in [0, k) (bools allowed for k = 2), or labels from
        ``categories``. Values outside the domain are an error (never clipped).
    k : int, optional
        Domain size, 2 <= k <= 2**32. Give ``k`` or ``categories``.
    categories : array_like, optional
        The public list of distinct labels (the domain); reports are labels from it.
    epsilon : float
        Local epsilon of each user, 2**-24 <= epsilon <= 2**40.
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's process-wide cryptographically secure ChaCha20 generator
        (unlike numpy/scikit-learn, where None means an insecure generator). Seeds and numpy
        generators are for tests only.
    accountant : dpcore.Accountant, optional
        Charged the effective epsilon (<= ``epsilon``; see Privacy) once before anything is drawn.

    Returns
    -------
    ndarray or scalar
        The reports, same shape as ``values``: int64 (bool for boolean input), or labels from
        ``categories``.

    Raises
    ------
    ValueError
        Neither or both of k and categories; values outside the domain; values of more than
        one dimension; epsilon out of range or not finite; duplicate categories.
    TypeError
        Non-integer values with ``k``; non-numeric epsilon or k; a bad ``random_state`` or
        ``accountant``.

    Privacy
    -------
    epsilon-LDP per user: for any two values v, v' of one user and every report y,
    P(y | v) <= e^epsilon P(y | v'). The law drawn is exact and rational: P(report = v) =
    p = A / 2**64 with the integer A = min(floor(2**64 L / (L + k - 1)), 2**64 - 1), L a
    rigorous rational lower bound of e^epsilon, and every other value with probability
    (1 - p) / (k - 1) exactly; so the likelihood ratio A (k - 1) / (2**64 - A) is at most
    L <= e^epsilon (``frequency_oracle("randomized_response", ...).epsilon_effective`` <=
    epsilon; p is within ~2**-63 of e^epsilon / (e^epsilon + k - 1)). The reports of different
    users are independent: the release is epsilon-DP under replace-one of a user's value, in
    the central model too. If an accountant is given it is charged ``epsilon_effective`` (<=
    epsilon, see the :mod:`dpcore.local` accounting rule) once.

    References
    ----------
    .. [War65] S. L. Warner, JASA 1965. .. [WBLJ17] Wang et al., USENIX Security 2017.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore import local
    >>> reports = local.randomized_response(np.array([0, 1, 2, 1]), k=3, epsilon=1.0, random_state=0)
    >>> reports.shape, bool(((reports >= 0) & (reports < 3)).all())
    ((4,), True)
    >>> local.randomized_response(["yes", "no"], categories=["no", "yes"], epsilon=2.0,
    ...                           random_state=1).dtype.kind
    'U'
    """
    codes, k, shape, cats = _encode(values, k, categories, as_bytes=True)
    oracle = _oracle("randomized_response", k, _check_epsilon(epsilon), None)
    out = oracle._release_codes((codes, shape), accountant, random_state)
    return out if cats is None else cats[out]


# ------------------------------------------------------------------------------------------
# Unary encoding


def unary_encoding(values: ArrayLike, *, k: int | None = None, categories: ArrayLike | None = None,
                   epsilon: float, method: str = "optimized", random_state: RandomStateLike = None,
                   accountant: AccountantLike | None = None) -> np.ndarray:
    """Privatise one value per user as a perturbed one-hot bit vector (unary encoding).

    Bit j of a user's report is 1 with probability p when j is the user's value and q
    otherwise, independently. ``method="optimized"`` (OUE, [WBLJ17]): p = 1/2,
    q ~ 1 / (e^epsilon + 1), the smallest variance among unary encodings.
    ``method="symmetric"`` (basic one-time RAPPOR, [EPK14]): p ~ e^(epsilon/2) /
    (e^(epsilon/2) + 1), q = 1 - p.

    Parameters
    ----------
    values : array_like, shape (n,)
        One value per user: integers in [0, k), or labels from ``categories``.
    k : int, optional
        Domain size, 2 <= k <= 2**32 (the output has n k bytes). Give ``k`` or ``categories``.
    categories : array_like, optional
        Public distinct labels; column j of the output is ``categories[j]``.
    epsilon : float
        Local epsilon, 2**-24 <= epsilon <= 2**40.
    method : {"optimized", "symmetric"}, default="optimized"
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's cryptographically secure generator. Seeds are for tests only.
    accountant : dpcore.Accountant, optional
        Charged the effective epsilon (<= ``epsilon``) once before anything is drawn.

    Returns
    -------
    ndarray of uint8, shape (n, k)
        The reports (0/1), one row per user.

    Raises
    ------
    ValueError, TypeError
        As :func:`randomized_response`; an unknown ``method``; a scalar ``values``.

    Privacy
    -------
    epsilon-LDP per user: for any two values v, v' of one user and every bit vector y,
    P(y | v) <= e^epsilon P(y | v'); the worst ratio is p (1 - q) / ((1 - p) q). The exact
    rational law drawn: OUE p = 1/2, q = ceil(2**64 / (L + 1)) / 2**64 with L <= e^epsilon a
    rational lower bound, ratio (1 - q) / q <= L; symmetric p = A / 2**64 (A as for binary
    randomized response with a lower bound L' of e^(epsilon/2)), q = 1 - p, ratio (p / q)**2
    <= L'**2 <= e^epsilon. ``frequency_oracle(...)`` reports p, q and ``epsilon_effective``
    <= epsilon. If an accountant is given it is charged ``epsilon_effective`` (<= epsilon,
    see the :mod:`dpcore.local` accounting rule) once.

    Examples
    --------
    >>> from dpcore import local
    >>> bits = local.unary_encoding([0, 3, 3], k=4, epsilon=1.0, random_state=0)
    >>> bits.shape, bits.dtype.name
    ((3, 4), 'uint8')
    """
    if method not in ("optimized", "symmetric"):
        raise ValueError(f"method must be 'optimized' or 'symmetric', got {method!r}")
    codes, k, shape, _ = _encode(values, k, categories)
    if len(shape) != 1:
        raise ValueError("values must be one-dimensional (one value per user), got a scalar")
    oracle = _oracle(f"{method}_unary", k, _check_epsilon(epsilon), None)
    return oracle._release_codes((codes, shape), accountant, random_state)


# ------------------------------------------------------------------------------------------
# Optimized local hashing


@dataclass(frozen=True)
class LocalHashingReports:
    """Reports of :func:`local_hashing`: user i reports (seeds[i], values[i]).

    Attributes
    ----------
    seeds : ndarray of int64, shape (n, m + 1)
        The hash seeds (a_0, ..., a_{m-1}, b), each in [0, g): the hash of x with base-g
        digits d_0..d_{m-1} (least significant first) is (b + sum_t a_t d_t) mod g.
    values : ndarray of int64, shape (n,)
        The reported hash values, in [0, g).
    g : int
        Hash range (a prime).
    k : int
        Domain size.
    """

    seeds: np.ndarray
    values: np.ndarray
    g: int
    k: int

    def hash(self, x: ArrayLike) -> np.ndarray:
        """The hash of domain value(s) ``x`` under every user's seed: shape (n,) + shape(x)."""
        x = np.asarray(x, dtype=np.int64)
        m = self.seeds.shape[1] - 1
        acc = np.broadcast_to(self.seeds[:, m].reshape((-1,) + (1,) * x.ndim), (self.seeds.shape[0],) + x.shape)
        acc = acc.copy()
        rest = x.copy()
        for t in range(m):
            a = self.seeds[:, t].reshape((-1,) + (1,) * x.ndim)
            acc = (acc + a * (rest % self.g)) % self.g
            rest = rest // self.g
        return acc


def local_hashing(values: ArrayLike, *, k: int | None = None, categories: ArrayLike | None = None,
                  epsilon: float, g: int | None = None, random_state: RandomStateLike = None,
                  accountant: AccountantLike | None = None) -> LocalHashingReports:
    """Privatise one value per user with optimized local hashing (OLH, [WBLJ17]).

    Each user draws a hash function h: {0..k-1} -> {0..g-1} from a pairwise-independent family
    and reports it with randomized response over {0..g-1} applied to h(value). With g ~
    e^epsilon + 1 the estimator's variance matches OUE's while each report is small
    (m + 2 integers instead of k bits).

    Parameters
    ----------
    values : array_like, shape (n,)
        One value per user: integers in [0, k), or labels from ``categories``.
    k : int, optional
        Domain size, 2 <= k <= 2**32. Give ``k`` or ``categories``.
    categories : array_like, optional
        Public distinct labels (the domain).
    epsilon : float
        Local epsilon, 2**-24 <= epsilon <= 2**40.
    g : int, optional
        Hash range, a prime in [2, 2**31 - 1]. Default: the prime next to e^epsilon + 1 with
        the smaller variance (see :func:`frequency_oracle`).
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's cryptographically secure generator. Seeds are for tests only.
    accountant : dpcore.Accountant, optional
        Charged the effective epsilon (<= ``epsilon``) once before anything is drawn.

    Returns
    -------
    LocalHashingReports

    Raises
    ------
    ValueError, TypeError
        As :func:`randomized_response`; a ``g`` that is not a prime in range.

    Privacy
    -------
    epsilon-LDP per user: for any two values v, v' of one user and every report (seed, y),
    P(seed, y | v) <= e^epsilon P(seed, y | v'). The seed is drawn uniformly, independently of
    the value; y is exact randomized response over Z_g of h(v) (P(y = h(v)) = A / 2**64, each
    other residue (1 - A / 2**64) / (g - 1), A as in :func:`randomized_response` with k = g),
    whose likelihood ratio is at most a rational lower bound of e^epsilon. If an accountant
    is given it is charged ``epsilon_effective`` (<= epsilon, see the :mod:`dpcore.local`
    accounting rule) once.

    Notes
    -----
    The family: write x in base g (g prime) as m digits, h(x) = (b + sum_t a_t d_t(x)) mod g
    with (a, b) uniform on Z_g^(m+1). For x != x' some digit difference is invertible mod g,
    so (h(x), h(x')) is exactly uniform on Z_g^2; hence a report supports j != v with
    probability exactly 1/g and the estimator is exactly unbiased. (The usual ((a x + b) mod P)
    mod g family is only approximately uniform.)

    Examples
    --------
    >>> from dpcore import local
    >>> r = local.local_hashing([5, 1, 7], k=10, epsilon=1.0, random_state=0)
    >>> r.g, r.seeds.shape
    (3, (3, 4))
    """
    codes, k, shape, _ = _encode(values, k, categories)
    if len(shape) != 1:
        raise ValueError("values must be one-dimensional (one value per user), got a scalar")
    oracle = _oracle("local_hashing", k, _check_epsilon(epsilon), None if g is None else _check_g(g))
    return oracle._release_codes((codes, shape), accountant, random_state)


# ------------------------------------------------------------------------------------------
# Frequency estimation (post-processing)


@dataclass(frozen=True)
class FrequencyEstimate:
    """Unbiased frequency estimates from local reports.

    Attributes
    ----------
    frequencies : ndarray of float, shape (k,)
        Unbiased estimates of the fraction of users holding each value (may be negative or
        exceed 1; they sum to 1 for randomized response and local hashing only in expectation).
    variance : ndarray of float, shape (k,)
        The exact variance formula of :meth:`FrequencyOracle.variance` evaluated at the
        estimates clipped to [0, 1] (a plug-in estimate of each estimate's variance).
    counts : ndarray of int64, shape (k,)
        How many reports support each value.
    n : int
        Number of reports.
    oracle : FrequencyOracle
        The law the reports were drawn from.
    categories : ndarray or None
        Labels of the k entries, when given.
    """

    frequencies: np.ndarray
    variance: np.ndarray
    counts: np.ndarray
    n: int
    oracle: FrequencyOracle
    categories: np.ndarray | None = None


def estimate_frequencies(reports: ArrayLike | LocalHashingReports, *, epsilon: float,
                         mechanism: str = "randomized_response", k: int | None = None,
                         categories: ArrayLike | None = None, g: int | None = None) -> FrequencyEstimate:
    """Unbiased estimates of the value frequencies from local reports (post-processing).

    Parameters
    ----------
    reports : array_like or LocalHashingReports
        "randomized_response": the reports (shape (n,), integers in [0, k) or labels).
        "optimized_unary" / "symmetric_unary": the (n, k) 0/1 array. "local_hashing": the
        `LocalHashingReports` (it carries k and g; do not pass them).
    epsilon : float
        The epsilon the reports were privatised with (public).
    mechanism : {"randomized_response", "optimized_unary", "symmetric_unary", "local_hashing"}
    k : int, optional
        Domain size (randomized response and unary encoding; unary infers it from the shape).
    categories : array_like, optional
        Labels instead of k, as given to the randomizer.
    g : int, optional
        Ignored unless given for "local_hashing", where it must match ``reports.g``.

    Returns
    -------
    FrequencyEstimate

    Raises
    ------
    ValueError, TypeError
        Malformed reports (wrong shape, entries outside the report space) or parameters.

    Privacy
    -------
    Post-processing of the reports only: no privacy cost, nothing charged.

    Notes
    -----
    With c_j the number of reports supporting j and p, q the oracle's exact probabilities,
    f_j = (c_j / n - q) / (p - q) is unbiased, with variance (f p (1 - p) + (1 - f) q (1 - q))
    / (n (p - q)**2) [WBLJ17].

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore import local
    >>> values = np.repeat([0, 1, 2], [6000, 3000, 1000])
    >>> reports = local.randomized_response(values, k=3, epsilon=2.0, random_state=0)
    >>> est = local.estimate_frequencies(reports, k=3, epsilon=2.0)
    >>> np.round(est.frequencies, 1)
    array([0.6, 0.3, 0.1])
    """
    if mechanism not in _MECHANISMS:
        raise ValueError(f"mechanism must be one of {', '.join(map(repr, _MECHANISMS))}, got {mechanism!r}")
    epsilon = _check_epsilon(epsilon)
    cats = None
    if mechanism == "randomized_response":
        codes, k, shape, cats = _encode(reports, k, categories, name="reports")
        oracle = _oracle(mechanism, k, epsilon, None)
        counts = np.bincount(codes, minlength=k).astype(np.int64)
        n = codes.size
    elif mechanism == "local_hashing":
        if not isinstance(reports, LocalHashingReports):
            raise TypeError("reports must be the LocalHashingReports returned by local_hashing")
        if k is not None or categories is not None:
            raise ValueError("k and categories come from the LocalHashingReports; do not pass them")
        if g is not None and g != reports.g:
            raise ValueError("g does not match reports.g")
        k, g = reports.k, _check_g(reports.g)
        oracle = _oracle(mechanism, check.integer(k, "reports.k", minimum=2, maximum=MAX_CATEGORIES),
                         epsilon, g)
        seeds, values = _check_hash_reports(reports, k, g)
        n = values.size
        digits = _digit_table(k, g, seeds.shape[1] - 1)
        counts = np.zeros(k, dtype=np.int64)
        _local.olh_support(counts, seeds, values, digits, g)
    else:
        bits = check.real_array(reports, "reports")
        if bits.ndim != 2:
            raise ValueError(f"reports must be an (n, k) array of 0/1 for unary encoding, got {bits.ndim} dimensions")
        if categories is not None:
            cats = _check_categories(categories)
            k_expected = cats.size
        else:
            k_expected = bits.shape[1] if k is None else check.integer(k, "k", minimum=2, maximum=MAX_CATEGORIES)
        if bits.shape[1] != k_expected:
            raise ValueError(f"reports must have k={k_expected} columns, got {bits.shape[1]}")
        if not np.all((bits == 0) | (bits == 1)):
            raise ValueError("reports must contain only 0 and 1")
        k = check.integer(k_expected, "k", minimum=2, maximum=MAX_CATEGORIES)
        oracle = _oracle(mechanism, k, epsilon, None)
        counts = bits.sum(axis=0, dtype=np.int64)
        n = bits.shape[0]
    if n == 0:
        raise ValueError("reports is empty: no frequencies can be estimated from 0 reports")
    gap = oracle.p - oracle.q
    # Unbiased up to the double roundings of q and p - q (relative 2**-52).
    freqs = (counts / n - float(oracle.q)) / float(gap)
    variance = oracle.variance(n, np.clip(freqs, 0.0, 1.0))
    return FrequencyEstimate(freqs, variance, counts, n, oracle, cats)


def _check_hash_reports(reports, k, g):
    seeds = np.asarray(reports.seeds)
    values = np.asarray(reports.values)
    if not (np.issubdtype(seeds.dtype, np.integer) and np.issubdtype(values.dtype, np.integer)):
        raise TypeError("reports.seeds and reports.values must be integer arrays")
    m = _hash_digits(k, g)
    if values.ndim != 1 or seeds.shape != (values.size, m + 1):
        raise ValueError(f"reports.seeds must have shape (n, {m + 1}) and reports.values shape (n,)")
    for name, arr in (("reports.seeds", seeds), ("reports.values", values)):
        if arr.size and (arr.min() < 0 or arr.max() >= g):
            raise ValueError(f"{name} must lie in [0, g) = [0, {g})")
    return np.ascontiguousarray(seeds, dtype=np.int64), np.ascontiguousarray(values, dtype=np.int64)


def _digit_table(k, g, m):
    x = np.arange(k, dtype=np.int64)
    digits = np.empty((k, m), dtype=np.int64)
    for t in range(m):
        digits[:, t] = x % g
        x //= g
    return digits
