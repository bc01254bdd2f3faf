"""The selection and local mechanism classes are plans (issue 26): cost known from the
calibration, equal to what their release charges, composable before any data.

Their output laws are tested in test_selection, test_permute_and_flip and test_local; here a
plan's release is checked to draw exactly what the public function draws for the same seed."""
import numpy as np
import pytest
from _recording import RecordingAccountant

import dpcore
from dpcore import curves, local, plans, selection
from dpcore._release import Cost
from dpcore.local._epsilon import LOCAL_RELATION


UTILITY = np.array([3.0, 9.0, -np.inf, 7.5, 8.0])
BOX = ((0.0, 30.0), (0.0, 40.0))
POINTS = np.array([[1.0, 2.0], [29.0, 39.5], [15.25, 0.0]])
CODES = np.array([0, 3, 4, 1, 3])

#: (mechanism class, calibration, data, the public function releasing the same draw)
REGISTRY = [
    (selection.ExponentialMechanism, dict(sensitivity=1.0, epsilon=0.7), UTILITY,
     lambda d, **kw: selection.exponential(d, sensitivity=1.0, epsilon=0.7, **kw)),
    (selection.ExponentialMechanism, dict(sensitivity=2.0, epsilon=0.3, monotonic=True,
                                          method="gumbel"), UTILITY,
     lambda d, **kw: selection.exponential(d, sensitivity=2.0, epsilon=0.3, monotonic=True,
                                           method="gumbel", **kw)),
    (selection.ExponentialMechanism, dict(sensitivity=1.0, epsilon=0.5, method="inverse-cdf"),
     UTILITY, lambda d, **kw: selection.exponential(d, sensitivity=1.0, epsilon=0.5,
                                                    method="inverse-cdf", **kw)),
    (selection.ExponentialMechanism, dict(sensitivity=1.0, epsilon=1.0,
                                          method=selection.EXACT_PERMUTE_AND_FLIP), UTILITY,
     lambda d, **kw: selection.permute_and_flip(d, sensitivity=1.0, epsilon=1.0, **kw)),
    (selection.ExponentialMechanism, dict(sensitivity=1.0, epsilon=0.9, k=2, method="gumbel"), UTILITY,
     lambda d, **kw: selection.top_k(d, 2, sensitivity=1.0, epsilon=0.9, **kw)),
    (local.DuchiMechanism, dict(epsilon=0.8), np.array([0.5, -1.0, 0.0, 1.0]),
     lambda d, **kw: local.duchi(d, epsilon=0.8, **kw)),
    (local.PlanarLaplaceMechanism, dict(epsilon=0.1, grid=0.5, bounds=BOX), POINTS,
     lambda d, **kw: local.planar_laplace(d, epsilon=0.1, grid=0.5, bounds=BOX, **kw)),
    (local.FrequencyOracle, dict(mechanism="randomized_response", k=5, epsilon=1.3), CODES,
     lambda d, **kw: local.randomized_response(d, k=5, epsilon=1.3, **kw)),
    (local.FrequencyOracle, dict(mechanism="randomized_response", k=2, epsilon=0.4),
     np.array([True, False, True]),
     lambda d, **kw: local.randomized_response(d, k=2, epsilon=0.4, **kw)),
    (local.FrequencyOracle, dict(mechanism="optimized_unary", k=5, epsilon=2.0), CODES,
     lambda d, **kw: local.unary_encoding(d, k=5, epsilon=2.0, **kw)),
    (local.FrequencyOracle, dict(mechanism="symmetric_unary", k=5, epsilon=0.9), CODES,
     lambda d, **kw: local.unary_encoding(d, k=5, epsilon=0.9, method="symmetric", **kw)),
    (local.FrequencyOracle, dict(mechanism="local_hashing", k=5, epsilon=1.1), CODES,
     lambda d, **kw: local.local_hashing(d, k=5, epsilon=1.1, **kw)),
    (local.FrequencyOracle, dict(mechanism="local_hashing", k=5, epsilon=1.1, g=7), CODES,
     lambda d, **kw: local.local_hashing(d, k=5, epsilon=1.1, g=7, **kw)),
    (selection.ExponentialMechanism, dict(sensitivity=1.0, epsilon=0.6,
                                          method="permute-and-flip"), UTILITY,
     lambda d, **kw: selection.exponential(d, sensitivity=1.0, epsilon=0.6,
                                           method="permute-and-flip", **kw)),
]
IDS = [f"{cls.__name__}-{i}" for i, (cls, *_) in enumerate(REGISTRY)]


def calibrate(cls, params):
    if cls is local.DuchiMechanism:
        return cls.calibrate(params["epsilon"])
    if cls is local.FrequencyOracle:
        return local.frequency_oracle(**params)
    return cls.calibrate(**params)


