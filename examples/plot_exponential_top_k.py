"""
Selection: the exponential mechanism and top-k
==============================================

Twelve candidates with public names and private scores (here, how many of 500 survey
respondents picked each one: adding or removing a respondent moves each score by at most 1, so
the sensitivity is 1). :func:`dpcore.exponential <dpcore.selection.exponential>` picks one
candidate with probability proportional to exp(epsilon * score / (2 * sensitivity)); with
``method="exact"`` (the default) the law is exactly that, even in floating point.
:func:`dpcore.top_k <dpcore.selection.top_k>` releases k candidates at once.

Left: how often each candidate was chosen over 4,000 independent releases at epsilon = 0.2,
against the exact law of the mechanism and against the non-private choice (the true maximum,
which would be chosen every time). We repeat the release only to show its law; every release is
a separate epsilon = 0.2 release. Right: how often each candidate is among the private top 3
at several epsilons. The seed generates the example scores only.
"""

import matplotlib.pyplot as plt
import numpy as np

import dpcore

rng = np.random.default_rng(4)                      # example data only
popularity = np.linspace(2, 1, 12)
votes = rng.choice(12, size=500, p=popularity / popularity.sum())
scores = np.bincount(votes, minlength=12).astype(float)
names = [chr(ord("A") + i) for i in range(12)]
sensitivity, epsilon, draws = 1.0, 0.2, 4000

picked = np.array([dpcore.exponential(scores, sensitivity=sensitivity, epsilon=epsilon)
                   for _ in range(draws)])
freq = np.bincount(picked, minlength=12) / draws
logits = epsilon * scores / (2 * sensitivity)
law = np.exp(logits - logits.max())
law /= law.sum()

top3 = {}
for eps in (0.1, 0.5, 2.0):
    chosen = np.concatenate([dpcore.top_k(scores, 3, sensitivity=sensitivity, epsilon=eps)
                             for _ in range(1000)])
    top3[eps] = np.bincount(chosen, minlength=12) / 1000

fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
ax = axes[0]
x = np.arange(12)
ax.bar(x - 0.2, freq, 0.4, label=f"dpcore.exponential, {draws} releases")
ax.bar(x + 0.2, law, 0.4, alpha=0.6, label="exact law exp(eps u / 2) / Z")
ax.plot(np.argmax(scores), 1.0, "k*", ms=12, label="non-private argmax (always)")
ax.set_xticks(x, [f"{n}\n{int(s)}" for n, s in zip(names, scores)], fontsize=8)
ax.set_xlabel("candidate / score")
ax.set_ylabel("share of releases")
ax.set_title(f"exponential mechanism, epsilon = {epsilon}")
ax.legend(fontsize=8)

ax = axes[1]
for j, (eps, share) in enumerate(top3.items()):
    ax.bar(x + (j - 1) * 0.27, share, 0.27, label=f"epsilon = {eps}")
true_top = np.argsort(scores)[::-1][:3]
ax.plot(true_top, np.ones(3), "k*", ms=12, label="non-private top 3")
ax.set_xticks(x, names)
ax.set_ylabel("share of 1,000 releases containing the candidate")
ax.set_title("dpcore.top_k, k = 3")
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()
