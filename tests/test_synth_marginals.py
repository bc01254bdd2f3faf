"""dpcore.synth.marginals: exact counts of many marginals, exact discrete Gaussian / Laplace noise."""
import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from _gof import ALPHA, dgauss_pmf, dlap_pmf, integer_pvalue

import dpcore
from dpcore import calibration
from dpcore.synth import Categorical, Domain, Numeric, marginals
from dpcore.synth._marginals import Budget, MarginalNoise, count_marginals


def naive_counts(codes, shape, clique):
    out = np.zeros([shape[i] for i in clique], dtype=np.int64)
    for row in codes:
        out[tuple(row[i] for i in clique)] += 1
    return out


def test_count_marginals_matches_a_naive_count():
    rng = np.random.default_rng(0)
    shape = (3, 5, 2, 4)
    codes = np.column_stack([rng.integers(0, s, 400) for s in shape])
    cliques = [(0,), (3,), (1, 2), (2, 1), (0, 1, 3), (0, 1, 2, 3)]
    for clique, got in zip(cliques, count_marginals(codes, shape, cliques)):
        assert np.array_equal(got, naive_counts(codes, shape, clique)), clique


def wide_domain():
    return Domain({"a": Categorical(list(range(40))), "b": Numeric(0, 1, bins=29)})


def test_values_outside_the_domain_are_counted_in_the_declared_bin():
    dom = Domain({"a": Categorical(["x", "y"]), "b": Categorical(["p", "q"], other="q")})
    data = {"a": ["x", "zz", None, "y"], "b": ["p", "zz", None, "q"]}
    out = marginals(data, domain=dom, attributes=["a", "b", ("a", "b")], rho=1e12,
                    random_state=0)  # sigma about 1e-6: the noise is 0
    assert out[("a",)].tolist() == [1, 1, 2]
    assert out[("b",)].tolist() == [1, 3]
    assert out[("a", "b")].tolist() == [[1, 0], [0, 1], [0, 2]]


def noise_samples(mechanism, budget, seeds):
    dom = wide_domain()
    rng = np.random.default_rng(11)
    data = {"a": rng.integers(0, 40, 500), "b": rng.uniform(0, 1, 500)}
    exact = count_marginals(dom.encode(data), dom.shape, [(0, 1)])[0]
    kwargs = dict(rho=budget) if mechanism == "gaussian" else dict(epsilon=budget)
    draws = [marginals(data, domain=dom, attributes=[("a", "b")], random_state=s, **kwargs)
             [("a", "b")] - exact for s in seeds]
    return np.concatenate([d.reshape(-1) for d in draws])


def law_pvalue(samples, pmf, half_width):
    """Chi-square p-value of integer noise against ``pmf`` on [-half_width, half_width] (the
    mass beyond pooled in two tail cells)."""
    return integer_pvalue(samples, pmf, np.arange(-half_width, half_width + 1))


def test_gaussian_noise_law():
    """Noisy minus exact counts (1230 cells x 10 releases) against the exact discrete Gaussian
    of the calibrated sigma: chi-square at alpha = 1e-4; a sigma 10% larger is rejected."""
    rho = 0.02  # one marginal: sigma = 5
    sigma = MarginalNoise.calibrate("gaussian", 1, rho).scale
    assert sigma == pytest.approx(5.0)
    samples = noise_samples("gaussian", rho, range(10))
    assert samples.size == 12300
    assert law_pvalue(samples, dgauss_pmf(sigma), int(12 * sigma) + 2) > ALPHA
    assert law_pvalue(samples, dgauss_pmf(1.1 * sigma), int(12 * (1.1 * sigma)) + 2) < ALPHA  # power


def test_laplace_noise_law():
    epsilon = 0.5  # one marginal: scale 2
    scale = MarginalNoise.calibrate("laplace", 1, epsilon).scale
    assert scale == 2.0
    samples = noise_samples("laplace", epsilon, range(10))
    assert law_pvalue(samples, dlap_pmf(scale), int(30 * scale) + 2) > ALPHA
    assert law_pvalue(samples, dlap_pmf(1.1 * scale), int(30 * (1.1 * scale)) + 2) < ALPHA  # power


@pytest.mark.parametrize("k, rho", [(1, 0.5), (3, 0.1), (14, 1 / 3), (105, 0.37), (7, 1e-9)])
def test_gaussian_calibration_is_the_smallest_safe_sigma(k, rho):
    noise = MarginalNoise.calibrate("gaussian", k, rho)
    sigma = Fraction(noise.scale)
    assert Fraction(k) / (2 * sigma * sigma) <= Fraction(rho)
    smaller = Fraction(math.nextafter(noise.scale, 0.0))
    assert Fraction(k) / (2 * smaller * smaller) > Fraction(rho)
    assert noise.guarantee <= rho * (1 + 1e-15)


