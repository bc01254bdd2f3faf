"""
Error of private statistics against epsilon
===========================================

The mean, the median and a histogram of the same data, released with
:func:`dpcore.stats.mean`, :func:`dpcore.stats.median` and :func:`dpcore.stats.histogram` at
several values of epsilon, against the non-private values computed with NumPy.

The bounds ``(0, 100)`` are public knowledge about the data (a score between 0 and 100), given by
the caller and never read from the data: records are clipped to them. The seed below only
generates the example data; the noise comes from dpcore's secure generator, so each build of this
page draws new noise.
"""

import matplotlib.pyplot as plt
import numpy as np

import dpcore

# Example data (fixed seed for the data only): 2,000 scores in [0, 100].
data_rng = np.random.default_rng(20)
x = np.clip(data_rng.normal(62.0, 15.0, size=2000), 0, 100)
bounds = (0.0, 100.0)              # public: the range of the score
bins, hist_range = 20, (0.0, 100.0)

epsilons = np.array([0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0])
repeats = 30

true_mean = x.mean()
true_median = np.median(x)
true_hist, _ = np.histogram(x, bins=bins, range=hist_range)

mean_err, median_err, hist_err = [], [], []
for eps in epsilons:
    m, q, h = [], [], []
    for _ in range(repeats):
        m.append(abs(dpcore.stats.mean(x, bounds=bounds, epsilon=eps) - true_mean))
        q.append(abs(dpcore.stats.median(x, bounds=bounds, epsilon=eps) - true_median))
        counts, _edges = dpcore.stats.histogram(x, bins=bins, range=hist_range, epsilon=eps)
        h.append(np.abs(counts - true_hist).mean())
    mean_err.append(np.mean(m))
    median_err.append(np.mean(q))
    hist_err.append(np.mean(h))

# %%
# Mean absolute error over the repetitions (log-log axes). The error of the mean and of the
# histogram counts falls like 1/epsilon (Laplace noise); the median's error is that of the
# exponential mechanism over a grid of the bounds, which depends on how densely the data sit
# around the median. The histogram's noise is a whole number of counts: at large epsilon it is
# almost always 0, and an error of exactly 0 has no place on a log axis, so such points are
# left out.

fig, ax = plt.subplots(figsize=(6, 4))
ax.loglog(epsilons, mean_err, "o-", label="stats.mean")
ax.loglog(epsilons, median_err, "s-", label="stats.median")
hist_err = np.array(hist_err)
shown = hist_err > 0
ax.loglog(epsilons[shown], hist_err[shown], "^-", label="stats.histogram (mean |error| per bin)")
ax.set_xlabel("epsilon")
ax.set_ylabel("mean absolute error")
ax.set_title(f"n = {x.size}, bounds = {bounds}, {repeats} releases per epsilon")
ax.legend()
fig.tight_layout()

# %%
# One private histogram at epsilon = 0.1 beside the non-private counts.
eps = 0.1
noisy, edges = dpcore.stats.histogram(x, bins=bins, range=hist_range, epsilon=eps)
fig, ax = plt.subplots(figsize=(6, 4))
centres = (edges[:-1] + edges[1:]) / 2
width = edges[1] - edges[0]
ax.bar(centres - width / 4, true_hist, width=width / 2, label="non-private (numpy.histogram)")
ax.bar(centres + width / 4, noisy, width=width / 2,
       label=f"dpcore.stats.histogram, epsilon = {eps}")
ax.set_xlabel("score")
ax.set_ylabel("count")
ax.legend()
fig.tight_layout()
plt.show()
