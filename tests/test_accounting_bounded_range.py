"""The default ("zcdp") accountant counts bounded-range charges at epsilon**2 / 8.

A pure charge that carries a :class:`dpcore.curves.BoundedRange` curve (the exponential
mechanism, top-k) is counted in the zCDP analyses at rho = epsilon**2 / 8 (Cesar-Rogers) instead
of epsilon**2 / 2; everything else is unchanged. Checked with exact numbers (the same rational
sums and conversion the accountant documents), against the rdp/pld accountants, against the
exact privacy of the worst two-candidate exponential mechanisms composed (a lower bound no valid
accountant may go below), in parallel blocks, charge_repeated, refusals and the report.
"""
import math
from fractions import Fraction

import numpy as np
import pytest

import dpcore
from dpcore import calibration, selection
from dpcore._floats import round_down, round_up
from dpcore._release.sums import split_budget
from dpcore.curves import (ApproxDP, BoundedRange, Composed, Gaussian, Laplace, PureDP, Repeated,
                           ZCDP)

EPS = 0.1
DELTA = 1e-6
K = 200


def _em(epsilon=EPS):
    return selection.ExponentialMechanism.calibrate(sensitivity=1.0, epsilon=epsilon)


def _br_rho(epsilon=EPS):
    """One bounded-range release's rho as the curve states it: epsilon**2 / 8 rounded up."""
    return Fraction(round_up(Fraction(epsilon) ** 2 / 8))


def _pure_rho(epsilon=EPS):
    return Fraction(round_up(Fraction(epsilon) ** 2 / 2))


def _converted(rho, delta=DELTA, plus=Fraction(0)):
    """What the zcdp analysis reports for zCDP total ``rho`` beside summed epsilon ``plus``."""
    return round_up(plus + Fraction(calibration.zcdp_epsilon(round_up(rho), delta)))


def _selections(method, k=K, with_curve=True, budget=100.0):
    acc = dpcore.Accountant(budget, DELTA, method=method)
    mech = _em()
    for _ in range(k):
        if with_curve:
            mech.release(np.arange(4.0), accountant=acc, random_state=0)
        else:
            acc.charge(epsilon=mech.epsilon_effective)
    return acc


def test_the_exponential_mechanism_states_its_curve_and_the_charge_carries_its_rho():
    mech = _em()
    assert mech.epsilon_effective == EPS and mech.curve == BoundedRange(EPS)
    acc = dpcore.Accountant(1.0, DELTA)
    mech.release(np.arange(4.0), accountant=acc, random_state=0)
    entry = acc.history[0]
    assert entry.curve == BoundedRange(EPS) and entry.rho_from_curve
    assert Fraction(entry.rho_implied) == _br_rho()
    assert entry.rho_implied == pytest.approx(EPS**2 / 8, rel=1e-15)


def test_200_selections_before_and_after_with_exact_numbers():
    before = _selections("zcdp", with_curve=False)
    after = _selections("zcdp")
    # before: 200 pure charges at eps**2/2, rho = 1.0 (up to the double rounding)
    assert before.spent == (_converted(K * _pure_rho()), DELTA)
    assert before.report()["analysis"] == "pure-as-zcdp"
    assert before.report()["rho_from_curves"] == 0
    # after: at eps**2/8, rho = 0.25: the tight conversion of rho = 200 * 0.1**2 / 8
    assert after.spent == (_converted(K * _br_rho()), DELTA)
    report = after.report()
    assert report["analysis"] == "pure-as-zcdp" and report["rho_from_curves"] == K
    assert report["rho"] == round_up(K * _br_rho())
    assert report["history"][0]["rho_from_curve"] is True
    # the numbers (documented in the user guide): 7.766 before, 3.542 after
    assert before.spent[0] == pytest.approx(7.76622, abs=1e-5)
    assert after.spent[0] == pytest.approx(3.54229, abs=1e-5)
    assert after.spent[0] == pytest.approx(
        calibration.zcdp_epsilon(K * EPS**2 / 8, DELTA), rel=1e-12)


