"""
Why floating-point-safe noise matters: Mironov's attack
=======================================================

Mironov (CCS 2012) showed that adding textbook floating-point Laplace noise to a double leaks the
input. The sampler computes ``x + scale * log(2u)`` (or its mirror) for a uniform ``u`` on the
grid of multiples of 2**-53, so only some doubles can come out of it, and *which* doubles depends
on ``x``: an output that ``x = 0`` can produce is often impossible for ``x = 1``. An attacker who
sees one such output knows the input exactly, whatever epsilon says.

Here a private bit (0 or 1, sensitivity 1, epsilon = 0.5) is released with the textbook sampler
(NumPy's algorithm, reimplemented below so the attacker can invert it) and with dpcore. For each
output the attacker asks: could the *other* input have produced it? The seeds below drive the
textbook sampler and the choice of the bits; dpcore draws from its secure generator.
"""

import math

import matplotlib.pyplot as plt
import numpy as np

import dpcore
from dpcore.mechanisms import LaplaceMechanism

epsilon, sensitivity = 0.5, 1.0
scale = sensitivity / epsilon
TWO53 = 2**53


def textbook_noise(k):
    """NumPy's Laplace inversion for the uniform u = k / 2**53, k in [1, 2**53)."""
    u = k / TWO53
    if u >= 0.5:
        return -scale * math.log(2.0 - u - u)
    return scale * math.log(u + u)


def textbook_release(x, k):
    return x + textbook_noise(k)


def possible(y, x):
    """Is there a uniform k with x + noise(k) == y?  (x + noise(k) is non-decreasing in k.)"""
    lo, hi = 1, TWO53 - 1
    while lo < hi:                       # smallest k with release >= y
        mid = (lo + hi) // 2
        if textbook_release(x, mid) < y:
            lo = mid + 1
        else:
            hi = mid
    return textbook_release(x, lo) == y


rng = np.random.default_rng(12)           # the textbook sampler's randomness and the bits
n = 2000
bits = rng.integers(0, 2, size=n)
uniforms = rng.integers(1, TWO53, size=n)
outputs = [textbook_release(float(b), int(k)) for b, k in zip(bits, uniforms)]
ruled_out = np.array([not possible(y, 1.0 - b) for y, b in zip(outputs, bits)])
print(f"textbook sampler: the other bit is impossible for {ruled_out.mean():.1%} of {n} releases")

# %%
# dpcore's releases of the same bits. With ``method="discrete"`` every output is a multiple of a
# power-of-two grid and the noise is an exact integer number of grid steps with full support, so
# every multiple of the grid can come from either input: the test above can never rule one out.
# (Snapping outputs likewise lie on multiples of its grid Lambda, for both inputs.)

mech = LaplaceMechanism.calibrate(sensitivity=sensitivity, epsilon=epsilon)
safe_bits = bits[:500]
safe = np.array([dpcore.laplace(float(b), sensitivity=sensitivity, epsilon=epsilon)
                 for b in safe_bits])
# The other input x' reaches y exactly when y - x' is a whole number of grid steps (the exact
# discrete Laplace noise takes every integer value with positive probability).
other = 1.0 - safe_bits
safe_ruled_out = ~(np.mod(safe - other, mech.grid) == 0)
print(f"dpcore: the other bit is impossible for {safe_ruled_out.mean():.1%} of {safe.size} "
      f"releases "
      f"(grid {mech.grid:.3g})")

fig, ax = plt.subplots(figsize=(5, 4))
ax.bar(["textbook\nfloating point", 'dpcore\nmethod="discrete"'],
       [ruled_out.mean(), safe_ruled_out.mean()], color=["tab:red", "tab:green"])
ax.set_ylim(0, 1)
ax.set_ylabel("share of releases revealing the bit")
ax.set_title(f"Releases of a private bit, epsilon = {epsilon}")
fig.tight_layout()

# %%
# The attack needs no luck: the gaps are in the output set itself. Zoom in around one output of
# the textbook sampler for input 0: the neighbouring doubles it can reach (dots) against those
# input 1 can reach (crosses), over a window of a few dozen units in the last place (ulp). Where
# a dot has no cross above it, that output betrays input 0.

y0 = textbook_release(0.0, int(uniforms[0]))
k_lo = max(1, int(uniforms[0]) - 15)
ks = range(k_lo, k_lo + 30)
from0 = np.unique([textbook_release(0.0, k) for k in ks])
window = (from0.min(), from0.max())
from1 = []
# outputs of input 1 in the same window: invert to the first uniform reaching the window
lo, hi = 1, TWO53 - 1
while lo < hi:
    mid = (lo + hi) // 2
    if textbook_release(1.0, mid) < window[0]:
        lo = mid + 1
    else:
        hi = mid
k = lo
while k < TWO53 and textbook_release(1.0, k) <= window[1] and len(from1) < 1000:
    from1.append(textbook_release(1.0, k))
    k += 1
from1 = np.unique(from1)
ulp = np.spacing(abs(y0))
fig, ax = plt.subplots(figsize=(8, 3))
ax.plot((from0 - y0) / ulp, np.zeros_like(from0), "o", ms=5, label="reachable from x = 0")
ax.plot((from1 - y0) / ulp, np.ones_like(from1), "x", ms=6, label="reachable from x = 1")
ax.set_yticks([0, 1], ["x = 0", "x = 1"])
ax.set_ylim(-0.5, 1.5)
ax.set_xlabel(f"output - {y0:.6g}, in units in the last place")
ax.set_title("Reachable doubles near one output")
ax.legend(fontsize=8, loc="center right")
fig.tight_layout()
plt.show()
