"""The noisy record count with which the trees' defaults pick their rule below epsilon 0.2
(``dpcore.learn._tree_plan``, ``_tree_grid.sized_rules``): its law, the budget split, the rule as
a function of the released count only, reproducibility, the forest's consistency."""
from fractions import Fraction

import numpy as np
import pytest

pytest.importorskip("sklearn")

import dpcore  # noqa: E402
from _gof import ALPHA, dlap_pmf, integer_pvalue  # noqa: E402
from dpcore.learn import _tree  # noqa: E402
from dpcore.learn._tree import DecisionTreeClassifier, RandomForestClassifier  # noqa: E402
from dpcore.learn._tree_grid import (  # noqa: E402
    COUNT_SHARE,
    SMALL_EPSILON,
    SMALL_NARROW,
    SMALL_TABLE,
    SMALL_TABLE_RULE,
    counted_defaults,
    rule_for_count,
    sized_rules,
    tree_defaults,
)
from dpcore.learn._tree_plan import count_budget, noisy_record_count, sized_plans  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore::dpcore.accounting.PrivacyWarning"),
              pytest.mark.filterwarnings("ignore::dpcore.learn._tree.SingleLeafWarning")]


def _table(n, d=2, seed=0):
    rng = np.random.default_rng(seed)  # insecure-ok: test data
    X = rng.uniform(0, 1, (n, d))
    return X, (X[:, 0] > 0.5).astype(int)


def test_noisy_count_law():
    # the released count minus the number of records, over 2500 fits, against the exact
    # discrete Laplace law of scale 1 / (COUNT_SHARE epsilon) rounded up (chi-square, alpha =
    # ALPHA); power: the laws of a scale 1.3 times as large or as small are rejected
    X, y = _table(60)
    eps = 0.19
    scale, _ = count_budget(eps)
    assert scale == pytest.approx(1 / (eps * COUNT_SHARE)) and scale >= 1 / (eps * COUNT_SHARE)
    gen = np.random.default_rng(31)  # insecure-ok: test seeds
    noise = np.array([DecisionTreeClassifier(epsilon=eps, bounds=(0, 1), classes=[0, 1],
                                             n_bins=4, random_state=gen)
                      .fit(X, y).n_records_noisy_ - 60 for _ in range(2500)])
    support = np.arange(-1200, 1201)
    assert integer_pvalue(noise, dlap_pmf(scale), support) > ALPHA
    assert integer_pvalue(noise, dlap_pmf(1.3 * scale), support) < ALPHA   # power
    assert integer_pvalue(noise, dlap_pmf(scale / 1.3), support) < ALPHA


def test_noisy_record_count_adds_one_discrete_laplace_draw():
    a = noisy_record_count(100, 3.0, np.random.default_rng(5))  # insecure-ok: test seeds
    b = dpcore.discrete_laplace(3.0, random_state=np.random.default_rng(5))  # insecure-ok
    assert a == 100 + int(b)


@pytest.mark.parametrize("eps", [1e-6, 0.01, 0.1, 0.15, 0.19999])
def test_budget_split_sums_to_epsilon(eps):
    scale, rest = count_budget(eps)
    count_eps = 1 / Fraction(scale)
    assert count_eps <= Fraction(eps) * Fraction(COUNT_SHARE)
    assert count_eps + Fraction(rest) <= Fraction(eps)
    assert count_eps + Fraction(rest) >= Fraction(eps) * (1 - Fraction(1, 10**12))
    # each plan: the count, the levels that look at the data and the leaves within epsilon
    X, _ = _table(10, d=3)
    scale2, rules, plans = sized_plans(eps, (np.zeros(3), np.ones(3)), np.arange(3), 32,
                                       "max", 3)
    assert scale2 == scale and set(plans) == set(rules)
    for (depth, share, levels), (p_depth, bins, mechs, leaf_eps) in (
            ((r[0], r[2], r[3]), plans[r]) for r in rules):
        assert p_depth == depth and bins == 32
        looks = [m for m in mechs if m is not None]
        assert len(looks) == min(depth, levels)
        total = count_eps + sum(Fraction(m.epsilon_effective) for m in looks) + Fraction(
            leaf_eps)
        assert total <= Fraction(eps)
        assert total >= Fraction(eps) * (1 - Fraction(1, 10**9))
        split = sum(Fraction(m.epsilon_effective) for m in looks)
        assert float(split / Fraction(rest)) == pytest.approx(share, rel=1e-9)


