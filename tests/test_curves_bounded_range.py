"""The bounded-range curve of the exponential mechanism (dpcore.curves.BoundedRange).

- sound: never below the exact Rényi divergences of exponential mechanisms (one selection,
  monotone utilities, top-k peeling) on every neighbouring pair of small brute-forced cases, in
  60-digit arithmetic;
- tight: two-candidate pairs come within 1e-6 of it (it is the supremum, not a loose bound);
- never above pure epsilon-DP's RDP nor a epsilon**2 / 8 (Cesar-Rogers);
- the accountants: many exponential mechanisms compose tighter than the same pure charges under
  method="rdp" and "pld", never looser, and under "zcdp" (at epsilon**2 / 8).
"""
import itertools

import mpmath
import numpy as np
import pytest

import dpcore
from dpcore import selection
from dpcore.curves import BoundedRange, PureDP, Repeated

mpmath.mp.dps = 60
ORDERS = np.array([1.1, 1.5, 2.0, 3.0, 8.0, 32.0, 256.0])


def em_law(scale, utility):
    """P(r) = exp(c u_r) / sum exp(c u_r'), exactly (mpmath, the double scale read exactly)."""
    w = [mpmath.exp(mpmath.mpf(scale) * u) for u in utility]
    total = mpmath.fsum(w)
    return [x / total for x in w]


def peeling_law(scale, utility, k):
    """The law of the ordered top-k of k peeling rounds (one-shot Gumbel top-k's law)."""
    law = {}
    for order in itertools.permutations(range(len(utility)), k):
        p, left = mpmath.mpf(1), list(range(len(utility)))
        for r in order:
            probs = em_law(scale, [utility[j] for j in left])
            p *= probs[left.index(r)]
            left.remove(r)
        law[order] = p
    return [law[key] for key in sorted(law)]


def renyi(p, q, order):
    a = mpmath.mpf(order)
    return mpmath.log(mpmath.fsum(x**a * y**(1 - a) for x, y in zip(p, q))) / (a - 1)


def worst_divergence(law, pairs, orders):
    """The largest D_a over the pairs, both directions, per order."""
    worst = [mpmath.mpf(0)] * len(orders)
    for u, v in pairs:
        p, q = law(u), law(v)
        for i, a in enumerate(orders):
            worst[i] = max(worst[i], renyi(p, q, a), renyi(q, p, a))
    return worst


def neighbours(m, steps, monotone=False):
    """(u, u') with u in {0..2}^m (u_0 = 0: the law is shift invariant) and u' - u in
    {-1, 0, 1}^m (monotone: all >= 0 or all <= 0), sensitivity 1."""
    if monotone:
        moves = [d for d in itertools.product((-1, 0, 1), repeat=m)
                 if min(d) >= 0 or max(d) <= 0]
    else:
        moves = list(itertools.product((-1, 0, 1), repeat=m))
    for rest in itertools.product(range(steps), repeat=m - 1):
        u = (0,) + rest
        for d in moves:
            yield u, tuple(x + y for x, y in zip(u, d))


@pytest.mark.parametrize("epsilon, monotonic", [(0.5, False), (2.0, False), (1.0, True)])
def test_curve_bounds_the_exact_divergences_of_the_exponential_mechanism(epsilon, monotonic):
    mech = selection.ExponentialMechanism.calibrate(sensitivity=1.0, epsilon=epsilon,
                                                    monotonic=monotonic)
    curve = mech.curve
    assert curve == BoundedRange(mech.epsilon_effective)
    worst = worst_divergence(lambda u: em_law(mech.scale, u),
                             neighbours(3, 3, monotone=monotonic), ORDERS)
    bound = curve.rdp(ORDERS)
    for a, exact, b in zip(ORDERS, worst, bound):
        assert exact <= b, (a, exact, b)
    # and the brute force is not vacuous: the worst pair is within 5% of the bound at order 2
    assert worst[2] >= 0.95 * bound[2]


