"""Development data for the defaults of dpcore.stats, disjoint from what bench/utility_stats.py
reports (lognormal and normal data there; gamma, uniform, bimodal and exponential here).

    PYTHONPATH=python python bench/dev_stats.py [--releases 150] [--part histograms|quantiles|levels]

Histogram post-processing (``nonnegative=``): mean L1 error of the raw noisy counts, clamping
at 0, the least-squares projection with the noisy total, and with the true total (a public n),
over 4 data sets x n in {300, 3000, 30000} x bins in {10, 30, 100} x epsilon in
{0.1, 0.5, 1, 2, 5} on [0, 1]. Prints the cells each rule wins or ties and its L1 relative
to clamping.

Quantile candidates and mechanism (``--part quantiles``): RMSE over releases and the levels
(0.25, 0.5, 0.75) of the exponential mechanism over the default (finest) grid, and of exact
permute-and-flip over evenly spaced grids of 2**10 + 1, 2**13 + 1 and 2**16 + 1 points, over
the same 4 data sets x n in {300, 3000, 30000, 100000} x epsilon in {0.1, 0.5, 2, 5} on [0, 1]
(``--releases`` per cell, 100 by default there). Prints each rule's RMSE relative to the
default per cell, and its median, min and max.

Several levels (``--part levels``): RMSE over releases and levels of ``split="equal"`` (each
level an independent release with epsilon / m) and ``split="recursive"`` (the middle level
first, each half within the records between its released neighbours, epsilon / depth per
round), for the levels (0.25, 0.5, 0.75), (0.1, 0.25, 0.5, 0.75, 0.9) and nine deciles, over
the same data sets, sizes and epsilons, on the default grid; prints each cell's ratio
recursive / equal and its median, min and max per level set.

The model behind it (``--part flip-model``): utility -|y - t| in units of the noise scale 1/c,
grid step a (in those units) at a uniformly random offset to t; RMSE of permute-and-flip
(report-noisy-max with exponential noise, floating point: a model, not a release) relative to
the exponential mechanism on a continuum (Laplace, RMSE sqrt(2)), for a in 0.25 ... 5.
"""
import argparse

import numpy as np

from dpcore import stats
from dpcore._release.bins import nonnegative_least_squares

RULES = ("raw", "clamp", "proj_noisy", "proj_n")


def data_sets(rng):
    return {
        "gamma2": lambda n: rng.gamma(2.0, 1.0, n) / 10,
        "uniform": lambda n: rng.uniform(0, 1, n),
        "bimodal": lambda n: np.where(rng.random(n) < 0.3, rng.normal(0.2, 0.03, n),
                                      rng.normal(0.7, 0.1, n)),
        "expo": lambda n: rng.exponential(0.1, n),
    }


def histogram_cells(releases, rng):
    results = {}
    for name, make in data_sets(rng).items():
        for n in (300, 3000, 30000):
            x = make(n)
            for bins in (10, 30, 100):
                exact, _ = np.histogram(x, bins=bins, range=(0, 1))
                for eps in (0.1, 0.5, 1, 2, 5):
                    errors = {rule: [] for rule in RULES}
                    for _ in range(releases):
                        c, _ = stats.histogram(x, bins=bins, range=(0, 1), epsilon=eps,
                                               nonnegative=False,
                                               random_state=int(rng.integers(2**62)))
                        candidates = {
                            "raw": c, "clamp": np.maximum(c, 0),
                            "proj_noisy": nonnegative_least_squares(c.astype(float),
                                                                    float(c.sum())),
                            "proj_n": nonnegative_least_squares(c.astype(float),
                                                                float(exact.sum())),
                        }
                        for rule, value in candidates.items():
                            errors[rule].append(np.abs(value - exact).sum())
                    results[(name, n, bins, eps)] = {k: float(np.mean(v)) for k, v in errors.items()}
    return results


QUANTILE_RULES = {"em-finest": dict(), "pf-1025": dict(grid=2**10 + 1, method="permute-and-flip"),
                  "pf-8193": dict(grid=2**13 + 1, method="permute-and-flip"),
                  "pf-65537": dict(grid=2**16 + 1, method="permute-and-flip")}
QUANTILE_LEVELS = (0.25, 0.5, 0.75)


