"""Accountant(method="rdp" | "pld"): composition of the releases' curves, atomic refusal of
overspending, agreement with the curves and with the default analysis."""
import math
import pickle

import numpy as np
import pytest

import dpcore
import dpcore.curves
from dpcore import calibration
from dpcore._release import Cost
from dpcore.accounting import Charge
from dpcore.curves import (DEFAULT_ORDERS, DiscreteGaussian, DiscreteLaplace, Gaussian, Laplace,
                           PureDP, ZCDP, check_orders, epsilon_from_rdp)

METHODS = ["rdp", "pld"]


def snapshot(acc):
    return acc.spent, acc.remaining, acc.history, acc.report()


@pytest.mark.parametrize("method", METHODS)
def test_refused_charge_changes_nothing(method):
    acc = dpcore.Accountant(3.0, 1e-6, method=method)
    step = Gaussian(sigma=2.0).poisson(0.05)
    acc.charge(curve=step.repeat(100), label="sgd")
    acc.charge(epsilon=0.1)
    before = snapshot(acc)
    with pytest.raises(dpcore.BudgetExceeded, match="nothing was charged") as info:
        acc.charge(curve=step.repeat(5000), label="too many steps")
    assert info.value.spent[0] > 3.0
    assert snapshot(acc) == before
    with pytest.raises(dpcore.BudgetExceeded):
        acc.charge(epsilon=2.9)
    with pytest.raises(dpcore.BudgetExceeded):
        with acc.parallel() as block:
            block.charge(epsilon=2.95)
    assert snapshot(acc)[:3] == before[:3]
    acc.charge(curve=step.repeat(10))  # what fits is still accepted
    assert len(acc.history) == 3  # the refused parallel block took no entry


@pytest.mark.parametrize("method", METHODS)
def test_releases_refused_by_a_curve_accountant_draw_nothing(method):
    acc = dpcore.Accountant(1.0, 1e-6, method=method)
    dpcore.gaussian([1.0, 2.0], sensitivity=1.0, rho=0.01, accountant=acc, random_state=0)
    before = snapshot(acc)
    with pytest.raises(dpcore.BudgetExceeded):
        dpcore.laplace(3.0, sensitivity=1.0, epsilon=0.45, accountant=acc, random_state=0)
    assert snapshot(acc) == before


@pytest.mark.parametrize("method", METHODS)
def test_never_worse_than_the_default_analysis(method):
    rng = np.random.default_rng(3)
    default = dpcore.Accountant(50.0, 1e-6)
    tight = dpcore.Accountant(50.0, 1e-6, method=method)
    for _ in range(40):
        kind = rng.integers(3)
        if kind == 0:
            kwargs = dict(epsilon=float(rng.uniform(0.01, 0.3)))
        elif kind == 1:
            kwargs = dict(epsilon=float(rng.uniform(0.01, 0.3)), delta=1e-9)
        else:
            kwargs = dict(rho=float(rng.uniform(0.001, 0.01)))
        default.charge(**kwargs)
        tight.charge(**kwargs)
        assert tight.spent[0] <= default.spent[0]


def test_pld_accountant_composes_gaussians_exactly():
    """200 Gaussian releases charged one by one: the exact Gaussian with sqrt(200) times the
    ratio, up to one grid step (Gaussian curves merge before discretisation)."""
    acc = dpcore.Accountant(10.0, 1e-6, method="pld")
    sigma = math.sqrt(200) * 2.0
    for _ in range(200):
        acc.charge(curve=Gaussian(sigma))
    exact = Gaussian(2.0).epsilon_for(1e-6)  # its PLD: the exact value plus at most a step
    assert exact - 2e-4 <= acc.spent[0] <= exact
    assert acc.report()["analysis"] == "pld"


def test_accountant_matches_the_curve_it_was_charged():
    step = Gaussian(sigma=1.0).poisson(0.01)
    curve = step.repeat(1000)
    orders = check_orders(DEFAULT_ORDERS)
    rdp = dpcore.Accountant(5.0, 1e-6, method="rdp")
    rdp.charge(curve=curve)
    assert rdp.spent[0] == pytest.approx(epsilon_from_rdp(orders, curve.rdp(orders), 1e-6)[0],
                                         rel=1e-12)
    pld = dpcore.Accountant(5.0, 1e-6, method="pld")
    pld.charge(curve=curve)
    assert pld.spent[0] == pytest.approx(curve.pld(1e-4).epsilon(1e-6), rel=1e-12)
    assert pld.spent[0] < rdp.spent[0] < 2.5
    assert pld.spent[1] == 1e-6


