"""The privacy accountant: exact sequential composition, refusal, zCDP, parallel and advanced
composition, thread safety, reporting and argument errors."""
import dataclasses
import threading
from fractions import Fraction

import pytest

import dpcore
from dpcore import calibration
from dpcore.accounting import Charge


def _exact_sum(values):
    return sum((Fraction(v) for v in values), Fraction(0))


# ---------------------------------------------------------------------------------------------
# sequential composition and refusal


def test_basic_composition_is_exact():
    acc = dpcore.Accountant(1.0, 1e-5)
    acc.charge(epsilon=0.25, label="a")
    acc.charge(0.125, 1e-6, label="b")
    acc.charge(epsilon=0.5)
    assert acc.spent == (0.875, 1e-6)
    assert acc.remaining == (0.125, 9e-6)
    assert [c.label for c in acc.history] == ["a", "b", None]
    assert acc.history[1] == Charge(0.125, 1e-6, None, "b")
    assert acc.budget == (1.0, 1e-5)
    with pytest.raises(AttributeError):
        acc.epsilon = 2.0  # the budget is read-only


def test_spent_rounds_up_and_is_the_exact_sum():
    acc = dpcore.Accountant(2.0)
    charges = [0.4, 0.6, 0.3, 0.3, 0.3]
    for e in charges:
        acc.charge(epsilon=e)
    exact = _exact_sum(charges)
    assert Fraction(acc.spent[0]) >= exact
    assert Fraction(acc.spent[0]) - exact < Fraction(acc.spent[0]) * Fraction(1, 2**52)
    assert Fraction(acc.remaining[0]) <= 2 - exact


def test_refusal_records_nothing():
    acc = dpcore.Accountant(1.0, 1e-6)
    acc.charge(epsilon=0.6, label="first")
    before = (acc.spent, acc.remaining, acc.history, acc.report())
    with pytest.raises(dpcore.BudgetExceeded, match="nothing was charged") as info:
        acc.charge(epsilon=0.5, label="second")
    assert (acc.spent, acc.remaining, acc.history, acc.report()) == before
    assert info.value.charge.epsilon == 0.5
    assert info.value.budget == (1.0, 1e-6)
    assert info.value.spent[0] == pytest.approx(1.1)
    with pytest.raises(dpcore.BudgetExceeded):
        acc.charge(epsilon=0.1, delta=2e-6)  # delta overspent
    assert (acc.spent, acc.history) == before[0:1] + before[2:3]
    acc.charge(epsilon=0.4)  # exactly the rest still fits
    assert acc.spent == (1.0, 0.0)


def test_budget_tolerance_admits_decimal_literals_and_nothing_more():
    from dpcore.accounting import BUDGET_TOLERANCE

    acc = dpcore.Accountant(1.0)
    for _ in range(10):  # the double 0.1 is slightly above 1/10: 10 * 0.1 > 1 by ~5.6e-17
        acc.charge(epsilon=0.1)
    assert 10 * Fraction(0.1) > 1
    # anything beyond the relative tolerance is refused
    acc = dpcore.Accountant(1.0)
    acc.charge(epsilon=0.5)
    over = float(Fraction(1, 2) + BUDGET_TOLERANCE * 2)
    with pytest.raises(dpcore.BudgetExceeded):
        acc.charge(epsilon=over)
    acc.charge(epsilon=0.5)


def test_share_splits_exactly():
    acc2 = dpcore.Accountant(1.0)
    e = acc2.share(10)
    for _ in range(10):
        acc2.charge(epsilon=e)
    assert 10 * Fraction(e) <= 1
    assert acc2.spent[0] <= 1.0
    assert acc2.share(3) == pytest.approx((1.0 - acc2.spent[0]) / 3, abs=1e-15)


def test_budget_exceeded_is_a_runtime_error_not_a_value_error():
    assert issubclass(dpcore.BudgetExceeded, RuntimeError)
    assert not issubclass(dpcore.BudgetExceeded, ValueError)


