"""Development study of PrivBayes's defaults: ``network_share`` and the conditionals' prior
(``dpcore.synth._privbayes.PRIOR_WEIGHT``), on data disjoint from the reporting cells of
``bench/test_synth.py`` (never its breast-cancer rows or adult-like seeds 2031/2032)::

    PYTHONPATH=python python bench/synth_privbayes_dev.py [--seeds=8] [--sets=small|big|all]
        [--budgets=epsilon=1,epsilon=0.3,epsilon=3,rho=0.015,rho=0.1,rho=1]
        [--variants=0.3:0,0.3:1,0.05:0,0.05:1]

Each variant is ``network_share:PRIOR_WEIGHT``; each line prints, per data set and budget, the
mean average L1 error over all 2-way / 3-way marginals (synthetic sample as large as the data,
noise seeds 40000 + i) and its ratio to the first variant.

Data (public domains as the benchmark's breast-cancer domain: equal-width bins on the full data
set's min/max, plus the missing code):

* scikit-learn's wine (178 x 14, 8 bins), diabetes (442 x 11, unscaled, 8 bins), and digits
  (600 shuffled rows, the 20 pixels of largest variance and the class, 5 bins);
* the adult-like generator (``synth_data.adult_like``) with its development data seeds: 400,
  1,000 and 2,000 records (seeds 1000, 1001, 1002) and 10**5 records (seed 1003, ``big``).
"""
from __future__ import annotations

import sys

import numpy as np


def _binned_domain(frame, label=None, bins=8):
    from dpcore.synth import Categorical, Domain, Numeric

    return Domain({c: Categorical(sorted(frame[c].unique().tolist())) if c == label else
                   Numeric(float(frame[c].min()), float(frame[c].max()), bins=bins)
                   for c in frame.columns})


def small_sets():
    """name -> (domain, records): the small development tables."""
    from sklearn import datasets

    import synth_data

    wine = datasets.load_wine(as_frame=True).frame
    diabetes = datasets.load_diabetes(as_frame=True, scaled=False).frame
    digits = datasets.load_digits(as_frame=True).frame
    pixels = digits.drop(columns="target").var().sort_values().index[-20:].tolist()
    digits = digits[pixels + ["target"]].iloc[
        np.random.default_rng(5).permutation(len(digits))[:600]]
    out = {"wine": (_binned_domain(wine, "target"), wine),
           "diabetes": (_binned_domain(diabetes), diabetes),
           "digits600": (_binned_domain(digits, "target", bins=5), digits)}
    for n, seed in ((400, 1000), (1000, 1001), (2000, 1002)):
        out[f"adult{n}"] = (synth_data.adult_like_domain(), synth_data.adult_like(n, seed))
    return out


def big_sets():
    import synth_data

    return {"adult1e5": (synth_data.adult_like_domain(), synth_data.adult_like(10**5, 1003))}


def errors(domain, frame, budget, share, prior, seeds):
    """Mean 2-way and 3-way workload errors of PrivBayes(budget, network_share=share) with
    PRIOR_WEIGHT = prior over the noise seeds."""
    import dpcore.synth._privbayes as privbayes
    from dpcore.synth import PrivBayes, workload_error

    codes = domain.encode(frame)
    saved, privbayes.PRIOR_WEIGHT = privbayes.PRIOR_WEIGHT, prior
    try:
        found = []
        for seed in seeds:
            model = PrivBayes(**budget, domain=domain, network_share=share,
                              random_state=40_000 + seed).fit(frame)
            sample = model.sample(len(codes), output="codes")
            found.append([workload_error(codes, sample, domain=domain, ways=w, codes=True)
                          for w in (2, 3)])
    finally:
        privbayes.PRIOR_WEIGHT = saved
    return np.mean(found, axis=0)


def main(argv):
    options = dict(a[2:].split("=", 1) for a in argv if a.startswith("--"))
    seeds = range(int(options.get("seeds", 8)))
    which = options.get("sets", "all")
    sets = {**(small_sets() if which in ("small", "all") else {}),
            **(big_sets() if which in ("big", "all") else {})}
    budgets = options.get("budgets", "epsilon=1,epsilon=0.3,epsilon=3,rho=0.015,rho=0.1,rho=1")
    variants = [tuple(map(float, v.split(":"))) for v in
                options.get("variants", "0.3:0,0.3:1,0.05:0,0.05:1").split(",")]
    for text in budgets.split(","):
        kind, value = text.split("=")
        for name, (domain, frame) in sets.items():
            rows = [errors(domain, frame, {kind: float(value)}, share, prior, seeds)
                    for share, prior in variants]
            print(f"{text} {name:10s} " + "  ".join(
                f"{share:g}:{prior:g} {e2:.4f}/{e3:.4f} ({e2 / rows[0][0]:.3f}/"
                f"{e3 / rows[0][1]:.3f})" for (share, prior), (e2, e3) in zip(variants, rows)),
                flush=True)


if __name__ == "__main__":
    sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
    main(sys.argv[1:])