def assert_same(a, b):
    """Equal releases (local hashing reports by their arrays)."""
    if isinstance(a, local.LocalHashingReports):
        assert (a.g, a.k) == (b.g, b.k)
        np.testing.assert_array_equal(a.seeds, b.seeds)
        a, b = a.values, b.values
    np.testing.assert_array_equal(a, b)
    assert np.asarray(a).dtype == np.asarray(b).dtype


def test_every_mechanism_class_is_in_the_registry():
    public = {getattr(module, name) for module in (selection, local) for name in module.__all__}
    classes = {c for c in public if isinstance(c, type) and c.__name__.endswith("Mechanism")}
    assert classes | {local.FrequencyOracle} == {cls for cls, *_ in REGISTRY}
    assert all(issubclass(c, plans.Plan) for c in classes)
    # every public plan class of these modules is walked
    assert {c for c in public if isinstance(c, type) and issubclass(c, plans.Plan)} == {
        cls for cls, *_ in REGISTRY}
    # every mechanism the frequency oracles calibrate is walked
    assert {p["mechanism"] for cls, p, *_ in REGISTRY if cls is local.FrequencyOracle} == {
        "randomized_response", "optimized_unary", "symmetric_unary", "local_hashing"}


@pytest.mark.parametrize("cls, params, data, function", REGISTRY, ids=IDS)
def test_cost_is_what_the_release_charges(cls, params, data, function):
    mech = calibrate(cls, params)
    cost = mech.cost  # from the calibration alone
    if cls is selection.ExponentialMechanism:
        assert cost == Cost(mech.epsilon_effective, curve=mech.curve)
        assert cost.epsilon <= params["epsilon"]
        # bounded-range rounds for the exponential mechanism's law (test_curves_bounded_range)
        if mech.method in ("exact", "gumbel", "inverse-cdf"):
            per_round = curves.BoundedRange(mech.epsilon_effective / (mech.k or 1))
            assert mech.curve == (per_round if mech.k is None else per_round.repeat(mech.k))
        else:
            assert mech.curve is None
    elif cls in (local.DuchiMechanism, local.FrequencyOracle):
        # the effective epsilon (test_local: proven >= the exact loss), the nominal labelled
        assert cost == Cost(mech.epsilon_effective) and cost.epsilon <= params["epsilon"]
        assert mech.label.endswith(f"(epsilon={params['epsilon']!r})")
    else:
        assert cost == Cost(mech.epsilon_ldp)
    acc = RecordingAccountant()
    out = mech.release(data, accountant=acc, random_state=4)
    assert acc.charges == [(cost, mech.label)]
    # the public function charges the same, under the same label, and draws the same
    acc_f = RecordingAccountant()
    assert_same(function(data, accountant=acc_f, random_state=4), out)
    assert acc_f.charges == acc.charges
    # composed: one charge of the summed cost, each part drawing in order from one generator
    acc = RecordingAccountant()
    both = plans.sequential(mech, plans.wrap(mech, "again"))
    pair = both.release((data, data), accountant=acc, random_state=dpcore.default_rng(6))
    assert acc.charges == [(plans.total_cost([cost, cost]), f"{mech.label} + again")]
    rng = dpcore.default_rng(6)
    first = mech.release(data, random_state=rng)
    assert_same(pair[0], first)
    assert_same(pair[1], mech.release(data, random_state=rng))


BAD = {
    selection.ExponentialMechanism: [np.array([1.0, np.nan]), np.array([]), np.ones((2, 2)),
                                     "x"],
    local.DuchiMechanism: [np.array([0.5, 1.5]), np.array([np.inf]), np.zeros((2, 2)), "x"],
    local.PlanarLaplaceMechanism: [np.array([[1.0, 2.0, 3.0]]), np.array([[31.0, 1.0]]),
                                   np.array([[np.nan, 1.0]]), "x"],
    local.FrequencyOracle: [np.array([0, 5]), np.array([-1, 2]), np.array([0.0, 1.0]),
                            np.zeros((2, 2), dtype=int), "x", [[0, 1], [2]]],
}


@pytest.mark.parametrize("cls, params, data, function", REGISTRY, ids=IDS)
def test_bad_data_is_refused_before_the_charge(cls, params, data, function):
    mech = calibrate(cls, params)
    acc = RecordingAccountant()
    for bad in BAD[cls]:
        with pytest.raises((ValueError, TypeError)):
            mech.release(bad, accountant=acc)
    if cls is selection.ExponentialMechanism and params.get("k"):
        with pytest.raises(ValueError, match="k must be at most"):
            mech.release(np.array([1.0, -np.inf, -np.inf]), accountant=acc)
    assert acc.charges == []


