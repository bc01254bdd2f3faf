# cython: language_level=3
"""Secure-randomness kernel: the ChaCha20 bit generator and exact samplers on top of any bitgen_t.

`ChaCha20` is a `numpy.random.BitGenerator` whose words are the RFC 8439 ChaCha20 keystream
(C code in chacha20.h). Keyed from the OS (``seed=None``) it is a cryptographically secure
generator; it is rekeyed in a forked child. `bitgen_handle` turns any accepted ``random_state``
into the C generator, its lock and its owner, so kernels can draw with
``with h.lock, nogil: ...``. The C-level samplers (declared in _random.pxd) use only integer
arithmetic and exact floating-point operations, so their output laws are exact.

Not constant-time: rejection loops run a data-dependent number of times
(a timing channel if run time is observable).
"""
import os
import threading
import weakref

import numpy as np
from numpy.random import Generator, RandomState, SeedSequence
from numpy.random.bit_generator import ISeedSequence, SeedlessSeedSequence

from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_IsValid
from libc.math cimport fabs
from libc.stdint cimport uint32_t, uint64_t, UINT64_MAX
from numpy.random.bit_generator cimport BitGenerator


cdef extern from "chacha20.h" nogil:
    int DPC_CHACHA_BUF_WORDS

    const uint32_t *dpc_chacha_constants
    void dpc_chacha20_init_dispatch()
    int dpc_chacha20_set_lanes(int lanes)
    int dpc_chacha20_get_lanes()
    void dpc_chacha20_block(const uint32_t *input, uint32_t *out)
    void dpc_chacha20_set_key(dpc_chacha20_state *st, const uint32_t *key)
    void dpc_chacha20_seek(dpc_chacha20_state *st, uint64_t block, int word)
    void dpc_chacha20_tell(const dpc_chacha20_state *st, uint64_t *block, int *word)
    uint64_t dpc_chacha20_next64(dpc_chacha20_state *st)
    void dpc_chacha20_fill(dpc_chacha20_state *st, uint64_t *out, size_t n)
    uint64_t dpc_chacha20_next_uint64(void *st)
    uint32_t dpc_chacha20_next_uint32(void *st)
    double dpc_chacha20_next_double(void *st)
    uint64_t dpc_mul64(uint64_t a, uint64_t b, uint64_t *lo)
    uint64_t dpc_div128_sat(uint64_t hi, uint64_t lo, uint64_t d)
    void dpc_chacha20_refill_fn(dpc_chacha20_state *st)


cdef extern from "dpc_bits.h" nogil:
    int dpc_clz64(uint64_t w)
    int dpc_ctz64(uint64_t w)
    int dpc_clz64_portable(uint64_t w)
    int dpc_ctz64_portable(uint64_t w)


dpc_chacha20_init_dispatch()


# ------------------------------------------------------------------------------------------------
# The bit generator

# Every live ChaCha20 (for the fork hook) and the process-wide default generator.
_INSTANCES = weakref.WeakSet()
_DEFAULT = None
_DEFAULT_LOCK = threading.Lock()


cdef object _key_words(object key_bytes):
    """32 bytes -> the 8 little-endian 32-bit key words as a native uint32 array."""
    return np.frombuffer(key_bytes, dtype="<u4").astype(np.uint32)


cdef object _reinit_lock(object lock):
    """Return `lock` unlocked in a forked child: reset in place when the lock type allows it (so
    numpy Generators, which keep a reference to their bit generator's lock, see the reset),
    otherwise a fresh lock of the same kind."""
    reinit = getattr(lock, "_at_fork_reinit", None)
    if reinit is not None:
        reinit()
        return lock
    return threading.RLock()


