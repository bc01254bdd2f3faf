"""dpcore.synth.PrivBayes: cost before fit, one charge, the dependence score's sensitivity, the
law of the network choice and of the noisy marginals, sampling."""
import itertools
import math

import numpy as np
import pytest

from _gof import ALPHA, chisquare_pvalue, integer_pvalue

import dpcore
from dpcore._release import Cost
from dpcore.synth import Categorical, Domain, PrivBayes
from dpcore.synth._marginals import MarginalNoise, count_marginals
from dpcore.synth._privbayes import DEPENDENCE_SENSITIVITY, clipped_noise_mean, dependence_score


def domain():
    return Domain({"a": Categorical([0, 1, 2]), "b": Categorical([0, 1, 2]),
                   "c": Categorical([0, 1])})


def data(n=400, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 3, n)
    b = np.where(rng.random(n) < 0.6, a, rng.integers(0, 3, n))
    c = (rng.random(n) < 0.3 + 0.2 * (b == 2)).astype(int)
    return {"a": a, "b": b, "c": c}


# -- the score --------------------------------------------------------------------------------

def test_dependence_score_formula():
    joint = np.array([[10, 0, 5], [2, 8, 1]])
    n = joint.sum()
    expected = 0.5 * np.abs(joint - np.outer(joint.sum(1), joint.sum(0)) / n).sum()
    got = dependence_score(joint)
    assert got <= expected < got + 2.0**-10 and (got * 2**10).is_integer()
    assert dependence_score(np.zeros((2, 3), dtype=int)) == 0.0
    assert dependence_score(np.outer([1, 2], [3, 4])) == 0.0  # independent


@pytest.mark.parametrize("seed", range(6))
def test_dependence_score_sensitivity(seed):
    """Adding one record to any cell moves the score by at most 2 + 2**-10 (every cell of
    random tables, sparse and dense, including n = 0 and 1)."""
    rng = np.random.default_rng(seed)
    shape = tuple(rng.integers(2, 5, 3))
    tables = [np.zeros(shape, dtype=np.int64), rng.integers(0, 2, shape) * (rng.random(shape) < 0.2),
              rng.integers(0, 30, shape), rng.poisson(rng.gamma(0.3, 20, shape))]
    worst = 0.0
    for table in tables:
        base = dependence_score(table)
        for cell in itertools.product(*map(range, shape)):
            bigger = table.copy()
            bigger[cell] += 1
            worst = max(worst, abs(dependence_score(bigger) - base))
    assert worst <= DEPENDENCE_SENSITIVITY


def test_dependence_score_sensitivity_bound_is_nearly_reached():
    """The bound is not loose by much: a table where one record moves the score by > 1.5."""
    table = np.zeros((2, 2), dtype=np.int64)
    table[0, 0] = 1
    worst = max(abs(dependence_score(table + np.eye(2, dtype=np.int64)[[i]].T @
                                     np.eye(2, dtype=np.int64)[[j]]) - dependence_score(table))
                for i in range(2) for j in range(2))
    assert worst > 0.9


# -- cost and charging ------------------------------------------------------------------------

def test_cost_and_one_charge():
    acc = dpcore.Accountant(10.0, 1e-3)
    pb = PrivBayes(rho=0.4, domain=domain(), random_state=0, accountant=acc)
    assert pb.cost == Cost(rho=0.4)
    pb.fit(data())
    pb.sample(20)
    assert [c.rho for c in acc.history] == [0.4]
    assert PrivBayes(epsilon=1.0, domain=domain()).cost == Cost(1.0)


@pytest.mark.parametrize("bad, error", [
    (dict(degree=0), ValueError), (dict(degree=1.5), TypeError), (dict(network_share=0.0), ValueError),
    (dict(network_share=1.0), ValueError), (dict(max_cells=0), ValueError),
    (dict(domain=None), ValueError), (dict(rho=None), ValueError),
    (dict(random_state="x"), TypeError)])
def test_bad_arguments_charge_nothing(bad, error):
    acc = dpcore.Accountant(10.0, 1e-3)
    kwargs = dict(rho=0.5, domain=domain(), random_state=0, accountant=acc)
    kwargs.update(bad)
    with pytest.raises(error):
        PrivBayes(**kwargs).fit(data())
    assert acc.history == []


# -- laws -------------------------------------------------------------------------------------

