import numpy as np
from dpcore import stats
from dpcore._release.bins import nonnegative_least_squares
rng = np.random.default_rng(2024)
sets = {
 "gamma2": lambda n: rng.gamma(2.0, 1.0, n) / 10,
 "uniform": lambda n: rng.uniform(0, 1, n),
 "bimodal": lambda n: np.where(rng.random(n) < 0.3, rng.normal(0.2, 0.03, n), rng.normal(0.7, 0.1, n)),
 "expo": lambda n: rng.exponential(0.1, n),
}
res = {}
for name, gen in sets.items():
  for n in (300, 3000, 30000):
    x = gen(n)
    for bins in (10, 30, 100):
      exact, _ = np.histogram(x, bins=bins, range=(0, 1))
      for eps in (0.1, 0.5, 1, 2, 5):
        errs = {k: [] for k in ("raw", "clamp", "proj_noisy", "proj_n")}
        for s in range(150):
          c, _ = stats.histogram(x, bins=bins, range=(0, 1), epsilon=eps, nonnegative=False, random_state=rng.integers(2**62))
          errs["raw"].append(np.abs(c - exact).sum())
          errs["clamp"].append(np.abs(np.maximum(c, 0) - exact).sum())
          errs["proj_noisy"].append(np.abs(nonnegative_least_squares(c.astype(float), float(c.sum())) - exact).sum())
          errs["proj_n"].append(np.abs(nonnegative_least_squares(c.astype(float), float(exact.sum())) - exact).sum())
        m = {k: np.mean(v) for k, v in errs.items()}
        res[(name, n, bins, eps)] = m
keys = ("raw","clamp","proj_noisy","proj_n")
import itertools
wins = {k: 0 for k in keys}
ratio = {k: [] for k in keys}
for cell, m in res.items():
    best = min(m.values())
    wins[min(m, key=m.get)] += 1
    for k in keys: ratio[k].append(m[k] / m["clamp"])
print("wins", wins)
for k in keys: print(k, "ratio to clamp: median %.3f max %.3f min %.3f" % (np.median(ratio[k]), np.max(ratio[k]), np.min(ratio[k])))
for cell, m in list(res.items()):
    if cell[2] == 30 and cell[1] in (300, 30000): print(cell, {k: round(v/m['clamp'],3) for k,v in m.items()})