def test_pld_joins_curves_without_a_pld_by_splitting_delta():
    acc = dpcore.Accountant(20.0, 1e-6, method="pld")
    acc.charge(curve=Laplace(2.0).repeat(20))
    acc.charge(curve=DiscreteGaussian(sigma=10.0, sensitivity=1.0).repeat(10))
    eps = acc.spent[0]
    # any split is an upper bound; the accountant takes the best of a grid, and never more
    # than the RDP analysis
    orders = check_orders(DEFAULT_ORDERS)
    lap = Laplace(2.0).repeat(20).pld(1e-4)
    dg_rdp = DiscreteGaussian(10.0).repeat(10).rdp(orders)
    half = lap.epsilon(0.5e-6) + epsilon_from_rdp(orders, dg_rdp, 0.5e-6)[0]
    assert eps <= half * (1 + 1e-12)
    both = Laplace(2.0).repeat(20).rdp(orders) + dg_rdp
    assert eps <= epsilon_from_rdp(orders, both, 1e-6)[0] * (1 + 1e-12)


def test_repeated_charges_use_the_curve_of_each_release():
    default = dpcore.Accountant(10.0, 1e-6)
    pld = dpcore.Accountant(10.0, 1e-6, method="pld")
    for acc in (default, pld):
        acc.charge_repeated(0.05, k=400, delta_prime=1e-7)
    assert pld.history[0].curve == PureDP(0.05).repeat(400)
    assert default.history[0].curve is None
    assert pld.spent[0] < default.spent[0]


def test_laplace_and_gaussian_releases_state_their_curves():
    acc = dpcore.Accountant(100.0, 1e-6, method="pld")
    dpcore.laplace(1.0, sensitivity=1.0, epsilon=0.5, accountant=acc, random_state=0)
    dpcore.gaussian(1.0, sensitivity=1.0, rho=0.01, accountant=acc, random_state=0)
    dpcore.gaussian(1.0, sensitivity=1.0, epsilon=1.0, delta=1e-7, accountant=acc,
                    random_state=0)
    dpcore.laplace([1.0, 2.0], sensitivity=1.0, epsilon=0.5, accountant=acc, random_state=0)
    lap, g_rho, g_eps, lap_vec = acc.history
    assert isinstance(lap.curve, DiscreteLaplace) and lap.epsilon == 0.5
    assert lap.curve.fallback()["epsilon"] == pytest.approx(lap.epsilon, rel=1e-9)
    assert isinstance(g_rho.curve, DiscreteGaussian)
    assert g_rho.curve.rho == pytest.approx(g_rho.rho, rel=1e-9) and g_rho.curve.rho >= g_rho.rho
    assert isinstance(g_eps.curve, DiscreteGaussian) and g_eps.epsilon == 1.0
    assert lap_vec.curve is None  # a vector: the plain pure guarantee only
    # 100 scalar Laplace releases: far tighter than basic composition (10)
    acc = dpcore.Accountant(10.0, 1e-6, method="pld")
    for _ in range(100):
        dpcore.laplace(1.0, sensitivity=1.0, epsilon=0.1, accountant=acc, random_state=0)
    assert acc.spent[0] < 0.6 * 10.0


def test_curve_only_charges_and_their_errors():
    step = Gaussian(sigma=1.0).poisson(0.01)
    default = dpcore.Accountant(10.0, 1e-6)
    with pytest.raises(ValueError, match="method='rdp' or 'pld'"):
        default.charge(curve=step)
    assert default.history == []
    entry = default.charge(curve=Gaussian(2.0))  # a curve with a plain guarantee lends it
    assert entry.rho == pytest.approx(0.125) and entry.curve == Gaussian(2.0)
    acc = dpcore.Accountant(10.0, 1e-6, method="rdp")
    entry = acc.charge(curve=step)
    assert (entry.epsilon, entry.delta, entry.rho) == (None, None, None)
    assert acc.report()["history"][0]["curve"] == repr(step)
    with pytest.raises(ValueError, match="parallel block"):
        with acc.parallel() as block:
            block.charge(curve=step)
    with pytest.raises(TypeError, match="curve"):
        acc.charge(epsilon=0.1, curve="gaussian")
    with pytest.raises(TypeError, match="curve"):
        Cost(0.1, curve=0.5)


def test_one_relation_per_accountant():
    acc = dpcore.Accountant(10.0, 1e-6, method="rdp")
    acc.charge(curve=Gaussian(2.0).poisson(0.1))  # add/remove
    acc.charge(epsilon=0.1)  # no relation stated: fine
    with pytest.raises(ValueError, match="one relation"):
        acc.charge(curve=DiscreteLaplace(2.0, 1, relation="substitution").without_replacement(0.1))
    assert len(acc.history) == 2