def network_law(codes, shape, scale):
    """Exact law of the degree-1 network on 3 columns: the first column uniform, then each
    choice proportional to exp(scale * score) among (child, parent) with parent chosen."""
    score = {}
    for x, p in itertools.permutations(range(3), 2):
        score[(x, p)] = dependence_score(count_marginals(codes, shape, [(p, x)])[0])
    law = {}
    for first in range(3):
        rest = [j for j in range(3) if j != first]
        options = [(x, first) for x in rest]
        w1 = np.exp(scale * np.array([score[o] for o in options]))
        for (x1, p1), q1 in zip(options, w1 / w1.sum()):
            last = [j for j in rest if j != x1][0]
            options2 = [(last, first), (last, x1)]
            w2 = np.exp(scale * np.array([score[o] for o in options2]))
            for (x2, p2), q2 in zip(options2, w2 / w2.sum()):
                law[(first, (x1, p1), (x2, p2))] = q1 * q2 / 3
    return law


def test_network_law():
    """600 fits (rho = 0.02 so that the choices stay random) against the exact law of the
    ordered network (12 outcomes): chi-square at alpha 1e-4; the law with the score scale
    doubled (the exponential mechanism's factor 2 forgotten) is rejected."""
    dom = domain()
    d = data(150, 1)
    codes = dom.encode(d)
    fits = [PrivBayes(rho=0.02, domain=dom, network_share=0.3, random_state=s).fit(d)
            for s in range(600)]
    scale = fits[0].plan_.selection.scale
    assert scale == pytest.approx(math.sqrt(8 * 0.006 / 2) / (2 * DEPENDENCE_SENSITIVITY),
                                  rel=1e-12)
    names = dom.names
    seen = []
    for pb in fits:
        (first, _), (x1, (p1,)), (x2, (p2,)) = pb.network_
        seen.append((names.index(first), (names.index(x1), names.index(p1)),
                     (names.index(x2), names.index(p2))))
    for s, expect in ((scale, True), (2 * scale, False)):
        law = network_law(codes, dom.shape, s)
        keys = sorted(law)
        observed = [seen.count(k) for k in keys]
        p = chisquare_pvalue(observed, [law[k] for k in keys])
        assert (p > ALPHA) == expect, (s, p)


def noise_pvalue(samples, pmf_of, width):
    support = np.arange(-width, width + 1)
    table = {k: pmf_of(k) for k in support.tolist()}
    norm = sum(table.values())
    return integer_pvalue(samples, lambda k: table[k] / norm, support)


@pytest.mark.parametrize("kind", ["gaussian", "laplace"])
def test_marginal_noise_law(kind):
    """Noisy minus exact counts of the measured marginals over 120 fits, against the exact
    discrete Gaussian / Laplace of the calibrated scale (chi-square, alpha 1e-4); a scale 25%
    off is rejected."""
    dom = domain()
    d = data(300, 2)
    codes = dom.encode(d)
    kwargs = dict(rho=0.5) if kind == "gaussian" else dict(epsilon=2.0)
    samples, scales = [], set()
    for seed in range(120):
        pb = PrivBayes(domain=dom, random_state=seed, **kwargs).fit(d)
        scales.add(pb.noise_.scale)
        for names, noisy in zip(pb.measured_, pb.noisy_marginals_):
            clique = tuple(dom.index(n) for n in names)
            samples.append((noisy - count_marginals(codes, dom.shape, [clique])[0]).ravel())
    samples = np.concatenate(samples)
    (scale,) = scales  # degree 1 on 3 columns: always 2 marginals
    kept = 1 - PrivBayes(rho=1.0).network_share  # the marginals' share of the budget
    if kind == "gaussian":
        assert scale == pytest.approx(math.sqrt(2 / (2 * 0.5 * kept)), rel=1e-12)

        def pmf(s):
            return lambda k: math.exp(-k * k / (2 * s * s))
    else:
        assert scale == pytest.approx(2 / (2.0 * kept), rel=1e-12)

        def pmf(s):
            return lambda k: math.exp(-abs(k) / s)
    width = int(12 * scale) + 2
    assert noise_pvalue(samples, pmf(scale), width) > ALPHA
    assert noise_pvalue(samples, pmf(1.25 * scale), width) < ALPHA


# -- what it learns ---------------------------------------------------------------------------

def test_privbayes_reproduces_a_planted_dependence():
    d = data(20000, 3)
    pb = PrivBayes(rho=1.0, domain=domain(), random_state=4).fit(d)
    out = pb.sample(20000, output="dict")
    assert abs(np.mean(out["a"] == out["b"]) - np.mean(d["a"] == d["b"])) < 0.03
    assert abs(pb.n_records_ - 20000) < 100
    parents = dict(pb.network_)
    assert "a" in parents.get("b", ()) or "b" in parents.get("a", ())


