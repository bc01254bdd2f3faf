"""dpcore.synth.MST: cost before fit, one charge, the public domain, the law of every noise
step, and sampling."""
import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from _gof import ALPHA, dgauss_pmf, dlap_pmf, integer_pvalue

import dpcore
from dpcore._release import Cost
from dpcore.synth import MST, Categorical, Domain, Numeric
from dpcore.synth._marginals import count_marginals
from dpcore.synth._tree import TreeModel


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
    assert MST(rho=0.5, domain=dom).cost == Cost(rho=0.5)
    assert MST(epsilon=1.0, domain=dom).cost == Cost(1.0)
    assert MST(epsilon=1.0, delta=1e-6, domain=dom).cost == Cost(1.0, 1e-6)
    with pytest.raises(ValueError, match="rho"):
        MST(rho=0.5, epsilon=1.0, domain=dom).cost  # noqa: B018


@pytest.mark.parametrize("kwargs", [dict(rho=0.5), dict(epsilon=1.0),
                                    dict(epsilon=1.0, delta=1e-6)])
def test_fit_charges_once_equal_to_cost(kwargs):
    acc = dpcore.Accountant(10.0, 1e-3)
    mst = MST(domain=small_domain(), random_state=0, accountant=acc, **kwargs)
    cost = mst.cost
    mst.fit(small_data())
    assert len(acc.history) == 1
    entry = acc.history[0]
    assert (entry.epsilon, entry.delta if entry.rho is None else 0.0, entry.rho) == (
        cost.epsilon, cost.delta, cost.rho)
    mst.sample(50)  # post-processing: nothing more
    mst.sample(50, random_state=3)
    assert len(acc.history) == 1


@pytest.mark.parametrize("bad, error", [
    (dict(domain=None), ValueError), (dict(domain={"a": 1}), TypeError),
    (dict(rho=None), ValueError), (dict(epsilon=1.0), ValueError), (dict(rho=-1.0), ValueError),
    (dict(rho=math.nan), ValueError), (dict(rho=1e-40), ValueError),
    (dict(random_state="seed"), TypeError), (dict(accountant=object()), TypeError),
    (dict(delta=1e-6), ValueError)])
def test_bad_arguments_charge_nothing(bad, error):
    acc = dpcore.Accountant(10.0, 1e-3)
    kwargs = dict(rho=0.5, domain=small_domain(), random_state=0, accountant=acc)
    kwargs.update(bad)
    with pytest.raises(error):
        MST(**kwargs).fit(small_data())
    assert acc.history == []


def test_missing_column_charges_nothing():
    acc = dpcore.Accountant(10.0, 1e-3)
    data = small_data()
    del data["b"]
    with pytest.raises(ValueError, match="'b'"):
        MST(rho=0.5, domain=small_domain(), accountant=acc).fit(data)
    assert acc.history == []


def test_over_budget_fit_draws_nothing():
    acc = dpcore.Accountant(0.1, 1e-9)
    rng = dpcore.default_rng(5)
    before = rng.bit_generator.state
    with pytest.raises(dpcore.BudgetExceeded):
        MST(epsilon=0.5, domain=small_domain(), random_state=rng, accountant=acc).fit(
            small_data())
    assert rng.bit_generator.state == before and not hasattr(MST, "model_")


# -- the domain is public ---------------------------------------------------------------------

def test_fit_never_reads_the_domain_from_the_data():
    """The category "w" never occurs: it is still a code of the model, and samples contain it
    for some seeds (its noisy count is positive about half of the time); codes never exceed the
    declared sizes."""
    dom = small_domain()
    data = small_data(60)
    seen = set()
    for seed in range(20):
        mst = MST(rho=0.05, domain=dom, random_state=seed).fit(data)
        assert [s.size for s in mst.compression_.supports] == list(dom.shape)
        assert len(mst.one_way_[0]) == dom.shape[0]
        out = mst.sample(2000, output="dict")
        seen |= set(out["a"].tolist())
    assert "w" in seen
    assert seen <= {"x", "y", "z", "w", None}


def test_values_outside_the_domain_go_to_the_declared_bin():
    """With noise of sigma ~1e-5 the 1-way counts are exact: unknown categories and NaN land in
    the missing code, non-numbers in c's fill bin (0.5 -> bin 1)."""
    dom = small_domain()
    data = {"a": ["x", "nope", None, "y", "z"], "b": [0, 1, 7, "?", 2],
            "c": [0.1, "text", np.nan, 2.0, -1.0]}
    mst = MST(rho=1e10, domain=dom, random_state=0).fit(data)
    assert mst.one_way_[0].tolist() == [1, 1, 1, 0, 2]
    assert mst.one_way_[1].tolist() == [1, 1, 1, 2]
    assert mst.one_way_[2].tolist() == [2, 3]


