"""Sanity checks on benchmark outputs, so a fast but broken contender fails instead of winning.

They are coarse on purpose (right shape and type, finite, mean and variance within 6 standard
errors of the contender's nominal law, and for large samples the right family of distribution):
the exact goodness-of-fit tests live in tests/. Six standard errors keep a correct contender from
ever failing by chance (probability ~2e-9 per check) while catching a wrong scale, a constant,
a missing sign or a Gaussian where a Laplace was asked for.
"""
from __future__ import annotations

import math

import numpy as np

Z = 6.0  # standard errors allowed

# Upper bounds on the kurtosis E[X^4] / E[X^2]^2 of the laws benchmarked (6 for Laplace, 6.5 for
# the discrete Laplace with scale 1, 3 for Gaussians): they bound the standard error of the variance.
KURTOSIS = {"laplace": 7.0, "gaussian": 3.0}

# Excess kurtosis tells the families apart: 3 for Laplace (2.2 to 3.5 for the snapped and discrete
# versions benchmarked here), 0 for Gaussians (also the discrete Gaussian with sigma = 1). Checked
# only on large samples, where its standard error is below 0.16 (Laplace) and 0.02 (Gaussian).
FAMILY_EXCESS_KURTOSIS = {"laplace": (1.0, 6.0), "gaussian": (-0.5, 0.5)}
FAMILY_MIN_N = 10**5


def check_array(out, *, shape, kind):
    """``out`` is an ndarray of ``shape`` whose dtype kind is ``kind`` ("f", "i" or "u"), all finite."""
    out = np.asarray(out)
    assert out.shape == tuple(shape), f"shape {out.shape}, expected {tuple(shape)}"
    assert out.dtype.kind == kind, f"dtype {out.dtype}, expected kind {kind!r}"
    if kind == "f":
        assert np.isfinite(out).all(), "non-finite values in the output"
    return out


def check_noise(noise, *, family, var, mean=0.0):
    """Check the empirical law of ``noise`` (1-d) against the nominal one.

    Parameters
    ----------
    family : {"laplace", "gaussian"}
    var : float or (float, float)
        Nominal variance, or a range when the exact value depends on calibration details
        (grid rounding, privacy slack).
    mean : float
        Nominal mean.
    """
    noise = np.asarray(noise, dtype=np.float64).reshape(-1)
    n = noise.size
    lo, hi = (var, var) if np.isscalar(var) else var
    kurt = KURTOSIS[family]
    m = float(noise.mean())
    v = float(noise.var())
    assert abs(m - mean) <= Z * math.sqrt(hi / n), (
        f"noise mean {m:.5g}, expected {mean} (+- {Z * math.sqrt(hi / n):.3g})"
    )
    # sd of the sample variance ~ var * sqrt((kurtosis - 1) / n)
    rel = Z * math.sqrt((kurt - 1.0) / n)
    assert lo * (1.0 - rel) <= v <= hi * (1.0 + rel), (
        f"noise variance {v:.5g}, expected [{lo:.5g}, {hi:.5g}] (relative tolerance {rel:.3g})"
    )
    if n >= FAMILY_MIN_N:
        excess = float(np.mean((noise - m) ** 4)) / v**2 - 3.0
        low, high = FAMILY_EXCESS_KURTOSIS[family]
        assert low <= excess <= high, (
            f"excess kurtosis {excess:.3f}, outside [{low}, {high}] expected for a {family} law"
        )


def check_bits(words, n):
    """``words`` are ``n`` uint64 whose 64 bit positions each look like fair coins."""
    words = check_array(words, shape=(n,), kind="u")
    assert words.dtype == np.uint64, f"dtype {words.dtype}, expected uint64"
    sample = np.ascontiguousarray(words[: 10**6])
    bits = np.unpackbits(sample.view(np.uint8)).reshape(sample.size, 64)
    freq = bits.mean(axis=0)
    tol = Z * 0.5 / math.sqrt(sample.size)
    worst = float(np.abs(freq - 0.5).max())
    assert worst <= tol, f"a bit position has frequency {0.5 + worst:.5f} (tolerance {tol:.2g})"
    assert np.unique(sample[:1000]).size == min(1000, sample.size), "repeated 64-bit words"


def discrete_laplace_variance(scale):
    """Variance 2q / (1 - q)^2 of the discrete Laplace law P(z) ~ exp(-|z| / scale), q = e^(-1/scale)."""
    q = math.exp(-1.0 / scale)
    return 2.0 * q / (1.0 - q) ** 2


def discrete_gaussian_variance(sigma):
    """Variance of the discrete Gaussian P(z) ~ exp(-z^2 / (2 sigma^2)), by direct summation."""
    z = np.arange(0, int(50 * sigma) + 50, dtype=np.float64)
    w = np.exp(-(z**2) / (2.0 * sigma**2))
    w[1:] *= 2.0  # +z and -z
    return float((w * z**2).sum() / w.sum())
