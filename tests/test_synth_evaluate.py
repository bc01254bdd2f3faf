"""dpcore.synth.workload_error and tstr_accuracy (evaluation helpers, not releases)."""
import itertools

import numpy as np
import pytest

from dpcore.synth import Categorical, Domain, Numeric, tstr_accuracy, workload_error


def domain():
    return Domain({"a": Categorical([0, 1, 2]), "b": Categorical(["u", "v"]),
                   "c": Numeric(0, 1, bins=3), "y": Categorical([0, 1])})


def data(n, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 3, n)
    return {"a": a, "b": np.where(rng.random(n) < 0.7, "u", "v"), "c": rng.uniform(0, 1, n),
            "y": (a == 2).astype(int)}


def naive_error(x, y, shape, width):
    errors = []
    for clique in itertools.combinations(range(len(shape)), width):
        px = np.zeros([shape[i] for i in clique])
        py = np.zeros_like(px)
        for row in x:
            px[tuple(row[list(clique)])] += 1
        for row in y:
            py[tuple(row[list(clique)])] += 1
        errors.append(np.abs(px / px.sum() - py / py.sum()).sum())
    return errors


def test_workload_error_matches_a_naive_computation():
    dom = domain()
    x, y = dom.encode(data(300, 0)), dom.encode(data(200, 1))
    expected = naive_error(x, y, dom.shape, 2) + naive_error(x, y, dom.shape, 3)
    assert workload_error(x, y, domain=dom, codes=True) == pytest.approx(np.mean(expected))
    assert workload_error(data(300, 0), data(200, 1), domain=dom, ways=2) == pytest.approx(
        np.mean(naive_error(x, y, dom.shape, 2)))
    assert workload_error(x, x, domain=dom, codes=True) == 0.0


def test_workload_error_sees_broken_dependence():
    dom = domain()
    x = dom.encode(data(2000, 2))
    shuffled = x.copy()
    shuffled[:, 3] = np.random.default_rng(3).permutation(shuffled[:, 3])
    assert workload_error(x, shuffled, domain=dom, ways=1, codes=True) == 0.0
    assert workload_error(x, shuffled, domain=dom, ways=2, codes=True) > 0.1


def test_workload_error_arguments():
    dom = domain()
    x = dom.encode(data(10, 0))
    with pytest.raises(ValueError, match="ways"):
        workload_error(x, x, domain=dom, ways=5, codes=True)
    with pytest.raises(ValueError, match="ways"):
        workload_error(x, x, domain=dom, ways=[], codes=True)
    with pytest.raises(TypeError, match="domain"):
        workload_error(x, x, domain=None)
    with pytest.raises(ValueError, match="columns"):
        workload_error(x[:, :2], x, domain=dom, codes=True)
    with pytest.raises(ValueError, match="0 .. size - 1"):
        workload_error(x + 5, x, domain=dom, codes=True)
    empty = np.zeros((0, 4), dtype=np.int64)
    assert 0 < workload_error(empty, x, domain=dom, ways=1, codes=True) <= 2


def test_codes_are_not_mistaken_for_values():
    """Without codes=True an integer array is data: the codes 0, 1, 2 of column c are values in
    its first bin, so the two readings differ."""
    dom = domain()
    x = dom.encode(data(200, 9))
    assert workload_error(x, x, domain=dom, codes=True) == 0.0
    assert not np.array_equal(dom.encode(x), x)


def test_tstr_accuracy_real_and_broken_training_data():
    pytest.importorskip("sklearn")
    dom = domain()
    train, test = data(2000, 4), data(2000, 5)
    assert tstr_accuracy(train, test, domain=dom, label="y") == 1.0
    codes = dom.encode(train)
    codes[:, 3] = np.random.default_rng(6).permutation(codes[:, 3])  # label independent
    chance = np.mean(dom.encode(test)[:, 3] == 0)
    test_codes = dom.encode(test)
    assert tstr_accuracy(codes, test_codes, domain=dom, label="y", codes=True) == pytest.approx(
        chance, abs=0.05)
    one_class = dom.encode(train)
    one_class[:, 3] = 1
    assert tstr_accuracy(one_class, test_codes, domain=dom, label="y",
                         codes=True) == pytest.approx(1 - chance)
    with pytest.raises(ValueError, match="no column"):
        tstr_accuracy(train, test, domain=dom, label="z")


def test_tstr_accuracy_takes_an_estimator():
    tree = pytest.importorskip("sklearn.tree")
    dom = domain()
    acc = tstr_accuracy(data(500, 7), data(500, 8), domain=dom, label="y",
                        estimator=tree.DecisionTreeClassifier(max_depth=2))
    assert acc == 1.0
