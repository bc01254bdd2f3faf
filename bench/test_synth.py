"""Benchmarks of dpcore.synth: MST's fit + sample time, and the error report against independent
noisy 1-way marginals and smartnoise-synth's MST.

Group ``synth-mst-1e5`` (pytest-benchmark): ``dpcore-mst`` fits MST to the adult-like data set
(10**5 records, 15 columns; ``bench/synth_data.py``) at smartnoise's rho for epsilon = 1,
delta = 1e-9 and samples 10**5 records; ``smartnoise-mst`` does the same with smartnoise-synth
when it is importable (it needs its own environment: ``bench/synth_peers.py``).

The comparison (errors over 10 seeds, Holm-adjusted one-sided bounds, train-on-synthetic
accuracy, and the times), in four steps, the peer in its own environment::

    PYTHONPATH=python python bench/test_synth.py export /tmp/synth-bench
    PYTHONPATH=python /work/env-synth/bin/python bench/synth_peers.py /tmp/synth-bench [--aim]
    PYTHONPATH=python python bench/test_synth.py run /tmp/synth-bench [cell ...] \
        [--methods=aim,mst,privbayes,privbayes-eps] [--seeds=0-9] [--part=NAME] [--no-tstr]
    PYTHONPATH=python python bench/test_synth.py report /tmp/synth-bench [cell ...]

``run`` caches every (contender, seed) result in ``DIR/dpcore-<cell>[.<part>].json`` (errors,
TSTR accuracy, CPU time; resumable, and parts with different ``--seeds`` can run in parallel);
``report`` merges them with the peers' samples.

Cells: ``adult`` (adult-like, training data seed 2031, 10**5 records; test records seed 2032;
the development data that chose the defaults used seeds 1000..1009) and ``breast_cancer``
(scikit-learn's bundled set, a fixed 400 / 169 train / test split), both at epsilon = 1,
delta = 1e-9 (smartnoise's conversion to rho; dpcore runs at that rho), and
``breast_cancer_eps10`` (the same at epsilon = 10). Noise seeds 0..9 for
every contender. Contenders: ``dpcore-mst``, ``dpcore-aim`` (defaults: every 2-way marginal as
the workload, as smartnoise's ``AIMSynthesizer(degree=2)``); ``dpcore-privbayes`` (defaults,
at rho: the independent baseline's and the TSTR criteria; its namesake runs at epsilon, below);
``independent`` (every 1-way marginal at the same rho with dpcore's discrete Gaussian, clipped
at zero, columns sampled independently); ``smartnoise-mst`` and
``smartnoise-aim`` (their own samplers) and ``-iid`` (i.i.d. records from the same fitted
models; see ``synth_peers.py``); ``dpcore-privbayes-eps`` (dpcore's PrivBayes at the cell's
epsilon as pure epsilon-DP) against ``datasynthesizer-k0`` / ``-k1`` (DataSynthesizer 0.1.13's
PrivBayes at its default k and at k = 1; ``synth_peer_datasynthesizer.py``, its own env).

Criteria (issue 31): average 2-way and 3-way L1 error of each dpcore method at most 1.05x its
smartnoise namesake's and at most 0.5x the independent baseline's: one-sided Welch tests of
mean(dpcore) - c mean(peer) < 0 at 5%, Holm-adjusted over the cells (data sets x widths) of each
criterion; the mean TSTR accuracy within 0.05 of training on the real data; fit + sample at
least 10x faster than smartnoise's MST at 10**5 records (min of 3 runs against smartnoise's
fastest seed).
"""
from __future__ import annotations

import json
import math
import pathlib
import sys
import time

import numpy as np
import pytest

from common import DPCORE, PEER, dpcore_api, peer, record

EPSILON, DELTA = 1.0, 1e-9
SEEDS = range(10)
ADULT_N, ADULT_TEST_N = 100_000, 20_000
ADULT_SEED, ADULT_TEST_SEED = 2031, 2032