def _repeated(method, curve):
    """200 selections charged at once (test_charge_repeated_...: the same as one by one)."""
    acc = dpcore.Accountant(100.0, DELTA, method=method)
    acc.charge_repeated(EPS, k=K, curve=curve)
    return acc.spent[0]


@pytest.mark.parametrize("method", ["rdp", "pld"])
def test_the_tight_accountants_are_at_most_a_little_better(method):
    zcdp = _selections("zcdp").spent[0]
    tight = _repeated(method, BoundedRange(EPS))
    # they run the zcdp analysis too (so never worse); the exact BR RDP is slightly tighter
    assert tight <= zcdp <= 1.01 * tight
    assert _repeated(method, None) > 2 * tight  # 7.64 (rdp), 7.19 (pld) as pure charges


def _two_point_exact_epsilon(q, epsilon, k, delta):
    """The exact epsilon at ``delta`` (both directions) of k compositions of the pair
    P = (p, 1 - p), Q = (q, 1 - q) whose log odds differ by ``epsilon``: a two-candidate
    exponential mechanism on two neighbours (its odds move by at most e**epsilon)."""
    p = math.exp(epsilon) * q / (1 - q + math.exp(epsilon) * q)
    j = np.arange(k + 1)
    log_binom = np.array([math.lgamma(k + 1) - math.lgamma(i + 1) - math.lgamma(k - i + 1)
                          for i in j])
    log_p = log_binom + j * math.log(p) + (k - j) * math.log1p(-p)
    log_q = log_binom + j * math.log(q) + (k - j) * math.log1p(-q)

    def delta_at(e, a, b):
        loss = a - b
        big = loss > e
        return float(np.sum(np.exp(a[big]) * -np.expm1(e - loss[big])))

    worst = 0.0
    for a, b in ((log_p, log_q), (log_q, log_p)):
        lo, hi = 0.0, 50.0
        for _ in range(80):
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if delta_at(mid, a, b) <= delta else (mid, hi)
        worst = max(worst, hi)
    return worst


def test_never_below_the_exact_privacy_of_two_candidate_exponential_mechanisms():
    # a lower bound on what any valid accountant must report for 200 selections at 0.1
    exact = max(_two_point_exact_epsilon(q, EPS, K, DELTA) for q in np.linspace(0.02, 0.98, 49))
    reported = _selections("zcdp").spent[0]
    assert exact <= reported <= 1.1 * exact  # 3.30 <= 3.54: eps**2/8 is nearly tight here
    assert exact > 3.2  # the brute force found the hard pairs (p near 1/2)


def test_a_plain_pure_charge_without_a_curve_is_unchanged():
    acc = dpcore.Accountant(1.0, DELTA)
    entry = acc.charge(epsilon=EPS)
    assert Fraction(entry.rho_implied) == _pure_rho() and not entry.rho_from_curve
    # a pure curve with no tighter zCDP bound changes nothing either
    entry = acc.charge(epsilon=0.5, curve=Laplace(2.0))
    assert entry.rho_implied == round_up(Fraction(0.5) ** 2 / 2) and not entry.rho_from_curve
    # permute-and-flip is not bounded-range: no curve, eps**2/2
    acc = dpcore.Accountant(1.0, DELTA)
    dpcore.selection.permute_and_flip(np.arange(4.0), sensitivity=1.0, epsilon=EPS,
                                      random_state=0, accountant=acc)
    assert acc.history[0].curve is None and Fraction(acc.history[0].rho_implied) == _pure_rho()


def test_a_pure_budget_is_unchanged():
    # no delta budget: no conversion, the selections sum as epsilon
    acc = dpcore.Accountant(30.0)
    for _ in range(K):
        _em().release(np.arange(4.0), accountant=acc, random_state=0)
    assert acc.spent == (round_up(K * Fraction(EPS)), 0.0)
    assert acc.report()["analysis"] == "basic" and acc.report()["rho_from_curves"] == 0