def test_two_data_sets_give_models_over_the_same_domain():
    dom = small_domain()
    one = MST(rho=1.0, domain=dom, random_state=0).fit(small_data(200, 1))
    other = MST(rho=1.0, domain=dom, random_state=0).fit(
        {"a": ["w"] * 10, "b": [2] * 10, "c": [0.9] * 10})
    for m in (one, other):
        assert m.domain_ is dom and [len(y) for y in m.one_way_] == list(dom.shape)


# -- law of each noise step -------------------------------------------------------------------

def law_fits(kwargs, seeds, n=300):
    """Noise samples of the 1-way and 2-way steps over many fits of the same data."""
    dom = small_domain()
    data = small_data(n)
    codes = dom.encode(data)
    exact_one = count_marginals(codes, dom.shape, [(0,), (1,), (2,)])
    one, two, fits = [], [], []
    for seed in seeds:
        mst = MST(domain=dom, random_state=seed, **kwargs).fit(data)
        one.extend((y - x).tolist() for y, x in zip(mst.one_way_, exact_one))
        compressed = mst.compression_.codes(codes)
        pairs = [(dom.index(a), dom.index(b)) for a, b in mst.edges_]
        exact_two = count_marginals(compressed, mst.compression_.sizes, pairs)
        two.extend((y - x).reshape(-1).tolist() for y, x in zip(mst.two_way_, exact_two))
        fits.append(mst)
    flat = np.concatenate([np.asarray(v) for v in one])
    return flat, np.concatenate([np.asarray(v) for v in two]), fits


def dgauss_pvalue(samples, sigma):
    half = int(10 * sigma) + 2
    return integer_pvalue(samples, dgauss_pmf(sigma), np.arange(-half, half + 1))


def dlap_pvalue(samples, scale):
    half = int(25 * scale) + 2
    return integer_pvalue(samples, dlap_pmf(scale), np.arange(-half, half + 1))


def test_gaussian_noise_laws_of_both_measurements():
    """rho = 0.3 over 3 columns: 1-way sigma**2 = 3 / (2 * 0.1), 2-way sigma**2 = 2 / (2 *
    0.1); noisy minus exact counts over 150 fits against the exact discrete Gaussian, chi-square
    at alpha 1e-4 each; a sigma 20% off is rejected (1650 and ~1000 draws)."""
    one, two, fits = law_fits(dict(rho=0.3), range(150))
    plan = fits[0].plan_
    assert Fraction(plan.one_way.scale) ** 2 >= Fraction(3) / (2 * Fraction(0.1))
    assert plan.one_way.scale == pytest.approx(math.sqrt(15.0), rel=1e-12)
    assert plan.two_way.scale == pytest.approx(math.sqrt(10.0), rel=1e-12)
    assert one.size == 150 * 11 and two.size > 150 * 4
    assert dgauss_pvalue(one, plan.one_way.scale) > ALPHA
    assert dgauss_pvalue(two, plan.two_way.scale) > ALPHA
    assert dgauss_pvalue(one, 1.2 * plan.one_way.scale) < ALPHA  # power
    assert dgauss_pvalue(two, 1.2 * plan.two_way.scale) < ALPHA


def test_laplace_noise_laws_of_both_measurements():
    """epsilon = 3 over 3 columns: 1-way scale 3 / 1, 2-way scale 2 / 1 (discrete Laplace);
    chi-square at alpha 1e-4; a scale 25% off is rejected."""
    one, two, fits = law_fits(dict(epsilon=3.0), range(150))
    plan = fits[0].plan_
    assert (plan.one_way.scale, plan.two_way.scale) == (3.0, 2.0)
    assert plan.selection.epsilon == 0.5
    assert dlap_pvalue(one, 3.0) > ALPHA and dlap_pvalue(two, 2.0) > ALPHA
    assert dlap_pvalue(one, 3.75) < ALPHA  # power (scale 25% off; 1650 draws)