def _rho_smartnoise(epsilon, delta):
    """smartnoise's rho for (epsilon, delta) (read from its run), else dpcore's conversion."""
    from dpcore import calibration

    return calibration.zcdp_rho_for(epsilon, delta)


#: cell -> epsilon (delta = DELTA); breast_cancer_eps10 shows the regime with more signal per
#: cell (400 records, 31 columns, 9 codes each: at epsilon = 1 every count is within the noise)
EPSILONS = {"adult": EPSILON, "breast_cancer": EPSILON, "breast_cancer_eps10": 10.0}


def cells(names=None):
    """name -> (domain, training data, test data, label, epsilon)."""
    import synth_data

    names = list(EPSILONS) if not names else names
    out = {}
    if "adult" in names:
        out["adult"] = (synth_data.adult_like_domain(), synth_data.adult_like(ADULT_N, ADULT_SEED),
                        synth_data.adult_like(ADULT_TEST_N, ADULT_TEST_SEED), synth_data.LABEL,
                        EPSILONS["adult"])
    try:
        frame = synth_data.breast_cancer()
    except ImportError:  # needs scikit-learn
        return out
    order = np.random.default_rng(0).permutation(len(frame))
    for name in ("breast_cancer", "breast_cancer_eps10"):
        if name in names:
            out[name] = (synth_data.breast_cancer_domain(), frame.iloc[order[:400]],
                         frame.iloc[order[400:]], "target", EPSILONS[name])
    return out


# ------------------------------------------------------------------------------------------------
# pytest-benchmark: fit + sample time


@pytest.fixture(scope="module")
def adult():
    pytest.importorskip("pandas")
    import synth_data

    return synth_data.adult_like_domain(), synth_data.adult_like(ADULT_N, ADULT_SEED)


def test_dpcore_mst_fit_sample(benchmark, adult):
    dpcore_api()
    from dpcore.synth import MST, workload_error

    domain, frame = adult
    rho = _rho_smartnoise(EPSILON, DELTA)
    record(benchmark, n=ADULT_N, contender="dpcore-mst", role=DPCORE, group="synth-mst-1e5")
    out = benchmark.pedantic(
        lambda: MST(rho=rho, domain=domain, random_state=0).fit(frame).sample(
            ADULT_N, output="codes"), rounds=3, iterations=1)
    assert out.shape == (ADULT_N, len(domain))
    error = workload_error(domain.encode(frame), out, domain=domain, ways=2, codes=True)
    assert error < 0.06  # sanity: it learned the pairs


def test_smartnoise_mst_fit_sample(benchmark, adult):
    snsynth = peer("snsynth.mst", "smartnoise-synth")
    import pandas as pd

    domain, frame = adult
    codes = domain.encode(frame)
    df = pd.DataFrame(codes, columns=[f"c{j}" for j in range(codes.shape[1])])
    record(benchmark, n=ADULT_N, contender="smartnoise-mst", role=PEER, group="synth-mst-1e5")

    def run():
        model = snsynth.MSTSynthesizer(epsilon=EPSILON, delta=DELTA)
        model.fit(df, categorical_columns=list(df.columns))
        return np.asarray(model.sample(ADULT_N))

    out = benchmark.pedantic(run, rounds=1, iterations=1)
    assert out.shape == codes.shape


# ------------------------------------------------------------------------------------------------
# the comparison report


def export(directory, names=None):
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "spec.json"
    spec = json.loads(path.read_text()) if path.exists() else {}
    for name, (domain, train, _, _, epsilon) in cells(names).items():
        np.save(directory / f"{name}.npy", domain.encode(train))
        spec[name] = {"epsilon": epsilon, "delta": DELTA, "seeds": len(SEEDS),
                      "sizes": [int(size) for size in domain.shape]}  # public codes per column
    path.write_text(json.dumps(spec, indent=1))
    print(f"wrote {sorted(spec)} to {directory}")


