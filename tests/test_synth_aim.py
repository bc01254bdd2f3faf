"""dpcore.synth.AIM: cost before fit, one charge, the public domain, the law of every noise step
(the measurements and the selection), the caps, and what it learns."""
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from _gof import ALPHA
from test_synth_mst import dgauss_pvalue, dlap_pvalue

import dpcore
from dpcore._release import Cost
from dpcore.synth import AIM, Categorical, Domain, Numeric
from dpcore.synth._aim import ROUND_ITERATIONS, candidate_weights, quality_scores
from dpcore.synth._estimate import Measurement, fit_model
from dpcore.synth._marginals import count_marginals


def small_domain():
    return Domain({"a": Categorical(["x", "y", "z", "w"]), "b": Categorical([0, 1, 2]),
                   "c": Numeric(0.0, 1.0, bins=2, fill=0.5)})


def small_data(n=300, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.choice(["x", "y", "z"], n)  # "w" never occurs
    b = np.where(a == "x", 0, rng.integers(0, 3, n))
    return {"a": a, "b": b, "c": rng.uniform(0, 1, n)}


# -- cost and charging ------------------------------------------------------------------------

def test_cost_is_known_before_fit():
    dom = small_domain()
    assert AIM(rho=0.5, domain=dom).cost == Cost(rho=0.5)
    assert AIM(epsilon=1.0, domain=dom).cost == Cost(1.0)
    assert AIM(epsilon=1.0, delta=1e-6, domain=dom).cost == Cost(1.0, 1e-6)


@pytest.mark.parametrize("kwargs", [dict(rho=0.5), dict(epsilon=1.0),
                                    dict(epsilon=1.0, delta=1e-6)])
def test_fit_charges_once_equal_to_cost(kwargs):
    acc = dpcore.Accountant(10.0, 1e-3)
    aim = AIM(domain=small_domain(), random_state=0, accountant=acc, **kwargs)
    cost = aim.cost
    aim.fit(small_data())
    assert len(acc.history) == 1
    entry = acc.history[0]
    assert (entry.epsilon, entry.delta if entry.rho is None else 0.0, entry.rho) == (
        cost.epsilon, cost.delta, cost.rho)
    aim.sample(50, output="codes")
    aim.sample(50, random_state=3, output="codes")
    assert len(acc.history) == 1
    # the rounds' guarantees add up (exactly) to at most the total, and use all of it
    total = aim.plan_.budget.total
    assert aim.budget_spent_ <= total and aim.budget_spent_ == pytest.approx(total, rel=1e-9)


@pytest.mark.parametrize("bad, error", [
    (dict(domain=None), ValueError), (dict(domain={"a": 1}), TypeError),
    (dict(rho=None), ValueError), (dict(rho=-1.0), ValueError), (dict(rho=1e-40), ValueError),
    (dict(rounds=2), ValueError), (dict(rounds=4.5), TypeError), (dict(degree=0), ValueError),
    (dict(max_cells=0), ValueError), (dict(max_cells=5), ValueError),
    (dict(max_model_size=0.0), ValueError), (dict(max_time=-1.0), ValueError),
    (dict(workload=[("a", "nope")]), ValueError), (dict(workload="ab"), TypeError),
    (dict(random_state="seed"), TypeError), (dict(delta=1e-6), ValueError)])
def test_bad_arguments_charge_nothing(bad, error):
    acc = dpcore.Accountant(10.0, 1e-3)
    kwargs = dict(rho=0.5, domain=small_domain(), random_state=0, accountant=acc)
    kwargs.update(bad)
    with pytest.raises(error):
        AIM(**kwargs).fit(small_data())
    assert acc.history == []


def test_missing_column_charges_nothing():
    acc = dpcore.Accountant(10.0, 1e-3)
    data = small_data()
    del data["b"]
    with pytest.raises(ValueError, match="'b'"):
        AIM(rho=0.5, domain=small_domain(), accountant=acc).fit(data)
    assert acc.history == []


# -- the domain is public ---------------------------------------------------------------------

def test_fit_never_reads_the_domain_from_the_data():
    """The category "w" never occurs: it is a code of every measurement and of the model, and
    samples contain it for some seeds; an empty data set and a one-value data set give models
    of the same shape."""
    dom = small_domain()
    seen = set()
    for seed in range(10):
        aim = AIM(rho=0.05, domain=dom, random_state=seed).fit(small_data(60))
        assert aim.model_.sizes == dom.shape
        for names, noisy, _ in aim.measurements_:
            assert noisy.shape == tuple(dom.shape[dom.index(c)] for c in names)
        seen |= set(aim.sample(2000, output="dict")["a"].tolist())
    assert "w" in seen and seen <= {"x", "y", "z", "w", None}
    for data in ({n: [] for n in "abc"}, {"a": ["w"] * 10, "b": [2] * 10, "c": [0.9] * 10}):
        aim = AIM(rho=1.0, domain=dom, random_state=0).fit(data)
        assert aim.model_.sizes == dom.shape and aim.n_records_ >= 1.0
        assert [m[1].shape for m in aim.measurements_[:3]] == [(5,), (4,), (2,)]


# -- law of each noise step -------------------------------------------------------------------

def noise_by_scale(kwargs, seeds, n=300):
    """Noisy minus exact counts of every measurement over many fits, grouped by the noise's
    scale, and the fits."""
    dom = small_domain()
    data = small_data(n)
    codes = dom.encode(data)
    groups: dict = {}
    fits = []
    for seed in seeds:
        aim = AIM(domain=dom, random_state=seed, **kwargs).fit(data)
        for names, noisy, noise in aim.measurements_:
            exact, = count_marginals(codes, dom.shape, [tuple(dom.index(c) for c in names)])
            groups.setdefault(noise.scale, []).extend((noisy - exact).reshape(-1).tolist())
        fits.append(aim)
    return {k: np.array(v) for k, v in groups.items()}, fits


@pytest.mark.slow
def test_gaussian_noise_laws_of_all_measurements():
    """rho = 0.6, T = 6 rounds over 3 columns: a round's measurement share is 0.9 rho / 6 =
    0.09, sigma**2 = 1 / (2 * 0.09) for the 1-way marginals and the first adaptive rounds;
    annealed rounds (sigma / 2) and the last round (what is left) have their own sigma. Every
    group with at least 200 draws against the exact discrete Gaussian of its sigma, chi-square
    at alpha 1e-4 each; sigma 20% off is rejected for the 1-way group."""
    groups, fits = noise_by_scale(dict(rho=0.6, rounds=6), range(60))
    sigma = fits[0].plan_.one_way.scale
    assert sigma == pytest.approx(math.sqrt(1 / 0.18), rel=1e-12)
    assert Fraction(sigma) ** 2 * 2 * Fraction(fits[0].plan_.measure) >= 1
    big = {s: v for s, v in groups.items() if v.size >= 200}
    assert sigma in big and len(big) >= 2
    for s, v in big.items():
        assert dgauss_pvalue(v, s) > ALPHA, s
    assert dgauss_pvalue(groups[sigma], 1.2 * sigma) < ALPHA  # power


@pytest.mark.slow
def test_laplace_noise_laws_of_all_measurements():
    """epsilon = 3 (pure), T = 6: measurement share 0.9 * 3 / 6 = 0.45, discrete Laplace scale
    1 / 0.45 rounded up; groups with at least 200 draws against the exact law, chi-square at
    alpha 1e-4; a scale 25% off is rejected."""
    groups, fits = noise_by_scale(dict(epsilon=3.0, rounds=6), range(60))
    scale = fits[0].plan_.one_way.scale
    assert Fraction(scale) >= Fraction(1) / Fraction(0.45) and scale < 1 / 0.45 + 1e-12
    big = {s: v for s, v in groups.items() if v.size >= 200}
    assert scale in big
    for s, v in big.items():
        assert dlap_pvalue(v, s) > ALPHA, s
    assert dlap_pvalue(groups[scale], 1.25 * scale) < ALPHA


def first_pick_law(aim, codes, scale_factor=1.0):
    """The exact law of AIM's first adaptive pick given its released 1-way marginals: the model
    refitted to them (deterministic post-processing), the quality scores, exp(c u) / sum."""
    plan = aim.plan_
    dom = aim.domain_
    d = len(dom)
    ones = [Measurement((i,), aim.measurements_[i][1].astype(float), plan.one_way.std)
            for i in range(d)]
    tree, marginals, total, _ = fit_model(dom.shape, ones, ROUND_ITERATIONS)
    eligible = list(plan.candidates)
    answers = dict(zip(eligible, count_marginals(codes, dom.shape, eligible)))
    bias = math.sqrt(2 / math.pi) * aim.measurements_[d][2].scale
    scores = quality_scores(tree, marginals, total, eligible, plan.candidates, answers, bias)
    # the last round's selection: epsilon**2 / 8 <= (remaining - round_down(0.9 remaining))
    used = Fraction(d) / (2 * Fraction(plan.one_way.scale) ** 2)
    remaining = Fraction(plan.budget.total) - used
    select = remaining - Fraction(float(remaining * Fraction(9, 10)))
    eps = math.sqrt(8 * float(select))
    c = scale_factor * eps / (2 * max(plan.candidates.values()))
    w = np.exp(c * (scores - scores.max()))
    return eligible, w / w.sum()


@pytest.mark.slow
def test_selection_law():
    """T = d = 3 rounds: the 1-way marginals take 0.9 rho, the one adaptive round is the last
    (0.1 rho: 9/10 measure, 1/10 select). Its picks over 200 fits at rho = 0.02 (random picks)
    against the exponential mechanism's exact law given each fit's released 1-way marginals:
    the counts of each candidate against the sums of the fits' probabilities, chi-square at
    alpha 1e-4 (independent picks with varying laws: the Pearson statistic is then stochastically
    smaller than with one law, so the test is conservative). Power: the laws with the score
    scale doubled (the sensitivity's factor 2 forgotten) are rejected."""
    dom = small_domain()
    data = small_data(300)
    codes = dom.encode(data)
    fits = [AIM(rho=0.02, domain=dom, rounds=3, random_state=s).fit(data) for s in range(200)]
    observed = np.zeros(6)
    expected = {factor: np.zeros(6) for factor in (1.0, 2.0)}
    for aim in fits:
        assert len(aim.selected_) == 1
        pick = tuple(sorted(dom.index(c) for c in aim.selected_[0]))
        for factor in expected:
            keys, probs = first_pick_law(aim, codes, factor)
            expected[factor] += probs
        observed[keys.index(pick)] += 1
    assert stats.chisquare(observed, expected[1.0]).pvalue > ALPHA
    assert stats.chisquare(observed, expected[2.0]).pvalue < ALPHA


def test_quality_scores_follow_the_definition():
    """w_r (||x_r - round(N mu_r)||_1 - round(bias cells_r)), computed by hand for an
    independent model."""
    dom = small_domain()
    codes = dom.encode(small_data(300))
    d = len(dom)
    exact_one = count_marginals(codes, dom.shape, [(i,) for i in range(d)])
    ones = [Measurement((i,), x.astype(float), 1.0) for i, x in enumerate(exact_one)]
    tree, marginals, total, _ = fit_model(dom.shape, ones, 200)
    candidates = candidate_weights([(0, 1), (0, 2), (1, 2)])
    assert candidates == {(0,): 2, (1,): 2, (2,): 2, (0, 1): 4, (0, 2): 4, (1, 2): 4}
    answers = dict(zip(candidates, count_marginals(codes, dom.shape, list(candidates))))
    scores = quality_scores(tree, marginals, total, list(candidates), candidates, answers, 0.5)
    p = [x / 300 for x in exact_one]
    independent = 300 * np.outer(p[0], p[1])
    by_hand = 4 * (np.abs(answers[(0, 1)] - np.rint(independent)).sum() - round(0.5 * 20))
    assert scores[3] == by_hand
    assert scores[0] == 2 * (0 - round(0.5 * 5))  # a 1-way marginal is fitted exactly
    assert np.all(scores == np.rint(scores))


# -- caps ---------------------------------------------------------------------------------------

def test_time_cap_ends_with_one_round_spending_the_rest():
    aim = AIM(rho=1.0, domain=small_domain(), max_time=1e-9, random_state=0).fit(small_data())
    assert len(aim.selected_) == 1
    assert aim.budget_spent_ == pytest.approx(1.0, rel=1e-12) and aim.budget_spent_ <= 1.0


def test_model_size_cap_keeps_candidates_inside_the_model():
    """A cap below any pair's cells: only 1-way marginals (inside the model's cliques) are
    eligible, so the model stays independent."""
    aim = AIM(rho=1.0, domain=small_domain(), max_model_size=1e-9, random_state=0).fit(
        small_data())
    assert all(len(c) == 1 for c in aim.selected_)
    assert all(len(c) == 1 for c in aim.model_.cliques)


# -- what AIM learns, and sampling -----------------------------------------------------------

def planted(n, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 5, n)
    b = (a + (rng.random(n) < 0.1) * rng.integers(1, 5, n)) % 5
    c = rng.integers(0, 3, n)
    d = np.where(rng.random(n) < 0.8, c, rng.integers(0, 3, n))
    e = (b + d) % 3  # a 3-way dependence: e depends on b and d jointly
    return {"a": a, "b": b, "c": c, "d": d, "e": e}


def planted_domain():
    return Domain({"a": Categorical(range(5)), "b": Categorical(range(5)),
                   "c": Categorical(range(3)), "d": Categorical(range(3)),
                   "e": Categorical(range(3))})


def test_aim_learns_planted_dependence_with_a_non_tree_model():
    data = planted(20000, 1)
    aim = AIM(rho=1.0, domain=planted_domain(), degree=3, random_state=2).fit(data)
    assert ("a", "b") in aim.selected_ or any({"a", "b"} <= set(c) for c in aim.selected_)
    out = aim.sample(20000, output="dict")
    for x, y in (("a", "b"), ("c", "d")):
        assert abs(np.mean(out[x] == out[y]) - np.mean(data[x] == data[y])) < 0.02
    # e = (b + d) mod 3 holds in the synthetic data: a 3-way clique was measured (codes: the
    # model may sample a column's missing code, which decodes to None)
    codes = aim.sample(20000, output="codes")
    assert np.mean(codes[:, 4] == (codes[:, 1] + codes[:, 3]) % 3) > 0.9
    assert abs(aim.n_records_ - 20000) < 200


def test_sample_defaults_outputs_and_reproducibility():
    data = planted(1000, 3)
    aim = AIM(rho=1.0, domain=planted_domain(), random_state=4).fit(data)
    codes = aim.sample(7, output="codes")
    assert codes.shape == (7, 5) and codes.dtype == np.int64
    assert len(aim.sample(output="codes")) == round(aim.n_records_)
    same = [AIM(rho=1.0, domain=planted_domain(), random_state=4).fit(data).sample(
        30, output="codes") for _ in range(2)]
    assert np.array_equal(same[0], same[1])
    with pytest.raises(ValueError, match="not fitted"):
        AIM(rho=1.0, domain=planted_domain()).sample(3)


def test_one_column_and_params():
    dom = Domain({"a": planted_domain()["a"]})
    aim = AIM(rho=0.5, domain=dom, random_state=0).fit({"a": planted(500, 5)["a"]})
    assert aim.sample(10, output="codes").shape == (10, 1)
    assert aim.budget_spent_ == pytest.approx(0.5, rel=1e-12)
    assert AIM(rho=1.0, domain=dom).set_params(degree=3).degree == 3
    base = pytest.importorskip("sklearn.base")
    assert base.clone(AIM(rho=1.0, domain=dom, max_time=5.0)).max_time == 5.0


def test_model_is_a_function_of_the_noisy_measurements(monkeypatch):
    """With the noise and the selection replaced by data-independent stand-ins (the last
    eligible candidate, a pair), two different data sets give the same model and records: the
    fits, the final pooling of the 1-way measurements and sampling read only released values."""
    from test_synth_mst import _fixed_noisy

    from dpcore.selection import ExponentialMechanism
    from dpcore.synth._marginals import MarginalNoise

    def last(self, utility, *, random_state=None, accountant=None):
        return len(utility) - 1

    monkeypatch.setattr(MarginalNoise, "draw", _fixed_noisy)
    monkeypatch.setattr(ExponentialMechanism, "select", last)
    dom = Domain({name: Categorical(range(4)) for name in "abcd"})  # one group of 4 columns
    rng = np.random.default_rng(2)
    fits = [AIM(rho=0.5, domain=dom, rounds=8, random_state=1).fit(
        {name: rng.integers(0, k, n) for name in "abcd"}) for n, k in ((300, 4), (40, 2))]
    assert fits[0].selected_ == fits[1].selected_ and len(fits[0].selected_[0]) == 2
    for a, b in zip(fits[0].marginals_, fits[1].marginals_):
        assert np.array_equal(a, b)
    assert np.array_equal(fits[0].sample(200, random_state=3, output="codes"),
                          fits[1].sample(200, random_state=3, output="codes"))


def test_pool_one_way_merges_then_pools_the_groups():
    """Two measurements of one column merge into their inverse-variance average; the 1-way
    measurements of a group are pooled (here all within the noise: the group's mean); a pair
    and a column outside the groups pass unchanged."""
    from dpcore.synth._estimate import merge_measurements, pool_one_way

    y = np.array([10.0, 20.0, 30.0])
    merged = merge_measurements([Measurement((0,), y, 1.0), Measurement((0,), y + 4, 2.0)])
    assert len(merged) == 1 and np.allclose(merged[0].noisy, y + 4 * 0.2)
    assert merged[0].std == pytest.approx(math.sqrt(1 / (1 + 1 / 4)))
    pair = Measurement((0, 1), np.ones((3, 3)), 1.0)
    out = pool_one_way([Measurement((0,), np.array([30.0, 0, 0]), 100.0), pair,
                        Measurement((1,), np.array([0.0, 30, 0]), 100.0),
                        Measurement((2,), np.array([0.0, 0, 30]), 100.0),
                        Measurement((3,), y, 100.0)], [[0, 1, 2]])
    assert [m.clique for m in out] == [(0,), (0, 1), (1,), (2,), (3,)]
    assert all(np.allclose(out[k].noisy, [10, 10, 10]) for k in (0, 2, 3))
    assert out[1] is pair and out[4].noisy is y


def test_quality_scores_stay_integers_of_bounded_range_for_any_model():
    """A model whose marginal has non-finite entries (e.g. an underflowed separator) still gives
    the definition's scores with those cells read as 0 (or 2**50): never a wrapped int64."""
    class Broken:
        def project(self, marginals, r):
            return np.array([np.nan, np.inf, -np.inf, 0.25])

    answers = {(0,): np.array([3, 1, 0, 5])}
    scores = quality_scores(Broken(), [], 8.0, [(0,)], {(0,): 2}, answers, 0.5)
    assert scores[0] == 2 * ((3 + (2**50 - 1) + 0 + 3) - round(0.5 * 4))
