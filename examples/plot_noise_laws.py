"""
Laplace noise three ways: floating point, snapping and discrete
===============================================================

The same query (true value 0, sensitivity 1, epsilon = 0.5) answered with

* NumPy's ``Generator.laplace``: the textbook floating-point sampler, **not** safe for
  differential privacy (see :ref:`sphx_glr_auto_examples_plot_mironov_attack.py`);
* ``dpcore.laplace(method="snapping")``: Mironov's snapping mechanism, clamped to a public bound
  B = 100 and rounded to a power-of-two grid Lambda >= 1/epsilon;
* ``dpcore.laplace(method="discrete")`` (the default): the value on a fine power-of-two grid plus
  exact discrete Laplace noise;
* ``dpcore.discrete_laplace``: the exact integer sampler underneath, scale 2.

All four follow the Laplace shape with scale 1/epsilon = 2; snapping rounds it to the multiples
of Lambda = 4, a coarse grid since Lambda >= 1/epsilon, which is the price of its clamp-and-round
proof. What differs is the set of values they can output, which is what
:ref:`the floating-point attack <sphx_glr_auto_examples_plot_mironov_attack.py>`
exploits. We draw many values of noise for the same query only to show their laws: each draw on
its own is one release at epsilon = 0.5.
"""

import matplotlib.pyplot as plt
import numpy as np

import dpcore
from dpcore.mechanisms import LaplaceMechanism

epsilon, sensitivity, bound = 0.5, 1.0, 100.0
n = 100_000
zeros = np.zeros(n)

# A seeded NumPy generator for the insecure baseline only; dpcore draws from its secure generator.
naive = np.random.default_rng(0).laplace(0.0, sensitivity / epsilon, size=n)
# A vector with L1 sensitivity 1: every coordinate gets noise with the law of a scalar release.
discrete = dpcore.laplace(zeros, sensitivity=sensitivity, epsilon=epsilon)
# Snapping treats each coordinate as a release of its own at epsilon (see its Privacy section).
snapped = dpcore.laplace(zeros, sensitivity=sensitivity, epsilon=epsilon, bound=bound,
                         method="snapping")
integers = dpcore.discrete_laplace(sensitivity / epsilon, size=n)

snap = LaplaceMechanism.calibrate(sensitivity=sensitivity, epsilon=epsilon, bound=bound,
                                  method="snapping")
disc = LaplaceMechanism.calibrate(sensitivity=sensitivity, epsilon=epsilon)
print(f"snapping: grid Lambda = {snap.grid}, effective epsilon = {snap.epsilon_effective:.6f}")
print(f"discrete: grid = {disc.grid:.3g}, effective epsilon = {disc.epsilon_effective:.6f}")

# %%
# The histograms agree with the Laplace density of scale 2. The snapping outputs sit on the
# multiples of Lambda = 4 and the integer sampler on the integers, so they are drawn as spikes
# (the probability of each support point divided by its spacing, to be comparable with a density).

t = np.linspace(-15, 15, 601)
density = epsilon / (2 * sensitivity) * np.exp(-epsilon * np.abs(t) / sensitivity)

fig, axes = plt.subplots(2, 2, figsize=(10, 7), sharex=True, sharey=True)
panels = [
    (axes[0, 0], naive, "numpy Generator.laplace (not DP-safe)", None),
    (axes[0, 1], discrete, 'dpcore.laplace(method="discrete")', None),
    (axes[1, 0], snapped, f'dpcore.laplace(method="snapping"), Lambda = {snap.grid:g}', snap.grid),
    (axes[1, 1], integers, "dpcore.discrete_laplace(2)", 1.0),
]
for ax, draws, title, spacing in panels:
    if spacing is None:
        ax.hist(draws, bins=np.linspace(-15, 15, 61), density=True, alpha=0.6)
    else:
        values, counts = np.unique(draws, return_counts=True)
        keep = np.abs(values) <= 15
        ax.vlines(values[keep], 0, counts[keep] / n / spacing, lw=3, alpha=0.7)
    ax.plot(t, density, "k--", lw=1, label="Laplace(scale 2) density")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
for ax in axes[1]:
    ax.set_xlabel("noise")
fig.suptitle(f"{n:,} draws each, epsilon = {epsilon}, sensitivity = {sensitivity}")
fig.tight_layout()
plt.show()
