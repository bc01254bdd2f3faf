"""
Private against non-private classifiers: accuracy curves
========================================================

:class:`dpcore.learn.LogisticRegression` (objective perturbation, pure epsilon-DP, and noisy
gradient descent, (epsilon, delta)-DP) and :class:`dpcore.learn.GaussianNB` on the breast-cancer
data bundled with scikit-learn, against scikit-learn's non-private ``LogisticRegression`` and
``GaussianNB`` on the same split.

What the guarantee covers and what it does not, here:

* the label set is public and given as ``classes=[0, 1]`` (never read from ``y``);
* rows are clipped to the public norm bound ``data_norm`` (logistic regression) and features
  to public ``bounds`` (naive Bayes);
* to keep the example short, the features are standardised with the *training* data's mean and
  standard deviation. That step looks at the data and is **not** covered by the guarantee; a
  real release would scale with public knowledge of the features, or spend budget on it.

The seed below only splits the data; the noise comes from dpcore's secure generator.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import LogisticRegression as SkLogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.naive_bayes import GaussianNB as SkGaussianNB

from dpcore.learn import GaussianNB, LogisticRegression

X, y = load_breast_cancer(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
mu, sd = X_train.mean(axis=0), X_train.std(axis=0)        # not private: see above
X_train, X_test = (X_train - mu) / sd, (X_test - mu) / sd

classes = [0, 1]          # public: malignant / benign
data_norm = 5.0           # public bound on a row's norm (longer rows are scaled down)
bounds = (-3.0, 3.0)      # public per-feature range for naive Bayes (values are clipped)

epsilons = [0.1, 0.2, 0.5, 1.0, 2.0, 5.0]
repeats = 6


def private_accuracy(make):
    means, stds = [], []
    for eps in epsilons:
        scores = [make(eps).fit(X_train, y_train).score(X_test, y_test) for _ in range(repeats)]
        means.append(np.mean(scores))
        stds.append(np.std(scores))
    return np.array(means), np.array(stds)


curves = {
    "dpcore LogisticRegression (objective)": private_accuracy(
        lambda eps: LogisticRegression(epsilon=eps, data_norm=data_norm, classes=classes)),
    "dpcore LogisticRegression (gd, delta = 1e-6)": private_accuracy(
        lambda eps: LogisticRegression(epsilon=eps, delta=1e-6, method="gd", data_norm=data_norm,
                                       classes=classes)),
    "dpcore GaussianNB": private_accuracy(
        lambda eps: GaussianNB(epsilon=eps, bounds=bounds, classes=classes)),
}
baselines = {
    "scikit-learn LogisticRegression (not private)":
        SkLogisticRegression().fit(X_train, y_train).score(X_test, y_test),
    "scikit-learn GaussianNB (not private)":
        SkGaussianNB().fit(X_train, y_train).score(X_test, y_test),
}

fig, ax = plt.subplots(figsize=(7.5, 4.5))
for label, (mean, std) in curves.items():
    ax.errorbar(epsilons, mean, yerr=std, marker="o", capsize=3, label=label)
for (label, acc), ls in zip(baselines.items(), ["--", ":"]):
    ax.axhline(acc, color="k", ls=ls, lw=1, label=f"{label}: {acc:.3f}")
ax.set_xscale("log")
ax.set_xlabel("epsilon")
ax.set_ylabel("test accuracy")
ax.set_title(f"breast cancer, {len(X_train)} training rows; mean +- std over {repeats} fits")
ax.legend(fontsize=7, loc="lower right")
fig.tight_layout()
plt.show()
