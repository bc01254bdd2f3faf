"""The junction-tree model of dpcore.synth (AIM's inference): exact marginals by belief
propagation against brute force, marginals of any attribute set, the sampling law, and the
mirror-descent fit reaching consistent measurements."""
import numpy as np
import pytest

from _gof import ALPHA, chisquare_pvalue

from dpcore.synth._estimate import Measurement, estimate_total, fit_model
from dpcore.synth._junction import JunctionTree, model_cells

SIZES = (2, 3, 2, 4, 3)
CYCLE = [(0, 1), (1, 2), (2, 3), (0, 3), (1, 4), (2, 4)]  # not a tree: needs triangulation


def brute_force(tree):
    joint = np.zeros(tree.sizes)
    for clique, theta in zip(tree.cliques, tree.theta):
        joint = joint + theta.reshape([s if v in clique else 1 for v, s in enumerate(tree.sizes)])
    p = np.exp(joint - joint.max())
    return p / p.sum()


def random_tree(seed):
    tree = JunctionTree.build(SIZES, CYCLE)
    rng = np.random.default_rng(seed)
    tree.theta = [rng.normal(size=t.shape) for t in tree.theta]
    return tree


def test_junction_tree_covers_every_clique_with_the_running_intersection_property():
    tree = JunctionTree.build(SIZES, CYCLE)
    for clique in CYCLE:
        assert any(set(clique) <= set(c) for c in tree.cliques)
    for v in range(len(SIZES)):  # the cliques holding v form a connected subtree
        holding = {i for i, c in enumerate(tree.cliques) if v in c}
        roots = [i for i in holding if tree.parent[i] not in holding]
        assert len(roots) == 1
    assert model_cells(SIZES, CYCLE) == tree.cells
    assert model_cells(SIZES, [(0,), (1,)]) == sum(SIZES)  # every attribute, on its own


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_belief_propagation_and_projection_match_brute_force(seed):
    tree = random_tree(seed)
    p = brute_force(tree)
    marginals = tree.calibrate()
    for clique, mu in zip(tree.cliques, marginals):
        other = tuple(v for v in range(5) if v not in clique)
        np.testing.assert_allclose(mu, p.sum(axis=other), rtol=1e-10, atol=1e-14)
    for r in [(0, 4), (0, 3), (1, 3), (0, 2, 4), (3, 4), (0, 1, 2, 3, 4), (2,)]:
        other = tuple(v for v in range(5) if v not in r)
        np.testing.assert_allclose(tree.project(marginals, r), p.sum(axis=other), rtol=1e-10,
                                   atol=1e-14)


def test_sampling_law():
    """60,000 records against the model's exact joint (144 cells), chi-square at alpha 1e-4;
    power: the joint with two cells' probabilities swapped is rejected."""
    tree = random_tree(3)
    p = brute_force(tree)
    codes = tree.sample(tree.calibrate(), 60000, np.random.default_rng(4))
    counts = np.zeros(SIZES)
    np.add.at(counts, tuple(codes.T), 1)
    assert chisquare_pvalue(counts.reshape(-1), p.reshape(-1)) > ALPHA
    flat = p.reshape(-1).copy()
    lo, hi = np.argmin(flat), np.argmax(flat)
    flat[[lo, hi]] = flat[[hi, lo]]
    assert chisquare_pvalue(counts.reshape(-1), flat) < ALPHA


def test_mirror_descent_fits_consistent_measurements_on_cliques_that_are_not_a_tree():
    """Exact marginals of a distribution on a cycle of pairs (with their 1-way marginals): the
    fitted model reproduces every one of them, and the total is the measurements' total."""
    rng = np.random.default_rng(1)
    p = rng.dirichlet(np.full(int(np.prod(SIZES)), 0.3)).reshape(SIZES)
    cliques = [(v,) for v in range(5)] + CYCLE
    measurements = []
    for clique in cliques:
        other = tuple(v for v in range(5) if v not in clique)
        measurements.append(Measurement(clique, 1000.0 * p.sum(axis=other), 1.0 + len(clique)))
    assert estimate_total(measurements) == pytest.approx(1000.0)
    tree, marginals, total, _ = fit_model(SIZES, measurements, 1000)
    for m in measurements:
        np.testing.assert_allclose(total * tree.project(marginals, m.clique), m.noisy,
                                   atol=1e-3)


def test_warm_start_keeps_the_distribution():
    tree = random_tree(5)
    before = tree.calibrate()
    grown = JunctionTree.build(SIZES, CYCLE + [(0, 4)] + [tuple(c) for c in tree.cliques])
    grown.warm_start(tree)
    after = grown.calibrate()
    for clique, mu in zip(tree.cliques, before):
        np.testing.assert_allclose(grown.project(after, clique), mu, rtol=1e-10, atol=1e-14)


def test_projection_across_an_underflowed_separator_is_finite():
    """A chain a - b - c whose separator b has a cell of subnormal mass: the contracted
    marginal of (a, c) stays finite and sums to 1."""
    tree = JunctionTree.build((2, 2, 2), [(0, 1), (1, 2)])
    tree.theta = [np.array([[0.0, -710.0], [0.0, -710.0]]), np.array([[0.0, 0.0], [0.0, 0.0]])]
    marginals = tree.calibrate()
    joint = tree.project(marginals, (0, 2))
    assert np.all(np.isfinite(joint)) and joint.sum() == pytest.approx(1.0)
