"""Secure randomness for dpcore: the ChaCha20 bit generator and the ``random_state`` rules.

Every dpcore function that draws takes ``random_state``. **Unlike numpy and scikit-learn, where
``None`` means a fast statistical generator (a global Mersenne Twister or fresh PCG64), in
dpcore ``None`` means the cryptographically secure generator**: ChaCha20 keyed with 256 bits
from the operating system, shared process-wide, rekeyed in forked children and safe to share
across threads (draws hold its lock).

Seeds (an ``int``, a sequence of ints, a `numpy.random.SeedSequence`) and caller-supplied numpy
generators are accepted for tests and reproducibility only: a seeded stream is predictable by
anyone who knows or guesses the seed, so noise drawn from it protects nothing. Never pass a seed
in production. An empty seed (``[]``, an empty array) is refused with a ValueError: numpy would
turn it into a fixed, publicly known stream.

Copies and pickling: an OS-keyed ChaCha20, including the process-wide default generator and a
numpy Generator over one (it pickles through its bit generator), is *rekeyed* when pickled
(e.g. sent to a joblib worker with ``n_jobs=2``), copied or deep-copied: the copy is a new
OS-keyed ChaCha20 sharing nothing with the original, so two processes never draw the same
noise, and the key is never written to the pickle. A seeded ChaCha20 is copied exactly (the
copy continues the same stream, as a seed promises). Setting ``state`` explicitly still copies
a stream exactly, for whoever needs that on purpose.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Union

import numpy as np

from dpcore._random import ChaCha20, bitgen_handle, default_bit_generator
# The kernel's 64-bit word reader, re-exported for the exact samplers written in Python (only this
# module imports the _random kernel).
from dpcore._random import Words64 as Words64

__all__ = ["ChaCha20", "RandomStateLike", "SeedLike", "check_random_state", "default_bit_generator",
           "default_rng"]

#: A seed (tests and reproducibility only).
SeedLike = Union[int, Sequence[int], np.random.SeedSequence]
#: What ``random_state`` accepts everywhere: None (the secure generator), a seed or a generator.
RandomStateLike = Union[None, SeedLike, np.random.BitGenerator, np.random.Generator,
                        np.random.RandomState]


def default_rng(seed: SeedLike | None = None) -> np.random.Generator:
    """A `numpy.random.Generator` over dpcore's ChaCha20 bit generator.

    Parameters
    ----------
    seed : {None, int, array_like[int], numpy.random.SeedSequence}, default=None
        ``None`` (production): a new ChaCha20 keyed with 256 bits from the OS. Unlike
        `numpy.random.default_rng`, the result is cryptographically secure. Anything else
        seeds a deterministic ChaCha20 through `numpy.random.SeedSequence`: for tests and
        reproducibility only, never for releasing private data.

    Returns
    -------
    numpy.random.Generator
        A generator whose ``bit_generator`` is a `ChaCha20`. When ``seed`` is None, pickled or
        copied generators are rekeyed from the OS (see the module docstring).

    Raises
    ------
    ValueError
        If ``seed`` is an empty sequence ("seed must be non-empty; use None for the secure
        generator") or a seed numpy's SeedSequence rejects (e.g. a negative int).

    Examples
    --------
    >>> from dpcore.random import default_rng
    >>> rng = default_rng()                 # secure
    >>> x = rng.integers(0, 10, size=3)
    >>> a = default_rng(7).random(2)        # reproducible, tests only
    >>> b = default_rng(7).random(2)
    >>> bool((a == b).all())
    True
    """
    return np.random.Generator(ChaCha20(seed))


def check_random_state(random_state: RandomStateLike) -> np.random.Generator:
    """Turn a ``random_state`` argument into a `numpy.random.Generator`.

    Parameters
    ----------
    random_state : {None, int, array_like[int], SeedSequence, BitGenerator, Generator, RandomState}
        - ``None``: the process-wide cryptographically secure generator
          (`default_bit_generator`). **This differs from scikit-learn and scipy**, where None
          means numpy's global Mersenne Twister.
        - ``int``, non-empty sequence of ints >= 0, or `numpy.random.SeedSequence`: a new
          ChaCha20 seeded from it (tests and reproducibility only).
        - `numpy.random.Generator`: returned as is. `numpy.random.BitGenerator`: wrapped in a
          Generator. Legacy `numpy.random.RandomState`: a Generator over its bit generator.
          These are used as given, also when they are not secure (tests only).

    Returns
    -------
    numpy.random.Generator

    Raises
    ------
    TypeError
        For any other type (bools and floats included); the message names ``random_state``.
    ValueError
        For an empty seed sequence ("random_state must be non-empty; use None for the secure
        generator") or a seed numpy's SeedSequence rejects (e.g. a negative int).

    Examples
    --------
    >>> from dpcore.random import check_random_state, default_bit_generator
    >>> check_random_state(None).bit_generator is default_bit_generator()
    True
    """
    if isinstance(random_state, np.random.Generator):
        return random_state
    return np.random.Generator(bitgen_handle(random_state).bit_generator)