cdef class ChaCha20(BitGenerator):
    """ChaCha20(seed=None)

    Cryptographically secure bit generator: the ChaCha20 keystream (RFC 8439, 20 rounds).

    Each 64-byte block of keystream gives eight 64-bit words. The generator state is a 256-bit
    key and a 64-bit block counter (input words 12-13; words 14-15 are zero), so one key gives
    2**64 blocks (2**73 bytes) of output.

    Parameters
    ----------
    seed : {None, int, array_like[int], numpy.random.SeedSequence}, default=None
        ``None`` (the default, and the only choice for production) keys the generator with 256
        bits from the operating system (`os.urandom`). Anything else is passed to
        `numpy.random.SeedSequence` and the key is ``SeedSequence(seed).generate_state(8,
        numpy.uint32)``: deterministic, for tests and reproducibility only. A seed is not a
        secret key, and a seeded generator gives no security or privacy guarantee. An empty
        sequence (``[]``, an empty array, a SeedSequence of one) is refused.

    Attributes
    ----------
    lock : threading.RLock
        Held by everyone drawing from this generator (shared with numpy Generators over it).
    os_keyed : bool
        True when the key came from the OS; such generators are rekeyed in forked children and
        when copied or pickled.

    Raises
    ------
    ValueError
        If ``seed`` is an empty sequence ("seed must be non-empty; use None for the secure
        generator"), or a seed numpy's SeedSequence rejects.

    Notes
    -----
    Unlike `numpy.random.default_rng` and scikit-learn, ``None`` here means the
    cryptographically secure, OS-keyed generator, not a fast statistical one.

    Fork safety: after `os.fork`, every OS-keyed ChaCha20 alive in the child is rekeyed from
    fresh OS entropy, so parent and child never emit the same words. Seeded generators are *not*
    rekeyed (a seed promises reproducibility): a seeded generator continues the same stream in
    parent and child. Locks of all ChaCha20 instances are reset in the child, since a lock held
    by another thread at fork time would never be released there.

    Copies and pickling: an OS-keyed generator (including the process-wide default) is
    *rekeyed* when pickled (e.g. sent to a joblib worker), copied or deep-copied: the copy is a
    new ChaCha20 keyed from the OS (``os_keyed`` True) that shares nothing with the original,
    and its key is never written to the pickle. Two processes or two copies therefore never
    emit the same noise. A numpy Generator over a ChaCha20 pickles through its bit generator,
    so the same holds for it. A seeded generator (tests and reproducibility only) is copied
    exactly: the copy continues the same stream, which is the point of a seed. To copy an
    OS-keyed stream on purpose, set ``state`` explicitly. To give workers independent streams
    use `spawn`.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore.random import ChaCha20
    >>> rng = np.random.Generator(ChaCha20())       # secure, OS-keyed
    >>> x = rng.standard_normal(3)
    >>> a = ChaCha20(seed=12345).random_raw(4)        # reproducible, tests only
    >>> b = ChaCha20(seed=12345).random_raw(4)
    >>> bool((a == b).all())
    True
    """
    cdef dpc_chacha20_state rng_state
    cdef bint _os_keyed
    cdef object __weakref__

    def __init__(self, seed=None):
        if seed is None or isinstance(seed, SeedlessSeedSequence):
            BitGenerator.__init__(self, SeedlessSeedSequence())
            self._rekey_from_os()
        else:
            if _is_empty_seed(seed):
                raise ValueError(f"seed must be non-empty; use None for the secure generator "
                                 f"(an empty seed gives a fixed, publicly known stream), "
                                 f"got {seed!r}")
            BitGenerator.__init__(self, seed)
            self._set_key(self._seed_seq.generate_state(8, np.uint32))
            self._os_keyed = False
        self._bitgen.state = <void *>&self.rng_state
        self._bitgen.next_uint64 = &dpc_chacha20_next_uint64
        self._bitgen.next_uint32 = &dpc_chacha20_next_uint32
        self._bitgen.next_double = &dpc_chacha20_next_double
        self._bitgen.next_raw = &dpc_chacha20_next_uint64
        _INSTANCES.add(self)

    cdef _set_key(self, object words):
        """Key with 8 32-bit words (key words 4-11) and restart at block 0."""
        cdef uint32_t key[8]
        cdef Py_ssize_t i
        for i in range(8):
            key[i] = <uint32_t>int(words[i])
        dpc_chacha20_set_key(&self.rng_state, key)

    cdef _rekey_from_os(self):
        self._set_key(_key_words(os.urandom(32)))
        self._os_keyed = True

    cdef _after_fork_in_child(self):
        self.lock = _reinit_lock(self.lock)
        if self._os_keyed:
            self._rekey_from_os()

    @property
    def os_keyed(self):
        """True when the key came from the OS (``seed=None``); False for seeded generators."""
        return bool(self._os_keyed)

    @property
    def state(self):
        """The exact generator state as a dict.

        Keys: ``bit_generator`` (``"ChaCha20"``); ``state``: ``{"key": int (256 bits, key word
        4 least significant), "counter": block of the next unread word, "word": index 0-7 of
        the next unread 64-bit word in that block}``; ``has_uint32`` and ``uinteger`` (the
        buffered half-word of 32-bit draws); ``os_keyed``.

        Setting a state whose ``os_keyed`` is false (or missing) makes the generator a seeded
        one: it is then not rekeyed after `os.fork`. The key is secret material: a state taken
        from an OS-keyed generator reproduces its future output.
        """
        cdef uint64_t block = 0
        cdef int word = 0, i
        cdef int has_uint32 = 0
        cdef uint32_t uinteger = 0
        with self.lock:
            dpc_chacha20_tell(&self.rng_state, &block, &word)
            key = 0
            for i in range(8):
                key |= int(self.rng_state.input[4 + i]) << (32 * i)
            has_uint32 = self.rng_state.has_uint32
            uinteger = self.rng_state.uinteger
        return {
            "bit_generator": type(self).__name__,
            "state": {"key": key, "counter": int(block), "word": int(word)},
            "has_uint32": int(has_uint32),
            "uinteger": int(uinteger),
            "os_keyed": bool(self._os_keyed),
        }

    @state.setter
    def state(self, value):
        if not isinstance(value, dict):
            raise TypeError(f"state must be a dict, got {type(value).__name__}")
        if value.get("bit_generator") != type(self).__name__:
            raise ValueError(f"state must be for a {type(self).__name__} bit generator, "
                             f"got bit_generator={value.get('bit_generator')!r}")
        try:
            inner = value["state"]
            key = int(inner["key"])
            counter = int(inner["counter"])
            word = int(inner.get("word", 0))
            has_uint32 = int(value.get("has_uint32", 0))
            uinteger = int(value.get("uinteger", 0))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"state is malformed: {exc!r}") from None
        if not 0 <= key < 2**256:
            raise ValueError(f"state['state']['key'] must be in [0, 2**256), got {key}")
        if not 0 <= counter < 2**64:
            raise ValueError(f"state['state']['counter'] must be in [0, 2**64), got {counter}")
        if not 0 <= word < 8:
            raise ValueError(f"state['state']['word'] must be in [0, 8), got {word}")
        if has_uint32 not in (0, 1) or not 0 <= uinteger < 2**32:
            raise ValueError("state['has_uint32'] must be 0 or 1 and state['uinteger'] in [0, 2**32)")
        words = [(key >> (32 * i)) & 0xFFFFFFFF for i in range(8)]
        with self.lock:
            self._set_key(words)
            dpc_chacha20_seek(&self.rng_state, <uint64_t>counter, word)
            self.rng_state.has_uint32 = has_uint32
            self.rng_state.uinteger = <uint32_t>uinteger
            self._os_keyed = bool(value.get("os_keyed", False))

    def __reduce__(self):
        # OS-keyed: the copy is a fresh OS-keyed generator (the key is not pickled); seeded:
        # the exact state and the seed sequence (for spawn). See the class docstring.
        if self._os_keyed:
            return (type(self), ())
        return (_chacha20_unpickle, (self.state, self._seed_seq))

    def spawn(self, int n_children):
        """spawn(n_children)

        Create independent child generators.

        Parameters
        ----------
        n_children : int
            Number of children, >= 0.

        Returns
        -------
        list of ChaCha20
            OS-keyed parent: children keyed from the OS (independent, not reproducible).
            Seeded parent: children keyed from ``seed_seq.spawn(n_children)``, reproducible
            from the parent's seed (tests only).
        """
        if n_children < 0:
            raise ValueError(f"n_children must be >= 0, got {n_children}")
        if self._os_keyed or not isinstance(self._seed_seq, SeedSequence):
            return [type(self)() for _ in range(n_children)]
        return [type(self)(seed=s) for s in self._seed_seq.spawn(n_children)]

    def random_raw(self, size=None, output=True):
        """random_raw(size=None, output=True)

        Raw 64-bit words of the keystream.

        Parameters
        ----------
        size : int or tuple of int, optional
            Output shape; None (default) returns one Python int.
        output : bool, default=True
            When False the words are generated (the stream advances) but None is returned.

        Returns
        -------
        int or numpy.ndarray of uint64
        """
        cdef uint64_t value
        cdef uint64_t[::1] flat
        if size is None:
            with self.lock:
                value = dpc_chacha20_next64(&self.rng_state)
            return int(value) if output else None
        out = np.empty(size, dtype=np.uint64)
        flat = out.reshape(-1)
        with self.lock, nogil:
            dpc_chacha20_fill(&self.rng_state, &flat[0] if flat.shape[0] > 0 else NULL,
                              <size_t>flat.shape[0])
        return out if output else None