def test_history_entries_are_frozen():
    acc = dpcore.Accountant(1.0)
    entry = acc.charge(epsilon=0.5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        entry.epsilon = 0.0
    acc.history.clear()  # a copy
    assert len(acc.history) == 1


# ---------------------------------------------------------------------------------------------
# zCDP


def test_zcdp_charges_sum_and_convert_with_the_remaining_delta():
    acc = dpcore.Accountant(3.0, 1e-5)
    acc.charge(epsilon=0.5, delta=1e-6, label="approx")
    acc.charge(rho=0.02, label="g1")
    acc.charge(rho=0.03, label="g2")
    assert acc.history[-1].rho == 0.03 and acc.history[-1].epsilon is None
    expected = 0.5 + calibration.zcdp_epsilon(0.05, 1e-5 - 1e-6)
    assert acc.spent[0] == pytest.approx(expected, rel=1e-12)
    assert acc.spent[0] >= expected * (1 - 1e-15)
    assert acc.spent[1] == 1e-5
    assert acc.remaining[1] == 0.0
    # an (epsilon, delta) charge can still be accepted: delta is re-split
    acc.charge(epsilon=0.1, delta=1e-6)
    assert acc.spent[0] == pytest.approx(0.6 + calibration.zcdp_epsilon(0.05, 1e-5 - 2e-6), rel=1e-12)
    assert acc.report()["rho"] == pytest.approx(0.05)


def test_zcdp_conversion_matches_calibration_round_trip():
    rho = calibration.zcdp_rho_for(1.0, 1e-6)
    acc = dpcore.Accountant(1.0, 1e-6)
    acc.charge(rho=rho)
    assert acc.spent[0] <= 1.0
    assert acc.spent[0] == pytest.approx(1.0, rel=1e-9)


def test_zcdp_needs_a_delta_budget():
    acc = dpcore.Accountant(10.0)
    with pytest.raises(dpcore.BudgetExceeded, match="delta"):
        acc.charge(rho=0.001)
    assert acc.history == []
    acc2 = dpcore.Accountant(10.0, 1e-6)
    acc2.charge(epsilon=0.1, delta=1e-6)  # uses up all delta
    with pytest.raises(dpcore.BudgetExceeded, match="delta"):
        acc2.charge(rho=0.001)
    assert len(acc2.history) == 1


def test_pure_charges_counted_as_zcdp_when_tighter():
    acc = dpcore.Accountant(1.0, 1e-6)
    for _ in range(400):
        acc.charge(epsilon=2.0**-9)  # basic composition: 400/512 = 0.78
    rho = 400 * 2.0**-18 / 2
    expected = calibration.zcdp_epsilon(rho, 1e-6)
    assert expected < 400 * 2.0**-9
    assert acc.spent[0] == pytest.approx(expected, rel=1e-12)
    assert acc.report()["analysis"] == "pure-as-zcdp"
    # a few large charges: basic is better and is used
    acc2 = dpcore.Accountant(1.0, 1e-6)
    acc2.charge(epsilon=0.5)
    assert acc2.spent == (0.5, 0.0) and acc2.report()["analysis"] == "basic"


def test_gaussian_mechanism_charges_rho():
    acc = dpcore.Accountant(1.0, 1e-6)
    dpcore.gaussian([1.0, 2.0], sensitivity=1.0, rho=0.01, accountant=acc)
    assert acc.history[-1].rho == pytest.approx(0.01, rel=1e-6)
    assert acc.spent[0] == pytest.approx(calibration.zcdp_epsilon(acc.history[-1].rho, 1e-6), rel=1e-12)


# ---------------------------------------------------------------------------------------------
# parallel composition


def test_parallel_block_charges_the_maximum_once():
    acc = dpcore.Accountant(1.0, 1e-6)
    acc.charge(epsilon=0.25)
    with acc.parallel(label="cells") as block:
        block.charge(epsilon=0.5)
        block.charge(epsilon=0.25, delta=1e-7)
        block.charge(epsilon=0.5)
    assert len(acc.history) == 2
    entry = acc.history[-1]
    assert (entry.kind, entry.count, entry.label) == ("parallel", 3, "cells")
    assert (entry.epsilon, entry.delta) == (0.5, 1e-7)
    assert entry.rho_implied is None  # one partition was not pure
    assert acc.spent == (0.75, 1e-7)


def test_parallel_block_refusal_keeps_previous_maximum():
    acc = dpcore.Accountant(1.0)
    with acc.parallel() as block:
        block.charge(epsilon=0.6)
        with pytest.raises(dpcore.BudgetExceeded):
            block.charge(epsilon=1.5)
        block.charge(epsilon=0.9)
    assert acc.spent == (0.9, 0.0)
    assert acc.history[-1].count == 2


def test_parallel_block_zcdp_and_errors():
    acc = dpcore.Accountant(2.0, 1e-6)
    with acc.parallel() as block:
        block.charge(rho=0.01)
        block.charge(rho=0.03)
        with pytest.raises(ValueError, match="mix"):
            block.charge(epsilon=0.1)
    assert acc.history[-1].rho == 0.03
    with pytest.raises(RuntimeError, match="closed"):
        block.charge(rho=0.01)
    assert acc.history[-1].rho == 0.03


def test_parallel_block_as_accountant_of_a_release():
    acc = dpcore.Accountant(1.0)
    with acc.parallel(label="sectors") as block:
        for value in (3.0, 5.0, 8.0):
            dpcore.laplace(value, sensitivity=1.0, epsilon=0.5, accountant=block, random_state=1)
    assert len(acc.history) == 1
    assert 0.49 < acc.spent[0] <= 0.5


# ---------------------------------------------------------------------------------------------
# advanced composition


def test_charge_repeated_picks_advanced_when_smaller():
    acc = dpcore.Accountant(100.0, 1e-5)
    entry = acc.charge_repeated(0.1, k=100, delta_prime=1e-6, label="queries")
    eps_adv, delta_adv = calibration.advanced_composition(0.1, 0.0, 100, 1e-6)
    assert (entry.epsilon, entry.delta) == (eps_adv, delta_adv)
    assert (entry.composition, entry.count, entry.label) == ("advanced", 100, "queries")
    assert entry.epsilon < 10.0


def test_charge_repeated_picks_basic_when_smaller_or_when_only_basic_fits():
    acc = dpcore.Accountant(5.0, 1e-5)
    entry = acc.charge_repeated(1.0, k=2, delta_prime=1e-6)  # advanced: 2 sqrt(2 ln 1e6)... > 2
    assert (entry.epsilon, entry.delta, entry.composition) == (2.0, 0.0, "basic")
    acc2 = dpcore.Accountant(8.0, 1e-7)  # advanced would fit in epsilon but not in delta
    entry = acc2.charge_repeated(0.05, 1e-10, k=100, delta_prime=1e-6)
    assert entry.composition == "basic" and acc2.spent[1] <= 1e-7


def test_charge_repeated_refuses_when_nothing_fits():
    acc = dpcore.Accountant(1.0, 1e-5)
    with pytest.raises(dpcore.BudgetExceeded):
        acc.charge_repeated(0.5, k=100, delta_prime=1e-6)
    assert acc.history == []


def test_charge_repeated_pure_can_use_zcdp():
    acc = dpcore.Accountant(10.0, 1e-5)
    acc.charge_repeated(0.1, k=100, delta_prime=1e-6)
    # the 100 pure releases are also 100 * 0.01 / 2 = 0.5-zCDP: tighter than advanced (6.31)
    assert acc.spent[0] == pytest.approx(calibration.zcdp_epsilon(0.5, 1e-5), rel=1e-12)
    assert acc.spent[0] < 5.0


# ---------------------------------------------------------------------------------------------
# thread safety


def test_concurrent_charges_never_overspend_and_sum_exactly():
    acc = dpcore.Accountant(1.0)
    step = 2.0**-7  # exactly 128 charges fit
    accepted = []
    barrier = threading.Barrier(16)

    def worker():
        barrier.wait()
        for _ in range(20):
            try:
                acc.charge(epsilon=step)
            except dpcore.BudgetExceeded:
                continue
            accepted.append(1)

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(accepted) == 128 == len(acc.history)
    assert acc.spent == (1.0, 0.0)


def test_concurrent_mixed_charges_never_overspend():
    acc = dpcore.Accountant(2.0, 1e-5)
    barrier = threading.Barrier(8)

    def worker(i):
        barrier.wait()
        for j in range(30):
            try:
                if (i + j) % 3 == 0:
                    acc.charge(rho=0.003)
                elif (i + j) % 3 == 1:
                    acc.charge(epsilon=0.07, delta=1e-7)
                else:
                    acc.charge(epsilon=0.03)
            except dpcore.BudgetExceeded:
                pass

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    history = acc.history
    eps_sum = _exact_sum(c.epsilon for c in history if c.rho is None)
    delta_sum = _exact_sum(c.delta for c in history if c.rho is None)
    rho_sum = sum(c.rho for c in history if c.rho is not None)
    assert delta_sum < Fraction(1e-5)
    basic = eps_sum + Fraction(calibration.zcdp_epsilon(rho_sum, float(Fraction(1e-5) - delta_sum)))
    spent = Fraction(acc.spent[0])
    assert spent <= 2
    assert spent <= basic * (1 + Fraction(1, 10**9))  # never worse than the basic analysis


# ---------------------------------------------------------------------------------------------
# reporting and errors


def test_report_and_repr():
    acc = dpcore.Accountant(1.0, 1e-6)
    acc.charge(epsilon=0.25, label="count")
    report = acc.report()
    assert report["budget"] == {"epsilon": 1.0, "delta": 1e-6}
    assert report["spent"] == {"epsilon": 0.25, "delta": 0.0}
    assert report["remaining"] == {"epsilon": 0.75, "delta": 1e-6}
    assert report["charges"] == 1 and report["history"][0]["label"] == "count"
    assert repr(acc) == "Accountant(epsilon=1.0, delta=1e-06; spent=(0.25, 0.0), charges=1)"


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"epsilon": -1.0}, "epsilon"),
        ({"epsilon": 0.1, "delta": 1.0}, "delta"),
        ({"rho": -0.1}, "rho"),
        ({"epsilon": 0.1, "rho": 0.1}, "rho"),
        ({"delta": 1e-6}, "epsilon"),
    ],
)
def test_charge_errors_name_the_parameter(kwargs, name):
    acc = dpcore.Accountant(1.0, 1e-5)
    with pytest.raises(ValueError, match=name):
        acc.charge(**kwargs)
    assert acc.history == []


