"""dpcore.synth's post-processing: simplex projection, consistent tables, the tree model and its
sampler, domain compression."""
import itertools

import numpy as np
import pytest

from _gof import ALPHA, chisquare_pvalue

from dpcore.synth._compress import Compression
from dpcore.synth._tree import (
    TreeModel,
    consistent_table,
    draw_categorical,
    interaction_shrinkage,
    main_effects,
    pool_marginals,
    sample_conditional,
    shrink_interaction,
    simplex_projection,
    size_groups,
)


@pytest.mark.parametrize("seed", range(5))
def test_simplex_projection_is_the_euclidean_projection(seed):
    """Against the optimality condition: x = max(v - theta, 0) with sum x = total; and no
    random feasible point is closer."""
    rng = np.random.default_rng(seed)
    v = rng.normal(0, 10, 12)
    total = 25.0
    x = simplex_projection(v, total)
    assert np.all(x >= 0) and x.sum() == pytest.approx(total)
    theta = (v - x)[x > 0]
    assert np.ptp(theta) < 1e-9 and np.all(v[x == 0] <= theta[0] + 1e-9)
    others = rng.dirichlet(np.ones(12), 2000) * total
    assert np.all(np.linalg.norm(others - v, axis=1) >= np.linalg.norm(x - v) - 1e-9)


def test_simplex_projection_keeps_a_feasible_point():
    v = np.array([1.0, 2.0, 0.0, 7.0])
    assert np.allclose(simplex_projection(v, 10.0), v)


def test_consistent_table_matches_its_sums():
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 50, (5, 7)).astype(float)
    noisy = truth + rng.normal(0, 8, truth.shape)
    rows, cols = truth.sum(axis=1), truth.sum(axis=0)
    table = consistent_table(noisy, rows, cols)
    assert np.all(table >= 0)
    assert np.allclose(table.sum(axis=1), rows) and np.allclose(table.sum(axis=0), cols)
    # closer to the truth than the noisy table (the projection removes noise)
    assert np.abs(table - truth).sum() < np.abs(noisy - truth).sum()


def test_consistent_table_keeps_a_consistent_table():
    t = np.array([[3.0, 1.0], [0.0, 6.0]])
    assert np.allclose(consistent_table(t, t.sum(axis=1), t.sum(axis=0)), t, rtol=1e-5, atol=1e-5)


def test_consistent_table_reaches_sums_the_clipped_support_cannot():
    """Clipping leaves row 1's only mass in column 0, whose sum is 0: raking alone would empty
    the row for good; the trace of the independent table keeps the sums reachable."""
    noisy = np.array([[-3.0, -3.0, -3.0], [5.0, -9.0, -9.0], [-3.0, -3.0, -3.0]])
    rows, cols = np.array([0.0, 1.4, 0.0]), np.array([0.0, 0.0, 1.4])
    table = consistent_table(noisy, rows, cols)
    assert np.allclose(table, [[0, 0, 0], [0, 0, 1.4], [0, 0, 0]])


def test_consistent_table_fills_rows_emptied_by_clipping():
    noisy = np.array([[-5.0, -5.0], [10.0, 10.0]])
    table = consistent_table(noisy, np.array([4.0, 16.0]), np.array([10.0, 10.0]))
    assert np.all(table >= 0) and np.allclose(table.sum(axis=1), [4, 16])
    assert np.allclose(table.sum(axis=0), [10, 10])


def test_draw_categorical_never_draws_a_zero_weight():
    w = np.array([0.0, 2.0, 0.0, 1.0, 0.0])
    u = np.concatenate([np.linspace(0, 1, 1001)[:-1], [1 - 2**-53]])
    codes = draw_categorical(w, u)
    assert set(codes.tolist()) == {1, 3}
    assert np.mean(codes == 1) == pytest.approx(2 / 3, abs=2e-3)