def _chacha20_unpickle(state, seed_seq):
    """Rebuild a pickled seeded ChaCha20 with its exact state (and its seed sequence, for
    spawn). A state marked ``os_keyed`` (pickles written before OS-keyed generators pickled
    without their key) gives a fresh OS-keyed generator instead: copies never share a secure
    stream."""
    if isinstance(state, dict) and state.get("os_keyed"):
        return ChaCha20()
    bg = ChaCha20(seed_seq if isinstance(seed_seq, SeedSequence) else None)
    bg.state = state
    return bg


def default_bit_generator():
    """The process-wide secure generator: one OS-keyed ChaCha20, created on first use.

    Creation is thread-safe; the generator is shared by every ``random_state=None`` call and is
    rekeyed in forked children.
    """
    global _DEFAULT
    bg = _DEFAULT
    if bg is None:
        with _DEFAULT_LOCK:
            if _DEFAULT is None:
                _DEFAULT = ChaCha20()
            bg = _DEFAULT
    return bg


def _after_fork_in_child():
    """os.register_at_fork hook: new locks everywhere, new keys for OS-keyed generators."""
    global _DEFAULT_LOCK
    _DEFAULT_LOCK = threading.Lock()
    for bg in list(_INSTANCES):
        (<ChaCha20>bg)._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


