"""dpcore's RDP and PLD accountants against exact values and against Google's dp-accounting.

For Gaussian, Laplace and Poisson-subsampled Gaussian compositions (k = 1 .. 10**4 releases,
sampling rates 10**-3 .. 1) it prints, at delta = 1e-6:

* the exact epsilon where one is known: any Gaussian composition (Balle-Wang closed form); one
  Laplace release (closed form) and two (numerical integration); one subsampled Gaussian step
  (closed form of each direction's hockey-stick divergence);
* dpcore's ``Accountant(method="rdp")`` and ``Accountant(method="pld")`` (the same orders as
  dp-accounting's RDP accountant, the same discretisation interval 1e-4 as its PLD accountant);
* dp-accounting's ``RdpAccountant`` and ``PLDAccountant``;

and checks that dpcore is never below the exact value and at most dp-accounting's plus
max(1%, 2 * interval) (RDP against RDP, PLD against PLD). It also times 10**4 subsampled
Gaussian steps composed by the PLD accountant (no cache).

``--selections`` (no dp-accounting needed): k exponential-mechanism selections at epsilon
0.1 and 1 under each accountant: the default ``"zcdp"`` as plain pure charges (epsilon**2/2,
what it reported before it read the bounded-range curve) and with the curve (epsilon**2/8),
``"rdp"`` and ``"pld"`` with the curve, and a lower bound no valid accountant may go below (the
exact epsilon of the worst two-candidate exponential mechanisms composed, over a grid of their
probabilities); checks that every accountant is at or above it.

    PYTHONPATH=python python bench/accounting_compare.py --selections

dp-accounting pins its own numpy, so it lives in an environment of its own:

    python -m venv /work/env-accounting && /work/env-accounting/bin/pip install dp-accounting==0.6.0
    PYTHONPATH=python /work/env-accounting/bin/python bench/accounting_compare.py

Exit status 1 when a check fails.
"""
from __future__ import annotations

import argparse
import functools
import math
import sys
import time
import warnings

import numpy as np
from scipy import integrate, optimize, stats
from scipy.special import ndtr

import dpcore
from dpcore.curves import DEFAULT_ORDERS, BoundedRange, Gaussian, Laplace

DELTA = 1e-6
INTERVAL = 1e-4
KS = (1, 10, 100, 1000, 10_000)
RATES = (1e-3, 1e-2, 1e-1, 1.0)


# ---------------------------------------------------------------------------------------------
# exact values


def solve(delta_of, delta=DELTA):
    """The epsilon at which a decreasing delta(epsilon) crosses ``delta``."""
    if delta_of(0.0) <= delta:
        return 0.0
    hi = 1.0
    while delta_of(hi) > delta:
        hi *= 2.0
    return optimize.brentq(lambda e: delta_of(e) - delta, 0.0, hi, xtol=1e-13, rtol=1e-14)


def gaussian_exact(ratio):
    """Exact epsilon of a Gaussian with sensitivity / sigma = ratio (any composition of
    Gaussians is one, the squared ratios adding up)."""
    return solve(lambda e: ndtr(-e / ratio + ratio / 2) - math.exp(e) * ndtr(-e / ratio - ratio / 2))


def laplace_exact(e0, k):
    """k = 1: delta(e) = 1 - e^((e - e0)/2). k = 2: the loss law (atoms 1/2 at e0 and
    e^-e0/2 at -e0, density e^((l - e0)/2)/4 between) convolved by numerical integration."""
    if k == 1:
        return solve(lambda e: -math.expm1((min(e, e0) - e0) / 2))
    if k != 2:
        return None
    warnings.filterwarnings("ignore", category=integrate.IntegrationWarning)  # at 1e-12 rel.
    atoms = [(e0, 0.5), (-e0, 0.5 * math.exp(-e0))]

    def density(x):
        return 0.25 * math.exp((x - e0) / 2)

    def delta_of(eps):
        def hinge(x):
            return max(0.0, -math.expm1(eps - x))
        total = sum(wa * wb * hinge(a + b) for a, wa in atoms for b, wb in atoms)
        for a, wa in atoms:
            total += 2 * wa * integrate.quad(lambda x: density(x) * hinge(a + x), -e0, e0,
                                             epsabs=1e-15, epsrel=1e-12, limit=200)[0]
        total += integrate.dblquad(lambda y, x: density(x) * density(y) * hinge(x + y),
                                   -e0, e0, -e0, e0, epsabs=1e-15, epsrel=1e-11)[0]
        return total
    return solve(delta_of)