def test_sample_conditional_law():
    """Each parent value's children follow its row (chi-square per row, alpha 1e-4 split)."""
    table = np.array([[1.0, 0.0, 3.0], [2.0, 2.0, 2.0], [0.0, 0.0, 0.0]])
    rng = np.random.default_rng(3)
    parents = rng.integers(0, 3, 30000)
    children = sample_conditional(parents, table, rng)
    fallback = table.sum(axis=0) / table.sum()
    for value in range(3):
        row = table[value] / table[value].sum() if table[value].sum() else fallback
        observed = np.bincount(children[parents == value], minlength=3)
        keep = row > 0
        assert observed[~keep].sum() == 0
        assert chisquare_pvalue(observed[keep], row[keep] / row[keep].sum()) > ALPHA / 3
    # power: the first row drawn as if uniform over its support is rejected
    observed = np.bincount(children[parents == 0], minlength=3)
    assert chisquare_pvalue(observed[[0, 2]], [0.5, 0.5]) < ALPHA


def chain_model():
    """A consistent chain 0 - 1 - 2 (sizes 2, 3, 2) and its exact joint law."""
    p01 = np.array([[10.0, 20.0, 10.0], [5.0, 5.0, 50.0]])
    cond21 = np.array([[0.9, 0.1], [0.5, 0.5], [0.2, 0.8]])  # P(x2 | x1)
    p12 = p01.sum(axis=0)[:, None] * cond21
    model = TreeModel((2, 3, 2), [p01.sum(axis=1), p01.sum(axis=0), p12.sum(axis=0)],
                      [(0, 1), (1, 2)], [p01, p12], 100.0)
    joint = p01[:, :, None] * cond21[None, :, :] / 100.0
    return model, joint


def test_tree_sampling_law():
    """Records from the chain against its exact joint law: P(x0, x1) P(x2 | x1)."""
    model, joint = chain_model()
    codes = model.sample(40000, np.random.default_rng(4))
    flat = np.ravel_multi_index(codes.T, (2, 3, 2))
    observed = np.bincount(flat, minlength=12)
    assert chisquare_pvalue(observed, joint.reshape(-1)) > ALPHA
    # power: the law with x2 independent of x1 is rejected
    independent = joint.sum(axis=2, keepdims=True) * joint.sum(axis=(0, 1))[None, None, :]
    assert chisquare_pvalue(observed, independent.reshape(-1)) < ALPHA


def test_tree_sampling_from_any_root_orientation():
    """Edges given child-first are sampled through the transposed table."""
    model, joint = chain_model()
    flipped = TreeModel(model.sizes, model.marginals, [(1, 0), (2, 1)],
                        [model.tables[0].T, model.tables[1].T], model.total)
    codes = flipped.sample(40000, np.random.default_rng(5))
    observed = np.bincount(np.ravel_multi_index(codes.T, (2, 3, 2)), minlength=12)
    assert chisquare_pvalue(observed, joint.reshape(-1)) > ALPHA


def test_estimate_recovers_consistent_noiseless_measurements():
    model, _ = chain_model()
    est = TreeModel.estimate(model.sizes, [(m, 1.0) for m in model.marginals], model.edges,
                             [(t, 1.0) for t in model.tables])
    assert est.total == pytest.approx(100.0)
    for a, b in zip(est.tables, model.tables):
        assert np.allclose(a, b, atol=1e-7)


def test_estimate_averages_the_one_way_estimates():
    """Without edges each marginal is its own measurement, projected; the total is the
    inverse-variance average of the measured totals."""
    est = TreeModel.estimate((2, 2), [(np.array([30.0, 70.0]), 1.0),
                                      (np.array([10.0, 100.0]), np.array([1.0, 3.0]))], [], [])
    w = np.array([1 / 2, 1 / 4])
    assert est.total == pytest.approx(np.dot(w, [100.0, 110.0]) / w.sum())
    assert all(m.sum() == pytest.approx(est.total) for m in est.marginals)