# ------------------------------------------------------------------------------------------------
# random_state -> (bitgen_t *, lock, owner)

cdef class BitgenHandle:
    """What a kernel needs to draw: ``bitgen`` (C pointer), ``lock`` and ``bit_generator``.

    Use as ``with h.lock, nogil: sampler(h.bitgen, ...)``. Holding the handle keeps the bit
    generator (and so the pointer) alive.
    """

    def __repr__(self):
        return f"BitgenHandle({self.bit_generator!r})"


cdef class LockedBits:
    """Callable drawing raw 64-bit words while the caller already holds the generator's lock."""

    def __call__(self):
        return random_u64(self.bg)

    def ustar(self):
        return random_ustar(self.bg)


cdef LockedBits locked_bits(BitgenHandle h):
    cdef LockedBits bits = LockedBits.__new__(LockedBits)
    bits.bg = h.bitgen
    return bits


cdef bint _is_int_seed(object x):
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


cdef bint _is_empty_seed(object x):
    """An empty entropy sequence: [], (), an empty array, or a SeedSequence built from one.
    SeedSequence accepts them and yields a fixed stream; dpcore refuses them."""
    if isinstance(x, np.ndarray):
        return x.size == 0
    if isinstance(x, (list, tuple, range)):
        return len(x) == 0
    if isinstance(x, SeedSequence):
        entropy = x.entropy
        return isinstance(entropy, (list, tuple, np.ndarray)) and len(entropy) == 0
    return False


cdef bint _is_seed(object x):
    if _is_int_seed(x) or isinstance(x, ISeedSequence):
        return True
    if isinstance(x, np.ndarray):
        return x.dtype.kind in "iu" and x.size > 0
    if isinstance(x, (list, tuple)):
        return len(x) > 0 and all(_is_int_seed(v) for v in x)
    return False


ACCEPTED_RANDOM_STATE = (
    "None (the secure OS-keyed generator), an int or a non-empty sequence of ints >= 0 or a "
    "numpy SeedSequence (a seeded ChaCha20, tests only), a numpy BitGenerator, Generator or "
    "RandomState"
)


def _resolve_bit_generator(random_state):
    """The BitGenerator a ``random_state`` argument stands for (see `bitgen_handle`)."""
    if random_state is None:
        return default_bit_generator()
    if isinstance(random_state, BitGenerator):
        return random_state
    if isinstance(random_state, Generator):
        return random_state.bit_generator
    if isinstance(random_state, RandomState):
        return random_state._bit_generator
    if _is_empty_seed(random_state):
        raise ValueError(f"random_state must be non-empty; use None for the secure generator "
                         f"(an empty seed gives a fixed, publicly known stream), "
                         f"got {random_state!r}")
    if _is_seed(random_state):
        try:
            return ChaCha20(random_state)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"random_state is not a valid seed: {exc}") from None
    text = repr(random_state)
    if len(text) > 60:
        text = text[:57] + "..."
    raise TypeError(
        f"random_state must be {ACCEPTED_RANDOM_STATE}; got {type(random_state).__name__} {text}"
    )


cpdef BitgenHandle bitgen_handle(object random_state):
    """Resolve ``random_state`` to a `BitgenHandle`.

    None -> the process-wide secure generator (`default_bit_generator`); int, sequence of ints
    or SeedSequence -> a new ``ChaCha20(seed)``; a BitGenerator -> itself; a numpy Generator ->
    its ``bit_generator``; a legacy RandomState -> its ``_bit_generator``. Anything else raises
    TypeError naming ``random_state``.
    """
    cdef BitgenHandle h = BitgenHandle.__new__(BitgenHandle)
    bg = _resolve_bit_generator(random_state)
    capsule = bg.capsule
    if not PyCapsule_IsValid(capsule, "BitGenerator"):
        raise ValueError("random_state's bit generator has no valid 'BitGenerator' capsule")
    h.bitgen = <bitgen_t *>PyCapsule_GetPointer(capsule, "BitGenerator")
    h.lock = bg.lock
    h.bit_generator = bg
    return h