def test_constructor_and_method_errors():
    with pytest.raises(ValueError, match="epsilon"):
        dpcore.Accountant(0.0)
    with pytest.raises(ValueError, match="delta"):
        dpcore.Accountant(1.0, 1.0)
    with pytest.raises(TypeError, match="epsilon"):
        dpcore.Accountant("1")
    acc = dpcore.Accountant(1.0)
    with pytest.raises(TypeError, match="k"):
        acc.charge_repeated(0.1, k=2.5)
    with pytest.raises(ValueError, match="delta_prime"):
        acc.charge_repeated(0.1, k=2, delta_prime=0.0)
    with pytest.raises(ValueError, match="k"):
        acc.share(0)
    with pytest.raises(TypeError, match="label"):
        acc.charge(epsilon=0.1, label=3)


def test_pickle_copies_budget_and_history():
    import pickle

    acc = dpcore.Accountant(1.0, 1e-6)
    acc.charge(epsilon=0.25, label="a")
    acc.charge(rho=0.01, label="b")
    copy = pickle.loads(pickle.dumps(acc))
    assert copy.spent == acc.spent and copy.history == acc.history and copy.budget == acc.budget
    copy.charge(epsilon=0.1)  # the copy has its own lock and state
    assert len(copy.history) == 3 and len(acc.history) == 2
