"""The privacy accountant: exact sequential composition, refusal, zCDP, parallel and advanced
composition, thread safety, reporting and argument errors."""
import copy
import dataclasses
import pickle
import sys
import threading
from fractions import Fraction

import numpy as np
import pytest

import dpcore
from dpcore import calibration
from dpcore._floats import round_up
from dpcore.accounting import Charge, ParallelBlock, Partition


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


def test_charges_on_one_partition_sum():
    """Three releases on one partition cost their sum; the block costs the maximum over
    partitions (the old block took the maximum over every charge: 0.5 here)."""
    acc = dpcore.Accountant(1.0)
    with acc.parallel(label="cells") as block:
        with block.partition(label="a") as part:
            for _ in range(3):
                entry = part.charge(epsilon=0.2, label="step")
        assert isinstance(part, Partition) and part.label == "a" and part.block is block
        assert isinstance(block, ParallelBlock)
        other = block.partition()
        other.charge(epsilon=0.5)
    three = round_up(3 * Fraction(0.2))
    entry = acc.history[-1]
    assert len(acc.history) == 1 and block.entry == entry
    assert (entry.kind, entry.count, entry.label) == ("parallel", 2, "cells")
    assert (entry.epsilon, entry.delta) == (three, 0.0) and entry.epsilon > 0.6 - 1e-12
    assert acc.spent == (three, 0.0)
    assert part.total == Charge(three, 0.0, None, "a", "repeated", 3, "basic",
                                round_up(3 * Fraction(0.2) ** 2 / 2))
    assert other.total.epsilon == 0.5 and other.total.count == 1


def test_partition_deltas_sum_and_maxima_are_taken_separately():
    acc = dpcore.Accountant(2.0, 1e-5)
    with acc.parallel() as block:
        p = block.partition()
        p.charge(epsilon=0.25, delta=1e-7)
        p.charge(0.25, 2e-7)
        q = block.partition()
        q.charge(epsilon=0.75)
    entry = acc.history[-1]
    assert entry.epsilon == 0.75 and entry.delta == round_up(Fraction(1e-7) + Fraction(2e-7))
    assert entry.count == 2 and entry.rho_implied is None  # p has a delta > 0 charge
    assert p.total.epsilon == 0.5 and p.total.rho_implied is None


def test_direct_block_charges_are_partitions_of_their_own():
    acc = dpcore.Accountant(1.0)
    with acc.parallel() as block:
        block.charge(epsilon=0.5)
        block.charge(epsilon=0.5)
        assert acc.history[-1].epsilon == 0.5 and acc.history[-1].count == 2
        part = block.partition()
        part.charge(epsilon=0.375)
        assert acc.history[-1].epsilon == 0.5
        part.charge(epsilon=0.25)  # this partition now costs 0.625, more than the others
    assert acc.history[-1].epsilon == 0.625 and acc.history[-1].count == 3
    assert acc.spent == (0.625, 0.0)


def test_refused_partition_charge_records_nothing():
    acc = dpcore.Accountant(1.0)
    acc.charge(epsilon=0.125)
    with acc.parallel() as block:
        part = block.partition()
        part.charge(epsilon=0.5)
        part.charge(epsilon=0.25)
        before = (acc.spent, acc.history, acc.report(), part.total, block.entry)
        with pytest.raises(dpcore.BudgetExceeded, match="nothing was charged") as info:
            part.charge(epsilon=0.25)  # 0.125 + 1.0 > 1
        assert info.value.charge.kind == "parallel" and info.value.spent[0] == 1.125
        assert (acc.spent, acc.history, acc.report(), part.total, block.entry) == before
        empty = block.partition()
        with pytest.raises(dpcore.BudgetExceeded):
            empty.charge(epsilon=0.9)
        assert empty.total is None and acc.history[-1].count == 1
        part.charge(epsilon=0.125)  # exactly the rest still fits
        block.partition().charge(epsilon=0.875)  # so does another partition up to the max
    assert acc.spent == (1.0, 0.0) and acc.history[-1].count == 2


def test_partition_rho_implied_is_the_sum_and_the_block_takes_the_max():
    acc = dpcore.Accountant(10.0, 1e-6)
    with acc.parallel() as block:
        a = block.partition()
        for _ in range(3):
            a.charge(epsilon=0.2)
        b = block.partition()
        b.charge(epsilon=0.3)
    sum_a = 3 * Fraction(0.2) ** 2 / 2
    assert sum_a > Fraction(0.3) ** 2 / 2
    assert a.total.rho_implied == round_up(sum_a)
    assert b.total.rho_implied == round_up(Fraction(0.3) ** 2 / 2)
    assert acc.history[-1].rho_implied == round_up(sum_a)
    # the accountant uses it: 50 charges of 0.1 on one partition, as zCDP, cost less than 5
    acc = dpcore.Accountant(5.0, 1e-6)
    with acc.parallel() as block:
        part = block.partition()
        for _ in range(50):
            part.charge(epsilon=0.1)
        block.charge(epsilon=0.5)
    assert acc.report()["analysis"] == "pure-as-zcdp"
    rho = round_up(50 * Fraction(0.1) ** 2 / 2)
    assert acc.spent[0] == pytest.approx(calibration.zcdp_epsilon(rho, 1e-6), rel=1e-12)
    assert acc.spent[0] < 4.0