def test_sized_rules_read_public_inputs_only():
    assert sized_rules(0.1, 3, 4) == sized_rules(0.19, 2, 19) == sized_rules(0.1, 2) == (
        SMALL_TABLE_RULE, SMALL_NARROW)
    assert SMALL_NARROW == tree_defaults(0.1, 3, 4)
    assert SMALL_TABLE_RULE[1] == SMALL_NARROW[1]   # the same bins: binned before the count
    for eps, k, d in ((SMALL_EPSILON, 2, 4), (0.5, 3, 4), (0.1, 4, 4), (0.1, 10, 64),
                      (0.1, 2, 20)):
        assert sized_rules(eps, k, d) is None
    rules = sized_rules(0.1, 3, 4)
    assert rule_for_count(rules, -5) == rule_for_count(rules, SMALL_TABLE - 1) == rules[0]
    assert rule_for_count(rules, SMALL_TABLE) == rule_for_count(rules, 10**9) == rules[1]
    # a forest of T trees: the count per tree
    assert rule_for_count(rules, 3 * SMALL_TABLE - 1, 3) == rules[0]
    assert rule_for_count(rules, 3 * SMALL_TABLE, 3) == rules[1]
    assert counted_defaults(0.1, 3, 4, 100) == counted_defaults(0.1, 2, None, -40) == rules[0]
    assert counted_defaults(0.1, 3, 4, 5000) == counted_defaults(0.1, 3, 4, 5000, 2) == rules[1]
    assert counted_defaults(0.1, 3, 4, 5000, 3) == rules[0]
    assert counted_defaults(0.5, 3, 4, 100) == tree_defaults(0.5, 3, 4)


@pytest.mark.parametrize("cls", [DecisionTreeClassifier, RandomForestClassifier])
def test_rule_is_a_function_of_the_noisy_count_only(cls, monkeypatch):
    # the count is replaced by a fixed release: the plan the trees grow with (the levels that
    # look at the data, the leaves' epsilon) and the resolved parameters then follow it,
    # whatever the data (few or many records, any labels)
    used = []
    grow = _tree.grow_trees

    def spy(counts, roots, grid, k, depth, bins, mechs, leaf_eps, criterion, rng):
        used.append((depth, tuple(m is not None for m in mechs), leaf_eps))
        return grow(counts, roots, grid, k, depth, bins, mechs, leaf_eps, criterion, rng)

    monkeypatch.setattr(_tree, "grow_trees", spy)
    eps = 0.1
    _, rules, plans = sized_plans(eps, (np.zeros(2), np.ones(2)), np.arange(2), 32, "max", 2)
    for count, rule in ((SMALL_TABLE - 1, rules[0]), (SMALL_TABLE, rules[1])):
        monkeypatch.setattr(_tree, "noisy_record_count", lambda n, scale, rng, c=count: c)
        for n, seed in ((40, 1), (5000, 2)):
            X, y = _table(n, seed=seed)
            if seed == 2:
                y = 1 - y
            used.clear()
            est = cls(epsilon=eps, bounds=(0, 1), classes=[0, 1], random_state=seed).fit(X, y)
            assert est.n_records_noisy_ == count
            assert (est.max_depth_, est.n_bins_, est.split_share_, est.split_levels_) == rule
            depth, _, mechs, leaf_eps = plans[rule]
            assert used == [(depth, tuple(m is not None for m in mechs), leaf_eps)]


