"""Calibrated plans (issue 26): cost known before data, charged once, composed before data."""
import numpy as np
import pytest
from _recording import RecordingAccountant

import dpcore
from dpcore import plans
from dpcore._release import Cost
from dpcore.curves import Composed
from dpcore.mechanisms import GaussianMechanism, LaplaceMechanism


def laplace_plan(epsilon=0.5, size=1):
    return plans.wrap(LaplaceMechanism.calibrate(sensitivity=1.0, epsilon=epsilon, size=size),
                      "count")


def test_cost_is_known_before_data_and_charged_once():
    plan = laplace_plan(size=3)
    assert plan.cost == Cost(0.5, 0.0)
    acc = dpcore.Accountant(1.0)
    out = plan.release([1.0, 2.0, 3.0], accountant=acc, random_state=1)
    assert out.shape == (3,) and len(acc.history) == 1
    assert (acc.history[0].epsilon, acc.history[0].delta) == (0.5, 0.0)


def test_plan_draws_what_the_mechanism_draws():
    """A wrapped plan is the mechanism: the same generator gives the same release (its law is
    the mechanism's, tested in test_mechanisms)."""
    mech = LaplaceMechanism.calibrate(sensitivity=1.0, epsilon=0.5)
    a = plans.wrap(mech, "x").release(7.0, random_state=dpcore.default_rng(3))
    b = mech.release(7.0, random_state=dpcore.default_rng(3))
    assert a == b


def test_bad_data_is_refused_before_the_charge():
    acc = dpcore.Accountant(1.0)
    with pytest.raises(ValueError, match="calibrated for 3"):
        laplace_plan(size=3).release([1.0, 2.0], accountant=acc)
    with pytest.raises(ValueError, match="NaN"):
        laplace_plan().release(np.nan, accountant=acc)
    with pytest.raises(ValueError, match="one input per plan"):
        plans.sequential(laplace_plan(), laplace_plan()).release((1.0,), accountant=acc)
    assert acc.history == []


def test_sequential_adds_costs_and_draws_in_order():
    a, b = laplace_plan(0.25), laplace_plan(0.5)
    both = plans.sequential(a, b)
    assert (both.cost.epsilon, both.cost.delta) == (0.75, 0.0)
    assert both.cost.curve == Composed((a.cost.curve, b.cost.curve))  # the curves composed
    acc = dpcore.Accountant(1.0)
    out = both.release((10.0, 20.0), accountant=acc, random_state=dpcore.default_rng(5))
    rng = dpcore.default_rng(5)
    assert out == (a._draw(a._prepare(10.0), rng), b._draw(b._prepare(20.0), rng))
    assert len(acc.history) == 1 and acc.spent == (0.75, 0.0)
    with pytest.raises(dpcore.BudgetExceeded):
        both.release((10.0, 20.0), accountant=acc)
    assert acc.spent == (0.75, 0.0)


def test_total_cost_rounds_up_and_refuses_mixed_notions():
    third = Cost(1 / 3)
    total = plans.total_cost([third] * 3)
    assert total.epsilon >= 1.0 and total.epsilon == pytest.approx(1.0)
    rho = plans.wrap(GaussianMechanism.calibrate(sensitivity=1.0, rho=0.1), "g")
    assert plans.sequential(rho, rho).cost.rho == pytest.approx(0.2)
    with pytest.raises(ValueError, match="rho-zCDP and"):
        plans.sequential(rho, laplace_plan())
    with pytest.raises(ValueError, match="at least one"):
        plans.total_cost([])


def test_parallel_costs_one_part():
    part = laplace_plan(0.5)
    over = plans.parallel(part, 4)
    assert over.cost == part.cost
    acc = dpcore.Accountant(0.5)
    out = over.release([1.0, 2.0, 3.0, 4.0], accountant=acc, random_state=2)
    assert len(out) == 4 and acc.spent == (0.5, 0.0)
    with pytest.raises(ValueError, match="4 parts"):
        over.release([1.0], accountant=dpcore.Accountant(1.0))


def test_relations_must_agree():
    edge = plans.wrap(LaplaceMechanism.calibrate(sensitivity=1.0, epsilon=0.5), "edges",
                      relation="edge-DP")
    with pytest.raises(ValueError, match="different neighbouring relations"):
        plans.sequential(edge, laplace_plan())
    with pytest.raises(TypeError):
        plans.sequential(object())


# -- every calibrated mechanism is a plan whose cost is what its release charges ---------------