def independent_sample(train, domain, rho, n, seed):
    """The baseline: every 1-way marginal with discrete Gaussian noise at rho in total (clipped
    at zero, normalised), columns drawn independently."""
    from dpcore.synth import marginals

    noisy = marginals(train, domain=domain, attributes=list(domain.names), rho=rho,
                      random_state=seed)
    rng = np.random.default_rng(seed)
    out = []
    for name in domain.names:
        p = np.maximum(noisy[(name,)], 0).astype(float)
        p = p / p.sum() if p.sum() > 0 else np.full(p.size, 1.0 / p.size)
        out.append(rng.choice(p.size, n, p=p))
    return np.column_stack(out)


def welch_upper(x, y, c):
    """One-sided p-value of H0: mean(x) - c mean(y) >= 0 (Welch), and the 95% upper bound of the
    difference."""
    from scipy import stats

    x, y = np.asarray(x, float), np.asarray(y, float)
    vx, vy = x.var(ddof=1) / x.size, c * c * y.var(ddof=1) / y.size
    diff, se = x.mean() - c * y.mean(), math.sqrt(vx + vy)
    if se == 0:
        return (0.0 if diff < 0 else 1.0), diff
    df = (vx + vy) ** 2 / (vx ** 2 / (x.size - 1) + vy ** 2 / (y.size - 1))
    return float(stats.t.cdf(diff / se, df)), diff + stats.t.ppf(0.95, df) * se


def holm(pvalues):
    """Holm-adjusted p-values (same order)."""
    order = np.argsort(pvalues)
    adjusted = np.empty(len(pvalues))
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


#: dpcore's contenders -> their namesake peers (the criteria apply to each); fitted at the cell's
#: rho, except ``privbayes-eps`` at the cell's epsilon as pure epsilon-DP (DataSynthesizer's
#: privacy; its default k and dpcore's degree 1, see ``synth_peer_datasynthesizer.py``)
METHODS = {"mst": ("smartnoise-mst",), "aim": ("smartnoise-aim",), "privbayes": (),
           "privbayes-eps": ("datasynthesizer-k0", "datasynthesizer-k1")}

#: peer samples the report reads: contender -> (file tag, npz keys -> contender suffix)
PEER_FILES = {"smartnoise-mst": ("smartnoise", {"round": "", "iid": "-iid"}),
              "smartnoise-aim": ("smartnoise-aim", {"round": "", "iid": "-iid"}),
              "datasynthesizer-k0": ("datasynthesizer-k0", {"sample": ""}),
              "datasynthesizer-k1": ("datasynthesizer-k1", {"sample": ""})}


def dpcore_sample(method, rho, domain, train, n, seed, epsilon=None):
    from dpcore.synth import AIM, MST, PrivBayes

    if method == "privbayes-eps":  # pure epsilon-DP, dpcore's defaults otherwise
        model = PrivBayes(epsilon=epsilon, domain=domain, random_state=seed)
    else:
        make = {"mst": MST, "aim": AIM, "privbayes": PrivBayes}[method]
        model = make(rho=rho, domain=domain, random_state=seed)
    return model.fit(train).sample(n, output="codes")


#: ``--no-tstr``: skip the train-on-synthetic accuracy (about 30 s CPU per 10**5-record sample)
TSTR = "--no-tstr" not in sys.argv


def scores(codes, test_codes, sample, domain, label):
    from dpcore.synth import tstr_accuracy, workload_error

    return {"2": workload_error(codes, sample, domain=domain, ways=2, codes=True),
            "3": workload_error(codes, sample, domain=domain, ways=3, codes=True),
            "tstr": tstr_accuracy(sample, test_codes, domain=domain, label=label, codes=True)
            if TSTR else math.nan}