@pytest.mark.parametrize("k, epsilon", [(1, 0.5), (3, 0.1), (14, 1 / 3)])
def test_laplace_calibration(k, epsilon):
    noise = MarginalNoise.calibrate("laplace", k, epsilon)
    assert Fraction(k) / Fraction(noise.scale) <= Fraction(epsilon)
    assert noise.scale == pytest.approx(k / epsilon, rel=1e-15)


def test_budget_kinds():
    assert Budget.make(0.5, None, None).cost == dpcore._release.Cost(rho=0.5)
    pure = Budget.make(None, 1.0, None)
    assert pure.kind == "pure" and pure.mechanism == "laplace" and pure.total == 1.0
    approx = Budget.make(None, 1.0, 1e-6)
    assert approx.kind == "zcdp" and approx.total == calibration.zcdp_rho_for(1.0, 1e-6)
    assert approx.cost.epsilon == 1.0 and approx.cost.delta == 1e-6
    for bad in [(0.5, 1.0, None), (0.5, None, 1e-6), (None, None, None), (None, None, 1e-6),
                (-1.0, None, None), (None, 1.0, 1.0)]:
        with pytest.raises(ValueError):
            Budget.make(*bad)


@pytest.mark.parametrize("total", [1.0, 0.1, 1 / 3, 7.77])
def test_budget_parts_never_exceed_the_total(total):
    for budget in (Budget.make(total, None, None), Budget.make(None, total, None)):
        parts = budget.parts([1, 1, 1])
        assert sum(Fraction(p) for p in parts) <= Fraction(total)
        assert sum(parts) == pytest.approx(total, rel=1e-15)


@pytest.mark.parametrize("share, rounds", [(0.1, 1), (1 / 3, 14), (0.05, 104)])
def test_selection_epsilon_spends_at_most_the_share(share, rounds):
    zcdp = Budget.make(1.0, None, None).selection_epsilon(share, rounds)
    assert rounds * Fraction(zcdp) ** 2 / 8 <= Fraction(share)
    assert zcdp == pytest.approx(math.sqrt(8 * share / rounds), rel=1e-14)
    pure = Budget.make(None, 1.0, None).selection_epsilon(share, rounds)
    assert rounds * Fraction(pure) <= Fraction(share)


def test_charged_once_equal_to_the_cost():
    dom = wide_domain()
    data = {"a": [1, 2, 3], "b": [0.1, 0.5, 0.9]}
    acc = dpcore.Accountant(10.0, 1e-3)
    marginals(data, domain=dom, attributes=["a", "b", ("a", "b")], rho=0.25, random_state=1,
              accountant=acc)
    assert [c.rho for c in acc.history] == [0.25]
    marginals(data, domain=dom, attributes=["a"], epsilon=0.5, delta=1e-5, random_state=1,
              accountant=acc)
    assert (acc.history[-1].epsilon, acc.history[-1].delta) == (0.5, 1e-5)


@pytest.mark.parametrize("bad, error", [
    (dict(attributes=["zz"]), ValueError), (dict(attributes=[("a", "a")]), ValueError),
    (dict(attributes=[]), ValueError), (dict(attributes="a"), TypeError),
    (dict(domain={"a": 1}), TypeError), (dict(rho=None), ValueError),
    (dict(rho=1e-40), ValueError), (dict(data={"a": [1]}), ValueError)])
def test_bad_arguments_charge_nothing(bad, error):
    acc = dpcore.Accountant(10.0, 1e-3)
    kwargs = dict(data={"a": [1, 2], "b": [0.5, 0.2]}, domain=wide_domain(),
                  attributes=["a", ("a", "b")], rho=0.5, random_state=0, accountant=acc)
    kwargs.update(bad)
    with pytest.raises(error):
        marginals(kwargs.pop("data"), **kwargs)
    assert acc.history == []


def test_three_way_marginals_have_the_right_axes():
    dom = Domain({"x": Categorical("abc"[i] for i in range(3)), "y": Categorical([0, 1]),
                  "z": Numeric(0, 1, bins=4, fill=0.0)})
    out = marginals({"x": ["a"], "y": [1], "z": [0.3]}, domain=dom,
                    attributes=list(itertools.permutations(["x", "y", "z"])), rho=1.0,
                    random_state=0)
    assert out[("z", "x", "y")].shape == (4, 4, 3)
    assert out[("x", "y", "z")].shape == (4, 3, 4)
