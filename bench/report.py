"""Turn a pytest-benchmark JSON file into the Markdown tables of the README.

Usage::

    python -m pytest bench --benchmark-json=bench.json && python bench/report.py bench.json

Prints, for each benchmark group, every contender's median time per sample (ns) and its ratio to
the reference contenders measured in the same run (NumPy's PCG64 baseline and the naive
os.urandom twin), then how many times slower each peer library is than each dpcore contender,
then whether the performance targets are met. ``--check`` exits with status 1 when a measured
target is missed. Standard library only; reads what the benchmarks put in ``extra_info``
(``n``, ``contender``, ``role``).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass

ROLE_ORDER = {"baseline": 0, "naive": 1, "dpcore": 2, "peer": 3}
GROUP_ORDER = ["raw-bits", "laplace", "gaussian", "select", "hrg-n1000", "hrg-n10000"]  # then any other group, alphabetically


@dataclass(frozen=True)
class Result:
    group: str
    contender: str
    role: str
    n: int
    median: float  # seconds per call

    @property
    def ns(self):
        """Median nanoseconds per sample."""
        return self.median / self.n * 1e9


# Targets: (title, group, numerator contenders, denominator contender, kind, limit).
#   kind "slowdown": numerator time / denominator time per sample must be <= limit.
#   kind "speedup":  denominator time / numerator time (peer / dpcore) must be >= limit.
#   kind "throughput": denominator time / numerator time (throughput fraction) must be >= limit.
#   kind "ns": the numerator's time per sample at its largest size must be <= limit nanoseconds
#   (denominator None).
HISTOGRAM_GROUPS = [f"histogram-d{d}-{c}" for d in (1, 2, 3, 5) for c in ("1e4", "1e6")]

TARGETS = [
    ("snapping Laplace <= 2x numpy laplace", "laplace",
     ["dpcore-snapping"], "numpy-laplace", "slowdown", 2.0),
    ("discrete Laplace <= 2x numpy laplace", "laplace",
     ["dpcore-discrete", "dpcore-discrete_laplace"], "numpy-laplace", "slowdown", 2.0),
    ("discrete Gaussian <= 3x numpy normal", "gaussian",
     ["dpcore-gaussian", "dpcore-discrete_gaussian(sigma=1)",
      "dpcore-discrete_gaussian(sigma=100)"], "numpy-normal", "slowdown", 3.0),
    (">= 100x faster than diffprivlib Laplace.randomise", "laplace",
     ["dpcore-snapping", "dpcore-discrete", "dpcore-discrete_laplace"], "diffprivlib-laplace",
     "speedup", 100.0),
    (">= 100x faster than OpenDP then_laplace", "laplace",
     ["dpcore-snapping", "dpcore-discrete", "dpcore-discrete_laplace"], "opendp-laplace",
     "speedup", 100.0),
    (">= 100x faster than OpenDP then_gaussian", "gaussian",
     ["dpcore-gaussian", "dpcore-discrete_gaussian(sigma=1)",
      "dpcore-discrete_gaussian(sigma=100)"], "opendp-gaussian", "speedup", 100.0),
    ("ChaCha20 raw >= 40% of PCG64 raw throughput", "raw-bits",
     ["dpcore-chacha20"], "numpy-pcg64", "throughput", 0.40),
    ("fast selection <= 15 ns per candidate (10^7 in memory)", "select",
     ["dpcore-gumbel", "dpcore-permute-and-flip", "dpcore-inverse-cdf"], None, "ns", 15.0),
    ("exact selection <= 4x the fast method", "select",
     ["dpcore-exact"], "dpcore-gumbel", "slowdown", 4.0),
    ("HRG MCMC steps >= igraph_hrg_fit at n = 1000", "hrg-n1000",
     ["dpcore-fit_hrg", "dpcore-chain"], "igraph-hrg_fit", "speedup", 1.0),
    ("HRG MCMC steps >= 5x igraph_hrg_fit at n = 10^4", "hrg-n10000",
     ["dpcore-fit_hrg", "dpcore-chain"], "igraph-hrg_fit", "speedup", 5.0),
    ("HRG MCMC >= 100x the pure-Python twin (n = 1000)", "hrg-n1000",
     ["dpcore-chain"], "python-twin", "speedup", 100.0),
    ("HRG MCMC >= 100x the pure-Python twin (n = 10^4)", "hrg-n10000",
     ["dpcore-chain"], "python-twin", "speedup", 100.0),
    *[(f"counting >= 15x faster than numpy.histogramdd ({g})", g, ["dpcore-count"],
       "numpy-histogramdd", "speedup", 15.0) for g in HISTOGRAM_GROUPS],
    *[(f"counting >= 2x faster than floor/ravel_multi_index/bincount ({g})", g,
       ["dpcore-count"], "numpy-bincount", "speedup", 2.0) for g in HISTOGRAM_GROUPS],
    ("histogram noise step (10^6 cells) <= 3x numpy laplace (10^6 values)", "histogram-noise",
     ["dpcore-noise-step"], "numpy-laplace", "slowdown", 3.0),
    ("PCA(ppca).fit >= 10x faster than diffprivlib PCA.fit (d=100, k=5)", "pca-d100",
     ["dpcore-ppca"], "diffprivlib-pca", "speedup", 10.0),
    ("PCA(ppca).fit >= 10x faster than diffprivlib PCA.fit (d=10, k=1, isotropic)", "pca-d10",
     ["dpcore-ppca"], "diffprivlib-pca", "speedup", 10.0),
    ("PCA(ppca).fit >= 10x faster than diffprivlib PCA.fit (d=10, k=1, gap 1.1)",
     "pca-d10-spiked", ["dpcore-ppca"], "diffprivlib-pca", "speedup", 10.0),
    ("Gibbs sweep >= 20x the naive NumPy chain (d=100, k=5)", "bingham-sweep",
     ["dpcore-sweep"], "naive-sweep", "speedup", 20.0),
    ("PCA fit d=1000, k=10 (default 200 sweeps) < 60 s", "pca-d1000",
     ["dpcore-ppca"], None, "ns", 60e9),
]


def load(path):
    """The results in ``path`` that carry the bench suite's extra_info, and the machine info."""
    with open(path) as f:
        data = json.load(f)
    results, ignored = [], []
    for bench in data.get("benchmarks", []):
        info = bench.get("extra_info") or {}
        if not {"n", "contender", "role"} <= info.keys():
            ignored.append(bench.get("fullname", bench.get("name", "?")))
            continue
        results.append(Result(
            group=bench.get("group") or "(no group)",
            contender=info["contender"],
            role=info["role"],
            n=int(info["n"]),
            median=float(bench["stats"]["median"]),
        ))
    if ignored:
        print(f"note: ignored {len(ignored)} result(s) without n/contender/role: {ignored}",
              file=sys.stderr)
    return results, data


