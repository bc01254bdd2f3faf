"""Benchmarks of the ``_select`` kernel through dpcore's public API, against baselines and peers.

Group "select": one private selection among n candidates (epsilon 1, sensitivity 1), reported per
candidate. The utilities are uniform on [0, 10] with 100 planted candidates at 70, so every
correct contender returns a planted index (all others together have probability below 1e-8), and
a few extra calls on a small instance must return several different planted indices (the noise is
there).

Contenders:

* ``numpy-choice`` (role baseline): weights exp(c (u - max u)), normalised, ``Generator.choice``
  with NumPy's PCG64 (not secure; floating point).
* ``naive-exponential`` (role naive): the same textbook computation with one ``os.urandom`` uniform
  and an inverse CDF (secure bits, still open to Ilvento's floating-point attacks).
* ``dpcore-*``: :func:`dpcore.exponential` with each method, a chunked stream, and
  :func:`dpcore.top_k` (k = 10).
* peers (optional): OpenDP ``make_noisy_max`` (Gumbel noise for zCDP, exponential noise for pure
  DP: permute-and-flip) and diffprivlib's ``Exponential`` (probabilities, then ``randomise``).

Targets (checked by report.py): the fast methods ("gumbel", "permute-and-flip", "inverse-cdf")
take at most 15 ns per candidate at n = 10**7 in memory, and the exact method at most 4x
"gumbel".
"""
from __future__ import annotations

import os

import numpy as np
import pytest

import naive
from common import BASELINE, DPCORE, EPSILON, NAIVE, PEER, SENSITIVITY, dpcore_api, peer, record

GROUP = "select"
SIZES = [10**4, 10**6, 10**7]
PEER_SIZES = [10**4, 10**6]
PLANTED = 100
PLANTED_UTILITY = 70.0
SCALE = EPSILON / (2 * SENSITIVITY)  # the exponential mechanism's score scale


def naive_exponential(utility, epsilon, sensitivity):
    """Textbook exponential mechanism: weights exp(epsilon (u - max u) / (2 sensitivity)),
    normalised, inverse CDF at one ``os.urandom`` uniform (floating point throughout)."""
    w = np.exp(epsilon * (utility - utility.max()) / (2.0 * sensitivity))
    cdf = np.cumsum(w / w.sum())
    index = int(np.searchsorted(cdf, naive.uniform(1)[0] * cdf[-1], side="right"))
    return min(index, len(cdf) - 1)


def numpy_exponential(utility, epsilon, sensitivity, rng):
    w = np.exp(epsilon * (utility - utility.max()) / (2.0 * sensitivity))
    return int(rng.choice(len(w), p=w / w.sum()))


_CACHE = {}