def run_dpcore(directory, names=None, methods=("mst", "aim", "privbayes"), seeds=SEEDS, part=""):
    """dpcore's contenders and the independent baseline on every cell and seed; errors, TSTR
    accuracy and CPU time cached in ``DIR/dpcore-<cell><part>.json`` (resumable; parts run
    different seeds in parallel and the report merges them)."""
    from dpcore.synth import tstr_accuracy

    directory = pathlib.Path(directory)
    times_path = directory / "smartnoise-times.json"
    peer_times = json.loads(times_path.read_text()) if times_path.exists() else {}
    for name, (domain, train, test, label, epsilon) in cells(names).items():
        path = directory / f"dpcore-{name}{part}.json"
        done = json.loads(path.read_text()) if path.exists() else {}
        codes, test_codes = domain.encode(train), domain.encode(test)
        rho = peer_times.get(f"rho/{name}") or _rho_smartnoise(epsilon, DELTA)
        if "real" not in done:
            done["real"] = {"tstr": tstr_accuracy(codes, test_codes, domain=domain, label=label,
                                                  codes=True) if TSTR else math.nan}
        for seed in seeds:
            for who in ["independent"] + [f"dpcore-{m}" for m in methods]:
                key = f"{who}/{seed}"
                if key in done:
                    continue
                start = time.process_time()
                if who == "independent":
                    out = independent_sample(train, domain, rho, len(codes), seed)
                else:
                    out = dpcore_sample(who[len("dpcore-"):], rho, domain, train, len(codes), seed,
                                        epsilon)
                cpu = time.process_time() - start  # fit + sample only, not the scoring
                done[key] = dict(scores(codes, test_codes, out, domain, label), cpu=cpu)
                path.write_text(json.dumps(done, indent=1))
                print(f"{name} {key}: {done[key]}", flush=True)


