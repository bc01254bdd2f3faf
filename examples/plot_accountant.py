"""
Spending a privacy budget with an accountant
============================================

A :class:`dpcore.Accountant <dpcore.accounting.Accountant>` holds a budget (here epsilon = 2,
delta = 1e-6). Every release given ``accountant=acc`` validates its arguments, charges the
accountant, and only then draws; a release that would overspend raises
:class:`dpcore.BudgetExceeded <dpcore.accounting.BudgetExceeded>` and releases nothing.

The example runs a sequence of releases on one data set (bounds are public: ages in [0, 100],
incomes in [0, 200,000]), then a block of releases on disjoint partitions (parallel
composition: the block costs the maximum over its partitions, not the sum), and finally one
release too many. The seed generates the example data only.
"""

import matplotlib.pyplot as plt
import numpy as np

import dpcore

rng = np.random.default_rng(8)                            # example data only
age = rng.integers(18, 90, size=3000).astype(float)
income = np.clip(rng.lognormal(10.5, 0.6, size=3000), 0, 200_000)
region = rng.integers(0, 4, size=3000)                   # a public attribute per record

acc = dpcore.Accountant(epsilon=2.0, delta=1e-6)
steps = []


def record(label):
    steps.append((label, acc.spent[0]))
    print(f"{label:<32} spent epsilon = {acc.spent[0]:.3f}, remaining = {acc.remaining[0]:.3f}")


dpcore.stats.count(age, epsilon=0.2, accountant=acc)
record("count")
dpcore.stats.mean(age, bounds=(0, 100), epsilon=0.3, accountant=acc)
record("mean age")
dpcore.stats.median(income, bounds=(0, 200_000), epsilon=0.3, accountant=acc)
record("median income")
dpcore.stats.histogram(age, bins=8, range=(0, 100), epsilon=0.4, accountant=acc)
record("age histogram")

# Disjoint partitions by a public attribute: one partition per region. Each partition's charges
# add up; the block costs the largest partition total (0.5 here), not 4 x 0.5.
with acc.parallel(label="per-region means") as block:
    for r in range(4):
        part = block.partition()
        dpcore.stats.mean(income[region == r], bounds=(0, 200_000), epsilon=0.25, accountant=part)
        dpcore.stats.count(income[region == r], epsilon=0.25, accountant=part)
record("per-region block (4 partitions)")

try:
    dpcore.stats.mean(income, bounds=(0, 200_000), epsilon=0.5, accountant=acc)
except dpcore.BudgetExceeded as exc:
    refused = str(exc)
    print("refused:", refused)

# %%
# The budget after each step. The last request (epsilon = 0.5) would have overspent, so it was
# refused before any noise was drawn; the accountant's total is unchanged.

labels = [label for label, _ in steps]
spent = [s for _, s in steps]
fig, ax = plt.subplots(figsize=(8, 4))
x = np.arange(len(spent))
ax.bar(x, spent, width=0.6, color="tab:blue", label="epsilon spent after the step")
ax.bar(len(spent), 0.5, bottom=spent[-1], width=0.6, color="lightgrey", edgecolor="r",
       hatch="//", label="refused: mean income, epsilon = 0.5 (nothing drawn)")
ax.axhline(acc.budget[0], color="r", ls="--", label=f"budget epsilon = {acc.budget[0]}")
ax.set_xticks(np.arange(len(spent) + 1), labels + ["mean income\n(refused)"], rotation=20,
              ha="right", fontsize=8)
ax.set_ylabel("epsilon spent")
ax.set_ylim(0, 2.6)
ax.legend(fontsize=8, loc="upper left")
ax.set_title("Sequential composition, then a parallel block")
fig.tight_layout()
plt.show()