def quantile_cells(releases, rng):
    results = {}
    for name, make in data_sets(rng).items():
        for n in (300, 3000, 30000, 100000):
            x = np.clip(make(n), 0, 1)
            exact = np.quantile(x, QUANTILE_LEVELS)
            for eps in (0.1, 0.5, 2, 5):
                cell = {}
                for rule, kw in QUANTILE_RULES.items():
                    out = np.array([stats.quantile(x, QUANTILE_LEVELS, epsilon=eps, bounds=(0, 1),
                                                   random_state=int(rng.integers(2**62)), **kw)
                                    for _ in range(releases)])
                    cell[rule] = float(np.sqrt(np.mean((out - exact) ** 2)))
                results[(name, n, eps)] = cell
                print(name, n, eps, {k: f"{v / cell['em-finest']:.3f}" for k, v in cell.items()},
                      flush=True)
    for rule in QUANTILE_RULES:
        ratio = [c[rule] / c["em-finest"] for c in results.values()]
        print(f"{rule:>10}: RMSE / em-finest median {np.median(ratio):.3f}, min "
              f"{np.min(ratio):.3f}, max {np.max(ratio):.3f}, cells below 1: "
              f"{sum(r < 1 for r in ratio)} of {len(ratio)}")
    return results


LEVEL_SETS = {"3 levels": (0.25, 0.5, 0.75), "5 levels": (0.1, 0.25, 0.5, 0.75, 0.9),
              "9 deciles": tuple(np.round(np.arange(0.1, 0.91, 0.1), 1))}


def level_cells(releases, rng):
    """RMSE of split="recursive" relative to split="equal" per cell and level set."""
    ratios = {name: [] for name in LEVEL_SETS}
    for name, make in data_sets(rng).items():
        for n in (300, 3000, 30000, 100000):
            x = np.clip(make(n), 0, 1)
            for eps in (0.1, 0.5, 2, 5):
                for label, levels in LEVEL_SETS.items():
                    exact = np.quantile(x, levels)
                    rmse = {}
                    for split in ("equal", "recursive"):
                        out = np.array([stats.quantile(x, levels, epsilon=eps, bounds=(0, 1),
                                                       split=split,
                                                       random_state=int(rng.integers(2**62)))
                                        for _ in range(releases)])
                        rmse[split] = float(np.sqrt(np.mean((out - exact) ** 2)))
                    ratios[label].append(rmse["recursive"] / rmse["equal"])
                    print(name, n, eps, label, f"recursive / equal {ratios[label][-1]:.3f}",
                          flush=True)
    for label, r in ratios.items():
        print(f"{label:>9}: RMSE recursive / equal median {np.median(r):.3f}, min "
              f"{np.min(r):.3f}, max {np.max(r):.3f}, cells below 1: "
              f"{sum(v < 1 for v in r)} of {len(r)}")
    return ratios


def flip_model(draws=40000, seed=0):
    gen = np.random.default_rng(seed)  # insecure-ok: a model, not a release
    for a in (0.25, 0.5, 1, 1.5, 2, 3, 5):
        k = int(30 / a) + 3
        points = np.arange(-k, k + 1)[None, :] * a + gen.uniform(0, a, draws)[:, None]
        scores = -np.abs(points) + gen.exponential(size=points.shape)
        chosen = points[np.arange(draws), np.argmax(scores, axis=1)]
        print(f"c k = {a}: RMSE / exponential mechanism on a continuum "
              f"{np.sqrt(np.mean(chosen**2)) / np.sqrt(2):.3f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--releases", type=int, default=None)
    parser.add_argument("--part", choices=("histograms", "quantiles", "levels", "flip-model"),
                        default="histograms")
    args = parser.parse_args()
    if args.part == "flip-model":
        flip_model()
        return
    if args.part == "levels":
        level_cells(args.releases or 100, np.random.default_rng(2026))
        return
    if args.part == "quantiles":
        quantile_cells(args.releases or 100, np.random.default_rng(2025))
        return
    args.releases = args.releases or 150
    results = histogram_cells(args.releases, np.random.default_rng(2024))
    wins = {rule: 0 for rule in RULES}
    for cell in results.values():
        for rule in RULES:  # ties count for every rule that reaches the smallest error
            wins[rule] += cell[rule] <= min(cell.values())
    print(f"cells won or tied (smallest mean L1) of {len(results)}:", wins)
    for rule in RULES:
        ratio = [cell[rule] / cell["clamp"] for cell in results.values() if cell["clamp"] > 0]
        print(f"{rule:>10}: L1 / clamp median {np.median(ratio):.3f}, min {np.min(ratio):.3f}, "
              f"max {np.max(ratio):.3f}")


if __name__ == "__main__":
    main()