cdef class Words64:
    """Uniform 64-bit words from any numpy generator, for the exact samplers written in Python.

    Call with no argument for one word (a Python int), or ``batch(n)`` for n words (uint64
    array, the same words in the same order as n calls). Words come from the generator's
    ``next_uint64`` under its lock; ``bit_generator.random_raw`` is not a substitute, since
    MT19937 (and so RandomState) yields 32-bit words there.
    """
    cdef BitgenHandle h

    def __init__(self, random_state):
        self.h = bitgen_handle(random_state)

    def __call__(self):
        cdef uint64_t value
        with self.h.lock:
            value = random_u64(self.h.bitgen)
        return int(value)

    def batch(self, Py_ssize_t n):
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        out = np.empty(n, dtype=np.uint64)
        cdef uint64_t[::1] o = out
        cdef Py_ssize_t i
        cdef bitgen_t *bg = self.h.bitgen
        with self.h.lock, nogil:
            for i in range(n):
                o[i] = random_u64(bg)
        return out


# ------------------------------------------------------------------------------------------------
# C-level samplers (declared in _random.pxd; call with the generator's lock held)

cdef uint64_t random_u64(bitgen_t *bg) noexcept nogil:
    return bg.next_uint64(bg.state)


cdef uint64_t random_bounded(bitgen_t *bg, uint64_t n) noexcept nogil:
    # Lemire's multiply-shift: x * n = hi * 2**64 + lo with x uniform on [0, 2**64). Each value
    # of hi is hit by floor(2**64 / n) or that + 1 values of x; rejecting lo < 2**64 mod n
    # leaves exactly floor(2**64 / n) for every hi, so the accepted hi is uniform on [0, n).
    cdef uint64_t x, hi, lo, threshold
    if n <= 1:
        return 0
    x = bg.next_uint64(bg.state)
    hi = dpc_mul64(x, n, &lo)
    if lo < n:
        threshold = (0 - n) % n  # 2**64 mod n
        while lo < threshold:
            x = bg.next_uint64(bg.state)
            hi = dpc_mul64(x, n, &lo)
    return hi


cdef void random_words(dpc_words *src, bitgen_t *bg) noexcept nogil:
    # Only a dpcore ChaCha20 installs this module's dpc_chacha20_next_uint64 (each module that
    # includes chacha20.h has its own copy of the static function, so the comparison is made here),
    # and then bg.state is its dpc_chacha20_state.
    src.state = bg.state
    src.next_uint64 = bg.next_uint64
    if bg.next_uint64 == &dpc_chacha20_next_uint64:
        src.chacha = <dpc_chacha20_state *>bg.state
        src.refill = &dpc_chacha20_refill_fn
    else:
        src.chacha = NULL
        src.refill = NULL


cdef double random_ustar(bitgen_t *bg) noexcept nogil:
    # U* = a real uniform on (0, 1) truncated to a double. The number of leading zeros Z of
    # the real's binary expansion is read from whole 64-bit words (P(Z = z) = 2**-(z+1)); the
    # double is then (1 + m 2**-52) 2**-(Z+1) with 52 uniform mantissa bits m. Conditionally on
    # Z, the bits after the first 1 are uniform and independent, so when the first 1 leaves at
    # least 52 bits in its word (at most 11 zeros before it), those bits are the mantissa;
    # otherwise they come from a fresh word. The double is assembled from its exponent and
    # mantissa fields (dpc_ustar in chacha20.h): the same number ldexp(2**52 + m, -(53 + Z))
    # would give, exactly, since Z <= 1021 keeps it normal.
    cdef dpc_words src
    cdef uint64_t extra
    cdef int nextra
    random_words(&src, bg)
    return dpc_ustar(&src, &extra, &nextra)


cdef bint random_bernoulli_ratio(bitgen_t *bg, uint64_t a, uint64_t b) noexcept nogil:
    return random_bounded(bg, b) < a


cdef inline bint bernoulli_over_k(bitgen_t *bg, uint64_t a, uint64_t b, uint64_t k) noexcept nogil:
    """Exact Bernoulli(a / (b k)) for 0 <= a <= b, b, k >= 1, without overflow."""
    if b <= UINT64_MAX // k:
        return random_bounded(bg, b * k) < a
    # b * k needs more than 64 bits: a / (b k) = (a / b) (1 / k), two independent draws.
    return random_bounded(bg, b) < a and random_bounded(bg, k) == 0


cdef inline bint bernoulli_exp_small(bitgen_t *bg, uint64_t a, uint64_t b) noexcept nogil:
    """Exact Bernoulli(exp(-a/b)) for 0 <= a <= b (CKS Algorithm 1, gamma in [0, 1])."""
    cdef uint64_t k = 1
    if a == 0:
        return True
    while bernoulli_over_k(bg, a, b, k):  # Bernoulli(gamma / k)
        k += 1
    return (k & 1) == 1


