"""Development study of MST's and AIM's post-processing (the estimates from the noisy marginals),
on data disjoint from the reporting cells of ``bench/test_synth.py`` (never its breast-cancer
rows or adult-like seeds 2031/2032); the data sets are ``synth_privbayes_dev.py``'s::

    PYTHONPATH=python python bench/synth_marginal_dev.py [--method=mst|aim] [--seeds=8]
        [--sets=small|big|all|NAME,NAME] [--budgets=rho=0.015,rho=0.1,rho=1]
        [--variants=off:_tree.SHRINK_INTERACTIONS=0;on:_tree.SHRINK_INTERACTIONS=1]

A variant is ``label:module.NAME=value,...`` (module constants of ``dpcore.synth``, set for its
runs and restored); the defaults were chosen with ``_tree.SHRINK_INTERACTIONS`` (MST's edge
tables), ``_mst.POOL_ONE_WAY`` and ``_aim.POOL_ONE_WAY`` (the pooled 1-way estimates), e.g.
``--method=aim "--variants=off:_aim.POOL_ONE_WAY=0;on:_aim.POOL_ONE_WAY=1"``, and AIM's default
rounds with ``_aim.SIZED_ROUNDS`` (0: the paper's T = 16 d) and ``_aim.NOISE_TO_SIGNAL``, e.g.
``--method=aim "--variants=paper:_aim.SIZED_ROUNDS=0;c0.5:_aim.NOISE_TO_SIGNAL=0.5"``. Each line prints, per data set and budget, the mean average L1 error over
all 2-way / 3-way marginals (synthetic sample as large as the data, noise seeds 40000 + i) and
its ratio to the first variant.
"""
from __future__ import annotations

import importlib
import sys
import time

import numpy as np


def parse_variant(text):
    label, _, settings = text.partition(":")
    out = []
    for item in filter(None, settings.split(",")):
        target, value = item.split("=")
        module, name = target.rsplit(".", 1)
        out.append((f"dpcore.synth.{module}", name, float(value)))
    return label, out


def errors(method, domain, frame, budget, settings, seeds):
    """Mean 2-way and 3-way workload errors over the noise seeds with ``settings`` applied."""
    from dpcore.synth import AIM, MST, workload_error

    codes = domain.encode(frame)
    saved = []
    for module, name, value in settings:
        mod = importlib.import_module(module)
        old = getattr(mod, name)
        saved.append((mod, name, old))
        setattr(mod, name, type(old)(value))
    try:
        found = []
        for seed in seeds:
            make = {"mst": MST, "aim": AIM}[method]
            model = make(**budget, domain=domain, random_state=40_000 + seed).fit(frame)
            sample = model.sample(len(codes), output="codes")
            found.append([workload_error(codes, sample, domain=domain, ways=w, codes=True)
                          for w in (2, 3)])
    finally:
        for mod, name, old in reversed(saved):
            setattr(mod, name, old)
    return np.mean(found, axis=0), np.std(found, axis=0, ddof=1) / np.sqrt(len(found))


def main(argv):
    from synth_privbayes_dev import big_sets, small_sets

    options = dict(a[2:].split("=", 1) for a in argv if a.startswith("--"))
    method = options.get("method", "mst")
    seeds = range(int(options.get("seeds", 8)))
    which = options.get("sets", "small")
    sets = {**(small_sets() if which not in ("big",) else {}),
            **(big_sets() if which in ("big", "all") or "adult1e5" in which else {})}
    if which not in ("small", "big", "all"):
        sets = {k: v for k, v in sets.items() if k in which.split(",")}
    variants = [parse_variant(v) for v in
                options.get("variants", "off:_tree.SHRINK_INTERACTIONS=0;on:_tree.SHRINK_INTERACTIONS=1").split(";")]
    for text in options.get("budgets", "rho=0.015,rho=0.1,rho=1").split(","):
        kind, value = text.split("=")
        for name, (domain, frame) in sets.items():
            start = time.process_time()
            rows = [errors(method, domain, frame, {kind: float(value)}, settings, seeds)
                    for _, settings in variants]
            print(f"{method} {text} {name:10s} " + "  ".join(
                f"{label} {m[0]:.4f}/{m[1]:.4f} ({m[0] / rows[0][0][0]:.3f}/"
                f"{m[1] / rows[0][0][1]:.3f})" for (label, _), (m, _) in zip(variants, rows))
                + f"  [{time.process_time() - start:.0f} s]", flush=True)


if __name__ == "__main__":
    sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
    main(sys.argv[1:])