def test_compression_rule_and_expansion():
    noisy = [np.array([100, 2, -3, 50, 1]), np.array([5, 4]), np.array([90, 80, 70])]
    comp = Compression.from_noisy(noisy, std=10.0)  # threshold 30
    assert [s.tolist() for s in comp.supports] == [[True, False, False, True, False],
                                                   [True, True], [True, True, True]]
    assert comp.sizes == (3, 2, 3)
    codes = np.array([[0, 0, 0], [1, 1, 1], [2, 0, 2], [3, 1, 0], [4, 0, 1]])
    assert comp.codes(codes)[:, 0].tolist() == [0, 2, 2, 1, 2]
    y, var = comp.one_way(noisy[0], 4.0, 0)
    assert y.tolist() == [100, 50, 0] and var.tolist() == [4.0, 4.0, 12.0]
    # a merged code expands uniformly to its members (chi-square)
    merged = np.tile([2, 0, 0], (6000, 1))
    expanded = comp.expand(merged, np.random.default_rng(6))[:, 0]
    observed = np.bincount(expanded, minlength=5)
    assert observed[[0, 3]].sum() == 0
    assert chisquare_pvalue(observed[[1, 2, 4]], np.full(3, 1 / 3)) > ALPHA
    kept = comp.expand(np.array([[0, 1, 2], [1, 0, 1]]), np.random.default_rng(0))
    assert kept.tolist() == [[0, 1, 2], [3, 0, 1]]


def test_compression_keeps_two_codes_at_least():
    comp = Compression.from_noisy([np.array([100, 1, 1]), np.array([1, 1, 1])], std=10.0)
    assert comp.sizes == (3, 3)


@pytest.mark.parametrize("sizes", [(2, 3, 4), (3, 3)])
def test_tree_model_marginals_agree_with_its_tables(sizes):
    rng = np.random.default_rng(7)
    edges = list(itertools.combinations(range(len(sizes)), 2))[:len(sizes) - 1]
    one_way = [(rng.integers(0, 40, s).astype(float), 4.0) for s in sizes]
    two_way = [(rng.integers(-5, 20, (sizes[a], sizes[b])).astype(float), 4.0)
               for a, b in edges]
    model = TreeModel.estimate(sizes, one_way, edges, two_way)
    for (a, b), t in zip(edges, model.tables):
        assert np.all(t >= 0)
        assert np.allclose(t.sum(axis=1), model.marginals[a], atol=1e-6)
        assert np.allclose(t.sum(axis=0), model.marginals[b], atol=1e-6)


# -- the interaction's James-Stein shrinkage ------------------------------------------------------

def test_main_effects_is_the_projection_onto_sums_of_one_axis_functions():
    """Idempotent, it keeps a sum of one-axis functions exactly, and the rest is orthogonal to
    every one-axis function (2-way and 3-way)."""
    rng = np.random.default_rng(3)
    for shape in [(3, 4), (2, 3, 4)]:
        table = rng.normal(0, 5, shape)
        main = main_effects(table)
        assert np.allclose(main_effects(main), main)
        additive = sum(np.reshape(rng.normal(0, 1, s), [s if i == a else 1
                                                       for i, _ in enumerate(shape)])
                       for a, s in enumerate(shape)) * np.ones(shape)
        assert np.allclose(main_effects(additive), additive)
        for a, s in enumerate(shape):  # the residual's sums over the other axes are zero
            others = tuple(i for i in range(len(shape)) if i != a)
            assert np.allclose((table - main).sum(axis=others), 0.0)