#: calibrations of each mechanism class of dpcore.mechanisms (each method, each notion)
MECHANISMS = {
    LaplaceMechanism: [
        dict(sensitivity=1.0, epsilon=0.5),
        dict(sensitivity=2.0, epsilon=1.0, size=3),
        dict(sensitivity=1.0, epsilon=0.5, bound=10.0, method="snapping"),
        dict(sensitivity=1.0, epsilon=0.5, size=2, bound=1e4, method="snapping"),  # delta > 0
        dict(sensitivity=1.0, epsilon=1.0, granularity=2.0**-10),
    ],
    GaussianMechanism: [
        dict(sensitivity=1.0, rho=0.1),
        dict(sensitivity=1.0, epsilon=1.0, delta=1e-6),
        dict(sensitivity=3.0, epsilon=0.5, delta=1e-8, size=4),
        dict(sensitivity=1.0, rho=0.5, size=2, granularity=2.0**-8),
    ],
}


def test_every_mechanism_class_is_in_the_registry():
    from dpcore import mechanisms

    classes = {getattr(mechanisms, name) for name in mechanisms.__all__}
    classes = {c for c in classes if isinstance(c, type) and c.__name__.endswith("Mechanism")}
    assert classes == set(MECHANISMS)
    assert all(issubclass(c, plans.Plan) for c in classes)


@pytest.mark.parametrize("cls, params", [(c, p) for c, ps in MECHANISMS.items() for p in ps],
                         ids=lambda x: x.__name__ if isinstance(x, type) else repr(x))
def test_mechanism_cost_is_what_its_release_charges(cls, params):
    mech = cls.calibrate(**params)
    cost = mech.cost  # from the calibration alone
    if cls is LaplaceMechanism:
        assert (cost.epsilon, cost.delta) == (mech.epsilon_effective, mech.delta_effective)
        assert cost.epsilon <= mech.epsilon * (mech.size if mech.method == "snapping" else 1)
    elif mech.epsilon is None:
        assert cost.rho == mech.rho <= params["rho"]
    else:
        assert (cost.epsilon, cost.delta) == (params["epsilon"], params["delta"])
    assert cost.curve == mech.curve
    acc = RecordingAccountant()
    value = np.arange(mech.size, dtype=float) if mech.size > 1 else 3.0
    out = mech.release(value, accountant=acc, random_state=1)
    assert np.shape(out) == np.shape(value)
    assert acc.charges == [(cost, mech.label)]
    # the same through the Plan protocol, wrapped or composed
    acc = RecordingAccountant()
    plans.sequential(mech, plans.wrap(mech, "again")).release((value, value), accountant=acc,
                                                              random_state=1)
    assert acc.charges == [(plans.total_cost([cost, cost]), f"{mech.label} + again")]


@pytest.mark.parametrize("cls", list(MECHANISMS))
def test_mechanism_refuses_bad_data_before_the_charge(cls):
    mech = cls.calibrate(**MECHANISMS[cls][1])
    acc = RecordingAccountant()
    for bad in (np.zeros(mech.size + 1), np.full(mech.size, np.nan), "x"):
        with pytest.raises((ValueError, TypeError)):
            mech.release(bad, accountant=acc)
    assert acc.charges == []


def test_wrap_keeps_the_plans_relation_unless_restated():
    mech = LaplaceMechanism.calibrate(sensitivity=1.0, epsilon=0.5)
    assert plans.wrap(mech, "a").relation == mech.relation == plans.ADD_REMOVE
    assert plans.wrap(mech, "a", relation="edge-DP").cost == mech.cost
    with pytest.raises(TypeError, match="plan must be"):
        plans.wrap(object(), "a")
    with pytest.raises(ValueError, match="relation"):
        plans.wrap(mech, "a", relation=" ")


@pytest.mark.parametrize("cls", list(MECHANISMS))
def test_mechanism_states_the_relation_it_was_calibrated_for(cls):
    params = MECHANISMS[cls][0]
    assert cls.calibrate(**params).relation == plans.ADD_REMOVE
    swap = cls.calibrate(**params, relation="replace one record")
    assert swap.relation == "replace one record" and swap.cost == cls.calibrate(**params).cost
    with pytest.raises(ValueError, match="different neighbouring relations"):
        plans.sequential(swap, cls.calibrate(**params))
    assert plans.sequential(swap, swap).relation == "replace one record"
    with pytest.raises(TypeError, match="relation"):
        cls.calibrate(**params, relation=None)
    with pytest.raises(ValueError, match="relation"):
        cls.calibrate(**params, relation="")
