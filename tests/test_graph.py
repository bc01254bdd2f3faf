"""Tests of dpcore.graph and the _hrg kernel (PrivHRG, Xiao-Chen-Tan 2014)."""
import itertools
import math

import numpy as np
import pytest
from scipy import stats

from _gof import ALPHA, chisquare_pvalue, dlap_pmf, integer_pvalue

import dpcore
from dpcore import _hrg
from dpcore._random import bitgen_handle
from dpcore.graph import (
    Dendrogram, fit_hrg, log_likelihood_sensitivity, release_hrg, sample_graph,
)

# --------------------------------------------------------------------------- naive twins


def naive_loglik(n, edges, clusters):
    """log L of a dendrogram given as a list of internal nodes (leafset_left, leafset_right)."""
    adj = {(min(a, b), max(a, b)) for a, b in edges}
    total = 0.0
    for left, right in clusters:
        N = len(left) * len(right)
        e = sum((min(a, b), max(a, b)) in adj for a in left for b in right)
        if 0 < e < N:
            p = e / N
            total += e * math.log(p) + (N - e) * math.log1p(-p)
    return total


def state_clusters(arr, n):
    """[(left leaves, right leaves)] of the internal nodes of a kernel state."""
    ch0, ch1 = arr["ch0"], arr["ch1"]
    memo = {}

    def leaves(x):
        if x < n:
            return frozenset([x])
        if x not in memo:
            memo[x] = leaves(ch0[x]) | leaves(ch1[x])
        return memo[x]

    return [(leaves(ch0[r]), leaves(ch1[r])) for r in range(n, 2 * n - 1)]


def all_dendrograms(leaves):
    """Every dendrogram on `leaves`, as a frozenset of clusters (leaf sets of internal nodes)."""
    leaves = tuple(leaves)
    if len(leaves) == 1:
        yield frozenset()
        return
    first, rest = leaves[0], leaves[1:]
    # Split into two nonempty unordered parts: the part containing `first` and the rest.
    for k in range(len(rest)):
        for others in itertools.combinations(rest, k):
            left = (first,) + others
            right = tuple(x for x in rest if x not in others)
            if not right:
                continue
            for tl in all_dendrograms(left):
                for tr in all_dendrograms(right):
                    yield tl | tr | {frozenset(leaves)}


def cluster_splits(tree):
    """(left, right) splits of a dendrogram given as a set of clusters."""
    out = []
    for c in tree:
        kids = [d for d in tree if d < c and not any(d < e < c for e in tree)]
        covered = frozenset().union(*kids) if kids else frozenset()
        parts = kids + [frozenset([x]) for x in c - covered]
        assert len(parts) == 2
        out.append((parts[0], parts[1]))
    return out


def make_state(n, edges):
    e = np.asarray(edges, dtype=np.int32).reshape(-1, 2)
    return _hrg.HRGState(n, e[:, 0], e[:, 1])