cdef bint random_bernoulli_exp(bitgen_t *bg, uint64_t a, uint64_t b) noexcept nogil:
    # exp(-a/b) = exp(-1)**g * exp(-r/b) with g = a // b, r = a % b: g Bernoulli(exp(-1)) trials
    # (stopping at the first failure) and one Bernoulli(exp(-r/b)). Integer arithmetic only.
    cdef uint64_t g, r
    if a == 0:
        return True
    if b == 0:  # precondition b >= 1; exp(-inf) = 0, and no division by zero
        return False
    g = a // b
    r = a % b
    while g > 0:
        if not bernoulli_exp_small(bg, 1, 1):
            return False
        g -= 1
    return bernoulli_exp_small(bg, r, b)


cdef inline uint64_t scaled_quotient(uint64_t u, uint64_t t, uint64_t v, uint64_t s) noexcept nogil:
    """floor((u + t v) / s) exactly (128-bit intermediate); UINT64_MAX if it exceeds 64 bits."""
    cdef uint64_t hi, lo
    hi = dpc_mul64(t, v, &lo)
    lo += u
    if lo < u:
        hi += 1
    if hi == 0:
        return lo // s
    return dpc_div128_sat(hi, lo, s)


cdef uint64_t random_geometric_exp(bitgen_t *bg, uint64_t s, uint64_t t) noexcept nogil:
    # CKS: U uniform on [0, t) accepted with probability exp(-U/t) has P(U = u) proportional to
    # exp(-u/t); V with P(V = v) = (1 - e^-1) e^-v is independent; X = U + t V is then geometric
    # with ratio exp(-1/t), and X // s geometric with ratio exp(-s/t).
    cdef uint64_t u, v
    if s == 0 or t == 0:  # precondition s, t >= 1
        return 0
    while True:
        u = random_bounded(bg, t)
        if random_bernoulli_exp(bg, u, t):
            break
    v = 0
    while bernoulli_exp_small(bg, 1, 1):
        v += 1
    return scaled_quotient(u, t, v, s)


# ------------------------------------------------------------------------------------------------
# Per-block streams of threaded kernels (see _random.pxd)

cdef class StreamKey:
    """The 256-bit key of one threaded kernel call, drawn from the caller's generator."""

    def __repr__(self):
        return "StreamKey(<secret>)"


cdef StreamKey stream_key(BitgenHandle h):
    cdef StreamKey k = StreamKey.__new__(StreamKey)
    cdef uint64_t w
    cdef int i
    with h.lock:
        for i in range(4):
            w = random_u64(h.bitgen)
            k.key[2 * i] = <uint32_t>w
            k.key[2 * i + 1] = <uint32_t>(w >> 32)
    return k


cdef void stream_open(BlockStream *s, StreamKey key, uint64_t block) noexcept:
    dpc_chacha20_set_key(&s.chacha, key.key)
    s.chacha.input[14] = <uint32_t>block
    s.chacha.input[15] = <uint32_t>(block >> 32)
    # this module's callbacks, so random_words reads the buffer inline (and this module's lane
    # dispatch computes the blocks)
    s.bitgen.state = <void *>&s.chacha
    s.bitgen.next_uint64 = &dpc_chacha20_next_uint64
    s.bitgen.next_uint32 = &dpc_chacha20_next_uint32
    s.bitgen.next_double = &dpc_chacha20_next_double
    s.bitgen.next_raw = &dpc_chacha20_next_uint64


cdef LockedBits stream_bits(BlockStream *s):
    cdef LockedBits bits = LockedBits.__new__(LockedBits)
    bits.bg = &s.bitgen
    return bits


def _stream_words(random_state, uint64_t block, Py_ssize_t n):
    """(key words as a 256-bit int, the first n words of block `block`'s stream): a threaded
    kernel's key drawn from random_state, and what its block `block` reads."""
    cdef StreamKey k = stream_key(bitgen_handle(random_state))
    cdef BlockStream st
    cdef Py_ssize_t i
    out = np.empty(n, dtype=np.uint64)
    cdef uint64_t[::1] o = out
    stream_open(&st, k, block)
    for i in range(n):
        o[i] = random_u64(&st.bitgen)
    key = 0
    for i in range(8):
        key |= int(k.key[i]) << (32 * i)
    return key, out


# ------------------------------------------------------------------------------------------------
# Test helpers (private; batch draws under the lock without the GIL)