def test_interaction_shrinkage_exact_case():
    """2 x 2 tables have df = 1: nothing to shrink. A 3 x 3 table with interaction r (double
    centred, ||r||**2 = 4) has df = 4: factor 1 - 2 variance / 4."""
    assert interaction_shrinkage(np.array([[9.0, 1.0], [1.0, 9.0]]), np.full((2, 2), 5.0),
                                 100.0) == 1.0
    r = np.array([[1.0, -1.0, 0.0], [-1.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    independent = np.outer([1.0, 2.0, 3.0], [2.0, 1.0, 1.0])
    noisy = independent + r + np.array([[1.0], [2.0], [0.0]])  # plus a row effect
    assert interaction_shrinkage(noisy, independent, 1.2) == pytest.approx(1 - 2 * 1.2 / 4)
    assert interaction_shrinkage(noisy, independent, 3.0) == 0.0  # below the noise: all gone
    assert interaction_shrinkage(independent, independent, 1.0) == 0.0
    shrunk = shrink_interaction(noisy, independent, 1.2)
    assert np.allclose(shrunk, noisy - (2 * 1.2 / 4) * r)
    assert np.allclose(shrink_interaction(noisy, independent, 0.0), noisy)


def test_estimate_shrinks_a_noise_only_table_to_independence():
    """A 4 x 4 table whose interaction is far below its noise becomes the independent table of
    the estimated marginals; one far above it keeps its dependence."""
    rows, cols = np.array([400.0, 300.0, 200.0, 100.0]), np.full(4, 250.0)
    independent = np.outer(rows, cols) / 1000.0
    bump = 3.0 * np.array([[1, -1, 0, 0], [-1, 1, 0, 0], [0, 0, 1, -1], [0, 0, -1, 1]])
    one_way = [(rows, 1e-6), (cols, 1e-6)]
    est = TreeModel.estimate((4, 4), one_way, [(0, 1)], [(independent + bump, 100.0)])
    assert np.allclose(est.tables[0], independent, atol=1e-6)
    est = TreeModel.estimate((4, 4), one_way, [(0, 1)], [(independent + bump, 0.01)])
    assert np.abs(est.tables[0] - independent - bump).max() < 0.1


# -- the 1-way estimates pooled over columns with the same number of codes --------------------

def test_size_groups_are_public_and_need_three_columns():
    assert size_groups([9, 9, 4, 9, 4, 2, 2, 2]) == [[0, 1, 3]]
    assert size_groups([9, 9, 4, 9, 4, 4]) == [[0, 1, 3], [2, 4, 5]]
    assert size_groups([9, 9, 9, 9], eligible=[True, False, True, True]) == [[0, 2, 3]]
    assert size_groups([9, 9, 9, 9], eligible=[True, False, True, False]) == []


def test_pool_marginals_exact_case():
    """Group mean m = (2, 2, 0, 0); column 0 is 2 * sqrt(2) from it: factor 1 - 2 v / 8; column
    2 is the mean itself; column 3 is outside the group and unchanged."""
    values = [np.array([4.0, 0, 0, 0]), np.array([0.0, 4, 0, 0]), np.array([2.0, 2, 0, 0]),
              np.array([7.0, 1, 1, 1])]
    out = pool_marginals(values, [1.0, 1.0, 1.0, 1.0], [[0, 1, 2]])
    assert np.allclose(out[0], [3.5, 0.5, 0, 0]) and np.allclose(out[1], [0.5, 3.5, 0, 0])
    assert np.allclose(out[2], [2, 2, 0, 0]) and np.array_equal(out[3], values[3])
    out = pool_marginals(values, [4.0, 4.0, 4.0, 4.0], [[0, 1, 2]])  # all within the noise
    assert all(np.allclose(out[j], [2, 2, 0, 0]) for j in range(3))
    out = pool_marginals(values, [0.0, 0.0, 0.0, 0.0], [[0, 1, 2]])  # no noise: unchanged
    assert all(np.allclose(o, v) for o, v in zip(out, values))


def test_estimate_pools_the_grouped_marginals_only():
    """With groups, each grouped marginal is the projection of its pooled estimate (here all
    three are within the noise: the group's mean); without, of its own; the ungrouped column
    keeps its own either way."""
    one_way = [(np.array([300.0, 0, 0, 0]), 1e5), (np.array([0.0, 300, 0, 0]), 1e5),
               (np.array([0.0, 0, 300, 0]), 1e5), (np.array([100.0, 100, 100, 0]), 1e5)]
    alone = TreeModel.estimate((4, 4, 4, 4), one_way, [], [])
    pooled = TreeModel.estimate((4, 4, 4, 4), one_way, [], [], groups=[[0, 1, 2]])
    assert np.allclose(alone.marginals[0], [300, 0, 0, 0])
    assert np.allclose(pooled.marginals[0], [100, 100, 100, 0])
    assert np.allclose(pooled.marginals[3], alone.marginals[3])