def test_zcdp_partitions_sum_and_refuse_mixing():
    acc = dpcore.Accountant(2.0, 1e-6)
    with acc.parallel() as block:
        part = block.partition()
        part.charge(rho=0.01)
        part.charge(rho=0.02)
        block.charge(rho=0.025)
        before = (acc.history, part.total)
        with pytest.raises(ValueError, match="mix"):
            part.charge(epsilon=0.1)
        with pytest.raises(ValueError, match="mix"):
            block.partition().charge(epsilon=0.1)
        assert (acc.history, part.total) == before
    entry = acc.history[-1]
    assert entry.rho == round_up(Fraction(0.01) + Fraction(0.02)) and entry.count == 2
    assert entry.epsilon is None and part.total.rho == entry.rho and part.total.count == 2


def test_closed_blocks_and_partitions_refuse_charges():
    acc = dpcore.Accountant(1.0)
    with acc.parallel() as block:
        with block.partition() as part:
            part.charge(epsilon=0.25)
        with pytest.raises(RuntimeError, match="partition is closed"):
            part.charge(epsilon=0.25)
        open_part = block.partition()
    with pytest.raises(RuntimeError, match="block is closed"):
        open_part.charge(epsilon=0.25)
    with pytest.raises(RuntimeError, match="block is closed"):
        block.partition()
    assert acc.spent == (0.25, 0.0) and acc.history[-1].count == 1


def test_partition_as_accountant_of_releases():
    acc = dpcore.Accountant(1.0)
    with acc.parallel(label="sectors") as block:
        for value in (3.0, 5.0):
            with block.partition() as part:
                dpcore.laplace(value, sensitivity=1.0, epsilon=0.25, accountant=part,
                               random_state=1)
                dpcore.laplace(value, sensitivity=1.0, epsilon=0.25, accountant=part,
                               random_state=1)
    assert len(acc.history) == 1 and acc.history[-1].count == 2
    assert 0.49 < acc.spent[0] <= 0.5


