"""Benchmarks of the ``_random`` kernel: raw 64-bit words from the secure bit generator.

Group "raw-bits": dpcore's ChaCha20 ``random_raw(n)`` against NumPy's PCG64 (fast, not
cryptographically secure: the throughput ceiling) and ``os.urandom`` (the naive secure source).
Target: ChaCha20 delivers at least 40% of PCG64's throughput.
"""
from __future__ import annotations

import numpy as np
import pytest

import naive
from checks import check_bits
from common import BASELINE, DPCORE, NAIVE, dpcore_api, record

GROUP = "raw-bits"
SIZES = [10**6, pytest.param(10**7, marks=pytest.mark.large)]


@pytest.mark.parametrize("size", SIZES, indirect=True)
def test_raw_pcg64(benchmark, size):
    record(benchmark, n=size, contender="numpy-pcg64", role=BASELINE, group=GROUP)
    bitgen = np.random.PCG64()
    words = benchmark(bitgen.random_raw, size)
    check_bits(words, size)


@pytest.mark.parametrize("size", SIZES, indirect=True)
def test_raw_urandom(benchmark, size):
    record(benchmark, n=size, contender="naive-urandom", role=NAIVE, group=GROUP)
    words = benchmark(naive.random_raw, size)
    check_bits(words, size)


@pytest.mark.parametrize("size", SIZES, indirect=True)
def test_raw_chacha20(benchmark, size):
    dpcore = dpcore_api("ChaCha20")
    record(benchmark, n=size, contender="dpcore-chacha20", role=DPCORE, group=GROUP)
    bitgen = dpcore.ChaCha20()  # keyed from the OS, as in production
    words = benchmark(bitgen.random_raw, size)
    check_bits(words, size)
    # Successive calls continue the stream (a stuck counter would repeat the block).
    assert not np.array_equal(bitgen.random_raw(8), bitgen.random_raw(8))