def report(directory, names=None):
    """The table and the verdicts from the cached dpcore results and the peer's samples."""
    directory = pathlib.Path(directory)
    times_path = directory / "smartnoise-times.json"
    peer_times = json.loads(times_path.read_text()) if times_path.exists() else {}
    ds_path = directory / "datasynthesizer-times.json"
    ds_times = json.loads(ds_path.read_text()) if ds_path.exists() else {}
    rows = []
    checks: dict = {}
    for name, (domain, train, test, label, epsilon) in cells(names).items():
        codes, test_codes = domain.encode(train), domain.encode(test)
        done = {}
        for path in sorted(directory.glob(f"dpcore-{name}.*json")) + [
                directory / f"dpcore-{name}.json"]:
            if path.exists():
                done.update(json.loads(path.read_text()))
        results: dict = {}
        for key, value in done.items():
            if "/" in key:
                who, _ = key.split("/")
                results.setdefault(who, []).append(value)
        for seed in SEEDS:
            for who, (tag, keys) in PEER_FILES.items():
                peer_file = directory / f"{name}-{tag}-{seed}.npz"
                if peer_file.exists():
                    with np.load(peer_file) as z:
                        for key, suffix in keys.items():
                            results.setdefault(who + suffix, []).append(
                                scores(codes, test_codes, z[key], domain, label))
        real = done.get("real", {}).get("tstr", math.nan)
        for who, found in sorted(results.items()):
            e2, e3 = [r["2"] for r in found], [r["3"] for r in found]
            acc = [r["tstr"] for r in found]
            cpu = [r["cpu"] for r in found if "cpu" in r]
            rows.append((name, who, np.mean(e2), np.std(e2, ddof=1) if len(e2) > 1 else 0.0,
                         np.mean(e3), np.std(e3, ddof=1) if len(e3) > 1 else 0.0,
                         np.mean(acc), len(found), min(cpu) if cpu else math.nan))
        rows.append((name, "real data (train)", 0.0, 0.0, 0.0, 0.0, real, 1, math.nan))
        for method, namesakes in METHODS.items():
            mine = results.get(f"dpcore-{method}")
            if not mine:
                continue
            for w in ("2", "3"):
                x = [r[w] for r in mine]
                baseline = [] if method == "privbayes-eps" else [("independent", 0.5)]  # at rho
                for who, c in baseline + [
                        (n + suffix, 1.05) for n in namesakes for suffix in ("", "-iid")]:
                    other = [r[w] for r in results.get(who, [])]
                    if len(other) > 1:
                        p, bound = welch_upper(x, other, c)
                        checks.setdefault(f"dpcore {method} vs {who} (<= {c}x)", []).append(
                            (f"{name} {w}-way", np.mean(x) / np.mean(other), bound, p,
                             len(x), len(other)))
            acc = [r["tstr"] for r in mine]
            if not np.isfinite(acc).all():  # run or reported with --no-tstr
                continue
            checks.setdefault(f"dpcore {method} TSTR within 0.05 of real", []).append(
                (name, np.mean(acc) - real, None, None, len(acc), 0))
        peer_fast = {tag: [v["fit+sample"] for k, v in times.items()
                           if k.startswith(prefix + name + "/")]
                     for tag, prefix, times in (("smartnoise-mst", "", peer_times),
                                                ("smartnoise-aim", "aim/", peer_times),
                                                ("datasynthesizer-k0", "k0/", ds_times),
                                                ("datasynthesizer-k1", "k1/", ds_times))}
        print(f"{name}: epsilon = {epsilon:g}, delta = {DELTA:g}; peers' fastest fit + sample "
              + ", ".join(f"{t} {min(v):.1f} s ({len(v)} runs)" for t, v in peer_fast.items()
                          if v))
    print()
    print("| data | contender | 2-way L1 (mean +- sd) | 3-way L1 (mean +- sd) | TSTR accuracy "
          "| seeds | min CPU s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, who, m2, s2, m3, s3, acc, k, cpu in rows:
        print(f"| {name} | {who} | {m2:.4f} +- {s2:.4f} | {m3:.4f} +- {s3:.4f} | {acc:.3f} | "
              f"{k} | {cpu:.2f} |")
    print()
    for key, found in checks.items():
        if "TSTR" in key:
            print(f"{key}:")
            for cell, gap, _, _, k, _ in found:
                print(f"  {cell}: mean accuracy - real {gap:+.3f} ({k} seeds) -> "
                      f"{'met' if gap >= -0.05 else 'NOT met'}")
            continue
        adjusted = holm([p for _, _, _, p, _, _ in found])
        print(f"{key}: Holm-adjusted one-sided Welch tests over {len(found)} cells")
        for (cell, ratio, bound, p, k, kp), q in zip(found, adjusted):
            verdict = "met" if q < 0.05 else "NOT shown"
            print(f"  {cell}: ratio of means {ratio:.3f}; 95% upper bound of mean(dpcore) - "
                  f"c mean(peer) {bound:+.4f}; Holm p {q:.2g} ({k} vs {kp} seeds) -> {verdict}")


if __name__ == "__main__":
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    if len(sys.argv) < 3 or sys.argv[1] not in ("export", "run", "report"):
        sys.exit(__doc__)
    methods = [a.split("=", 1)[1].split(",") for a in sys.argv if a.startswith("--methods=")]
    cell_names = [a for a in sys.argv[3:] if not a.startswith("--")]
    if sys.argv[1] == "run":
        options = dict(a[2:].split("=", 1) for a in sys.argv if a.startswith("--") and "=" in a)
        low, high = map(int, options.get("seeds", "0-9").split("-"))
        run_dpcore(sys.argv[2], cell_names, *(methods or [("mst", "aim", "privbayes",
                                                            "privbayes-eps")]),
                   seeds=range(low, high + 1), part=f".{options['part']}" if "part" in options
                   else "")
    else:
        (export if sys.argv[1] == "export" else report)(sys.argv[2], cell_names)
