"""
Private PCA: captured variance against epsilon
==============================================

:class:`dpcore.learn.PCA` on the digits data (8x8 images, 64 features, bundled with
scikit-learn), keeping k = 5 components, for several epsilons and methods:

* ``method="ppca"`` with the default ``sampler="deflation"``: the exponential mechanism over
  subspaces, drawn exactly one component at a time with epsilon / k each (exactly epsilon-DP);
* ``method="ppca", sampler="gibbs"``: one draw of the whole subspace by a Gibbs chain; its
  epsilon-DP guarantee holds for the chain's stationary law only (k > 1);
* ``method="sulq"``: Gaussian noise on the second-moment matrix, (epsilon, delta)-DP with
  delta = 1e-6.

The quality measure is the share of the top-k variance a subspace V captures,
tr(V^T A V) / (sum of the k largest eigenvalues of A), where A is the second-moment matrix of the
centred rows; non-private PCA scores 1 and a random subspace about k/d = 0.08.

What is public here: pixel values lie in [0, 16] by the data's definition, so the centre
(8 in every pixel) and the row-norm bound (a centred row has norm at most 8 * sqrt(64) = 64)
are known without looking at the data. The noise comes from dpcore's secure generator; there is
no seed, so the curves move a little from build to build.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits

from dpcore.learn import PCA

X = load_digits().data                 # (1797, 64), pixel values in [0, 16]
k = 5
centre = np.full(X.shape[1], 8.0)      # public: the middle of the pixel range
data_norm = 8.0 * np.sqrt(X.shape[1])  # public: the largest norm of a centred row
Xc = X - centre
A = Xc.T @ Xc / len(X)
top = np.sort(np.linalg.eigvalsh(A))[::-1][:k].sum()


def captured(components):
    V = components.T
    return np.trace(V.T @ A @ V) / top


epsilons = [0.1, 0.5, 1.0, 2.0, 5.0]
methods = {
    "ppca, deflation (default, exact)": dict(method="ppca"),
    "ppca, gibbs (stationary law)": dict(method="ppca", sampler="gibbs"),
    "sulq, delta = 1e-6": dict(method="sulq", delta=1e-6),
}
repeats = 3
results = {}
for label, kwargs in methods.items():
    results[label] = [
        np.median([
            captured(PCA(k, epsilon=eps, data_norm=data_norm, mean=centre, **kwargs)
                     .fit(X).components_)
            for _ in range(repeats)
        ])
        for eps in epsilons
    ]
    print(label, np.round(results[label], 3))

fig, ax = plt.subplots(figsize=(7, 4.5))
for label, values in results.items():
    ax.semilogx(epsilons, values, "o-", label=label)
ax.axhline(1.0, color="k", ls="--", lw=1, label="non-private PCA")
ax.axhline(k / X.shape[1], color="grey", ls=":", lw=1, label="random subspace (k/d)")
ax.set_xlabel("epsilon")
ax.set_ylabel("captured share of the top-5 variance")
ax.set_title(f"digits, n = {len(X)}, d = {X.shape[1]}, k = {k}; median of {repeats} fits")
ax.set_ylim(0, 1.05)
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()