def test_mixing_with_plain_pure_charges_they_stay_at_a_half():
    acc = _selections("zcdp")
    for _ in range(100):
        acc.charge(epsilon=EPS)
    # pure-as-zcdp: rho = 200 eps**2/8 + 100 eps**2/2 = 0.75
    assert acc.spent[0] == _converted(K * _br_rho() + 100 * _pure_rho())
    assert acc.report()["analysis"] == "pure-as-zcdp"
    assert acc.report()["rho_from_curves"] == K


def test_a_large_plain_charge_is_summed_beside_the_selections():
    acc = _selections("zcdp")
    acc.charge(epsilon=2.0, label="one large Laplace release")
    # moving it into zCDP would cost rho 2.0: it is summed, the selections converted
    curves_only = _converted(K * _br_rho(), plus=Fraction(2.0))
    all_moved = _converted(K * _br_rho() + Fraction(2.0))
    basic = round_up(K * Fraction(EPS) + 2)
    assert acc.spent[0] == curves_only == min(curves_only, all_moved, basic)
    assert curves_only < all_moved
    assert acc.report()["analysis"] == "curves-as-zcdp"


def test_top_k_counts_k_bounded_range_rounds():
    acc = dpcore.Accountant(10.0, DELTA)
    picks = dpcore.top_k(np.arange(20.0), 5, sensitivity=1.0, epsilon=0.5, random_state=0,
                         accountant=acc)
    assert picks.shape == (5,)
    entry = acc.history[0]
    per_round = selection.ExponentialMechanism.calibrate(
        sensitivity=1.0, epsilon=0.5, k=5, method="gumbel").curve.curve
    assert entry.curve == Repeated(per_round, 5) and entry.rho_from_curve
    assert entry.rho_implied == round_up(5 * Fraction(round_up(
        Fraction(per_round.epsilon) ** 2 / 8)))
    # a fifth of a round's eps: 5 (0.1)**2/8 = 0.00625 against 0.5**2/2 = 0.125
    assert entry.rho_implied == pytest.approx(0.00625, rel=1e-12)


def test_repeated_curves_count_each_release():
    assert Repeated(BoundedRange(EPS), K).implied_rho() == round_up(K * _br_rho())
    # a pure base counts eps**2/2 per release, not (k eps)**2/2
    assert Repeated(PureDP(EPS), K).implied_rho() == round_up(K * _pure_rho())
    assert Repeated(Laplace(10.0), 3).implied_rho() == round_up(3 * _pure_rho())
    assert PureDP(EPS).implied_rho() is None and Laplace(1.0).implied_rho() is None
    assert BoundedRange(EPS).implied_rho() == BoundedRange(EPS).rho == float(_br_rho())


def test_charge_repeated_with_the_curve_of_one_release():
    one_by_one = _selections("zcdp")
    acc = dpcore.Accountant(100.0, DELTA)
    entry = acc.charge_repeated(EPS, k=K, curve=BoundedRange(EPS), label="200 selections")
    assert entry.rho_from_curve and entry.curve == Repeated(BoundedRange(EPS), K)
    assert Fraction(entry.rho_implied) == Fraction(round_up(K * _br_rho()))
    assert acc.spent == one_by_one.spent
    # without the curve: eps**2/2 per release, as before
    plain = dpcore.Accountant(100.0, DELTA)
    entry = plain.charge_repeated(EPS, k=K)
    assert not entry.rho_from_curve and entry.curve is None
    assert plain.spent == _selections("zcdp", with_curve=False).spent
    # the rdp accountant composes curve.repeat(k)
    rdp = dpcore.Accountant(100.0, DELTA, method="rdp")
    rdp.charge_repeated(EPS, k=K, curve=BoundedRange(EPS))
    assert rdp.spent[0] == pytest.approx(_selections("rdp").spent[0], rel=1e-9)
    with pytest.raises(TypeError, match="curve"):
        acc.charge_repeated(EPS, k=2, curve="BoundedRange")
    # an approximate-DP charge is not moved, whatever its curve
    entry = dpcore.Accountant(100.0, DELTA).charge_repeated(
        EPS, 1e-9, k=3, curve=BoundedRange(EPS))
    assert entry.rho_implied is None and not entry.rho_from_curve