def selection_law(mst, codes, scale):
    """The exact law of MST's two ordered edge picks (3 columns) given its noisy 1-way
    counts: P(e1) P(e2 | e1) with P proportional to exp(scale * score)."""
    comp = mst.compression_
    sizes = comp.sizes
    one_way = [comp.one_way(y, mst.plan_.one_way.std ** 2, i) for i, y in enumerate(mst.one_way_)]
    ind = TreeModel.estimate(sizes, one_way, [], [])
    pairs = [(0, 1), (0, 2), (1, 2)]
    exact = count_marginals(comp.codes(codes), sizes, pairs)
    score = np.array([np.abs(np.rint(np.outer(ind.marginals[a], ind.marginals[b]) / ind.total)
                             - x).sum() for (a, b), x in zip(pairs, exact)])
    w = np.exp(scale * (score - score.max()))
    first = w / w.sum()
    law = {}
    for i in range(3):
        rest = [j for j in range(3) if j != i]
        second = w[rest] / w[rest].sum()
        for j, p in zip(rest, second):
            law[(pairs[i], pairs[j])] = first[i] * p
    return law


def randomised_pit(fits, codes, scale):
    """u = F(k-) + V p(k) per fit (uniform on [0, 1] exactly when the picks follow the law)."""
    rng = np.random.default_rng(99)
    out = []
    for mst in fits:
        law = selection_law(mst, codes, scale)
        keys = sorted(law)
        probs = np.array([law[k] for k in keys])
        dom = mst.domain_
        picked = tuple((dom.index(a), dom.index(b)) for a, b in mst.edges_)
        k = keys.index(picked)
        out.append(probs[:k].sum() + rng.random() * probs[k])
    return np.array(out)


@pytest.mark.slow
def test_tree_selection_law():
    """The ordered tree edges of 400 fits (small rho, so that the picks are random) against the
    exponential mechanism's exact law given each fit's released 1-way counts: a randomised
    probability integral transform, KS test at alpha 1e-4. Power: the law with the score scale
    doubled (the factor 2 forgotten) is rejected."""
    dom = small_domain()
    data = small_data(300)
    codes = dom.encode(data)
    fits = [MST(rho=0.003, domain=dom, random_state=s).fit(data) for s in range(400)]
    scale = fits[0].plan_.selection.scale
    assert scale == pytest.approx(math.sqrt(8 * 0.001 / 2) / 2, rel=1e-12)
    assert stats.kstest(randomised_pit(fits, codes, scale), "uniform").pvalue > ALPHA
    assert stats.kstest(randomised_pit(fits, codes, 2 * scale), "uniform").pvalue < ALPHA


# -- what MST learns, and sampling --------------------------------------------------------------

def planted(n, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 5, n)
    b = (a + (rng.random(n) < 0.1) * rng.integers(1, 5, n)) % 5  # b = a 90% of the time
    c = rng.integers(0, 3, n)
    d = np.where(rng.random(n) < 0.8, c, rng.integers(0, 3, n))
    return {"a": a, "b": b, "c": c, "d": d}


def planted_domain():
    return Domain({"a": Categorical(range(5)), "b": Categorical(range(5)),
                   "c": Categorical(range(3)), "d": Categorical(range(3))})


def test_mst_finds_and_reproduces_planted_pairs():
    data = planted(20000, 1)
    mst = MST(rho=1.0, domain=planted_domain(), random_state=2).fit(data)
    assert {("a", "b"), ("c", "d")} <= set(mst.edges_)
    out = mst.sample(20000, output="dict")
    assert abs(np.mean(out["a"] == out["b"]) - np.mean(data["a"] == data["b"])) < 0.02
    assert abs(np.mean(out["c"] == out["d"]) - np.mean(data["c"] == data["d"])) < 0.02
    assert abs(mst.n_records_ - 20000) < 100


def test_sample_defaults_outputs_and_reproducibility():
    pd = pytest.importorskip("pandas")
    data = planted(1000, 3)
    mst = MST(rho=1.0, domain=planted_domain(), random_state=4).fit(data)
    frame = mst.sample()
    assert isinstance(frame, pd.DataFrame) and len(frame) == round(mst.n_records_)
    codes = mst.sample(7, output="codes")
    assert codes.shape == (7, 4) and codes.dtype == np.int64
    same = [MST(rho=1.0, domain=planted_domain(), random_state=4).fit(data).sample(
        30, output="codes") for _ in range(2)]
    assert np.array_equal(same[0], same[1])
    assert np.array_equal(mst.sample(30, random_state=8, output="codes"),
                          mst.sample(30, random_state=8, output="codes"))
    with pytest.raises(ValueError, match="output"):
        mst.sample(3, output="list")
    with pytest.raises(ValueError, match="n must be"):
        mst.sample(-1)
    with pytest.raises(ValueError, match="not fitted"):
        MST(rho=1.0, domain=planted_domain()).sample(3)