def sampled_gaussian_exact(sigma, rate):
    """One Poisson-subsampled Gaussian step: the larger of the two directions' exact curves
    (the loss is monotone in the output, so each region is a half-line)."""
    r = 1.0 / sigma

    def remove(eps):
        if rate < 1.0 and eps <= math.log1p(-rate):
            return -math.expm1(eps)
        x = (math.log1p(math.expm1(eps) / rate) + r * r / 2) / r
        return rate * ndtr(r - x) + (1 - rate) * ndtr(-x) - math.exp(eps) * ndtr(-x)

    def add(eps):
        if rate == 1.0:
            return remove(eps)
        if eps >= -math.log1p(-rate):
            return 0.0
        x = (math.log1p(math.expm1(-eps) / rate) + r * r / 2) / r
        return ndtr(x) - math.exp(eps) * (rate * ndtr(x - r) + (1 - rate) * ndtr(x))

    return solve(lambda e: max(remove(e), add(e)))


# ---------------------------------------------------------------------------------------------
# the accountants


def dpcore_epsilon(curve, method):
    acc = dpcore.Accountant(1e6, DELTA, method=method, orders=DEFAULT_ORDERS,
                            pld_interval=INTERVAL)
    acc.charge(curve=curve)
    return acc.spent[0]


@functools.lru_cache(maxsize=None)
def _dp_accounting():
    import logging
    # dp-accounting warns (absl) when its fractional-order series does not converge and drops
    # the order; that is its result, reported as is
    logging.getLogger("absl").setLevel(logging.ERROR)
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant
    from dp_accounting.rdp import rdp_privacy_accountant
    return dp_accounting, pld_privacy_accountant, rdp_privacy_accountant


def peer_epsilon(event, method):
    dpa, pld_mod, rdp_mod = _dp_accounting()
    if method == "pld":
        acc = pld_mod.PLDAccountant(value_discretization_interval=INTERVAL)
    else:
        acc = rdp_mod.RdpAccountant(orders=list(DEFAULT_ORDERS))
    acc.compose(event)
    return acc.get_epsilon(DELTA)


def cases(quick):
    dpa = _dp_accounting()[0]
    ks = KS[:3] if quick else KS
    for sigma_total in (1.0, 4.0):
        for k in ks:
            sigma = sigma_total * math.sqrt(k)
            yield ("gaussian", f"sigma_total={sigma_total:g}", 1.0, k, Gaussian(sigma).repeat(k),
                   dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(sigma), k),
                   gaussian_exact(1.0 / sigma_total))
    for b_total in (1.0, 4.0):
        for k in (1, 2) + ks[1:]:  # k = 2: the exact value by numerical integration
            scale = b_total * math.sqrt(k)
            yield ("laplace", f"b_total={b_total:g}", 1.0, k, Laplace(scale).repeat(k),
                   dpa.SelfComposedDpEvent(dpa.LaplaceDpEvent(scale), k),
                   laplace_exact(1.0 / scale, k))
    for sigma in (0.8, 2.0):
        for rate in RATES:
            for k in ks:
                if rate == 1.0 and k > 100:  # epsilon in the thousands: the Gaussian rows cover it
                    continue
                step = Gaussian(sigma).poisson(rate) if rate < 1 else Gaussian(sigma)
                event = dpa.GaussianDpEvent(sigma)
                if rate < 1:
                    event = dpa.PoissonSampledDpEvent(rate, event)
                exact = None
                if k == 1:
                    exact = sampled_gaussian_exact(sigma, rate)
                elif rate == 1.0:
                    exact = gaussian_exact(math.sqrt(k) / sigma)
                yield ("poisson-gaussian", f"sigma={sigma:g}", rate, k, step.repeat(k),
                       dpa.SelfComposedDpEvent(event, k), exact)


def two_candidate_lower_bound(epsilon, k, grid=49):
    """max over q of the exact epsilon at DELTA (both directions) of k compositions of the pair
    (p, 1 - p), (q, 1 - q) with log odds epsilon apart: a two-candidate exponential mechanism
    on two neighbours, which every epsilon-bounded-range accountant must cover."""
    j = np.arange(k + 1)
    worst = 0.0
    for q in np.linspace(0.02, 0.98, grid):
        p = math.exp(epsilon) * q / (1.0 - q + math.exp(epsilon) * q)
        log_p, log_q = stats.binom.logpmf(j, k, p), stats.binom.logpmf(j, k, q)
        for a, b in ((log_p, log_q), (log_q, log_p)):
            loss = a - b

            def delta_of(e, a=a, loss=loss):
                big = loss > e
                return float(np.sum(np.exp(a[big]) * -np.expm1(e - loss[big])))

            worst = max(worst, solve(delta_of))
    return worst