def test_parallel_blocks_take_the_largest_partition_of_summed_bounds():
    acc = dpcore.Accountant(10.0, DELTA)
    mech = _em()
    with acc.parallel(label="per sector") as block:
        with block.partition(label="a") as a:  # 10 selections
            for _ in range(10):
                mech.release(np.arange(4.0), accountant=a, random_state=0)
        with block.partition(label="b") as b:  # 5 plain pure charges
            for _ in range(5):
                b.charge(epsilon=EPS)
        with block.partition(label="c") as c:  # 2 selections and a plain charge
            for _ in range(2):
                mech.release(np.arange(4.0), accountant=c, random_state=0)
            c.charge(epsilon=EPS)
    assert Fraction(a.total.rho_implied) == Fraction(round_up(10 * _br_rho()))
    assert a.total.rho_from_curve and not b.total.rho_from_curve and c.total.rho_from_curve
    assert Fraction(c.total.rho_implied) == Fraction(round_up(
        2 * _br_rho() + Fraction(EPS) ** 2 / 2))
    entry = acc.history[-1]
    # max(10 eps**2/8, 5 eps**2/2, 2 eps**2/8 + eps**2/2) = 5 eps**2/2 (b), epsilon max = 1.0 (a)
    assert Fraction(entry.rho_implied) == Fraction(round_up(5 * Fraction(EPS) ** 2 / 2))
    assert entry.epsilon == round_up(10 * Fraction(EPS)) and entry.rho_from_curve


def test_many_parallel_blocks_of_selections_compose_at_a_quarter():
    acc = dpcore.Accountant(100.0, DELTA)
    plain = dpcore.Accountant(100.0, DELTA)
    mech = _em()
    for _ in range(40):
        with acc.parallel() as block:
            for _ in range(5):
                mech.release(np.arange(4.0), accountant=block, random_state=0)
        with plain.parallel() as block:
            for _ in range(5):
                block.charge(epsilon=mech.epsilon_effective)
    assert acc.spent[0] == _converted(40 * _br_rho())
    assert plain.spent[0] == _converted(40 * _pure_rho())
    assert acc.report()["rho_from_curves"] == 40


def _state(acc):
    return acc.spent, acc.remaining, acc.history, acc.report()


def test_refusal_is_atomic_and_the_bound_admits_more_selections():
    # a budget of 4.0: the 200 selections fit at eps**2/8 (3.54), not at eps**2/2 (7.77)
    acc = _selections("zcdp", budget=4.0)
    assert len(acc.history) == K
    with pytest.raises(dpcore.BudgetExceeded):
        _selections("zcdp", with_curve=False, budget=4.0)
    # go on until refused: nothing recorded, the selection not drawn
    mech = _em()
    while True:
        before = _state(acc)
        try:
            mech.release(np.arange(4.0), accountant=acc, random_state=0)
        except dpcore.BudgetExceeded as exc:
            assert exc.charge.rho_from_curve
            break
    assert _state(acc) == before
    assert acc.spent[0] <= 4.0
    n = len(acc.history)
    assert Fraction(acc.report()["rho"]) == Fraction(round_up(n * _br_rho()))
    # one more selection would have been over: the conversion of (n + 1) eps**2/8 exceeds 4
    assert _converted((n + 1) * _br_rho()) > 4.0 >= _converted(n * _br_rho())


def test_refusal_in_a_partition_is_atomic():
    acc = dpcore.Accountant(1.0, DELTA)
    mech = _em(0.5)
    with acc.parallel() as block:
        part = block.partition()
        mech.release(np.arange(4.0), accountant=part, random_state=0)
        mech.release(np.arange(4.0), accountant=part, random_state=0)
        before = (_state(acc), part.total, block.entry)
        with pytest.raises(dpcore.BudgetExceeded):
            # three selections at 0.5 on one partition: basic 1.5, zCDP rho 3/32 -> 2.0
            mech.release(np.arange(4.0), accountant=part, random_state=0)
        assert (_state(acc), part.total, block.entry) == before