def _chacha20_block(bytes key, counter, bytes nonce):
    """The RFC 8439 block function: 32-byte key, 32-bit block counter (word 12), 12-byte nonce
    (words 13-15); returns the 64-byte serialized block."""
    cdef uint32_t inp[16]
    cdef uint32_t out[16]
    cdef int i
    if len(key) != 32 or len(nonce) != 12:
        raise ValueError("key must be 32 bytes and nonce 12 bytes")
    if not 0 <= counter < 2**32:
        raise ValueError(f"counter must be in [0, 2**32), got {counter}")
    kw = np.frombuffer(key, dtype="<u4")
    nw = np.frombuffer(nonce, dtype="<u4")
    for i in range(4):
        inp[i] = dpc_chacha_constants[i]
    for i in range(8):
        inp[4 + i] = <uint32_t>int(kw[i])
    inp[12] = <uint32_t>counter
    for i in range(3):
        inp[13 + i] = <uint32_t>int(nw[i])
    dpc_chacha20_block(inp, out)
    return np.array([out[i] for i in range(16)], dtype="<u4").tobytes()


def _simd_lanes(lanes=None):
    """Test hook: blocks computed per step (1 scalar, 4, 8, 16); lowering it checks every path.
    Returns the value in force (requests above what this CPU/build supports are capped)."""
    if lanes is None:
        return dpc_chacha20_get_lanes()
    return dpc_chacha20_set_lanes(int(lanes))


def _ustar(random_state, Py_ssize_t n):
    """n draws of U* (float64 array)."""
    cdef BitgenHandle h = bitgen_handle(random_state)
    out = np.empty(n, dtype=np.float64)
    cdef double[::1] o = out
    cdef Py_ssize_t i
    cdef dpc_words src
    cdef uint64_t extra
    cdef int nextra
    with h.lock, nogil:
        random_words(&src, h.bitgen)
        for i in range(n):
            o[i] = dpc_ustar(&src, &extra, &nextra)  # = random_ustar(h.bitgen), inlined
    return out


def _words(random_state, Py_ssize_t n):
    """n words read through the inline reader (dpc_words: a ChaCha20's buffer directly, other
    generators through their callback); the same words as `Words64`."""
    cdef BitgenHandle h = bitgen_handle(random_state)
    cdef dpc_words src
    out = np.empty(n, dtype=np.uint64)
    cdef uint64_t[::1] o = out
    cdef Py_ssize_t i
    with h.lock, nogil:
        random_words(&src, h.bitgen)
        for i in range(n):
            o[i] = dpc_words_next(&src)
    return out


def _bit_helpers(x):
    """(floor, rint, ulp) of a float64 array by the kernels' inline helpers (floor needs
    |x| < 2**62, ulp a positive finite x; other entries give unspecified values)."""
    cdef const double[::1] xv = np.ascontiguousarray(x, dtype=np.float64)
    cdef Py_ssize_t i, n = xv.shape[0]
    fl = np.empty(n)
    ri = np.empty(n)
    ul = np.empty(n)
    cdef double[::1] f = fl, r = ri, u = ul
    for i in range(n):
        f[i] = dpc_floor(xv[i]) if fabs(xv[i]) < 4611686018427387904.0 else 0.0
        r[i] = dpc_rint(xv[i])
        u[i] = dpc_ulp(xv[i]) if 0.0 < xv[i] < 1.7976931348623157e308 else 0.0
    return fl, ri, ul


def _zero_counts(words):
    """(clz, ctz, clz portable, ctz portable): the leading and trailing zero counts of each
    nonzero 64-bit word by dpc_bits.h's helpers (the build's: builtin, MSVC bit scan or loop) and
    by its portable loops, as int arrays."""
    cdef const uint64_t[::1] w = np.ascontiguousarray(words, dtype=np.uint64)
    cdef Py_ssize_t i, n = w.shape[0]
    for i in range(n):
        if w[i] == 0:
            raise ValueError("words must be nonzero")
    out = np.empty((4, n), dtype=np.intc)
    cdef int[:, ::1] o = out
    for i in range(n):
        o[0, i] = dpc_clz64(w[i])
        o[1, i] = dpc_ctz64(w[i])
        o[2, i] = dpc_clz64_portable(w[i])
        o[3, i] = dpc_ctz64_portable(w[i])
    return out[0], out[1], out[2], out[3]


def _bounded(random_state, uint64_t m, Py_ssize_t n):
    """n uniform draws on {0, ..., m - 1} (uint64 array); m >= 1."""
    if m < 1:
        raise ValueError("m must be >= 1")
    cdef BitgenHandle h = bitgen_handle(random_state)
    out = np.empty(n, dtype=np.uint64)
    cdef uint64_t[::1] o = out
    cdef Py_ssize_t i
    with h.lock, nogil:
        for i in range(n):
            o[i] = random_bounded(h.bitgen, m)
    return out


