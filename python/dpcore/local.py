"""Local differential privacy: per-user randomizers and the estimators that decode them.

In the local model each user privatises their own value before it leaves their device; the
collector only ever sees the reports. A randomizer R is epsilon-LDP when for any two values v,
v' of one user and every report y, P(R(v) = y) <= e^epsilon P(R(v') = y). The functions here
apply R independently to a whole array of users (one value per user) in a compiled kernel, and
the estimators (:func:`estimate_frequencies`, :func:`estimate_mean`) are post-processing of the
reports: they cost no privacy.

Exact laws. e^epsilon is irrational, so no sampler can draw probabilities such as
e^epsilon / (e^epsilon + k - 1) exactly. Here every probability is instead an exact rational
chosen from epsilon once, in integer arithmetic, such that the likelihood ratio of the law is
at most a rigorous rational *lower* bound of e^epsilon; the kernel then draws that rational
law exactly (a uniform 64-bit integer compared with an integer threshold, uniform integers by
rejection, a full-precision uniform compared with a double). No probability is ever rounded to
a double. So the guarantee is epsilon-LDP for the requested epsilon (``epsilon_effective`` <=
epsilon) and the estimators, built from the same rationals, are exactly unbiased. The laws are
reported by :func:`frequency_oracle` (``p``, ``q`` as Fractions) and :class:`DuchiMechanism`.

Accounting. A per-user randomizer needs no central accountant; when one is given, it is
charged ``epsilon`` once per call: the local epsilon of every user (parallel composition across
users, each user's value being used once). :func:`planar_laplace` is charged its plain LDP
epsilon over the public ``bounds`` it requires for that. An empty input releases nothing and
charges nothing.

Decoding is post-processing (no charge). Local hashing decodes in O(n k m) integer operations
(n reports, k values, m base-g digits), in the compiled kernel.

Not constant-time: rejection loops run a random number of times (their law does not depend on
the value, but the kernels are not hardened against timing side channels; ALGORITHMS 0.3(4)).

References
----------
.. [War65] S. L. Warner, "Randomized response: a survey technique for eliminating evasive answer
   bias", JASA 1965.
.. [WBLJ17] T. Wang, J. Blocki, N. Li, S. Jha, "Locally differentially private protocols for
   frequency estimation", USENIX Security 2017.
.. [EPK14] U. Erlingsson, V. Pihur, A. Korolova, "RAPPOR", CCS 2014.
.. [DJW13] J. C. Duchi, M. I. Jordan, M. J. Wainwright, "Local privacy and statistical minimax
   rates", FOCS 2013 (JASA 2018).
.. [ABCP13] M. E. Andres, N. E. Bordenabe, K. Chatzikokolakis, C. Palamidessi,
   "Geo-indistinguishability", CCS 2013.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike

import dpcore._local as _local  # compiled kernel (no stub: mypy treats it as Any)
from dpcore import _validation as check
from dpcore._floats import round_up
from dpcore._random import Words64
from dpcore._release import Cost, release
from dpcore.accounting import AccountantLike
from dpcore.random import RandomStateLike

__all__ = [
    "randomized_response",
    "unary_encoding",
    "local_hashing",
    "estimate_frequencies",
    "duchi",
    "estimate_mean",
    "frequency_oracle",
    "FrequencyOracle",
    "FrequencyEstimate",
    "LocalHashingReports",
    "DuchiMechanism",
    "MeanEstimate",
    "planar_laplace",
    "PlanarLaplaceMechanism",
    "MIN_EPSILON",
    "MAX_CATEGORIES",
]

#: Smallest local epsilon accepted: below it the 64-bit thresholds cannot separate the laws.
MIN_EPSILON = 2.0**-24
#: Largest domain size k (values are 0 .. k - 1).
MAX_CATEGORIES = 2**32
#: Largest hash range g of local hashing (products of two residues stay below 2**64).
MAX_HASH_RANGE = 2**31 - 1

_WORD = 2**64  # thresholds are out of 2**64: P = threshold / 2**64
# e^90 > 2**128 exceeds every likelihood ratio the 64-bit thresholds can express, so epsilon is
# capped there for the calibration (a lower bound of e^90 is a lower bound of e^epsilon).
_EXP_CAP = Fraction(90)
_EXP_BITS = 192  # working precision of the lower bound of e^x

_MECHANISMS = ("randomized_response", "symmetric_unary", "optimized_unary", "local_hashing")


# ------------------------------------------------------------------------------------------
# Exact calibration (public arithmetic only)


@lru_cache(maxsize=256)
def _exp_lower(x: Fraction) -> Fraction:
    """A rational L with L <= e^x (x >= 0 rational), within a relative 2**-170 for x <= 90.

    e^x = (e^y)^(2**s) with y = x / 2**s <= 1/2. The Taylor polynomial of e^y has positive
    terms, so truncating it gives a lower bound; every rounding (to a multiple of
    2**-_EXP_BITS) rounds down, and squaring a lower bound of a positive number gives a lower
    bound of its square.
    """
    s = 0
    while x > Fraction(1, 2) * 2**s:
        s += 1
    y = x / 2**s
    term = Fraction(1)
    total = Fraction(1)
    for j in range(1, 40):  # remainder < 2**-190 for y <= 1/2
        term = term * y / j
        total += term
    scale = 2**_EXP_BITS
    t = total.numerator * scale // total.denominator
    for _ in range(s):
        t = t * t // scale
    return Fraction(t, scale)


def _check_epsilon(epsilon):
    epsilon = check.privacy_loss(epsilon, "epsilon", check.MAX_EPSILON)
    if epsilon < MIN_EPSILON:
        raise ValueError(
            f"epsilon must be >= MIN_EPSILON = 2**-24 for the local mechanisms, got {epsilon!r}"
        )
    return epsilon


def _e_lower(epsilon):
    return _exp_lower(min(Fraction(epsilon), _EXP_CAP))


def _ratio_epsilon(ratio, epsilon):
    """log(ratio) as a float, never reported above epsilon (ratio <= e^epsilon is proven)."""
    return min(math.log(ratio.numerator) - math.log(ratio.denominator), epsilon)


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
class FrequencyOracle:
    """The exact law of a pure frequency oracle ([WBLJ17]) for a domain {0, ..., k - 1}.

    A report *supports* value j (RR: the report is j; unary: bit j is 1; local hashing: the
    reported hash equals h(j)) with probability ``p`` when the user's value is j and ``q``
    otherwise, independently across users.

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
        The largest likelihood ratio P(y | v) / P(y | v') of the reports: e^epsilon_effective,
        proven <= e^epsilon.
    epsilon_effective : float
        log(ratio) (the guarantee actually provided), <= ``epsilon``.
    g : int or None
        Hash range (a prime) for "local_hashing".
    thresholds : tuple of int
        The kernel's integer thresholds (probabilities are threshold / 2**64).
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

    def variance(self, n: int, frequencies: ArrayLike) -> np.ndarray:
        """Exact variance of each estimated frequency from ``n`` reports when the true
        frequencies are ``frequencies``: (f p (1 - p) + (1 - f) q (1 - q)) / (n (p - q)**2)."""
        n = check.integer(n, "n", minimum=1)
        f = np.asarray(frequencies, dtype=np.float64)
        p, q = float(self.p), float(self.q)
        gap = float(self.p - self.q)
        return (f * p * (1 - p) + (1 - f) * q * (1 - q)) / (n * gap * gap)


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
        Charged ``epsilon`` once (see Privacy) before anything is drawn.

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
    the central model too. If an accountant is given it is charged ``epsilon`` once (the
    per-user local epsilon; parallel composition across users).

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
    is_bool = codes.dtype == np.uint8
    if codes.size == 0:
        return (cats[:0] if cats is not None else np.zeros(shape, dtype=bool if is_bool else np.int64))
    if is_bool:  # bytes in, bytes out: the same draws as the int64 kernel with k = 2
        def draw(rng):
            out = np.empty_like(codes)
            _local.binary_rr_u8_into(out, codes, oracle.thresholds[0], rng)
            return out.view(np.bool_)
    else:
        def draw(rng):
            out = np.empty_like(codes)
            _local.grr_into(out, codes, k, oracle.thresholds[0], rng)
            return out

    out = release(draw, cost=Cost(epsilon=oracle.epsilon), accountant=accountant,
                  random_state=random_state, label="local.randomized_response")
    return _decode(out, shape, cats, is_bool)


def _decode(codes, shape, cats, is_bool=False):
    result = cats[codes] if cats is not None else (codes.astype(bool, copy=False) if is_bool else codes)
    result = result.reshape(shape)
    return result[()] if len(shape) == 0 else result


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
        Charged ``epsilon`` once before anything is drawn.

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
    <= epsilon. If an accountant is given it is charged ``epsilon`` once (the per-user local
    epsilon; parallel composition across users).

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
    if codes.size == 0:
        return np.zeros((0, k), dtype=np.uint8)
    t_one, t_zero = oracle.thresholds

    def draw(rng):
        out = np.empty((codes.size, k), dtype=np.uint8)
        _local.unary_into(out, codes, t_one, t_zero, rng)
        return out

    return release(draw, cost=Cost(epsilon=oracle.epsilon), accountant=accountant,
                   random_state=random_state, label="local.unary_encoding")


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
        Charged ``epsilon`` once before anything is drawn.

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
    whose likelihood ratio is at most a rational lower bound of e^epsilon. If an accountant is
    given it is charged ``epsilon`` once (the per-user local epsilon; parallel composition
    across users).

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
    epsilon = _check_epsilon(epsilon)
    oracle = _oracle("local_hashing", k, epsilon, None if g is None else _check_g(g))
    g = oracle.g
    m = _hash_digits(k, g)

    def draw(rng):
        seeds = np.empty((codes.size, m + 1), dtype=np.int64)
        out = np.empty(codes.size, dtype=np.int64)
        if codes.size:
            _local.olh_into(seeds, out, codes, g, oracle.thresholds[0], rng)
        return LocalHashingReports(seeds, out, g, k)

    if codes.size == 0:
        return draw(None)
    return release(draw, cost=Cost(epsilon=epsilon), accountant=accountant,
                   random_state=random_state, label="local.local_hashing")


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


# ------------------------------------------------------------------------------------------
# Duchi et al.'s local mean


@dataclass(frozen=True)
class DuchiMechanism:
    """Calibration of Duchi et al.'s one-dimensional randomizer.

    Attributes
    ----------
    epsilon : float
        Requested local epsilon.
    bound : float
        B: every report is +B or -B (a double), B >= (e^epsilon + 1) / (e^epsilon - 1).
    keep : fractions.Fraction
        (B + 1) / (2 B): the probability that the randomized-response step keeps the sign.
    epsilon_effective : float
        log((B + 1) / (B - 1)) <= epsilon.
    """

    epsilon: float
    bound: float
    keep: Fraction
    epsilon_effective: float

    @classmethod
    def calibrate(cls, epsilon: float) -> DuchiMechanism:
        """Validate epsilon and compute B (rounded up to a double) and the exact keep law."""
        epsilon = _check_epsilon(epsilon)
        return _duchi(epsilon)

    def probability_plus(self, x: float) -> Fraction:
        """P(report = +B | x) = (1 + x / B) / 2, exactly (as a Fraction) for a double x."""
        return (1 + Fraction(x) / Fraction(self.bound)) / 2


@lru_cache(maxsize=64)
def _duchi(epsilon):
    lower = _e_lower(epsilon)
    bound = round_up((lower + 1) / (lower - 1))
    b = Fraction(bound)
    keep = (b + 1) / (2 * b)
    ratio = (b + 1) / (b - 1)
    if not (1 < bound < 2.0**52 and keep.denominator < 2**64):  # unreachable: B <= ~2 / 2**-24
        raise ValueError(f"epsilon={epsilon!r} is outside the range the one-bit mechanism supports")
    return DuchiMechanism(epsilon, bound, keep, _ratio_epsilon(ratio, epsilon))


def duchi(values: ArrayLike, *, epsilon: float, random_state: RandomStateLike = None,
          accountant: AccountantLike | None = None) -> np.ndarray:
    """Privatise one value in [-1, 1] per user with Duchi et al.'s one-bit mechanism.

    Each user reports +B with probability (1 + x / B) / 2 and -B otherwise, where
    B ~ (e^epsilon + 1) / (e^epsilon - 1); the report is an unbiased estimate of x.

    Parameters
    ----------
    values : array_like of float, shape (n,) or scalar
        One value per user in [-1, 1] (rescale your public range to it first). NaN,
        infinities and values outside [-1, 1] are an error (never clipped silently).
    epsilon : float
        Local epsilon, 2**-24 <= epsilon <= 2**40.
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's cryptographically secure generator. Seeds are for tests only.
    accountant : dpcore.Accountant, optional
        Charged ``epsilon`` once before anything is drawn.

    Returns
    -------
    ndarray of float or float
        Reports in {-B, +B} (B = ``DuchiMechanism.calibrate(epsilon).bound``), same shape.

    Raises
    ------
    ValueError
        Values outside [-1, 1] or not finite; more than one dimension; epsilon out of range.
    TypeError
        Non-numeric values or parameters.

    Privacy
    -------
    epsilon-LDP per user: for any two values x, x' in [-1, 1] of one user, P(y | x) <=
    e^epsilon P(y | x') for y = +-B; the worst ratio is (B + 1) / (B - 1). B is a double
    rounded up from (L + 1) / (L - 1), L a rational lower bound of e^epsilon, so the ratio is
    at most L <= e^epsilon. The law drawn is exactly P(+B | x) = (1 + x / B) / 2: a sign s
    with P(s = +1) = (1 + x) / 2 (a full-precision uniform compared with the double |x|,
    exact) followed by randomized response keeping s with probability (B + 1) / (2 B)
    (an exact integer ratio). Outputs are the two public doubles +-B: no low-order bits. If an
    accountant is given it is charged ``epsilon`` once (the per-user local epsilon; parallel
    composition across users).

    References
    ----------
    .. [DJW13] J. C. Duchi, M. I. Jordan, M. J. Wainwright, FOCS 2013; JASA 2018.

    Examples
    --------
    >>> from dpcore import local
    >>> y = local.duchi([0.5, -1.0, 0.0], epsilon=1.0, random_state=0)
    >>> B = local.DuchiMechanism.calibrate(1.0).bound
    >>> bool(((y == B) | (y == -B)).all())
    True
    """
    x = check.finite_array(values, "values")
    if x.ndim > 1:
        raise ValueError(f"values must be one-dimensional (one value per user), got {x.ndim} dimensions")
    if x.size and (x.min() < -1.0 or x.max() > 1.0):
        raise ValueError("values must lie in [-1, 1] (rescale the public range first); some value is outside")
    mech = DuchiMechanism.calibrate(epsilon)
    shape = x.shape
    flat = np.ascontiguousarray(x.reshape(-1))
    if flat.size == 0:
        return flat.reshape(shape).copy()
    num, den = mech.keep.numerator, mech.keep.denominator

    def draw(rng):
        signs = np.empty(flat.size, dtype=np.int8)
        _local.duchi_into(signs, flat, num, den, rng)
        return np.where(signs > 0, mech.bound, -mech.bound)

    out = release(draw, cost=Cost(epsilon=mech.epsilon), accountant=accountant,
                  random_state=random_state, label="local.duchi")
    out = out.reshape(shape)
    return out[()] if len(shape) == 0 else out


@dataclass(frozen=True)
class MeanEstimate:
    """The mean of Duchi reports.

    Attributes
    ----------
    mean : float
        Unbiased estimate of the users' mean.
    variance_bound : float
        B**2 / n, an upper bound on the estimate's variance (the exact variance is
        (B**2 - mean of x**2) / n).
    n : int
    """

    mean: float
    variance_bound: float
    n: int


def estimate_mean(reports: ArrayLike, *, epsilon: float) -> MeanEstimate:
    """Unbiased estimate of the mean from :func:`duchi` reports (post-processing).

    Parameters
    ----------
    reports : array_like of float, shape (n,)
        The reports, each exactly +B or -B for this epsilon.
    epsilon : float
        The epsilon the reports were privatised with.

    Returns
    -------
    MeanEstimate

    Raises
    ------
    ValueError
        Empty reports or entries other than +-B.

    Privacy
    -------
    Post-processing of the reports only: no privacy cost, nothing charged.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore import local
    >>> y = local.duchi(np.full(20000, 0.3), epsilon=2.0, random_state=0)
    >>> est = local.estimate_mean(y, epsilon=2.0)
    >>> bool(abs(est.mean - 0.3) < 5 * est.variance_bound ** 0.5)
    True
    """
    mech = DuchiMechanism.calibrate(epsilon)
    y = check.finite_array(reports, "reports").reshape(-1)
    if y.size == 0:
        raise ValueError("reports is empty")
    plus = y == mech.bound
    if not np.all(plus | (y == -mech.bound)):
        raise ValueError("reports must be the +-B outputs of duchi() for this epsilon")
    n = int(y.size)
    n_plus = int(np.count_nonzero(plus))
    mean = float(Fraction(mech.bound) * (2 * n_plus - n) / n)
    return MeanEstimate(mean, mech.bound**2 / n, n)


# ------------------------------------------------------------------------------------------
# Planar Laplace on a grid (geo-indistinguishability)

#: Largest |coordinate| / grid accepted (grid indices and outputs stay exact in doubles).
MAX_GRID_INDEX = 2.0**50


class _Words:
    """64-bit words from a generator, fetched in batches (order fixed: a seed reproduces)."""

    def __init__(self, rng):
        self._words = Words64(rng)
        self._buf = []

    def next(self):
        if not self._buf:
            self._buf = self._words.batch(256).tolist()[::-1]
        return self._buf.pop()


def _uniform_below(words, enclosure, first):
    """True with probability exactly r, for r in [0, 1] known through ``enclosure(bits)`` ->
    (lo, hi) with lo <= r <= hi and hi - lo <= about 2**-bits.

    A real uniform U is read 64 bits at a time (``first`` is its first word): after P bits it
    lies in [a / 2**P, (a + 1) / 2**P); U < r is decided once that cell lies below lo or at/above
    hi. For an irrational r this happens with probability one; a rational r has lo == hi.
    """
    a, bits = first, 64
    while True:
        lo, hi = enclosure(bits + 4)
        cell = Fraction(1, 2**bits)
        if (a + 1) * cell <= lo:
            return True
        if a * cell >= hi:
            return False
        a = (a << 64) | words.next()
        bits += 64


def _sqrt_enclosure(n, bits):
    """(lo, hi) with lo <= sqrt(n) <= hi for an integer n >= 0, hi - lo <= 2**-bits (exact when
    n is a perfect square)."""
    s = math.isqrt(n << (2 * bits))
    lo = Fraction(s, 2**bits)
    return (lo, lo) if s * s == n << (2 * bits) else (lo, Fraction(s + 1, 2**bits))


# Fast path of the planar acceptance test: gamma is first computed in doubles. While lam
# sqrt(n2) < 2**20 and taxi / s < 2**21, each of the few roundings errs by at most 2**-53 of
# a number below 2**21, so |gamma_double - gamma| < 2**-29 and |r_double - r| < 2**-28 for r =
# gamma / (M K); a uniform whose first 64 bits put it more than _FAST_MARGIN away from r_double
# is decided by them alone, exactly as the exact comparison would decide it. Otherwise the same
# word goes on to the exact comparison (the law is the exact one either way).
_FAST_MARGIN = 2.0**-26
_FAST_LIMIT = 2.0**20
_FORCE_EXACT = False  # test hook: every decision through the exact enclosures


def _bernoulli_exp_planar(words, n2, taxi, lam, inv_scale):
    """Exact Bernoulli(exp(-gamma)) with gamma = lam sqrt(n2) - taxi inv_scale >= 0 (irrational
    in general): exp(-gamma) = exp(-gamma / M)**M with an integer M >= gamma, each factor by
    Canonne-Kamath-Steinke's series (K = 1, 2, ... while Bernoulli(c / K); success iff K odd),
    every Bernoulli(c / K) decided on the uniform's first word when the double estimate of
    c / K is clearly away from it, else by `_uniform_below` on an exact enclosure."""
    offset = taxi * inv_scale

    def gamma(bits):
        lo, hi = _sqrt_enclosure(n2, bits)
        return lam * lo - offset, lam * hi - offset

    main, off = float(lam) * math.sqrt(n2), taxi * float(inv_scale)
    in_range = main < _FAST_LIMIT and off < 2 * _FAST_LIMIT
    if in_range:
        g = main - off
        m = max(1, math.ceil(g + _FAST_MARGIN))  # >= gamma: the error is below the margin
    else:
        m = max(1, math.ceil(gamma(16)[1]))
    fast = in_range and not _FORCE_EXACT
    for _ in range(m):
        k = 1
        while True:
            a = words.next()
            if fast:
                r = g / (m * k)
                if (a + 1) * 2.0**-64 <= r - _FAST_MARGIN:
                    k += 1
                    continue
                if a * 2.0**-64 >= r + _FAST_MARGIN:
                    break
            if not _uniform_below(words, lambda b, k=k: tuple(x / (m * k) for x in gamma(b)), a):
                break
            k += 1
        if k % 2 == 0:
            return False
    return True


@dataclass(frozen=True)
class PlanarLaplaceMechanism:
    """Calibration of the planar Laplace mechanism on a grid.

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
    """

    epsilon: float
    grid: float
    decay: Fraction
    proposal_scale: float
    epsilon_ldp: float | None

    @classmethod
    def calibrate(cls, *, epsilon: float, grid: float,
                  bounds: tuple[tuple[float, float], tuple[float, float]] | None = None
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
        eps_ldp = None
        if bounds is not None:
            (x0, x1), (y0, y1) = _check_box(bounds)
            d2 = (Fraction(x1) - Fraction(x0)) ** 2 + (Fraction(y1) - Fraction(y0)) ** 2
            num, den = d2.numerator, d2.denominator
            diameter_up = Fraction(math.isqrt(num * den * 4**64) + 1, den * 2**64)  # >= sqrt(d2)
            root2_up = Fraction(math.isqrt(2 * 4**64) + 1, 2**64)
            eps_ldp = round_up(Fraction(epsilon) * (diameter_up + root2_up * Fraction(grid)))
        return cls(epsilon, grid, lam, s, eps_ldp)


def _check_box(bounds):
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
    probability exp(-(epsilon u ||d|| - (|d1| + |d2|) / s)) <= 1 (||d||_1 <= sqrt(2) ||d||_2),
    decided by the Canonne-Kamath-Steinke Bernoulli(exp(-gamma)) series with each comparison
    made on an exact enclosure of the irrational gamma (integer square roots), refined until it
    decides. About 1.3 proposals per point. The acceptance test runs in Python (tens of
    microseconds per point) and is not constant-time.

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
    pts = check.finite_array(points, "points")
    if pts.shape == (2,):
        single = True
        pts = pts.reshape(1, 2)
    else:
        single = False
        if pts.ndim != 2 or pts.shape[1] != 2:
            raise ValueError(f"points must have shape (n, 2) or (2,), got {pts.ndim} dimensions / "
                             f"{pts.shape[-1] if pts.ndim else 0} columns")
    mech = PlanarLaplaceMechanism.calibrate(epsilon=epsilon, grid=grid, bounds=bounds)
    if bounds is not None:
        (x0, x1), (y0, y1) = _check_box(bounds)
        inside = (pts[:, 0] >= x0) & (pts[:, 0] <= x1) & (pts[:, 1] >= y0) & (pts[:, 1] <= y1)
        if not inside.all():
            raise ValueError("every point must lie inside bounds; some point is outside")
    elif accountant is not None:
        raise ValueError(
            "an accountant needs bounds: geo-indistinguishability has no finite plain epsilon "
            "over the unbounded plane (give the public box the locations lie in)"
        )
    scaled = pts / mech.grid  # exact: the grid is a power of two (barring underflow, checked)
    if np.abs(scaled).max(initial=0.0) >= MAX_GRID_INDEX:
        raise ValueError("points must lie within 2**50 grid steps of the origin; some point is farther")
    if np.any((pts != 0) & (scaled * mech.grid != pts)):
        raise ValueError("grid is too fine for these coordinates (points / grid is not exact)")
    centres = np.rint(scaled).astype(np.int64)
    if centres.size == 0:
        return pts.reshape((2,) if single else (0, 2)).copy()

    def draw(rng):
        offsets = _planar_offsets(centres.shape[0], mech, rng)
        out = (centres + offsets).astype(np.float64) * mech.grid  # exact: |index| < 2**51
        return out[0] if single else out

    # Without bounds no accountant reaches this point (refused above), so nothing is charged.
    cost = Cost(epsilon=mech.epsilon_ldp if mech.epsilon_ldp is not None else 0.0)
    return release(draw, cost=cost, accountant=accountant, random_state=random_state,
                   label="local.planar_laplace")


def _planar_offsets(n, mech, rng):
    """n exact draws of d in Z^2 with P(d) proportional to exp(-lambda ||d||_2)."""
    from dpcore import _noise

    lam = mech.decay
    inv_scale = 1 / Fraction(mech.proposal_scale)
    words = _Words(rng)
    out = np.empty((n, 2), dtype=np.int64)
    pending = np.arange(n)
    while pending.size:
        batch = max(2 * pending.size, 16)
        proposals = np.empty(2 * batch, dtype=np.int64)
        _noise.discrete_laplace_into(proposals, mech.proposal_scale, rng)
        proposals = proposals.reshape(batch, 2)
        filled = 0
        for d1, d2 in proposals.tolist():
            if filled == pending.size:
                break
            if _bernoulli_exp_planar(words, d1 * d1 + d2 * d2, abs(d1) + abs(d2), lam, inv_scale):
                out[pending[filled]] = (d1, d2)
                filled += 1
        pending = pending[filled:]
    return out