def selections(quick):
    """The --selections table (see the module); returns the failed checks."""
    failures = []
    print(f"k exponential-mechanism selections, delta = {DELTA:g}")
    print("| epsilon | k | summed | zcdp, eps^2/2 (before) | zcdp, eps^2/8 (now) | rdp | pld "
          "| two-candidate lower bound |")
    print("|---|---|---|---|---|---|---|---|")
    for epsilon in (0.1, 1.0):
        for k in KS[:3] if quick else KS:
            row = {}
            for name, method, curve in (("before", "zcdp", None),
                                        ("now", "zcdp", BoundedRange(epsilon)),
                                        ("rdp", "rdp", BoundedRange(epsilon)),
                                        ("pld", "pld", BoundedRange(epsilon))):
                acc = dpcore.Accountant(1e6, DELTA, method=method)
                acc.charge_repeated(epsilon, k=k, curve=curve)
                row[name] = acc.spent[0]
            bound = two_candidate_lower_bound(epsilon, k)
            for name, value in row.items():
                if value < bound:
                    failures.append(f"selections eps={epsilon:g} k={k}: {name} {value!r} below "
                                    f"the two-candidate lower bound {bound!r}")
            print(f"| {epsilon:g} | {k} | {k * epsilon:g} | {row['before']:.4f} | "
                  f"{row['now']:.4f} | {row['rdp']:.4f} | {row['pld']:.4f} | {bound:.4f} |")
            sys.stdout.flush()
    return failures


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="k up to 100 only")
    parser.add_argument("--selections", action="store_true",
                        help="only the exponential-mechanism table (no dp-accounting needed)")
    args = parser.parse_args(argv)
    if args.selections:
        failures = selections(args.quick)
        print("\nchecks:", "all passed" if not failures else f"{len(failures)} failed")
        for f in failures:
            print("  FAIL", f)
        return 1 if failures else 0
    failures = []
    print(f"delta = {DELTA:g}, orders = dp-accounting's default ({len(DEFAULT_ORDERS)}), "
          f"PLD interval = {INTERVAL:g}")
    print("| mechanism | parameters | rate | k | exact | dpcore RDP | dp-acc RDP | dpcore PLD "
          "| dp-acc PLD | PLD - peer (%) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, params, rate, k, curve, event, exact in cases(args.quick):
        ours = {m: dpcore_epsilon(curve, m) for m in ("rdp", "pld")}
        peer = {m: peer_epsilon(event, m) for m in ("rdp", "pld")}
        for m in ("rdp", "pld"):
            if exact is not None and ours[m] < exact:
                failures.append(f"{name} {params} q={rate:g} k={k}: {m} {ours[m]!r} below the "
                                f"exact {exact!r}")
            allowed = peer[m] + max(0.01 * peer[m], 2 * INTERVAL)
            if ours[m] > allowed:
                failures.append(f"{name} {params} q={rate:g} k={k}: {m} {ours[m]!r} above "
                                f"dp-accounting's {peer[m]!r} + margin")
        gap = 100.0 * (ours["pld"] - peer["pld"]) / peer["pld"] if peer["pld"] else 0.0
        exact_text = "" if exact is None else f"{exact:.5f}"
        print(f"| {name} | {params} | {rate:g} | {k} | {exact_text} | {ours['rdp']:.5f} | "
              f"{peer['rdp']:.5f} | {ours['pld']:.5f} | {peer['pld']:.5f} | {gap:+.2f} |")
        sys.stdout.flush()

    # speed: 10**4 subsampled Gaussian steps, composed from scratch (a new rate: no cache)
    step = Gaussian(1.0).poisson(0.0123)
    for method in ("pld", "rdp"):
        start = time.perf_counter()
        eps = dpcore_epsilon(step.repeat(10_000), method)
        seconds = time.perf_counter() - start
        print(f"10**4 subsampled Gaussian steps (sigma=1, q=0.0123), method={method!r}: "
              f"epsilon {eps:.4f} in {seconds:.2f} s")
        if method == "pld" and seconds >= 1.0:
            failures.append(f"10**4 steps composed in {seconds:.2f} s (>= 1 s)")
    dpa = _dp_accounting()[0]
    start = time.perf_counter()
    peer_epsilon(dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(
        0.0123, dpa.GaussianDpEvent(1.0)), 10_000), "pld")
    print(f"dp-accounting PLD, same composition: {time.perf_counter() - start:.2f} s")

    print("\nchecks:", "all passed" if not failures else f"{len(failures)} failed")
    for f in failures:
        print("  FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