def _bernoulli_ratio(random_state, uint64_t a, uint64_t b, Py_ssize_t n):
    """n draws of Bernoulli(a / b) (bool array); 0 <= a <= b, b >= 1."""
    if b < 1 or a > b:
        raise ValueError("need 0 <= a <= b and b >= 1")
    cdef BitgenHandle h = bitgen_handle(random_state)
    out = np.empty(n, dtype=np.uint8)
    cdef unsigned char[::1] o = out
    cdef Py_ssize_t i
    with h.lock, nogil:
        for i in range(n):
            o[i] = random_bernoulli_ratio(h.bitgen, a, b)
    return out.view(np.bool_)


def _bernoulli_exp(random_state, uint64_t a, uint64_t b, Py_ssize_t n):
    """n draws of Bernoulli(exp(-a / b)) (bool array); b >= 1."""
    if b < 1:
        raise ValueError("b must be >= 1")
    cdef BitgenHandle h = bitgen_handle(random_state)
    out = np.empty(n, dtype=np.uint8)
    cdef unsigned char[::1] o = out
    cdef Py_ssize_t i
    with h.lock, nogil:
        for i in range(n):
            o[i] = random_bernoulli_exp(h.bitgen, a, b)
    return out.view(np.bool_)


def _geometric_exp(random_state, uint64_t s, uint64_t t, Py_ssize_t n):
    """n draws with P(k) = (1 - exp(-s/t)) exp(-k s/t) (uint64 array); s, t >= 1."""
    if s < 1 or t < 1:
        raise ValueError("s and t must be >= 1")
    cdef BitgenHandle h = bitgen_handle(random_state)
    out = np.empty(n, dtype=np.uint64)
    cdef uint64_t[::1] o = out
    cdef Py_ssize_t i
    with h.lock, nogil:
        for i in range(n):
            o[i] = random_geometric_exp(h.bitgen, s, t)
    return out


def _scaled_quotient(uint64_t u, uint64_t t, uint64_t v, uint64_t s):
    """floor((u + t v) / s) as the geometric sampler computes it (saturating at 2**64 - 1)."""
    if s < 1:
        raise ValueError("s must be >= 1")
    return scaled_quotient(u, t, v, s)


# A bitgen_t that replays given words: lets tests check the exact map from bits to values.
cdef struct Replay:
    const uint64_t *words
    Py_ssize_t n
    Py_ssize_t pos


cdef uint64_t replay_next64(void *st) noexcept nogil:
    cdef Replay *r = <Replay *>st
    cdef uint64_t w = UINT64_MAX  # past the end: the caller reports the overrun
    if r.pos < r.n:
        w = r.words[r.pos]
    r.pos += 1
    return w


cdef uint32_t replay_next32(void *st) noexcept nogil:
    return <uint32_t>replay_next64(st)


cdef double replay_next_double(void *st) noexcept nogil:
    return (replay_next64(st) >> 11) * (1.0 / 9007199254740992.0)


def _replay(sampler, words, uint64_t a=0, uint64_t b=0):
    """Run one C sampler on the given 64-bit words instead of a generator: returns (value,
    number of words used). sampler: "u64", "ustar", "ustar_extra" (value, spare bits, their
    number), "bounded" (n=a), "bernoulli_ratio",
    "bernoulli_exp" (a, b) or "geometric_exp" (s=a, t=b). Raises if the words ran out."""
    cdef const uint64_t[::1] w = np.ascontiguousarray(words, dtype=np.uint64)
    cdef Replay r
    cdef bitgen_t bg
    cdef dpc_words src
    cdef uint64_t extra = 0
    cdef int nextra = 0
    r.words = &w[0] if w.shape[0] > 0 else NULL
    r.n = w.shape[0]
    r.pos = 0
    bg.state = <void *>&r
    bg.next_uint64 = &replay_next64
    bg.next_uint32 = &replay_next32
    bg.next_double = &replay_next_double
    bg.next_raw = &replay_next64
    if sampler == "u64":
        value = random_u64(&bg)
    elif sampler == "ustar":
        value = random_ustar(&bg)
    elif sampler == "ustar_extra":
        random_words(&src, &bg)
        value = dpc_ustar(&src, &extra, &nextra)
        value = (value, int(extra), int(nextra))
    elif sampler == "bounded":
        value = random_bounded(&bg, a)
    elif sampler == "bernoulli_ratio":
        value = bool(random_bernoulli_ratio(&bg, a, b))
    elif sampler == "bernoulli_exp":
        value = bool(random_bernoulli_exp(&bg, a, b))
    elif sampler == "geometric_exp":
        value = random_geometric_exp(&bg, a, b)
    else:
        raise ValueError(f"unknown sampler {sampler!r}")
    if r.pos > r.n:
        raise ValueError(f"{sampler} needed more than the {r.n} words given")
    return value, int(r.pos)