# ---------------------------------------------------------------------------------------------
# releases built on the exponential mechanism pass their bounded-range curve along

def _charged(release):
    acc = dpcore.Accountant(100.0, DELTA)
    release(acc)
    (entry,) = acc.history
    return entry


def _data():
    rng = np.random.default_rng(0)  # insecure-ok: example data
    y = rng.integers(0, 2, 400)
    X = rng.integers(0, 3, (400, 6)).astype(float)
    X[:, 2] = np.where(rng.random(400) < 0.9, y, 2)
    return X, y


def test_feature_selection_charges_k_bounded_range_rounds():
    X, y = _data()
    for method in ("exact", "gumbel"):
        est = dpcore.learn.SelectKBest(k=3, epsilon=0.6, bounds=(-0.5, 2.5), classes=[0, 1],
                                       n_bins=3, method=method, random_state=0)
        entry = _charged(lambda acc: est.set_params(accountant=acc).fit(X, y))
        assert isinstance(entry.curve, Repeated) and entry.curve.count == 3
        assert entry.curve.curve.epsilon <= 0.2 and entry.rho_from_curve
        assert entry.rho_implied == pytest.approx(3 * 0.2**2 / 8, rel=1e-12)
        assert est._cost().curve == entry.curve  # the cost known before the data says the same
    kd = dpcore.learn.PrivateKD(k=2, epsilon=1.0, bounds=(-0.5, 2.5), classes=[0, 1], n_bins=3,
                                random_state=0)
    entry = _charged(lambda acc: kd.set_params(accountant=acc).fit(X, y))
    assert entry.curve == Repeated(BoundedRange(split_budget(1.0, 2)), 2) == kd._cost().curve
    assert entry.rho_implied == pytest.approx(2 * 0.5**2 / 8, rel=1e-12)


def test_quantiles_charge_their_rounds_but_not_permute_and_flip():
    x = np.random.default_rng(1).uniform(0, 10, 500)  # insecure-ok: example data
    levels = [0.1, 0.25, 0.5, 0.75, 0.9]
    equal = _charged(lambda acc: dpcore.stats.quantile(
        x, levels, epsilon=1.0, bounds=(0, 10), split="equal", random_state=0, accountant=acc))
    assert equal.curve == Repeated(BoundedRange(split_budget(1.0, 5)), 5)
    assert equal.rho_from_curve and split_budget(1.0, 5) <= 0.2
    # recursive: 3 rounds of epsilon/3, each one bounded-range mechanism (disjoint nodes)
    tree = _charged(lambda acc: dpcore.stats.quantile(
        x, levels, epsilon=1.0, bounds=(0, 10), split="recursive", random_state=0,
        accountant=acc))
    assert tree.curve == Repeated(BoundedRange(split_budget(1.0, 3)), 3)
    continuous = _charged(lambda acc: dpcore.stats.median(
        x, epsilon=1.0, bounds=(0, 10), grid="continuous", random_state=0, accountant=acc))
    assert continuous.curve == Repeated(BoundedRange(1.0), 1)
    flip = _charged(lambda acc: dpcore.stats.median(
        x, epsilon=1.0, bounds=(0, 10), grid=101, method="permute-and-flip", random_state=0,
        accountant=acc))
    assert flip.curve is None and not flip.rho_from_curve
    # the release is the same with or without the curve: it is accounting only
    assert dpcore.stats.quantile(x, levels, epsilon=1.0, bounds=(0, 10), split="equal",
                                 random_state=0) == pytest.approx(dpcore.stats.quantile(
                                     x, levels, epsilon=1.0, bounds=(0, 10), split="equal",
                                     random_state=0, accountant=dpcore.Accountant(5.0)))


def test_the_ladder_counts_charge_the_exponential_mechanism_curve():
    ring = np.array([[i, (i + d) % 60] for i in range(60) for d in (1, 2)])
    from dpcore.graph_stats import kstar_count, triangle_count
    for count in (triangle_count, lambda g, **kw: kstar_count(g, k=2, **kw)):
        entry = _charged(lambda acc: count(ring, n_nodes=60, epsilon=0.5, random_state=0,
                                           accountant=acc))
        assert entry.curve == BoundedRange(entry.epsilon) and entry.rho_from_curve
    smooth = _charged(lambda acc: triangle_count(ring, n_nodes=60, epsilon=0.5, delta=1e-7,
                                                 random_state=0, accountant=acc))
    assert smooth.curve is None and smooth.rho_implied is None