def by_contender(results, group, contender):
    return sorted((r for r in results if r.group == group and r.contender == contender),
                  key=lambda r: r.n)


def nearest(candidates, n):
    """The candidate measured at ``n``, else the one with the nearest size (log scale)."""
    if not candidates:
        return None
    return min(candidates, key=lambda r: (abs(math.log(r.n / n)), -r.n))


def headline(results, group, contender):
    """A contender's measurement at the largest size it ran."""
    rows = by_contender(results, group, contender)
    return rows[-1] if rows else None


def pair(results, group, a, b):
    """Measurements of contenders a and b at the largest size both ran; else each at its largest."""
    ra, rb = by_contender(results, group, a), by_contender(results, group, b)
    if not ra or not rb:
        return None, None
    common = sorted({r.n for r in ra} & {r.n for r in rb})
    if common:
        n = common[-1]
        return next(r for r in ra if r.n == n), next(r for r in rb if r.n == n)
    return ra[-1], rb[-1]


def fmt_ns(ns):
    return f"{ns:.1f} ns" if ns < 1000 else f"{ns / 1000:,.2f} us"


def fmt_ratio(x):
    if x >= 100:
        return f"{x:,.0f}x"
    return f"{x:.1f}x" if x >= 10 else f"{x:.2f}x"


def fmt_n(n):
    exp = round(math.log10(n))
    return f"10^{exp}" if 10**exp == n else f"{n:,}"


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def group_tables(results):
    out = []
    groups = sorted({r.group for r in results},
                    key=lambda g: (GROUP_ORDER.index(g) if g in GROUP_ORDER else len(GROUP_ORDER), g))
    for group in groups:
        rows = [r for r in results if r.group == group]
        refs = {}
        for role in ("baseline", "naive"):
            names = sorted({r.contender for r in rows if r.role == role})
            if names:
                refs[role] = names[0]
        header = ["contender", "n", "median per sample"]
        header += [f"vs {refs[role]}" for role in ("baseline", "naive") if role in refs]
        body = []
        for r in sorted(rows, key=lambda r: (ROLE_ORDER.get(r.role, 9), r.contender, r.n)):
            line = [f"`{r.contender}`", fmt_n(r.n), fmt_ns(r.ns)]
            for role in ("baseline", "naive"):
                if role in refs:
                    ref = nearest(by_contender(results, group, refs[role]), r.n)
                    line.append(fmt_ratio(r.ns / ref.ns))
            body.append(line)
        out.append(f"### {group}\n\nTime per sample (median); ratios > 1 mean slower than the "
                   f"reference (measured at the same n, else the nearest n).\n\n"
                   + table(header, body))

        dpcores = sorted({r.contender for r in rows if r.role == "dpcore"})
        peers = sorted({r.contender for r in rows if r.role == "peer"})
        if dpcores and peers:
            body = []
            for p in peers:
                hp = headline(results, group, p)
                line = [f"`{p}`", fmt_n(hp.n), fmt_ns(hp.ns)]
                for d in dpcores:
                    line.append(fmt_ratio(hp.ns / nearest(by_contender(results, group, d), hp.n).ns))
                body.append(line)
            head = ["peer", "n", "per sample"] + [f"/ `{d}`" for d in dpcores]
            out.append(f"Speed-up of dpcore over the peers in group {group}: peer time per sample / "
                       "dpcore time per sample, dpcore measured at the same n (else the nearest):"
                       "\n\n" + table(head, body))
    return "\n\n".join(out)