def random_graph(n, m, seed):
    rng = np.random.default_rng(seed)
    keys = rng.choice(n * (n - 1) // 2, size=m, replace=False)
    pairs = np.array(list(itertools.combinations(range(n), 2)))
    return pairs[keys]


# --------------------------------------------------------------------------- likelihood


def test_ell_values_and_numerics():
    assert _hrg.ell(0, 7) == 0.0 and _hrg.ell(7, 7) == 0.0
    assert _hrg.ell(1, 2) == pytest.approx(2 * math.log(0.5), rel=1e-15)
    # log1p form at N = 1e9: 1 * ln(1e-9) + (1e9 - 1) ln(1 - 1e-9) = -21.7233... - 0.9999999995
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40
    N = 10**9
    exact = mpmath.log(mpmath.mpf(1) / N) + (N - 1) * mpmath.log(1 - mpmath.mpf(1) / N)
    assert _hrg.ell(1, N) == pytest.approx(float(exact), rel=1e-13)



def test_ell_lr_is_ell_bit_for_bit():
    # The chain's ell (a table for N = L R <= 32, else the direct formula) equals ell exactly.
    for L in range(1, 9):
        for R in range(1, 9):
            for e in range(L * R + 1):
                assert _hrg.ell_lr(e, L, R) == _hrg.ell(e, L * R)
    rng = np.random.default_rng(8)
    for _ in range(2000):
        L, R = (int(x) for x in rng.integers(1, 10**5, size=2))
        e = int(rng.integers(0, L * R + 1))
        assert _hrg.ell_lr(e, L, R) == _hrg.ell(e, L * R)
    with pytest.raises(ValueError):
        _hrg.ell_lr(7, 2, 3)


def test_metropolis_is_a_53_bit_uniform_comparison():
    # accept iff U < exp(y), U = A 2**-31 + B 2**-53 with A = bits 1..31 of the node word and
    # B = the top 22 bits of the next word, read only when A leaves the comparison undecided.
    from fractions import Fraction

    rng = np.random.default_rng(9)
    cases = []
    for y in [-1e-12, -1e-3, -0.5, -3.0, -21.4, -21.5, -21.6, -30.0, -745.0]:
        x = math.exp(y)
        a_edge = math.floor(x * 2**31)  # the high part that leaves the test undecided
        for A in [0, 1, a_edge, max(a_edge - 1, 0), min(a_edge + 1, 2**31 - 1), 2**31 - 1,
                  *rng.integers(0, 2**31, size=20).tolist()]:
            for _ in range(4):
                low = int(rng.integers(0, 2**32))
                w = (low & ~((2**31 - 1) << 1)) | (A << 1) | (int(rng.integers(0, 2**32)) << 32)
                extra = int(rng.integers(0, 2**63)) * 2 + int(rng.integers(0, 2))
                cases.append((w % 2**64, y, extra))
    for w, y, extra in cases:
        accepted, used = _hrg.metropolis(w, y, extra)
        A = (w >> 1) & (2**31 - 1)
        B = extra >> 42
        x = Fraction(math.exp(y))
        assert accepted == (Fraction(A, 2**31) + Fraction(B, 2**53) < x), (w, y, extra)
        assert used == (Fraction(A, 2**31) < x < Fraction(A + 1, 2**31)), (w, y, extra)


def test_scan_vector_and_scalar_agree_with_numpy():
    rng = np.random.default_rng(10)
    for trial in range(400):
        size = int(rng.integers(0, 80))
        lab = rng.integers(10, 14, size=size).astype(np.int32)
        lo = int(rng.integers(0, size + 1))
        hi = int(rng.integers(lo, size + 1))
        want_r = bool(trial % 2)
        expect_s = lo + np.flatnonzero(lab[lo:hi] == 11)
        expect_r = lo + np.flatnonzero(lab[lo:hi] == 12) if want_r else np.zeros(0, int)
        for vector in (True, False):
            got_s, got_r = _hrg.scan(lab, lo, hi, 11, 12, want_r, vector)
            np.testing.assert_array_equal(got_s, expect_s)
            np.testing.assert_array_equal(got_r, expect_r)


def check_slot_ranges(st, n):
    """Every node's recorded slot range is exactly the slots of its leaves; leaves' slot blocks
    partition the slots."""
    sb, se, slo, shi = st.slot_ranges()
    a = st.arrays()
    assert sorted(x for u in range(n) for x in range(sb[u], se[u])) == list(range(2 * st.m))
    clusters = state_clusters(a, n)
    for node in range(n, 2 * n - 1):
        if slo[node] < 0:
            continue
        left, right = clusters[node - n]
        slots = sorted(x for u in left | right for x in range(sb[u], se[u]))
        assert slots == list(range(slo[node], shi[node])), node
    for u in range(n):
        assert (slo[u], shi[u]) == (sb[u], se[u])
    return np.mean(slo[n:] >= 0)


def test_relayout_keeps_the_state_and_ranges_stay_exact():
    n, m = 60, 240
    edges = random_graph(n, m, 12)
    st = make_state(n, edges)
    h = bitgen_handle(12)
    st.random_tree(h)
    assert check_slot_ranges(st, n) == 1.0  # right after the layout every node is one range
    for temp in (1.0, 0.2, 3.0):
        st.run(3000, temp, h)
        check_slot_ranges(st, n)
        before = st.arrays()
        clusters = frozenset(a | b for a, b in state_clusters(before, n))
        logl = st.log_likelihood
        st.relayout()
        after = st.arrays()
        assert frozenset(a | b for a, b in state_clusters(after, n)) == clusters
        assert st.log_likelihood == logl
        assert check_slot_ranges(st, n) == 1.0
        fresh = make_state(n, edges)
        fresh.set_tree(after["parent"], after["ch0"], after["ch1"], st.root_id)
        b = fresh.arrays()
        for key in ("nleaves", "vol", "E", "lca"):
            np.testing.assert_array_equal(after[key], b[key], err_msg=key)
        np.testing.assert_array_equal(after["ell"], b["ell"])
        # pre-order ids: the root is n, an internal child 0 comes right after its parent, and
        # every internal child has a larger id than its parent
        assert st.root_id == n
        for x in range(n, 2 * n - 1):
            c0, c1 = after["ch0"][x], after["ch1"][x]
            assert c0 < n or c0 == x + 1
            assert c1 < n or c1 > x


def test_four_cycle_hand_example():
    st = make_state(4, [[0, 1], [1, 2], [2, 3], [3, 0]])
    # ((0, 1), (2, 3)): internal 4 = (0, 1), 5 = (2, 3), 6 = root (4, 5).
    parent = np.array([4, 4, 5, 5, 6, 6, -1], dtype=np.int32)
    ch0 = np.array([-1, -1, -1, -1, 0, 2, 4], dtype=np.int32)
    ch1 = np.array([-1, -1, -1, -1, 1, 3, 5], dtype=np.int32)
    st.set_tree(parent, ch0, ch1, 6)
    assert st.log_likelihood == pytest.approx(-2.772589, abs=1e-6)
    a = st.arrays()
    assert a["E"][4:].tolist() == [1, 1, 2]
    assert sorted(a["lca"].tolist()) == [4, 5, 6, 6]


@pytest.mark.parametrize("n, expected", [(34, 6.664695), (100, 8.823846), (1000, 13.429214),
                                         (10**5, 22.639557)])
def test_sensitivity_values(n, expected):
    assert log_likelihood_sensitivity(n) == pytest.approx(expected, abs=1e-6)
    assert log_likelihood_sensitivity(n) >= expected - 5e-7


def test_sensitivity_bounds_brute_force():
    # Every dendrogram on 5 and 6 leaves, many graphs, every single-edge change.
    rng = np.random.default_rng(5)
    for n in (5, 6):
        du = log_likelihood_sensitivity(n)
        pairs = list(itertools.combinations(range(n), 2))
        trees = [cluster_splits(t) for t in all_dendrograms(range(n))]
        worst = 0.0
        for tree in trees[:: max(1, len(trees) // 60)]:
            for _ in range(4):
                edges = [p for p in pairs if rng.random() < 0.4]
                base = naive_loglik(n, edges, tree)
                for p in pairs:
                    other = [q for q in edges if q != p] if p in edges else edges + [p]
                    worst = max(worst, abs(naive_loglik(n, other, tree) - base))
        assert worst <= du
    # Equality for n even: the balanced root with E = 0 gains its first edge.
    n = 6
    tree = cluster_splits(next(t for t in all_dendrograms(range(n)) if frozenset({0, 1, 2}) in t))
    assert abs(naive_loglik(n, [(0, 3)], tree) - naive_loglik(n, [], tree)) == pytest.approx(
        log_likelihood_sensitivity(n), rel=1e-12)


# --------------------------------------------------------------------------- kernel invariants


@pytest.mark.parametrize("n, m, seed", [(40, 120, 1), (200, 1000, 2), (7, 21, 3), (9, 20, 4)])
def test_incremental_state_matches_recomputation(n, m, seed):
    edges = random_graph(n, m, seed)
    st = make_state(n, edges)
    h = bitgen_handle(seed)
    st.random_tree(h)
    for i, temp in enumerate([0.05, 1.0, 0.3, 3.0] * 5):
        st.run(997 + 31 * i, temp, h)
        a = st.arrays()
        fresh = make_state(n, edges)
        fresh.set_tree(a["parent"], a["ch0"], a["ch1"], st.root_id)
        b = fresh.arrays()
        for key in ("nleaves", "vol", "E", "lca", "parent"):
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
        np.testing.assert_allclose(a["ell"], b["ell"], rtol=1e-13, atol=1e-9)
        assert st.log_likelihood == pytest.approx(fresh.log_likelihood, rel=1e-11, abs=1e-9)
        assert a["E"][n:].sum() == m
        N = a["nleaves"][a["ch0"][n:]] * a["nleaves"][a["ch1"][n:]]
        assert N.sum() == n * (n - 1) // 2
        if n <= 40:  # an independent from-scratch likelihood
            assert st.log_likelihood == pytest.approx(naive_loglik(n, edges, state_clusters(a, n)),
                                                      rel=1e-11, abs=1e-9)
    assert 0 < st.n_accepted <= st.n_steps  # (the complete graph accepts every move)


def test_keep_best_tracks_the_maximum_visited():
    n = 12
    edges = random_graph(n, 25, 6)
    st = make_state(n, edges)
    h = bitgen_handle(6)
    st.random_tree(h)
    visited = []
    for i in range(3000):  # one step at a time; the log overflows (16 n + 64 writes) often
        st.run(1, 2.0, h, True)
        if i % 700 == 350:  # node ids change; a pending undo log is materialised first
            st.relayout()
        visited.append((st.log_likelihood,
                        frozenset(a | b for a, b in state_clusters(st.arrays(), n))))
    best = max(ll for ll, _ in visited)
    # Distinct trees can tie (equal log-likelihood up to rounding): any of them is a best state.
    best_trees = {t for ll, t in visited if ll >= best - 1e-9}
    assert st.best_log_likelihood == pytest.approx(best, abs=1e-9)
    assert st.restore_best()
    assert st.log_likelihood == pytest.approx(best, abs=1e-9)
    restored = frozenset(a | b for a, b in state_clusters(st.arrays(), n))
    assert restored in best_trees
    assert naive_loglik(n, edges, state_clusters(st.arrays(), n)) == pytest.approx(best, abs=1e-9)


def test_hub_and_empty_graph():
    n = 50
    star = [[0, i] for i in range(1, n)]
    st = make_state(n, star)
    h = bitgen_handle(4)
    st.random_tree(h)
    st.run(20000, 1.0, h)
    fresh = make_state(n, star)
    a = st.arrays()
    fresh.set_tree(a["parent"], a["ch0"], a["ch1"], st.root_id)
    np.testing.assert_array_equal(a["lca"], fresh.arrays()["lca"])
    empty = make_state(n, np.zeros((0, 2)))
    empty.random_tree(h)
    empty.run(1000, 1.0, h)
    assert empty.log_likelihood == 0.0 and empty.n_accepted == 1000


# --------------------------------------------------------------------------- the chain's law

LAW_EDGES = [(0, 1), (0, 2), (1, 2), (2, 3), (3, 4)]


def exact_law(temp):
    trees = list(all_dendrograms(range(5)))
    assert len(trees) == 105
    logl = np.array([naive_loglik(5, LAW_EDGES, cluster_splits(t)) for t in trees])
    w = np.exp(temp * (logl - logl.max()))
    return trees, w / w.sum()


def chain_counts(temp, n_samples, thin, seed):
    st = make_state(5, LAW_EDGES)
    h = bitgen_handle(seed)
    st.random_tree(h)
    st.run(1000, temp, h)
    trees, _ = exact_law(temp)
    index = {t: i for i, t in enumerate(trees)}
    counts = np.zeros(len(trees))
    for _ in range(n_samples):
        st.run(thin, temp, h)
        a = st.arrays()
        clusters = frozenset(a | b for a, b in state_clusters(a, 5))
        counts[index[clusters]] += 1
    return counts


@pytest.mark.parametrize("temp", [1.0, 0.1])
def test_chain_law_n5(temp):
    counts = chain_counts(temp, 40000, 25, seed=11)
    _, p = exact_law(temp)
    assert chisquare_pvalue(counts, p) > ALPHA
    # Power: the law at a different temperature is rejected by the same samples.
    _, wrong = exact_law(temp * 2.0 if temp >= 1 else 1.0)
    assert chisquare_pvalue(counts, wrong) < ALPHA


# --------------------------------------------------------------------------- sampling


def three_level():
    # leaves 0..5: node 6 = (0, 1), 7 = (6, 2), 8 = (3, 4), 9 = (8, 5), 10 = root (7, 9).
    children = np.array([[0, 1], [6, 2], [3, 4], [8, 5], [7, 9]])
    n_pairs = np.array([1, 2, 1, 2, 9])
    return children, n_pairs


def test_sample_graph_binomial_per_node():
    children, n_pairs = three_level()
    p = np.array([1.0, 0.5, 0.0, 0.5, 1 / 3])
    d = Dendrogram(n_leaves=6, children=children, root=10, edge_counts=p * n_pairs)
    np.testing.assert_allclose(d.probabilities, p)
    rng = dpcore.default_rng(3)
    reps = 3000
    size = d.subtree_sizes
    per_node = np.zeros((reps, 5), dtype=int)
    pair_freq = np.zeros((6, 6))
    for t in range(reps):
        edges = sample_graph(d, random_state=rng)
        assert (edges[:, 0] < edges[:, 1]).all()
        assert len({tuple(e) for e in edges.tolist()}) == len(edges)
        pair_freq[edges[:, 0], edges[:, 1]] += 1
        _, lo, hi = d._ranges
        order = d.leaf_order
        pos = np.empty(6, dtype=int)
        pos[order] = np.arange(6)
        for r in range(5):
            a, b = children[r]
            pa, pb = pos[edges[:, 0]], pos[edges[:, 1]]
            ina = (lo[a] <= pa) & (pa < hi[a]) & (lo[b] <= pb) & (pb < hi[b])
            inb = (lo[b] <= pa) & (pa < hi[b]) & (lo[a] <= pb) & (pb < hi[a])
            per_node[t, r] = np.sum(ina | inb)
    assert size[10] == 6
    checks = [r for r in range(5) if 0 < p[r] < 1]  # Bonferroni over the random nodes
    for r in range(5):
        if p[r] in (0.0, 1.0):
            assert (per_node[:, r] == p[r] * n_pairs[r]).all()
            continue
        pmf = stats.binom(n_pairs[r], p[r]).pmf
        assert integer_pvalue(per_node[:, r], pmf, np.arange(n_pairs[r] + 1)) > ALPHA / len(checks)
        # Power: a wrong probability is rejected.
        wrong = stats.binom(n_pairs[r], min(1.0, p[r] * 1.25)).pmf
        assert integer_pvalue(per_node[:, r], wrong, np.arange(n_pairs[r] + 1)) < ALPHA
    # Every pair is an edge with its LCA's probability (all-pairs law).
    z = stats.norm.isf(ALPHA / 2 / 15)
    for x, y in itertools.combinations(range(6), 2):
        a, b = sorted((x, y))
        q = p[_lca(children, a, b) - 6]
        se = math.sqrt(max(q * (1 - q), 1e-12) / reps)
        assert abs(pair_freq[a, b] / reps - q) <= z * se + 1e-12


def _lca(children, a, b):
    parent = {}
    for r, (x, y) in enumerate(children):
        parent[int(x)] = parent[int(y)] = 6 + r
    anc = set()
    while a in parent:
        a = parent[a]
        anc.add(a)
    while b not in anc:
        b = parent[b]
    return b


def test_sample_graph_large_node_complement_path():
    # Root of 200 x 200 leaves with p = 0.9 (complement drawn) and a sparse left comb.
    n = 400
    children = []
    left = 0
    for i in range(1, 200):
        children.append([left, i])
        left = n + len(children) - 1
    right = 200
    for i in range(201, 400):
        children.append([right, i])
        right = n + len(children) - 1
    children.append([left, right])
    children = np.array(children)
    d0 = Dendrogram(n_leaves=n, children=children, root=2 * n - 2, edge_counts=np.zeros(n - 1))
    counts = np.zeros(n - 1)
    counts[-1] = 0.9 * 40000
    counts[:199] = 0.02 * d0.n_pairs[:199]
    d = Dendrogram(n_leaves=n, children=children, root=2 * n - 2, edge_counts=counts)
    rng = dpcore.default_rng(8)
    cross = []
    for _ in range(200):
        e = sample_graph(d, random_state=rng)
        assert len(np.unique(e[:, 0] * n + e[:, 1])) == len(e)
        cross.append(np.sum((e[:, 0] < 200) & (e[:, 1] >= 200)))
    cross = np.array(cross)
    z = stats.norm.isf(ALPHA / 2)
    assert abs(cross.mean() - 36000) <= z * math.sqrt(40000 * 0.09 / 200)
    assert abs(cross.var(ddof=1) / 3600 - 1) < 0.5


def test_distinct_subsets_uniform_per_owner():
    # Owners with totals 0, 4, 6, 0 (empty ranges before, between and after) and 2 resp. 3
    # values to draw: each owner's set must be a uniform k-subset, independently of the other's.
    from dpcore.graph import _distinct

    totals, counts = [0, 4, 6, 0], [0, 2, 3, 0]
    rng = dpcore.default_rng(21)
    subsets_a = list(itertools.combinations(range(4), 2))
    subsets_b = list(itertools.combinations(range(6), 3))
    joint = np.zeros((len(subsets_a), len(subsets_b)))
    reps = 6000
    for _ in range(reps):
        owner, value = _distinct(rng, totals, counts)
        assert np.array_equal(owner, np.repeat([1, 2], [2, 3]))
        a = tuple(value[owner == 1].tolist())
        b = tuple(value[owner == 2].tolist())
        joint[subsets_a.index(a), subsets_b.index(b)] += 1
    cells = joint.size  # 6 x 20 = 120 equally likely cells, 50 expected each
    assert chisquare_pvalue(joint.ravel(), np.full(cells, 1 / cells)) > ALPHA
    # Power: owner 1's first subset made 1.5x as likely as the others is rejected (noncentrality
    # 6000 * sum (p - q)^2 / q = 139 on 119 degrees of freedom: rejected with probability ~1).
    tilted = np.full(joint.shape, 1.0)
    tilted[0] *= 1.5
    assert chisquare_pvalue(joint.ravel(), (tilted / tilted.sum()).ravel()) < ALPHA


def test_complements_against_set_difference():
    from dpcore.graph import _complements

    rng = np.random.default_rng(5)
    totals = np.array([3, 0, 7, 5, 1, 9])
    owner, value = [], []
    for node, t in enumerate(totals):
        picked = rng.choice(t, size=rng.integers(0, t + 1), replace=False) if t else []
        owner += [node] * len(picked)
        value += sorted(int(x) for x in picked)
    owner, value = np.array(owner, dtype=np.int64), np.array(value, dtype=np.int64)
    nodes = np.array([0, 1, 2, 5])
    got_owner, got_value = _complements(totals, owner, value, nodes)
    expect = [(node, x) for node in nodes for x in range(totals[node])
              if x not in set(value[owner == node].tolist())]
    assert list(zip(got_owner.tolist(), got_value.tolist())) == expect


# --------------------------------------------------------------------------- PrivHRG


def karate():
    nx = pytest.importorskip("networkx")
    return nx.karate_club_graph()


def exact_counts(d, edges):
    st = make_state(d.n_leaves, edges)
    n = d.n_leaves
    parent = np.full(2 * n - 1, -1, dtype=np.int32)
    ch0 = np.full(2 * n - 1, -1, dtype=np.int32)
    ch1 = np.full(2 * n - 1, -1, dtype=np.int32)
    ch0[n:], ch1[n:] = d.children[:, 0], d.children[:, 1]
    parent[d.children[:, 0]] = np.arange(n, 2 * n - 1)
    parent[d.children[:, 1]] = np.arange(n, 2 * n - 1)
    st.set_tree(parent, ch0, ch1, d.root)
    return st.arrays()["E"][n:]


def test_privhrg_noise_is_discrete_laplace():
    n = 400
    edges = random_graph(n, 1600, 9)
    eps, split = 1.0, 0.5
    rng = dpcore.default_rng(21)
    noise = []
    for _ in range(12):
        rel = release_hrg(edges, n_nodes=n, epsilon=eps, epsilon_split=split, n_steps=2000,
                          random_state=rng)
        noise.append(rel.dendrogram.edge_counts - exact_counts(rel.dendrogram, edges))
    noise = np.concatenate(noise)
    eps2 = eps * (1 - split)

    support = np.arange(-12, 13)
    assert integer_pvalue(noise, dlap_pmf(1 / eps2), support) > ALPHA
    assert integer_pvalue(noise, dlap_pmf(1.2 / eps2), support) < ALPHA


def test_release_hrg_outputs_and_privacy_fields():
    G = karate()
    rel = release_hrg(G, epsilon=2.0, n_steps=30000, random_state=5)
    d = rel.dendrogram
    assert d.private and d.log_likelihood is None
    assert d.labels == tuple(G.nodes())
    assert rel.temperature == pytest.approx(1.0 / (2 * log_likelihood_sensitivity(34)))
    assert rel.temperature <= 1.0 / (2 * 6.6646945)
    assert rel.epsilon_dendrogram + rel.epsilon_counts == pytest.approx(2.0)
    e = rel.edges
    assert e.ndim == 2 and e.shape[1] == 2 and (e[:, 0] < e[:, 1]).all() and e.max() < 34
    assert rel.to_networkx().number_of_nodes() == 34
    # Reproducible with a seed (tests only), different for another seed.
    again = release_hrg(G, epsilon=2.0, n_steps=30000, random_state=5)
    np.testing.assert_array_equal(again.edges, rel.edges)
    np.testing.assert_array_equal(again.dendrogram.edge_counts, d.edge_counts)


def test_release_hrg_accountant_charges_first():
    G = karate()
    acc = dpcore.Accountant(1.0)
    release_hrg(G, epsilon=0.6, n_steps=100, accountant=acc, random_state=1)
    assert acc.spent[0] == pytest.approx(0.6)
    rng = dpcore.default_rng(3)
    before = rng.bit_generator.state
    with pytest.raises(dpcore.BudgetExceeded):
        release_hrg(G, epsilon=0.6, n_steps=100, accountant=acc, random_state=rng)
    assert rng.bit_generator.state == before
    assert acc.spent[0] == pytest.approx(0.6)


def test_release_progress_never_prints_likelihood(capsys):
    release_hrg(karate(), epsilon=1.0, n_steps=3000, random_state=2, progress=True)
    err = capsys.readouterr().err
    assert "3000/3000" in err and "likelihood" not in err


def test_karate_fit_close_to_long_run():
    G = karate()
    long = fit_hrg(G, n_steps=10_000_000, random_state=100)
    fit = fit_hrg(G, n_steps=2_000_000, random_state=7)
    assert fit.log_likelihood >= long.log_likelihood - 1.5
    # The best value several long runs found for this graph is -73.3212.
    assert long.log_likelihood > -74.5
    assert not fit.private
    # The reported likelihood is that of the returned dendrogram.
    E = exact_counts(fit, np.array([(fit.labels.index(a), fit.labels.index(b)) for a, b in G.edges()]))
    np.testing.assert_array_equal(E, fit.edge_counts)
    N = fit.n_pairs
    ll = sum(_hrg.ell(int(e), int(k)) for e, k in zip(E, N))
    assert fit.log_likelihood == pytest.approx(ll, rel=1e-12)


def test_dendrogram_exports():
    nx = pytest.importorskip("networkx")
    G = karate()
    d = fit_hrg(G, n_steps=5000, random_state=3)
    T = d.to_networkx()
    assert nx.is_arborescence(T) and T.number_of_nodes() == 67
    assert T.graph["root"] == ("internal", d.root)
    newick = d.to_newick()
    assert newick.endswith(";") and newick.count("(") == 33 == newick.count(")")
    assert sorted(d.leaf_order.tolist()) == list(range(34))
    assert d.n_pairs.sum() == 34 * 33 // 2
    g = sample_graph(d, random_state=1, as_networkx=True)
    assert set(g.nodes()) == set(G.nodes())


# --------------------------------------------------------------------------- input checks


def test_input_validation():
    nx = pytest.importorskip("networkx")
    with pytest.raises(TypeError, match="directed"):
        fit_hrg(nx.DiGraph([(0, 1), (1, 2)]))
    with pytest.raises(TypeError, match="n_nodes"):
        fit_hrg(np.array([[0, 1]]))
    with pytest.raises(ValueError, match="self-loop"):
        fit_hrg(np.array([[0, 1], [2, 2]]), n_nodes=3)
    with pytest.raises(ValueError, match="repeated"):
        fit_hrg(np.array([[0, 1], [1, 0]]), n_nodes=3)
    with pytest.raises(ValueError, match="shape"):
        fit_hrg(np.array([0, 1, 2]), n_nodes=3)
    with pytest.raises(TypeError, match="integer"):
        fit_hrg(np.array([[0.0, 1.0]]), n_nodes=3)
    with pytest.raises(ValueError, match="outside"):
        fit_hrg(np.array([[0, 3]]), n_nodes=3)
    with pytest.raises(ValueError, match="n_nodes"):
        fit_hrg(np.array([[0, 1]]), n_nodes=2)
    with pytest.raises(ValueError, match="multigraph"):
        fit_hrg(nx.MultiGraph([(0, 1), (0, 1), (1, 2)]))
    with pytest.raises(ValueError, match="epsilon"):
        release_hrg(np.array([[0, 1]]), n_nodes=3, epsilon=0.0)
    with pytest.raises(ValueError, match="epsilon_split"):
        release_hrg(np.array([[0, 1]]), n_nodes=3, epsilon=1.0, epsilon_split=1.0)
    with pytest.raises(ValueError, match="n_steps"):
        release_hrg(np.array([[0, 1]]), n_nodes=3, epsilon=1.0, n_steps=-1)
    with pytest.raises(TypeError, match="dendrogram"):
        sample_graph("tree")
    d = fit_hrg(np.array([[0, 1], [1, 0], [2, 2], [1, 2]]), n_nodes=4, simplify=True,
                n_steps=100, random_state=1)
    assert d.edge_counts.sum() == 2
    d = fit_hrg(nx.MultiGraph([(0, 1), (0, 1), (1, 2), (2, 2)]), simplify=True, n_steps=100,
                random_state=1)
    assert d.edge_counts.sum() == 2


def test_graph_doctests():
    import doctest

    import dpcore.graph as module

    failures, _ = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert failures == 0


def test_release_hrg_refuses_before_charging():
    """Arguments that would fail after the chain are refused before the charge (issue 14)."""
    ring = np.array([[i, (i + 1) % 12] for i in range(12)])
    acc = dpcore.Accountant(10.0)
    for bad in (dict(epsilon_split=1 - 2.0**-53), dict(epsilon=1e-300), dict(n_nodes=2**26 + 1),
                dict(random_state="seed")):
        kwargs = dict(n_nodes=12, epsilon=1.0, n_steps=10, accountant=acc)
        kwargs.update(bad)
        with pytest.raises((ValueError, TypeError)):
            dpcore.graph.release_hrg(ring, **kwargs)
    assert acc.history == []


def test_graph_errors_do_not_quote_private_counts():
    edges = np.array([[0, 1], [1, 2], [2, 2], [2, 2], [0, 1], [0, 1], [0, 1]])
    for exc_edges in (edges[:4], np.array([[0, 1], [0, 1], [0, 1], [1, 2]])):
        with pytest.raises(ValueError) as info:
            dpcore.graph.release_hrg(exc_edges, n_nodes=5, epsilon=1.0, n_steps=10)
        assert not any(ch.isdigit() for ch in str(info.value).split("simplify")[0])


def test_release_states_its_guarantee():
    ring = np.array([[i, (i + 1) % 12] for i in range(12)])
    rel = dpcore.graph.release_hrg(ring, n_nodes=12, epsilon=1.0, n_steps=100, random_state=2)
    assert "stationary" in rel.guarantee and "edge-DP" in rel.guarantee
    assert "100 steps" in rel.guarantee


def test_release_hrg_refuses_a_vertex_count_beyond_physical_memory(monkeypatch):
    """The memory estimate BYTES_PER_NODE * n_nodes is checked against physical memory before
    anything is allocated or charged (dpcore graph --nodes 3000000000 once reached 24 GB)."""
    ring = np.array([[i, (i + 1) % 12] for i in range(12)])
    acc = dpcore.Accountant(10.0)
    monkeypatch.setattr(dpcore.graph, "_physical_memory", lambda: 1000 * dpcore.graph.BYTES_PER_NODE)
    with pytest.raises(ValueError, match="n_nodes.*physical memory"):
        dpcore.graph.release_hrg(ring, n_nodes=1001, epsilon=1.0, n_steps=10, accountant=acc)
    with pytest.raises(ValueError, match="n_nodes.*physical memory"):
        dpcore.graph.fit_hrg(ring, n_nodes=1001, n_steps=10)
    assert acc.history == []
    rel = dpcore.graph.release_hrg(ring, n_nodes=1000, epsilon=1.0, n_steps=10, accountant=acc,
                                   random_state=0)
    assert rel.dendrogram.n_leaves == 1000 and len(acc.history) == 1
    assert dpcore.graph.MAX_NODES * dpcore.graph.BYTES_PER_NODE < 2**31 * 2**6  # int32 indices


def test_networkx_node_count_mismatch_quotes_no_count():
    nx = pytest.importorskip("networkx")
    G = nx.Graph()
    G.add_nodes_from(range(7))
    G.add_edges_from([(0, 1), (1, 2)])
    with pytest.raises(ValueError, match="n_nodes") as info:
        dpcore.graph.release_hrg(G, n_nodes=9, epsilon=1.0, n_steps=10)
    assert "7" not in str(info.value)
    assert "public" in dpcore.graph.release_hrg.__doc__.split("epsilon : float")[0]


def test_hrg_chain_is_interruptible():
    """HRGState.run checks for signals every SIGNAL_EVERY steps: Ctrl-C stops a long run with
    KeyboardInterrupt at a step boundary, the steps made counted and the state still valid."""
    import os
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import os, signal, subprocess, sys
        # KeyboardInterrupt on SIGINT even if this process inherited SIGINT ignored
        # (background jobs of a non-interactive shell do)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        import numpy as np
        from dpcore import _hrg
        from dpcore._random import bitgen_handle
        n = 500
        u = np.arange(n - 1, dtype=np.int32)
        st = _hrg.HRGState(n, u, u + 1)
        h = bitgen_handle(0)
        st.random_tree(h)
        # a separate process sends SIGINT every 0.5 s, 10 times (a timer thread
        # here would need the GIL of this busy process; one signal could be lost under load)
        subprocess.Popen([sys.executable, "-c", "import os, signal, time; "
                          "[time.sleep(0.5) or os.kill(%d, signal.SIGINT) "
                          "for _ in range(10)]" % os.getpid()],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            st.run(10**15, 1.0, h)
            print("finished")
        except KeyboardInterrupt:
            signal.signal(signal.SIGINT, signal.SIG_IGN)   # the killer's later signals
            done = st.n_steps
            st.run(100, 1.0, h)
            print("interrupted", done % _hrg.SIGNAL_EVERY == 0, st.n_steps == done + 100)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env=env)
    assert proc.stdout.strip() == "interrupted True True", proc.stderr


def test_malformed_edge_arrays_do_not_quote_the_edge_count():
    """The edge count m is private: a malformed edge array's error names no shape with m."""
    for bad in (np.zeros((7, 3), dtype=np.int64), np.zeros((7, 2, 1), dtype=np.int64)):
        with pytest.raises(ValueError, match=r"shape \(m, 2\)") as info:
            dpcore.graph.release_hrg(bad, n_nodes=12, epsilon=1.0, n_steps=10)
        assert "7" not in str(info.value)
    with pytest.raises(TypeError) as info:
        dpcore.graph.release_hrg([[0, 1], [1, 2, 3], [4, 5], [6, 7], [8, 9], [1, 3], [2, 4]],
                                 n_nodes=12, epsilon=1.0, n_steps=10)
    assert "7" not in str(info.value)