# ---------------------------------------------------------------------------------------------
# Composed: different releases in one charge (a tree's splits and leaves, MWEM, sample-aggregate)

def test_composed_curve_sums_its_parts():
    parts = (BoundedRange(0.25).repeat(3), PureDP(0.5), Laplace(4.0))
    curve = Composed(parts)
    orders = np.array([1.5, 2.0, 8.0, 64.0])
    assert np.all(curve.rdp(orders) >= sum(p.rdp(orders) for p in parts))
    assert np.allclose(curve.rdp(orders), sum(p.rdp(orders) for p in parts), rtol=1e-14)
    pld = parts[0].pld(1e-3).compose(parts[1].pld(1e-3)).compose(parts[2].pld(1e-3))
    assert curve.pld(1e-3).epsilon(DELTA) == pld.epsilon(DELTA)
    assert curve.fallback() == {"epsilon": 1.5, "delta": 0.0}
    assert curve.implied_rho() == round_up(
        3 * Fraction(round_up(Fraction(0.25) ** 2 / 8)) + Fraction(0.5) ** 2 / 2
        + Fraction(0.25) ** 2 / 2)
    assert Composed((ZCDP(0.1), Gaussian(2.0))).fallback() == {"rho": 0.225}
    assert Composed((ZCDP(0.1), PureDP(1.0))).fallback() is None  # mixed kinds
    assert Composed((ApproxDP(1.0, 1e-7), PureDP(1.0))).implied_rho() is None
    assert Composed((ApproxDP(1.0, 1e-7), ApproxDP(0.5, 1e-7))).fallback()["delta"] >= 2e-7
    assert Composed((PureDP(1.0, relation="add/remove"), PureDP(1.0))).relation == "add/remove"
    with pytest.raises(ValueError, match="relation"):
        Composed((PureDP(1.0, relation="add/remove"), PureDP(1.0, relation="substitution")))
    with pytest.raises(TypeError, match="PrivacyCurve"):
        Composed((PureDP(1.0), 1.0))
    with pytest.raises(ValueError, match="at least one"):
        Composed(())


def test_composed_charges_count_the_sum_of_their_parts():
    curve = Composed((BoundedRange(0.1).repeat(10), PureDP(0.5)))
    for method in ("zcdp", "rdp", "pld"):
        acc = dpcore.Accountant(10.0, DELTA, method=method)
        entry = acc.charge(epsilon=1.5, curve=curve)
        assert entry.rho_implied == curve.implied_rho() and entry.rho_from_curve
        assert math.isfinite(acc.spent[0]) and acc.spent[0] <= 1.5


def _tree_data():
    rng = np.random.default_rng(2)  # insecure-ok: example data
    X = rng.uniform(0, 1, (600, 3))
    return X, (X[:, 1] > 0.5).astype(int)


def test_trees_charge_their_split_levels_as_bounded_range_and_the_leaves_as_pure():
    X, y = _tree_data()
    tree = dpcore.learn.DecisionTreeClassifier(epsilon=1.0, bounds=(0, 1), classes=[0, 1],
                                               max_depth=4, split_share=0.5, split_levels=4,
                                               random_state=0)
    entry = _charged(lambda acc: tree.set_params(accountant=acc).fit(X, y))
    splits, leaves = entry.curve.parts
    assert isinstance(splits, Repeated) and splits.count == 4
    assert splits.curve.epsilon <= 0.125 and isinstance(leaves, PureDP)
    assert splits.count * splits.curve.epsilon + leaves.epsilon <= 1.0
    assert entry.rho_implied == entry.curve.implied_rho() < 0.14  # 4 (1/8)**2/8 + 0.5**2/2
    # accounting only: the same tree with or without the accountant
    alone = dpcore.learn.DecisionTreeClassifier(epsilon=1.0, bounds=(0, 1), classes=[0, 1],
                                                max_depth=4, split_share=0.5, split_levels=4,
                                                random_state=0).fit(X, y)
    assert np.array_equal(alone.predict(X), tree.predict(X))
    # random splits: the leaves only
    flat = dpcore.learn.DecisionTreeClassifier(epsilon=1.0, bounds=(0, 1), classes=[0, 1],
                                               max_depth=3, split_share=0.0, random_state=0)
    assert _charged(lambda acc: flat.set_params(accountant=acc).fit(X, y)).curve == PureDP(1.0)


