"""Benchmarks of the ``_local`` kernel (dpcore.local): local randomizers over arrays of users.

Groups (contenders: dpcore, a naive NumPy twin fed by os.urandom, NumPy's PCG64 version as the
speed ceiling, and OpenDP when installed):

* "local-rr-binary": binary randomized response, epsilon = 1. Peers: OpenDP's
  ``make_randomized_response_bool`` (one call per user, its API) and
  ``make_randomized_response_bitvec`` (one call flipping every bit of a packed vector: the same
  per-bit law, vectorised in Rust).
* "local-rr-k10": 10-ary randomized response. Peer: OpenDP's ``make_randomized_response``.
* "local-oue-k64", "local-olh-k64", "local-duchi": the other randomizers against NumPy twins.
* "local-planar": planar Laplace (exact, on the unit grid) against the textbook Lambert-W sampler
  in floating point (``naive_planar``). Target: within 2x of the naive twin.

Target: dpcore's randomized response >= 100x OpenDP's randomized-response throughput.

The naive twins draw ``uniform < p`` with a rounded p and ``floor(u * (k - 1))`` for the other
value: fine as statistical references, but their laws are not the exact rational laws dpcore
documents. Every contender's output is sanity-checked (keep rate within a z bound of its
law), so a fast but broken contender fails.
"""
from __future__ import annotations

import math
import os

import numpy as np
import pytest

from common import BASELINE, DPCORE, NAIVE, PEER, dpcore_api, peer, record

EPSILON = 1.0
SIZES = [10**6, pytest.param(10**7, marks=pytest.mark.large)]
PEER_SIZES = [10**3, 10**4]
Z = 6.0  # sanity bound in standard errors (a check of gross errors, not a law test)

P2 = math.e / (math.e + 1.0)  # binary RR keep probability at epsilon = 1
K = 10
PK = math.e / (math.e + K - 1.0)


def _local():
    dpcore_api()
    try:
        from dpcore import local
    except ImportError as exc:
        pytest.skip(f"dpcore.local is not importable: {exc}")
    return local


