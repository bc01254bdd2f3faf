"""Naive twins: short, obviously correct NumPy samplers fed by the operating system's CSPRNG.

Each twin answers "what would a careful person write in ten lines of NumPy?": secure bits from
``os.urandom``, a uniform double from the bits, then the textbook transform. They are the
baseline the dpcore kernels must beat while being as safe as those kernels claim to be.

.. warning::
   The real-valued twins are NOT differentially private, however good their random bits are.
   ``value + noise`` computed in floating point from a uniform on a regular 2**-52 grid and a
   library ``log``/``cos`` is exactly the naive sampler Mironov (CCS 2012) attacked: its set of
   reachable outputs depends on ``value``, so an observer can often tell two neighbouring inputs
   apart with certainty (Mironov, CCS 2012, Section 3). A secure bit source does not help. They exist for
   benchmarking and as statistical references only; never release data with them.
"""
from __future__ import annotations

import os

import numpy as np

__all__ = ["random_raw", "uniform", "laplace", "normal"]

_TWO_PI = 2.0 * np.pi


def random_raw(n):
    """``n`` uniformly random 64-bit words straight from ``os.urandom``."""
    return np.frombuffer(os.urandom(8 * n), dtype=np.uint64)


def uniform(n):
    """``n`` uniform doubles in the open interval (0, 1).

    The top 52 bits of each word give k in [0, 2**52); (k + 1/2) * 2**-52 is exact (53 significant
    bits) and never 0 or 1, so the transforms below never see log(0). This is the regular-grid
    uniform Mironov's attack exploits (section 1.1), not dpcore's full-precision U*.
    """
    k = random_raw(n) >> np.uint64(12)
    return (k.astype(np.float64) + 0.5) * 2.0**-52


def laplace(value, scale):
    """``value`` + Laplace(``scale``) noise by inverting the Laplace CDF (insecure, see module doc).

    With u uniform in (-1/2, 1/2): noise = -scale * sign(u) * ln(1 - 2|u|). u is never exactly 0
    and 1 - 2|u| >= 2**-52 > 0, so every draw is finite.
    """
    value = np.asarray(value, dtype=np.float64)
    u = uniform(value.size).reshape(value.shape) - 0.5
    return value - scale * np.sign(u) * np.log1p(-2.0 * np.abs(u))


def normal(value, sigma):
    """``value`` + N(0, ``sigma``**2) noise by the Box-Muller transform (insecure, see module doc).

    Each pair of uniforms (u1, u2) gives two independent standard normals
    sqrt(-2 ln u1) * (cos(2 pi u2), sin(2 pi u2)).
    """
    value = np.asarray(value, dtype=np.float64)
    n = value.size
    pairs = (n + 1) // 2
    u1 = uniform(pairs)
    u2 = uniform(pairs)
    radius = np.sqrt(-2.0 * np.log(u1))
    angle = _TWO_PI * u2
    z = np.concatenate([radius * np.cos(angle), radius * np.sin(angle)])[:n]
    return value + sigma * z.reshape(value.shape)