def test_mwem_and_sample_aggregate_charge_their_selections_as_bounded_range():
    x = np.random.default_rng(3).normal(0.5, 0.1, 500)  # insecure-ok: example data
    lo, hi = np.triu_indices(9, 1)
    entry = _charged(lambda acc: dpcore.publish.mwem(
        x, bins=8, range=(0, 1), queries=(lo, hi), epsilon=1.0, rounds=5, random_state=0,
        accountant=acc))
    selections, counts = entry.curve.parts
    assert selections.count == 5 and counts == PureDP(round_down(Fraction(1, 11))).repeat(6)
    assert selections.curve.epsilon <= 1 / 11
    entry = _charged(lambda acc: dpcore.robust.sample_aggregate(
        x, np.mean, n_blocks=50, output_range=(0.0, 1.0), epsilon=1.0, random_state=0,
        accountant=acc))
    assert entry.curve == Composed((BoundedRange(0.25).repeat(2), PureDP(0.5).repeat(1)))
    assert entry.rho_implied == pytest.approx(2 * 0.25**2 / 8 + 0.5**2 / 2, rel=1e-12)


def test_grid_search_partitions_carry_the_curves():
    X, y = _tree_data()
    acc = dpcore.Accountant(10.0, DELTA)
    tree = dpcore.learn.DecisionTreeClassifier(bounds=(0, 1), classes=[0, 1], max_depth=3,
                                               split_share=0.5, split_levels=3)
    search = dpcore.learn.PrivateGridSearch(tree, {"split_share": [0.25, 0.5]}, epsilon=1.0,
                                            classes=[0, 1], random_state=0, accountant=acc)
    search.fit(X, y)
    block = acc.history[0]
    assert block.kind == "parallel" and block.count == 3 and block.epsilon == 1.0
    # the trees' costs before the fit carry no curve (their defaults may depend on the data's
    # shape): eps**2/2 = 0.5 is the largest partition; the selection's curve is counted
    assert block.rho_implied == 0.5 and block.rho_from_curve
    # a candidate whose cost states a curve passes it to its partition
    select = dpcore.learn.SelectKBest(k=2, epsilon=0.5, bounds=(0, 1), classes=[0, 1])
    (charge,), = dpcore.learn.PrivateGridSearch._costs([select])
    assert charge["curve"] == select.cost.curve == Repeated(BoundedRange(0.25), 2)


def test_sequential_plans_keep_the_selections_curve():
    from dpcore import plans
    from dpcore.mechanisms import LaplaceMechanism
    em = _em()
    count = LaplaceMechanism.calibrate(sensitivity=1.0, epsilon=0.5)
    both = plans.sequential(em, em, count)
    assert both.cost.epsilon == round_up(2 * Fraction(EPS) + Fraction(0.5))
    assert both.cost.curve == Composed((em.curve, em.curve, count.cost.curve or PureDP(0.5)))
    acc = dpcore.Accountant(10.0, DELTA)
    both.release((np.arange(4.0), np.arange(4.0), 3.0), accountant=acc, random_state=0)
    entry = acc.history[0]
    assert entry.rho_from_curve
    assert entry.rho_implied == both.cost.curve.implied_rho() < round_up(
        Fraction(both.cost.epsilon) ** 2 / 2)
    # no curve anywhere: none on the total either
    assert plans.total_cost([dpcore._release.Cost(0.5), dpcore._release.Cost(0.25)]).curve is None