def _secure_uniform(n):
    words = np.frombuffer(os.urandom(8 * n), dtype=np.uint64)
    return ((words >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0**-53


def naive_rr(values, k, p, uniform):
    """Textbook k-ary randomized response in NumPy: keep with probability ~p (rounded)."""
    u = uniform(values.size)
    r = np.floor(uniform(values.size) * (k - 1)).astype(np.int64)
    other = r + (r >= values)
    return np.where(u < p, values, other)


def _pcg_uniform(rng):
    return lambda n: rng.random(n)


def check_keep_rate(reports, values, p):
    n = values.size
    kept = np.count_nonzero(np.asarray(reports) == values) / n
    assert abs(kept - p) <= Z * math.sqrt(p * (1 - p) / n), (kept, p)


@pytest.fixture(scope="module")
def bits_cache():
    return {}


def _values(cache, n, k, seed=0):
    key = (n, k, seed)
    if key not in cache:
        cache[key] = np.random.default_rng(seed).integers(0, k, n)
    return cache[key]


# ------------------------------------------------------------------------------------------
# Binary randomized response

RR2 = "local-rr-binary"


@pytest.mark.parametrize("size", SIZES, indirect=True)
def test_rr_binary_dpcore(benchmark, size, bits_cache):
    local = _local()
    record(benchmark, n=size, contender="dpcore-randomized_response", role=DPCORE, group=RR2)
    values = _values(bits_cache, size, 2)
    out = benchmark(local.randomized_response, values, k=2, epsilon=EPSILON)
    check_keep_rate(out, values, P2)


@pytest.mark.parametrize("size", SIZES, indirect=True)
def test_rr_binary_dpcore_bool(benchmark, size, bits_cache):
    local = _local()
    record(benchmark, n=size, contender="dpcore-randomized_response(bool)", role=DPCORE, group=RR2)
    values = _values(bits_cache, size, 2).astype(bool)
    out = benchmark(local.randomized_response, values, k=2, epsilon=EPSILON)
    check_keep_rate(out, values, P2)


@pytest.mark.parametrize("size", SIZES, indirect=True)
def test_rr_binary_naive(benchmark, size, bits_cache):
    record(benchmark, n=size, contender="naive-rr", role=NAIVE, group=RR2)
    values = _values(bits_cache, size, 2)
    out = benchmark(naive_rr, values, 2, P2, _secure_uniform)
    check_keep_rate(out, values, P2)


@pytest.mark.parametrize("size", SIZES, indirect=True)
def test_rr_binary_numpy(benchmark, size, bits_cache):
    record(benchmark, n=size, contender="numpy-rr", role=BASELINE, group=RR2)
    values = _values(bits_cache, size, 2)
    out = benchmark(naive_rr, values, 2, P2, _pcg_uniform(np.random.default_rng()))
    check_keep_rate(out, values, P2)


def _opendp():
    dp = peer("opendp.prelude", "opendp")
    dp.enable_features("contrib")
    return dp


def _scalar_loop(fn, xs):
    """How a scalar peer API privatises a vector: one Python call per user."""
    return [fn(x) for x in xs]


@pytest.mark.peer
@pytest.mark.parametrize("size", PEER_SIZES, indirect=True)
def test_rr_binary_opendp_bool(benchmark, size, bits_cache):
    dp = _opendp()
    record(benchmark, n=size, contender="opendp-randomized_response_bool", role=PEER, group=RR2)
    meas = dp.m.make_randomized_response_bool(prob=P2)
    values = _values(bits_cache, size, 2).astype(bool)
    out = benchmark(_scalar_loop, meas, values.tolist())
    check_keep_rate(out, values, P2)


@pytest.mark.peer
@pytest.mark.parametrize("size", SIZES, indirect=True)
def test_rr_binary_opendp_bitvec(benchmark, size, bits_cache):
    dp = _opendp()
    record(benchmark, n=size, contender="opendp-randomized_response_bitvec", role=PEER, group=RR2)
    # Each bit is replaced by a fair coin with probability f: kept with probability 1 - f/2 = P2.
    meas = dp.m.make_randomized_response_bitvec(
        dp.m.bitvector_domain(max_weight=1), dp.discrete_distance(), f=2.0 * (1.0 - P2)
    )
    values = _values(bits_cache, size - size % 8, 2)
    packed = np.packbits(values.astype(bool))
    out = benchmark(meas, packed)
    bits = np.unpackbits(np.frombuffer(out, dtype=np.uint8))[: values.size]
    check_keep_rate(bits, values, P2)


# ------------------------------------------------------------------------------------------
# 10-ary randomized response

RRK = "local-rr-k10"


@pytest.mark.parametrize("size", SIZES, indirect=True)
def test_rr_k_dpcore(benchmark, size, bits_cache):
    local = _local()
    record(benchmark, n=size, contender="dpcore-randomized_response", role=DPCORE, group=RRK)
    values = _values(bits_cache, size, K)
    out = benchmark(local.randomized_response, values, k=K, epsilon=EPSILON)
    check_keep_rate(out, values, PK)


@pytest.mark.parametrize("size", SIZES, indirect=True)
def test_rr_k_naive(benchmark, size, bits_cache):
    record(benchmark, n=size, contender="naive-rr", role=NAIVE, group=RRK)
    values = _values(bits_cache, size, K)
    out = benchmark(naive_rr, values, K, PK, _secure_uniform)
    check_keep_rate(out, values, PK)


@pytest.mark.parametrize("size", SIZES, indirect=True)
def test_rr_k_numpy(benchmark, size, bits_cache):
    record(benchmark, n=size, contender="numpy-rr", role=BASELINE, group=RRK)
    values = _values(bits_cache, size, K)
    out = benchmark(naive_rr, values, K, PK, _pcg_uniform(np.random.default_rng()))
    check_keep_rate(out, values, PK)


@pytest.mark.peer
@pytest.mark.parametrize("size", PEER_SIZES, indirect=True)
def test_rr_k_opendp(benchmark, size, bits_cache):
    dp = _opendp()
    record(benchmark, n=size, contender="opendp-randomized_response", role=PEER, group=RRK)
    meas = dp.m.make_randomized_response(categories=list(range(K)), prob=PK)
    values = _values(bits_cache, size, K)
    out = benchmark(_scalar_loop, meas, values.tolist())
    check_keep_rate(out, values, PK)


# ------------------------------------------------------------------------------------------
# Unary encoding, local hashing, Duchi

KU = 64
UE_SIZES = [10**5]


@pytest.mark.parametrize("size", UE_SIZES, indirect=True)
def test_oue_dpcore(benchmark, size, bits_cache):
    local = _local()
    record(benchmark, n=size, contender="dpcore-unary_encoding", role=DPCORE, group="local-oue-k64")
    values = _values(bits_cache, size, KU)
    out = benchmark(local.unary_encoding, values, k=KU, epsilon=EPSILON)
    check_keep_rate(out[np.arange(size), values], np.ones(size, dtype=np.uint8), 0.5)


def naive_oue(values, k, q, uniform):
    u = uniform(values.size * k).reshape(values.size, k)
    bits = (u < q).astype(np.uint8)
    bits[np.arange(values.size), values] = uniform(values.size) < 0.5
    return bits


@pytest.mark.parametrize("size", UE_SIZES, indirect=True)
def test_oue_naive(benchmark, size, bits_cache):
    record(benchmark, n=size, contender="naive-oue", role=NAIVE, group="local-oue-k64")
    values = _values(bits_cache, size, KU)
    out = benchmark(naive_oue, values, KU, 1 / (math.e + 1), _secure_uniform)
    check_keep_rate(out[np.arange(size), values], np.ones(size, dtype=np.uint8), 0.5)


@pytest.mark.parametrize("size", UE_SIZES, indirect=True)
def test_olh_dpcore(benchmark, size, bits_cache):
    local = _local()
    record(benchmark, n=size, contender="dpcore-local_hashing", role=DPCORE, group="local-olh-k64")
    values = _values(bits_cache, size, KU)
    out = benchmark(local.local_hashing, values, k=KU, epsilon=EPSILON)
    oracle = local.frequency_oracle("local_hashing", k=KU, epsilon=EPSILON)
    own = out.hash(np.arange(KU))[np.arange(size), values]
    check_keep_rate(out.values, own, float(oracle.p))


def naive_olh(values, k, g, p, uniform):
    """((a x + b) mod P) mod g hashing (only approximately uniform) + naive RR over g."""
    prime = 2**31 - 1
    a = np.floor(uniform(values.size) * (prime - 1)).astype(np.int64) + 1
    b = np.floor(uniform(values.size) * prime).astype(np.int64)
    h = ((a * values + b) % prime) % g
    return a, b, naive_rr(h, g, p, uniform), h


@pytest.mark.parametrize("size", UE_SIZES, indirect=True)
def test_olh_naive(benchmark, size, bits_cache):
    record(benchmark, n=size, contender="naive-olh", role=NAIVE, group="local-olh-k64")
    values = _values(bits_cache, size, KU)
    g = 3
    p = math.e / (math.e + g - 1)
    _, _, y, h = benchmark(naive_olh, values, KU, g, p, _secure_uniform)
    check_keep_rate(y, h, p)


@pytest.mark.parametrize("size", SIZES, indirect=True)
def test_duchi_dpcore(benchmark, size):
    local = _local()
    record(benchmark, n=size, contender="dpcore-duchi", role=DPCORE, group="local-duchi")
    x = np.linspace(-1, 1, size)
    out = benchmark(local.duchi, x, epsilon=EPSILON)
    mech = local.DuchiMechanism.calibrate(EPSILON)
    assert abs(out.mean() - x.mean()) <= Z * mech.bound / math.sqrt(size)


def naive_duchi(x, eps, uniform):
    b = (math.exp(eps) + 1) / (math.exp(eps) - 1)
    return np.where(uniform(x.size) < 0.5 + x / (2 * b), b, -b)


@pytest.mark.parametrize("size", SIZES, indirect=True)
def test_duchi_naive(benchmark, size):
    record(benchmark, n=size, contender="naive-duchi", role=NAIVE, group="local-duchi")
    x = np.linspace(-1, 1, size)
    out = benchmark(naive_duchi, x, EPSILON, _secure_uniform)
    b = (math.exp(EPSILON) + 1) / (math.exp(EPSILON) - 1)
    assert abs(out.mean() - x.mean()) <= Z * b / math.sqrt(size)


# ------------------------------------------------------------------------------------------
# Planar Laplace (geo-indistinguishability)

PLANAR_SIZES = [10**4, 10**5]
PLANAR_EPS = 0.5  # per unit distance, grid 1: the offset's mean radius is 2 / 0.5 = 4


@pytest.mark.parametrize("size", PLANAR_SIZES, indirect=True)
def test_planar_dpcore(benchmark, size):
    local = _local()
    record(benchmark, n=size, contender="dpcore-planar_laplace", role=DPCORE, group="local-planar")
    points = np.zeros((size, 2))
    out = benchmark(local.planar_laplace, points, epsilon=PLANAR_EPS, grid=1.0)
    radius = np.hypot(out[:, 0], out[:, 1])
    # E|d| of the lattice law is about 2 / lambda (continuous value; lattice correction < 1%)
    assert abs(radius.mean() - 2 / PLANAR_EPS) <= Z * math.sqrt(6 / PLANAR_EPS**2 / size) + 0.05


def naive_planar(points, eps, uniform):
    """Andres et al.'s continuous sampler (angle uniform, radius by the Lambert W inverse CDF),
    then rounded to the unit grid: the floating-point textbook version."""
    from scipy.special import lambertw

    n = points.shape[0]
    theta = 2 * np.pi * uniform(n)
    p = uniform(n)
    r = -(np.real(lambertw((p - 1) / np.e, k=-1)) + 1) / eps
    return np.rint(points + np.column_stack([r * np.cos(theta), r * np.sin(theta)]))


@pytest.mark.parametrize("size", PLANAR_SIZES, indirect=True)
def test_planar_naive(benchmark, size):
    record(benchmark, n=size, contender="naive-planar", role=NAIVE, group="local-planar")
    points = np.zeros((size, 2))
    out = benchmark(naive_planar, points, PLANAR_EPS, _secure_uniform)
    radius = np.hypot(out[:, 0], out[:, 1])
    assert abs(radius.mean() - 2 / PLANAR_EPS) <= Z * math.sqrt(6 / PLANAR_EPS**2 / size) + 0.1