def instance(n):
    """(utilities, planted indices) for n candidates; read-only and shared."""
    if n not in _CACHE:
        rng = np.random.default_rng(20240602)
        u = rng.uniform(0.0, 10.0, n)
        planted = rng.choice(n, size=min(PLANTED, n // 10), replace=False)
        u[planted] = PLANTED_UTILITY
        u.setflags(write=False)
        _CACHE[n] = (u, frozenset(int(i) for i in planted))
    return _CACHE[n]


def check_selection(selected, planted):
    assert isinstance(selected, (int, np.integer)), type(selected)
    assert int(selected) in planted, f"selected {selected}, not a planted candidate"


def check_noise(select):
    """``select(utility)`` on 1000 candidates (100 planted): 30 calls hit planted candidates only,
    and at least 3 different ones (a noiseless argmax would always give the same)."""
    u, planted = instance(1000)
    picks = {int(select(u)) for _ in range(30)}
    assert picks <= planted, picks - planted
    assert len(picks) >= 3, picks


# ------------------------------------------------------------------------------------------
# Baselines


@pytest.mark.parametrize("size", SIZES, indirect=True)
def test_select_numpy(benchmark, size):
    record(benchmark, n=size, contender="numpy-choice", role=BASELINE, group=GROUP)
    u, planted = instance(size)
    rng = np.random.Generator(np.random.PCG64())
    check_selection(benchmark(numpy_exponential, u, EPSILON, SENSITIVITY, rng), planted)
    check_noise(lambda x: numpy_exponential(x, EPSILON, SENSITIVITY, rng))


@pytest.mark.parametrize("size", SIZES, indirect=True)
def test_select_naive(benchmark, size):
    record(benchmark, n=size, contender="naive-exponential", role=NAIVE, group=GROUP)
    u, planted = instance(size)
    check_selection(benchmark(naive_exponential, u, EPSILON, SENSITIVITY), planted)
    check_noise(lambda x: naive_exponential(x, EPSILON, SENSITIVITY))


# ------------------------------------------------------------------------------------------
# dpcore


@pytest.mark.parametrize("method", ["exact", "gumbel", "permute-and-flip", "inverse-cdf"])
@pytest.mark.parametrize("size", SIZES, indirect=True)
def test_select_dpcore(benchmark, size, method):
    dpcore = dpcore_api("exponential")
    record(benchmark, n=size, contender=f"dpcore-{method}", role=DPCORE, group=GROUP)
    u, planted = instance(size)

    def select(x):
        return dpcore.exponential(x, sensitivity=SENSITIVITY, epsilon=EPSILON, method=method)

    check_selection(benchmark(select, u), planted)
    check_noise(select)


@pytest.mark.parametrize("method", ["exact", "gumbel"])
@pytest.mark.parametrize("size", SIZES, indirect=True)
def test_select_dpcore_stream(benchmark, size, method):
    """The same utilities fed as a stream of chunks of 10**5 (views; no copy)."""
    dpcore = dpcore_api("exponential")
    record(benchmark, n=size, contender=f"dpcore-{method}-stream", role=DPCORE, group=GROUP)
    u, planted = instance(size)
    chunk = 10**5

    def select(x):
        chunks = (x[i:i + chunk] for i in range(0, len(x), chunk))
        return dpcore.exponential(chunks, sensitivity=SENSITIVITY, epsilon=EPSILON, method=method)

    check_selection(benchmark(select, u), planted)
    check_noise(select)


@pytest.mark.parametrize("size", SIZES, indirect=True)
def test_select_dpcore_top_k(benchmark, size):
    dpcore = dpcore_api("top_k")
    record(benchmark, n=size, contender="dpcore-top_k(k=10)", role=DPCORE, group=GROUP)
    u, planted = instance(size)
    # epsilon 10 for 10 selections: each round has the score scale of the others' single draw
    picks = benchmark(dpcore.top_k, u, 10, sensitivity=SENSITIVITY, epsilon=10 * EPSILON)
    assert picks.shape == (10,) and len(set(picks.tolist())) == 10
    assert set(picks.tolist()) <= planted
    check_noise(lambda x: dpcore.top_k(x, 1, sensitivity=SENSITIVITY, epsilon=EPSILON)[0])


# ------------------------------------------------------------------------------------------
# Peers


def _opendp():
    dp = peer("opendp.prelude", "opendp")
    dp.enable_features("contrib")
    return dp


@pytest.mark.peer
@pytest.mark.parametrize("noise", ["gumbel", "exponential"])
@pytest.mark.parametrize("size", PEER_SIZES, indirect=True)
def test_select_opendp(benchmark, size, noise):
    dp = _opendp()
    record(benchmark, n=size, contender=f"opendp-noisy_max-{noise}", role=PEER, group=GROUP)
    u, planted = instance(size)
    space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.linf_distance(T=float)
    # Gumbel noise is OpenDP's choice for zCDP, exponential noise (permute-and-flip) for pure DP;
    # noise scale 1 / SCALE in utility units, as dpcore's "gumbel" / "permute-and-flip".
    measure = dp.zero_concentrated_divergence() if noise == "gumbel" else dp.max_divergence()
    meas = space >> dp.m.then_noisy_max(measure, scale=1.0 / SCALE)
    check_selection(benchmark(meas, u.tolist()), planted)
    check_noise(lambda x: meas(x.tolist()))


@pytest.mark.peer
@pytest.mark.parametrize("size", PEER_SIZES, indirect=True)
def test_select_diffprivlib(benchmark, size):
    mechanisms = peer("diffprivlib.mechanisms", "diffprivlib")
    record(benchmark, n=size, contender="diffprivlib-exponential", role=PEER, group=GROUP)
    u, planted = instance(size)

    def select(values):
        mech = mechanisms.Exponential(epsilon=EPSILON, sensitivity=SENSITIVITY, utility=values)
        return mech.randomise()

    check_selection(benchmark(select, u.tolist()), planted)
    check_noise(lambda x: select(x.tolist()))


def test_naive_twin_uses_os_entropy():
    """The naive twin draws from os.urandom (two calls differ) and inverts the CDF correctly on
    a certain case."""
    assert os.urandom(8) != os.urandom(8)
    u = np.array([0.0, -np.inf, 1e4])
    assert naive_exponential(u, EPSILON, SENSITIVITY) == 2