def test_seeded_fits_are_reproducible():
    X, y = _table(150, d=4, seed=3)
    fits = [DecisionTreeClassifier(epsilon=0.1, bounds=(0, 1), classes=[0, 1],
                                   random_state=7).fit(X, y) for _ in range(2)]
    assert fits[0].n_records_noisy_ == fits[1].n_records_noisy_
    assert fits[0].n_records_noisy_ is not None
    for name in ("feature", "threshold", "left", "slot", "values"):
        assert np.array_equal(getattr(fits[0].tree_, name), getattr(fits[1].tree_, name))
    # the default forest (one tree) draws the same count and grows the same tree
    forest = RandomForestClassifier(epsilon=0.1, bounds=(0, 1), classes=[0, 1],
                                    random_state=7).fit(X, y)
    assert forest.n_records_noisy_ == fits[0].n_records_noisy_
    for name in ("feature", "threshold", "left", "slot", "values"):
        assert np.array_equal(getattr(forest.tree_, name), getattr(fits[0].tree_, name))


@pytest.mark.parametrize("kw", [{"epsilon": 0.2}, {"epsilon": 0.1, "max_depth": 4},
                                {"epsilon": 0.1, "split_share": 0.2},
                                {"epsilon": 0.1, "split_levels": 2},
                                {"epsilon": 0.1, "classes": [0, 1, 2, 3]}])
def test_no_count_when_the_rule_does_not_read_it(kw):
    X, y = _table(80, d=3)
    kw = {"bounds": (0, 1), "classes": [0, 1], "random_state": 0, **kw}
    for cls in (DecisionTreeClassifier, RandomForestClassifier):
        est = cls(**kw).fit(X, y)
        assert est.n_records_noisy_ is None
    assert RandomForestClassifier(epsilon=0.1, bounds=(0, 1), classes=[0, 1],
                                  algorithm="random", random_state=0).fit(
        X, y).n_records_noisy_ is None
    # wide tables keep the wide rule, without a count
    Xw, yw = _table(80, d=25)
    assert DecisionTreeClassifier(epsilon=0.1, bounds=(0, 1), classes=[0, 1],
                                  random_state=0).fit(Xw, yw).n_records_noisy_ is None


@pytest.mark.parametrize("cls", [DecisionTreeClassifier, RandomForestClassifier])
def test_charged_epsilon_once_and_errors_before_the_charge(cls):
    X, y = _table(120, d=3)
    acc = dpcore.Accountant(1.0)
    cls(epsilon=0.1, bounds=(0, 1), classes=[0, 1], accountant=acc, random_state=0).fit(X, y)
    assert acc.spent[0] == pytest.approx(0.1) and len(acc.history) == 1
    acc = dpcore.Accountant(1.0)
    # a count scale above 2**44: refused before anything is charged
    with pytest.raises(ValueError, match="epsilon"):
        cls(epsilon=1e-13, bounds=(0, 1), classes=[0, 1], accountant=acc,
            random_state=0).fit(X, y)
    assert len(acc.history) == 0


@pytest.mark.parametrize("cls, kw", [(DecisionTreeClassifier, {}),
                                     (RandomForestClassifier, {}),
                                     (RandomForestClassifier, {"n_estimators": 3})])
def test_dask_fit_draws_the_same_count_and_trees(cls, kw):
    da = pytest.importorskip("dask.array")
    X, y = _table(900, d=4, seed=8)
    ref = cls(epsilon=0.1, bounds=(0, 1), classes=[0, 1], random_state=3, **kw).fit(X, y)
    est = cls(epsilon=0.1, bounds=(0, 1), classes=[0, 1], random_state=3, **kw).fit(
        da.from_array(X, chunks=(250, 2)), da.from_array(y, chunks=300))
    assert est.n_records_noisy_ == ref.n_records_noisy_ is not None
    assert est.split_levels_ == ref.split_levels_
    for name in ("feature", "threshold", "left", "slot", "values"):
        assert np.array_equal(getattr(est.tree_, name), getattr(ref.tree_, name))