def evaluate_targets(results):
    """Rows (target, contender, measured, limit, verdict) and whether any measured one failed."""
    rows, failed = [], False
    for title, group, numerators, denominator, kind, limit in TARGETS:
        if kind == "ns":
            for num in numerators:
                r = headline(results, group, num)
                if r is None:
                    rows.append([title, f"`{num}`", "-", "-", "not measured (no result)"])
                    continue
                ok = r.ns <= limit
                failed |= not ok
                rows.append([title, f"`{num}`", f"{fmt_ns(r.ns)} per sample (n={fmt_n(r.n)})",
                             f"<= {limit:g} ns", "met" if ok else "MISSED"])
            continue
        if not by_contender(results, group, denominator):
            rows.append([title, "-", "-", "-", f"not measured (no `{denominator}` result)"])
            continue
        absent = [num for num in numerators if not by_contender(results, group, num)]
        if absent:
            names = ", ".join(f"`{num}`" for num in absent)
            rows.append([title, names, "-", "-", "not measured (no result)"])
        for num in numerators:
            if num in absent:
                continue
            a, b = pair(results, group, num, denominator)
            if kind == "slowdown":
                value, ok = a.ns / b.ns, a.ns / b.ns <= limit
                shown, lim = f"{value:.2f}x {denominator}", f"<= {limit:g}x"
            elif kind == "speedup":
                value = b.ns / a.ns
                ok = value >= limit
                shown, lim = f"{value:,.0f}x faster", f">= {limit:g}x"
            else:
                value = b.ns / a.ns
                ok = value >= limit
                shown, lim = f"{100 * value:.0f}% of {denominator}", f">= {100 * limit:.0f}%"
            sizes = f"n={fmt_n(a.n)}" if a.n == b.n else f"n={fmt_n(a.n)} vs {fmt_n(b.n)}"
            failed |= not ok
            rows.append([title, f"`{num}`", f"{shown} ({sizes})", lim, "met" if ok else "MISSED"])
    return rows, failed


def machine_line(data):
    m = data.get("machine_info") or {}
    cpu = (m.get("cpu") or {}).get("brand_raw") or m.get("processor") or "?"
    py = m.get("python_version") or "?"
    date = data.get("datetime", "?")
    return f"Measured {date} on {cpu}, Python {py} ({m.get('python_implementation', '?')})."


def threads_table(results):
    """One line per threaded kernel (groups ``threads-<kernel>`` of bench/test_threads.py): the
    one-thread time per sample and the speed-ups t1 / t2 and t1 / tall."""
    body = []
    for group in sorted({r.group for r in results if r.group.startswith("threads-")}):
        one = headline(results, group, "t1")
        if one is None:
            continue
        line = [f"`{group[len('threads-'):]}`", fmt_n(one.n), fmt_ns(one.ns)]
        for name in ("t2", "tall"):
            other = headline(results, group, name)
            line.append(fmt_ratio(one.ns / other.ns) if other is not None else "-")
        body.append(line)
    if not body:
        return ""
    return ("### Threads\n\nSpeed-up over one thread (``dpcore.set_num_threads``), same n:\n\n"
            + table(["kernel", "n", "1 thread per sample", "2 threads", "all cores"], body))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("json", help="file written by pytest --benchmark-json")
    parser.add_argument("--check", action="store_true",
                        help="exit with status 1 if a measured target is missed")
    args = parser.parse_args(argv)
    results, data = load(args.json)
    if not results:
        print("no dpcore bench results in this file (was it run with --benchmark-disable?)",
              file=sys.stderr)
        return 2
    print(machine_line(data))
    print()
    print(group_tables(results))
    print()
    threads = threads_table(results)
    if threads:
        print(threads)
        print()
    rows, failed = evaluate_targets(results)
    print("### Targets\n")
    print(table(["target", "contender", "measured", "limit", "verdict"], rows))
    return 1 if (args.check and failed) else 0


if __name__ == "__main__":
    sys.exit(main())