def test_concurrent_partition_charges_sum_exactly():
    acc = dpcore.Accountant(100.0)
    block = acc.parallel()
    parts = [block.partition() for _ in range(4)]
    barrier = threading.Barrier(len(parts))

    def run(part, n):
        barrier.wait()
        for _ in range(n):
            part.charge(epsilon=0.125)

    threads = [threading.Thread(target=run, args=(p, 50 + 10 * i)) for i, p in enumerate(parts)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [p.total.count for p in parts] == [50, 60, 70, 80]
    assert acc.spent == (10.0, 0.0) and acc.history[-1].count == 4


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


def test_module_all():
    assert {"Accountant", "BudgetExceeded", "Charge", "ParallelBlock", "Partition"} <= set(
        dpcore.accounting.__all__)
    for name in dpcore.accounting.__all__:
        assert hasattr(dpcore.accounting, name)


# ---------------------------------------------------------------------------------------------
# copies and pickling: one budget, never duplicated


def test_copy_and_deepcopy_return_the_accountant_itself():
    acc = dpcore.Accountant(1.0)
    assert copy.copy(acc) is acc and copy.deepcopy(acc) is acc
    holder = copy.deepcopy({"a": acc, "b": [acc]})
    assert holder["a"] is acc and holder["b"][0] is acc
    copy.deepcopy(acc).charge(epsilon=0.25)
    assert acc.spent == (0.25, 0.0) and not acc.detached


def test_sklearn_clone_shares_the_accountant():
    base = pytest.importorskip("sklearn.base")
    acc = dpcore.Accountant(1.0)
    est = _ChargingEstimator(accountant=acc)
    twin = base.clone(est)
    assert twin.accountant is acc
    twin.fit(np.zeros((4, 1)), np.zeros(4))
    assert acc.spent == (0.1, 0.0)


def _detached_copy():
    acc = dpcore.Accountant(1.0, 1e-6)
    acc.charge(epsilon=0.25, label="a")
    acc.charge(rho=0.01, label="b")
    return acc, pickle.loads(pickle.dumps(acc))


def test_pickled_accountant_is_detached_and_readable():
    acc, dup = _detached_copy()
    assert dup is not acc and dup.detached and not acc.detached
    assert dup.spent == acc.spent and dup.remaining == acc.remaining
    assert dup.history == acc.history and dup.budget == acc.budget
    assert dup.report() == acc.report() and dup.share(2) == acc.share(2)
    assert repr(dup) == repr(acc)[:-1] + ", detached)"
    with pytest.raises(AttributeError):
        dup.detached = False
    again = pickle.loads(pickle.dumps(dup))
    assert again.detached
    with pytest.raises(dpcore.BudgetExceeded, match="pickled copy"):
        again.charge(epsilon=0.01)


@pytest.mark.parametrize("how", ["charge", "charge_zcdp", "charge_repeated", "block", "partition"])
def test_pickled_accountant_refuses_every_charge(how):
    acc, dup = _detached_copy()
    charges = {
        "charge": lambda a: a.charge(epsilon=0.01),
        "charge_zcdp": lambda a: a.charge(rho=0.0001),
        "charge_repeated": lambda a: a.charge_repeated(0.01, k=2, delta_prime=1e-9),
        "block": lambda a: a.parallel().charge(epsilon=0.01),
        "partition": lambda a: a.parallel().partition().charge(epsilon=0.01),
    }
    before = (acc.report(), dup.report())
    with pytest.raises(dpcore.BudgetExceeded,
                       match=r"pickled copy.*would not reach the original budget.*n_jobs=1"):
        charges[how](dup)
    assert (acc.report(), dup.report()) == before
    charges[how](acc)  # the original still charges
    assert len(acc.history) == 3 and len(dup.history) == 2


def test_pickled_accountant_refuses_releases():
    _, dup = _detached_copy()
    with pytest.raises(dpcore.BudgetExceeded, match="pickled copy"):
        dpcore.laplace(1.0, sensitivity=1.0, epsilon=0.1, accountant=dup, random_state=1)
    assert len(dup.history) == 2


try:
    from sklearn.base import BaseEstimator as _EstimatorBase
except ImportError:  # pragma: no cover - the tests using it skip without scikit-learn
    _EstimatorBase = object


class _ChargingEstimator(_EstimatorBase):
    """A minimal scikit-learn estimator whose fit is a release charged to ``accountant``."""

    def __init__(self, accountant=None):
        self.accountant = accountant

    def fit(self, X, y):
        self.accountant.charge(epsilon=0.1, label="fit")
        self.mean_ = float(np.mean(y))
        return self

    def score(self, X, y):
        return -float(np.mean((np.asarray(y) - self.mean_) ** 2))


def test_cross_val_score_in_workers_releases_nothing_unpaid():
    """n_jobs=2 sends pickled (detached) accountants to worker processes: their fits are
    refused, and the original budget is not bypassed."""
    model_selection = pytest.importorskip("sklearn.model_selection")
    try:  # the pickler of joblib's worker processes: vendored before joblib 1.5
        from joblib.externals import cloudpickle
    except ImportError:
        cloudpickle = pytest.importorskip("cloudpickle")
    X = np.arange(20.0).reshape(-1, 1)
    y = np.arange(20.0)
    acc = dpcore.Accountant(1.0)
    # the worker processes cannot import this test module: send the estimator class by value
    module = sys.modules[_ChargingEstimator.__module__]
    cloudpickle.register_pickle_by_value(module)
    try:
        with pytest.raises(dpcore.BudgetExceeded, match="pickled copy"):
            model_selection.cross_val_score(_ChargingEstimator(accountant=acc), X, y, cv=5,
                                            n_jobs=2, error_score="raise")
    finally:
        cloudpickle.unregister_pickle_by_value(module)
    assert acc.spent == (0.0, 0.0) and acc.history == []
    # in the process holding the accountant, the five fits are charged to it
    scores = model_selection.cross_val_score(_ChargingEstimator(accountant=acc), X, y, cv=5,
                                             n_jobs=1, error_score="raise")
    assert len(scores) == 5 and len(acc.history) == 5
    assert acc.spent[0] == pytest.approx(0.5)


def test_charge_partitions_is_all_or_nothing():
    acc = dpcore.Accountant(1.0)
    acc.charge(epsilon=0.25)
    with acc.parallel(label="block") as block:
        with pytest.raises(dpcore.BudgetExceeded):
            block.charge_partitions([[dict(epsilon=0.5)], [dict(epsilon=0.5), dict(epsilon=0.5)]])
        assert len(acc.history) == 1 and acc.spent[0] == 0.25
        parts = block.charge_partitions([[dict(epsilon=0.25), dict(epsilon=0.25)],
                                         [dict(epsilon=0.75)]], labels=["a", "b"])
        assert [p.label for p in parts] == ["a", "b"]
        assert acc.spent[0] == 1.0 and block.entry.count == 2
        assert parts[0].total.epsilon == 0.5
        with pytest.raises(ValueError, match="mix zCDP"):
            block.charge_partitions([[dict(rho=0.1)]])
        assert acc.spent[0] == 1.0


def test_delta_none_is_a_pure_budget_and_zero_still_works():
    """delta=None (the default) and delta=0.0 are the same pure budget; a delta > 0 charge does
    not fit it, and charge_repeated's default is pure too."""
    for acc in (dpcore.Accountant(1.0), dpcore.Accountant(1.0, None), dpcore.Accountant(1.0, 0.0)):
        assert acc.budget == (1.0, 0.0)
        with pytest.raises(dpcore.BudgetExceeded):
            acc.charge(0.1, 1e-9)
        entry = acc.charge_repeated(0.1, k=3)
        assert entry.delta == 0.0 and acc.spent[1] == 0.0
        assert acc.charge_repeated(0.1, 0.0, k=3).delta == 0.0
