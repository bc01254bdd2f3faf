"""The six kinds of generator every sampler must serve with its stated law (issue 25).

MT19937 (and the legacy RandomState built on it) yields 32-bit words through
``bit_generator.random_raw``; a sampler that read 64-bit words there drew from the wrong law.
"""
import numpy as np

import dpcore

GENERATOR_KINDS = {
    "PCG64": lambda seed: np.random.Generator(np.random.PCG64(seed)),
    "MT19937": lambda seed: np.random.Generator(np.random.MT19937(seed)),
    "Philox": lambda seed: np.random.Generator(np.random.Philox(seed)),
    "SFC64": lambda seed: np.random.Generator(np.random.SFC64(seed)),
    "RandomState": lambda seed: np.random.RandomState(seed),
    "ChaCha20": lambda seed: dpcore.default_rng(seed),
}


def generator(kind, seed):
    """A seeded generator of the given kind (a name of GENERATOR_KINDS)."""
    return GENERATOR_KINDS[kind](seed)


def misread_words(seed):
    """What the old samplers read from an MT19937: 32-bit words taken as 64-bit ones."""
    return np.random.MT19937(seed).random_raw
