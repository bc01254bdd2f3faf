"""Secure randomness for dpcore: the ChaCha20 bit generator and the ``random_state`` rules.

Every dpcore function that draws takes ``random_state``. **Unlike numpy and scikit-learn, where
``None`` means a fast statistical generator (a global Mersenne Twister or fresh PCG64), in
dpcore ``None`` means the cryptographically secure generator**: ChaCha20 keyed with 256 bits
from the operating system, shared process-wide, rekeyed in forked children and safe to share
across threads (draws hold its lock).

Seeds (an ``int``, a sequence of ints, a `numpy.random.SeedSequence`) and caller-supplied numpy
generators are accepted for tests and reproducibility only: a seeded stream is predictable by
anyone who knows or guesses the seed, so noise drawn from it protects nothing. Never pass a seed
in production.
"""
from __future__ import annotations

import numpy as np

from dpcore._random import ChaCha20, bitgen_handle, default_bit_generator

__all__ = ["ChaCha20", "check_random_state", "default_bit_generator", "default_rng"]


def default_rng(seed=None):
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
        A generator whose ``bit_generator`` is a `ChaCha20`.

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


def check_random_state(random_state):
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
        For a seed numpy's SeedSequence rejects (e.g. a negative int).

    Examples
    --------
    >>> from dpcore.random import check_random_state, default_bit_generator
    >>> check_random_state(None).bit_generator is default_bit_generator()
    True
    """
    if isinstance(random_state, np.random.Generator):
        return random_state
    return np.random.Generator(bitgen_handle(random_state).bit_generator)