@pytest.mark.parametrize("columns", [1, 2])
def test_one_and_two_columns(columns):
    names = ["a", "b"][:columns]
    dom = Domain({n: planted_domain()[n] for n in names})
    data = {n: v for n, v in planted(500, 5).items() if n in names}
    acc = dpcore.Accountant(10.0, 1e-3)
    mst = MST(rho=0.5, domain=dom, random_state=0, accountant=acc).fit(data)
    assert mst.plan_.selection is None
    assert mst.edges_ == ([] if columns == 1 else [("a", "b")])
    if columns == 1:
        assert mst.plan_.one_way.scale == pytest.approx(math.sqrt(1 / (2 * 0.5)))
    else:
        assert mst.plan_.one_way.scale == pytest.approx(math.sqrt(2 / (2 * 0.25)))
        assert mst.plan_.two_way.scale == pytest.approx(math.sqrt(1 / (2 * 0.25)))
    assert mst.sample(10, output="codes").shape == (10, columns)
    assert acc.history[0].rho == 0.5


def test_empty_data_fits():
    mst = MST(rho=1.0, domain=planted_domain(), random_state=0).fit(
        {n: [] for n in "abcd"})
    assert mst.n_records_ >= 1.0 and mst.sample(5, output="codes").shape == (5, 4)


def test_params_and_clone():
    mst = MST(rho=1.0, domain=planted_domain())
    assert mst.get_params()["rho"] == 1.0
    assert mst.set_params(rho=2.0).rho == 2.0
    with pytest.raises(ValueError, match="no parameter"):
        mst.set_params(alpha=1)
    assert "MST(rho=2.0" in repr(mst)
    base = pytest.importorskip("sklearn.base")
    acc = dpcore.Accountant(5.0, 1e-3)
    twin = base.clone(MST(rho=1.0, domain=planted_domain(), accountant=acc))
    assert twin.accountant is acc


def _fixed_noisy(self, counts, rng):
    """A stand-in for MarginalNoise.draw whose output ignores the counts (a fixed table per
    shape): fits of different data then see identical noisy measurements."""
    return np.random.default_rng(counts.size).integers(-5, 60, counts.shape)


def _first_eligible(self, utility, *, random_state=None, accountant=None):
    return int(np.argmax(np.isfinite(np.asarray(utility, float))))


@pytest.mark.parametrize("grouped", [False, True])
def test_model_is_a_function_of_the_noisy_measurements(monkeypatch, grouped):
    """With the noise and the tree selection replaced by data-independent stand-ins, two
    different data sets give the same model and the same records: everything after the
    measurements (compression, the shrinkage of the edge tables, the model, sampling) reads
    only released values."""
    from dpcore.selection import ExponentialMechanism
    from dpcore.synth._marginals import MarginalNoise

    monkeypatch.setattr(MarginalNoise, "draw", _fixed_noisy)
    monkeypatch.setattr(ExponentialMechanism, "select", _first_eligible)
    calls = [itertools.count()]
    if grouped:  # four columns of five codes: their 1-way estimates are pooled
        dom = Domain({name: Categorical(range(4)) for name in "abcd"})
        rng = np.random.default_rng(2)
        data = [{name: rng.integers(0, k, n) for name in "abcd"} for n, k in ((300, 4), (40, 2))]

        def nth_fixed(self, counts, rng):  # the k-th draw of a fit: a fixed table, below
            k = next(calls[0])             # three noise sds (no compression, so pooled)
            return np.random.default_rng(100 + k).integers(-5, 60, counts.shape) // 8

        monkeypatch.setattr(MarginalNoise, "draw", nth_fixed)
    else:
        dom = small_domain()
        data = [small_data(n, seed) for n, seed in ((300, 0), (50, 9))]
    fits = []
    for x in data:
        calls[0] = itertools.count()
        fits.append(MST(rho=0.5, domain=dom, random_state=1).fit(x))
    if grouped:
        assert all(keep.all() for keep in fits[0].compression_.supports)
    first, second = (f.model_ for f in fits)
    assert first.edges == second.edges and first.total == second.total
    for a, b in zip(first.tables + first.marginals, second.tables + second.marginals):
        assert np.array_equal(a, b)
    assert np.array_equal(fits[0].sample(200, random_state=3, output="codes"),
                          fits[1].sample(200, random_state=3, output="codes"))