def test_top_k_curve_bounds_the_exact_divergences_of_peeling():
    mech = selection.ExponentialMechanism.calibrate(sensitivity=1.0, epsilon=1.2, k=2,
                                                    method="gumbel")
    assert mech.curve == Repeated(BoundedRange(mech.epsilon_effective / 2), 2)
    worst = worst_divergence(lambda u: peeling_law(mech.scale, u, 2), neighbours(3, 2), ORDERS)
    bound = mech.curve.rdp(ORDERS)
    assert all(exact <= b for exact, b in zip(worst, bound))


@pytest.mark.parametrize("epsilon", [1e-9, 0.01, 0.3, 1.0, 4.0])
def test_curve_is_the_supremum_two_candidate_pairs_attain(epsilon):
    """u = (x, 0) against u' = (x + 1, -1) with c = epsilon / 2: the loss takes two values
    epsilon apart; over x the divergence comes within 1e-6 of the curve (never above it)."""
    scale = mpmath.mpf(epsilon) / 2
    bound = BoundedRange(epsilon).rdp(ORDERS)
    for i, a in enumerate(ORDERS):
        def divergence(x):
            p = em_law(scale, [x, 0])
            q = em_law(scale, [x + 1, -1])
            return max(renyi(p, q, a), renyi(q, p, a))
        lo, hi = mpmath.mpf(-60) / epsilon, mpmath.mpf(60) / epsilon
        for _ in range(120):  # golden-section style search (unimodal in x)
            m1, m2 = lo + (hi - lo) / 3, hi - (hi - lo) / 3
            if divergence(m1) < divergence(m2):
                lo = m1
            else:
                hi = m2
        best = divergence((lo + hi) / 2)
        assert best <= bound[i]
        assert best >= bound[i] * (1 - 1e-6)


@pytest.mark.parametrize("epsilon", [1e-5, 0.1, 1.0, 10.0, 300.0])
def test_curve_is_below_pure_dp_and_the_zcdp_rate(epsilon):
    orders = np.asarray(dpcore.curves.DEFAULT_ORDERS)
    rdp = BoundedRange(epsilon).rdp(orders)
    assert np.all(rdp <= PureDP(epsilon).rdp(orders))
    assert np.all(rdp <= orders * epsilon**2 / 8 * (1 + 1e-12))
    assert np.all(rdp > 0) and np.all(np.diff(rdp) >= 0)  # RDP grows with the order
    assert BoundedRange(epsilon).rho == pytest.approx(epsilon**2 / 8, rel=1e-15)
    assert BoundedRange(epsilon).fallback() == {"epsilon": epsilon, "delta": 0.0}


def test_bad_epsilon_is_refused():
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="epsilon"):
            BoundedRange(bad)
    with pytest.raises(ValueError, match="relation"):
        BoundedRange(1.0, relation="bogus")


def _spent(method, charges, with_curve):
    acc = dpcore.Accountant(1e3, 1e-6, method=method)
    mech = selection.ExponentialMechanism.calibrate(sensitivity=1.0, epsilon=0.1)
    for _ in range(charges):
        if with_curve:
            mech.release(np.arange(4.0), accountant=acc, random_state=0)
        else:
            acc.charge(epsilon=mech.epsilon_effective, label="pure")
    return acc.spent[0]


@pytest.mark.parametrize("method", ["rdp", "pld"])
def test_accountants_compose_exponential_mechanisms_tighter(method):
    plain = _spent(method, 200, with_curve=False)
    tight = _spent(method, 200, with_curve=True)
    assert tight < 0.8 * plain  # eps sqrt(k/2 log 1/delta) against eps sqrt(2 k log 1/delta)
    assert tight <= 200 * 0.1  # never above basic composition
    for few in (1, 3):  # never looser than the pure charges, even for few releases
        assert _spent(method, few, with_curve=True) <= _spent(method, few, with_curve=False)


def test_zcdp_accountant_counts_the_curve_at_a_quarter_of_the_rho():
    # pure-as-zcdp at eps**2/8 instead of eps**2/2 (exact numbers: test_accounting_bounded_range)
    tight, plain = _spent("zcdp", 20, with_curve=True), _spent("zcdp", 20, with_curve=False)
    assert tight < 0.6 * plain
    assert _spent("zcdp", 1, with_curve=True) == _spent("zcdp", 1, with_curve=False) == 0.1