def test_relations():
    exp = selection.ExponentialMechanism.calibrate(sensitivity=1.0, epsilon=0.5)
    assert exp.relation == plans.ADD_REMOVE
    swap = selection.ExponentialMechanism.calibrate(sensitivity=1.0, epsilon=0.5,
                                                    relation="replace one record")
    assert swap.relation == "replace one record" and swap.cost == exp.cost
    with pytest.raises(ValueError, match="different neighbouring relations"):
        plans.sequential(swap, exp)
    with pytest.raises(TypeError, match="relation"):
        selection.ExponentialMechanism.calibrate(sensitivity=1.0, epsilon=0.5, relation=None)
    duchi = local.DuchiMechanism.calibrate(1.0)
    planar = local.PlanarLaplaceMechanism.calibrate(epsilon=0.1, grid=1.0, bounds=BOX)
    assert duchi.relation == planar.relation == LOCAL_RELATION
    # two local randomizers on the same users compose: their epsilons add
    assert plans.sequential(duchi, planar).cost == plans.total_cost([duchi.cost, planar.cost])
    with pytest.raises(ValueError, match="different neighbouring relations"):
        plans.sequential(duchi, exp)


def test_select_and_top_k_keep_their_calibration():
    one = selection.ExponentialMechanism.calibrate(sensitivity=1.0, epsilon=0.5)
    two = selection.ExponentialMechanism.calibrate(sensitivity=1.0, epsilon=0.5, k=2,
                                                   method="gumbel")
    acc = RecordingAccountant()
    with pytest.raises(ValueError, match="use select_top_k"):
        two.select(UTILITY, accountant=acc)
    with pytest.raises(ValueError, match="use select"):
        one.select_top_k(UTILITY, accountant=acc)
    assert acc.charges == []
    assert one.select(UTILITY, random_state=1) == one.release(UTILITY, random_state=1)
    np.testing.assert_array_equal(two.select_top_k(UTILITY, random_state=1),
                                  two.release(UTILITY, random_state=1))


def test_stream_is_charged_before_it_is_read():
    """A stream cannot be checked before the charge (documented in exponential)."""
    mech = selection.ExponentialMechanism.calibrate(sensitivity=1.0, epsilon=0.5)
    acc = RecordingAccountant()
    with pytest.raises(ValueError, match="NaN"):
        mech.release(iter([np.array([1.0, np.nan])]), accountant=acc)
    assert acc.charges == [(mech.cost, mech.label)]


def test_planar_without_bounds_has_no_cost():
    mech = local.PlanarLaplaceMechanism.calibrate(epsilon=0.1, grid=1.0)
    with pytest.raises(ValueError, match="bounds"):
        mech.cost
    with pytest.raises(ValueError, match="bounds"):
        plans.sequential(mech)
    acc = RecordingAccountant()
    with pytest.raises(ValueError, match="bounds"):
        mech.release(POINTS, accountant=acc)
    assert acc.charges == []
    out = mech.release(POINTS, random_state=3)  # geo-indistinguishable, nothing to charge
    np.testing.assert_array_equal(out, local.planar_laplace(POINTS, epsilon=0.1, grid=1.0,
                                                            random_state=3))


def test_empty_input_charges_nothing():
    acc = RecordingAccountant()
    assert local.DuchiMechanism.calibrate(0.5).release([], accountant=acc).shape == (0,)
    planar = local.PlanarLaplaceMechanism.calibrate(epsilon=0.1, grid=1.0, bounds=BOX)
    assert planar.release(np.zeros((0, 2)), accountant=acc).shape == (0, 2)
    for mechanism in ("randomized_response", "optimized_unary", "local_hashing"):
        oracle = local.frequency_oracle(mechanism, k=4, epsilon=1.0)
        out = oracle.release([], accountant=acc)
        assert (out.values if mechanism == "local_hashing" else out).shape[0] == 0
    assert acc.charges == []


def test_frequency_oracle_scalar_and_shape_rules():
    """Randomized response keeps a scalar a scalar; the vector encodings refuse one."""
    rr = local.frequency_oracle("randomized_response", k=5, epsilon=1.0)
    assert rr.release(3, random_state=2) == local.randomized_response(3, k=5, epsilon=1.0,
                                                                       random_state=2)
    acc = RecordingAccountant()
    for mechanism in ("optimized_unary", "local_hashing"):
        with pytest.raises(ValueError, match="scalar"):
            local.frequency_oracle(mechanism, k=5, epsilon=1.0).release(3, accountant=acc)
    with pytest.raises(ValueError, match="k=2"):
        local.frequency_oracle("randomized_response", k=3, epsilon=1.0).release(
            np.array([True]), accountant=acc)
    assert acc.charges == []