def test_absent_category_is_in_the_model():
    dom = Domain({"a": Categorical(["x", "y", "never"]), "b": Categorical([0, 1])})
    d = {"a": ["x", "y"] * 20, "b": [0, 1] * 20}
    seen = set()
    for seed in range(20):
        pb = PrivBayes(rho=0.05, domain=dom, random_state=seed).fit(d)
        assert pb.noisy_marginals_[0].size == 4 * 3  # the declared codes, not the data's
        seen |= set(pb.sample(1000, output="dict")["a"].tolist())
    assert "never" in seen


def test_degree_two_and_max_cells():
    d = data(2000, 5)
    pb = PrivBayes(rho=1.0, domain=domain(), degree=2, random_state=0).fit(d)
    assert [len(p) for _, p in pb.network_] == [0, 1, 2]
    assert len(pb.measured_) == 1 and set(pb.measured_[0]) == {"a", "b", "c"}
    assert sorted(pb.noisy_marginals_[0].shape) == [3, 4, 4]
    small = PrivBayes(rho=1.0, domain=domain(), degree=2, max_cells=12, random_state=0).fit(d)
    assert all(math.prod(domain()[n].size for n in (x,) + p) <= 12 for x, p in small.network_)
    assert small.sample(5, output="codes").shape == (5, 3)


def test_one_column_and_empty_data():
    dom = Domain({"a": Categorical([0, 1])})
    pb = PrivBayes(rho=1.0, domain=dom, random_state=0).fit({"a": [0, 1, 1]})
    assert pb.network_ == [("a", ())] and pb.plan_.selection is None
    assert pb.sample(3, output="codes").shape == (3, 1)
    empty = PrivBayes(rho=1.0, domain=domain(), random_state=0).fit({n: [] for n in "abc"})
    assert empty.sample(4, output="codes").shape == (4, 3)


# -- post-processing of the noisy marginals -----------------------------------------------------

@pytest.mark.parametrize("kind, scale", [("laplace", 0.4), ("laplace", 3.0), ("laplace", 43.0),
                                         ("gaussian", 0.3), ("gaussian", 2.5), ("gaussian", 40.0)])
def test_clipped_noise_mean_is_the_mean_of_the_positive_part(kind, scale):
    """E max(Z, 0) against the series of the exact pmf summed far into the tails, and for large
    scales against the continuous laws' b / 2 and sigma / sqrt(2 pi)."""
    noise = MarginalNoise(kind, 1, scale)
    k = np.arange(-int(60 * scale) - 5, int(60 * scale) + 6, dtype=np.float64)
    pmf = np.exp(-np.abs(k) / scale) if kind == "laplace" else np.exp(-k * k / (2 * scale**2))
    expected = float(np.dot(np.maximum(k, 0), pmf) / pmf.sum())
    assert clipped_noise_mean(noise) == pytest.approx(expected, rel=1e-9)
    if scale > 10:
        continuous = scale / 2 if kind == "laplace" else scale / math.sqrt(2 * math.pi)
        assert clipped_noise_mean(noise) == pytest.approx(continuous, rel=2e-3)
    big = MarginalNoise("gaussian", 1, 2e4)  # the closed form beyond sigma = 10**4
    assert clipped_noise_mean(big) == pytest.approx(2e4 / math.sqrt(2 * math.pi), rel=1e-12)


def test_conditional_prior_pulls_rows_toward_the_pooled_child():
    """Clipped rows plus ``prior`` per noisy cell spread as the column sums: a row clipped to
    nothing becomes the pooled distribution, a row far above the noise keeps its own; no prior
    leaves the clipped counts."""
    noisy = [np.array([[-5, -3], [100, 300]])]
    got = PrivBayes._conditional(("a", "b"), [("a", "b")], noisy, prior=2.0)
    np.testing.assert_allclose(got, [[1.0, 3.0], [101.0, 303.0]])  # 2 * 2 cells * (1/4, 3/4)
    np.testing.assert_allclose(PrivBayes._conditional(("a", "b"), [("a", "b")], noisy),
                               [[0.0, 0.0], [100.0, 300.0]])
    # summed down from a larger marginal: each row sums 2 x 2 noisy cells
    wide = [np.arange(-3, 9).reshape(2, 3, 2)]  # axes a, c, b
    got = PrivBayes._conditional(("a", "b"), [("a", "c", "b")], wide, prior=0.5)
    clipped = np.maximum(wide[0], 0).sum(axis=1)
    pooled = clipped.sum(axis=0) / clipped.sum()
    np.testing.assert_allclose(got, clipped + 0.5 * 6 * pooled)
    # the first column (no parents): the prior is proportional to its own counts
    root = PrivBayes._conditional(("a",), [("a", "b")], [np.array([[-5, 7], [100, 300]])],
                                  prior=2.0)
    np.testing.assert_allclose(root / root.sum(), [[7 / 407, 400 / 407]])
