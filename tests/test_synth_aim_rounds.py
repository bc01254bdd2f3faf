"""dpcore.synth.AIM's default number of rounds: a noisy record count bought with a public share
of the budget (its law), T a function of public values and that count only, and the budget
split summing exactly to the total."""
import math
from fractions import Fraction

import numpy as np
import pytest

from _gof import ALPHA
from test_synth_mst import dgauss_pvalue, dlap_pvalue

import dpcore
import dpcore.synth._aim as aim_module
from dpcore.synth import AIM, Categorical, Domain
from dpcore.synth._aim import COUNT_SHARE, ROUNDS_PER_COLUMN, sized_rounds


def one_column(n):
    return Domain({"a": Categorical([0, 1])}), {"a": np.arange(n) % 2}


def counts_minus_n(kwargs, n, seeds):
    dom, data = one_column(n)
    fits = [AIM(domain=dom, random_state=seed, **kwargs).fit(data) for seed in seeds]
    return np.array([f.record_count_ - n for f in fits]), fits[0]


@pytest.mark.slow
def test_record_count_law_gaussian():
    """rho = 0.5: the count gets rho / 100, discrete Gaussian with sigma**2 >= 1 / (2 * 0.005)
    (sigma 10); 1500 fits against the exact law, chi-square at alpha 1e-4; power: sigma 20%
    off is rejected."""
    noise, fit = counts_minus_n(dict(rho=0.5), 50, range(1500))
    sigma = fit.plan_.count.scale
    assert sigma == pytest.approx(10.0, rel=1e-12)
    assert 2 * Fraction(sigma) ** 2 * Fraction(0.5) * COUNT_SHARE >= 1
    assert dgauss_pvalue(noise, sigma) > ALPHA
    assert dgauss_pvalue(noise, 1.2 * sigma) < ALPHA  # power
    assert dgauss_pvalue(noise, sigma / 1.2) < ALPHA


@pytest.mark.slow
def test_record_count_law_laplace():
    """epsilon = 20 (pure): the count's discrete Laplace scale is 1 / 0.2 = 5 (rounded up);
    1500 fits against the exact law, chi-square at alpha 1e-4; a scale 40% off is rejected (the
    discrete Laplace's heavier tails make its scale harder to tell apart than a sigma)."""
    noise, fit = counts_minus_n(dict(epsilon=20.0), 50, range(1500))
    scale = fit.plan_.count.scale
    assert Fraction(scale) >= 5 and scale == pytest.approx(5.0, rel=1e-12)
    assert dlap_pvalue(noise, scale) > ALPHA
    assert dlap_pvalue(noise, 1.4 * scale) < ALPHA  # power
    assert dlap_pvalue(noise, scale / 1.4) < ALPHA


@pytest.mark.parametrize("kwargs", [dict(rho=0.02), dict(epsilon=1.0),
                                    dict(epsilon=1.0, delta=1e-9)])
def test_budget_split_sums_exactly_to_the_total(kwargs):
    """The count's exact guarantee plus every round's is at most the total, within rounding of
    it, and the charge is the cost."""
    acc = dpcore.Accountant(10.0, 1e-3)
    dom, data = one_column(300)
    aim = AIM(domain=dom, random_state=1, accountant=acc, **kwargs)
    cost = aim.cost
    aim.fit(data)
    assert len(acc.history) == 1 and acc.history[0].epsilon == cost.epsilon
    plan = aim.plan_
    whole = Fraction(plan.budget.total)
    count = plan.count
    spent = (Fraction(1) / (2 * Fraction(count.scale) ** 2) if count.mechanism == "gaussian"
             else 1 / Fraction(count.scale))
    assert spent <= whole * COUNT_SHARE and spent > whole * COUNT_SHARE * Fraction(99, 100)
    rest = whole - spent
    # a round's shares come from what the count left, divided into the chosen T
    assert Fraction(plan.measure) + Fraction(plan.select) <= rest / plan.rounds
    assert Fraction(plan.measure) + Fraction(plan.select) > rest / plan.rounds * (1 - 1e-12)
    assert aim.budget_spent_ <= whole and aim.budget_spent_ == pytest.approx(whole, rel=1e-9)


def test_given_rounds_release_no_count():
    dom, data = one_column(300)
    aim = AIM(rho=0.5, domain=dom, rounds=3, random_state=0).fit(data)
    assert aim.plan_.count is None and aim.record_count_ is None and aim.plan_.rounds == 3
    assert aim.budget_spent_ == pytest.approx(0.5, rel=1e-9)


def test_rounds_are_a_function_of_public_values_and_the_released_count(monkeypatch):
    """With the count forced to one value, data sets of 30 and 30,000 records get the same T,
    the one sized_rounds gives from the public values and that count; the real count is what
    the default reads, and T moves with it."""
    dom = Domain({"a": Categorical(range(4)), "b": Categorical(range(3))})
    rng = np.random.default_rng(0)  # insecure-ok: test data
    small = {"a": rng.integers(0, 4, 30), "b": rng.integers(0, 3, 30)}
    large = {"a": rng.integers(0, 4, 30_000), "b": rng.integers(0, 3, 30_000)}
    monkeypatch.setattr(aim_module, "noisy_record_count", lambda noise, n, rng: 700)
    found = {AIM(rho=0.01, domain=dom, random_state=seed).fit(data).plan_.rounds
             for data in (small, large) for seed in (0, 1)}
    fit = AIM(rho=0.01, domain=dom, random_state=0).fit(small)
    rest = Fraction(0.01) - 1 / (2 * Fraction(fit.plan_.count.scale) ** 2)
    assert found == {sized_rounds("gaussian", rest, dom.shape, 700)}
    monkeypatch.undo()
    rounds = [AIM(rho=0.01, domain=dom, random_state=0).fit(data).plan_.rounds
              for data in (small, large)]
    assert rounds[0] < rounds[1] == ROUNDS_PER_COLUMN * 2


def test_sized_rounds_rule():
    """T is the largest in [d, 16 d] whose 1-way noise std per cell is at most NOISE_TO_SIGNAL
    times the mean count per cell, non-decreasing in the count and the budget."""
    shape = (9,) * 31
    low = sized_rounds("gaussian", Fraction(0.0148), shape, 0)
    assert low == 31
    assert sized_rounds("gaussian", Fraction(0.0148), shape, 10**6) == 16 * 31
    values = [sized_rounds("gaussian", Fraction(0.0148), shape, n) for n in range(0, 3000, 50)]
    assert values == sorted(values) and 31 < values[-1] <= 16 * 31
    for n in (300, 800, 1500):
        t = sized_rounds("gaussian", Fraction(0.0148), shape, n)
        allowed = aim_module.NOISE_TO_SIGNAL * n / 9
        if 31 < t < 16 * 31:  # T is the largest meeting the bound
            assert math.sqrt(t / (1.8 * 0.0148)) <= allowed * (1 + 1e-12)
            assert math.sqrt((t + 1) / (1.8 * 0.0148)) > allowed
    pure = [sized_rounds("laplace", Fraction(e), shape, 400) for e in (0.5, 1, 2, 4)]
    assert pure == sorted(pure)