def test_method_arguments_are_checked():
    with pytest.raises(ValueError, match="method"):
        dpcore.Accountant(1.0, method="moments")
    with pytest.raises(ValueError, match="orders"):
        dpcore.Accountant(1.0, method="rdp", orders=[0.5, 2.0])
    with pytest.raises(ValueError, match="pld_interval"):
        dpcore.Accountant(1.0, method="pld", pld_interval=0.0)
    with pytest.raises(ValueError, match="pld_interval"):
        dpcore.Accountant(1.0, method="pld", pld_interval=2.0)
    acc = dpcore.Accountant(1.0, 1e-6, method="pld", orders=[2.0, 4.0, 8.0], pld_interval=1e-3)
    assert acc.method == "pld" and acc.report()["method"] == "pld"


@pytest.mark.parametrize("method", METHODS)
def test_zero_delta_budget_still_composes_pure_charges(method):
    acc = dpcore.Accountant(1.0, method=method)
    for _ in range(10):
        acc.charge(epsilon=0.1)
    assert acc.spent == (pytest.approx(1.0, abs=1e-15), 0.0)
    with pytest.raises(dpcore.BudgetExceeded):
        acc.charge(rho=0.001)


def test_pickled_curve_accountant_is_detached_and_readable():
    acc = dpcore.Accountant(5.0, 1e-6, method="pld")
    acc.charge(curve=Gaussian(1.0).poisson(0.01).repeat(100))
    copy = pickle.loads(pickle.dumps(acc))
    assert copy.detached and copy.spent == acc.spent and copy.method == "pld"
    with pytest.raises(dpcore.BudgetExceeded, match="detached"):
        copy.charge(epsilon=0.01)


@pytest.mark.parametrize("method", METHODS)
def test_parallel_blocks_compose_as_their_plain_guarantee(method):
    acc = dpcore.Accountant(2.0, 1e-6, method=method)
    with acc.parallel() as block:
        for _ in range(3):
            with block.partition() as part:
                part.charge(curve=Laplace(2.0))  # 0.5-DP each, summed on the partition
                part.charge(epsilon=0.25)
    assert acc.history[-1].epsilon == 0.75
    assert acc.spent[0] <= 0.75


def test_zcdp_charges_in_rdp_match_the_tight_conversion():
    acc = dpcore.Accountant(5.0, 1e-5, method="rdp")
    acc.charge(curve=ZCDP(0.3))
    exact = calibration.zcdp_epsilon(0.3, 1e-5)
    assert exact * (1 - 1e-12) <= acc.spent[0] <= exact * 1.002


def test_charge_records_the_curve():
    acc = dpcore.Accountant(5.0, 1e-6, method="pld")
    entry = acc.charge(epsilon=0.5, curve=Laplace(2.0), label="x")
    assert entry == Charge(0.5, 0.0, None, "x", rho_implied=0.125, curve=Laplace(2.0))


def test_pld_composes_curves_with_only_a_plain_guarantee_as_that():
    """Sampling (epsilon, delta)-DP releases without replacement: no PLD or RDP bound, but the
    amplified (epsilon', g delta); the PLD analysis uses it rather than giving up."""
    curve = dpcore.curves.ApproxDP(0.5, 1e-8, relation="substitution").without_replacement(0.1)
    acc = dpcore.Accountant(10.0, 1e-6, method="pld")
    for _ in range(50):
        acc.charge(curve=curve)
    pld_spent = [a.evaluate(acc._budget_delta) for a in acc._analyses][-1]
    assert pld_spent is not None and pld_spent.analysis == "pld"
    eps1 = curve.fallback()["epsilon"]
    assert acc.spent[0] < 50 * eps1  # tighter than summing the amplified epsilons
    with acc.parallel() as block:  # a block entry replaced in place: the history is rebuilt
        block.charge(epsilon=0.1)
        block.charge(epsilon=0.2)
    assert acc.history[-1].epsilon == 0.2


def test_laplace_on_a_very_fine_grid_keeps_its_plain_guarantee():
    """A shift beyond 2**53 grid units has no DiscreteLaplace curve: the release still runs and
    charges its pure epsilon."""
    acc = dpcore.Accountant(5000.0, method="pld")
    dpcore.laplace(1.0, sensitivity=1.0, epsilon=2000.0, granularity=2.0**-54, accountant=acc,
                   random_state=0)
    assert acc.history[0].curve is None and acc.spent[0] == pytest.approx(2000.0)
