"""Benchmarks of the ``_hrg`` kernel: Clauset-Moore-Newman MCMC steps on sparse random graphs.

Groups ``hrg-n1000`` and ``hrg-n10000``: a G(n, m) random graph with m = 5 n (average degree 10),
the same graph for every contender; ``extra_info["n"]`` is the number of MCMC steps per call, so the
report's "per sample" column is time per step.

Contenders:

* ``dpcore-fit_hrg`` (role dpcore): :func:`dpcore.graph.fit_hrg` end to end (input checks, CSR
  build, random start, the steps at temperature 1 keeping the best dendrogram, result object).
* ``dpcore-chain`` (role dpcore): the kernel's steps alone (``HRGState.run``) from a fresh random
  start each round (set-up untimed), at the twin's and at the full step count.
* ``igraph-hrg_fit`` (role peer): igraph's C implementation (Clauset's fitHRG code),
  ``igraph_hrg_fit(graph, hrg, start=false, steps)``: a random start and exactly ``steps`` moves
  keeping the best dendrogram, timed by a small C driver (``igraph_hrg_driver.c``, compiled here
  when Debian's ``libigraph-dev`` and a C compiler are present, else skipped). The time includes
  the driver's process start and edge-list parsing (a few ms; see the driver's own timings in the
  benchmark's extra_info, ``internal_seconds``).
* ``python-twin`` (role naive): the same chain (same moves, same lowest-common-ancestor edge
  labelling) in pure Python, uniforms from dpcore's generator in blocks, from a fresh random start
  each round (set-up untimed); compared with ``dpcore-chain`` at the same step count. It takes the
  same algorithmic shortcuts as the kernel, so both do the same work per step: no subtree walk
  when E_s = 0 (then E_kc = 0 and the move relabels nothing), edges labelled r collected only when
  the walked subtree is k, the same small-N table for ell, and no exp when delta < -21.5 and the
  uniform is >= 2**-31. (The kernel's memory-layout work, i.e. node records, slot ranges in leaf
  order, vectorised label scans and prefetching, has no Python counterpart.)

Targets (report.py): per step, dpcore at least as fast as igraph at n = 1000, at least 5x faster at
n = 10^4, and at least 100x faster than the Python twin.
"""
from __future__ import annotations

import math
import os
import shutil
import subprocess
import tempfile

import numpy as np
import pytest

from common import DPCORE, NAIVE, PEER, dpcore_api, record

STEPS = 200_000
_TWO_M31 = 2.0**-31
TWIN_STEPS = 20_000
GRAPH_SIZES = [1000, 10_000]
_HERE = os.path.dirname(os.path.abspath(__file__))


def sparse_graph(n, seed=20240611):
    """G(n, m) with m = 5 n distinct undirected edges (average degree 10), as an (m, 2) array."""
    rng = np.random.default_rng(seed)
    m = 5 * n
    keys = np.empty(0, dtype=np.int64)
    while keys.size < m:
        u = rng.integers(0, n, 2 * m)
        v = rng.integers(0, n, 2 * m)
        ok = u != v
        lo, hi = np.minimum(u[ok], v[ok]), np.maximum(u[ok], v[ok])
        keys = np.unique(np.concatenate([keys, lo * n + hi]))
    keys = rng.permutation(keys)[:m]
    return np.stack([keys // n, keys % n], axis=1)


_GRAPHS = {}


def graph(n):
    if n not in _GRAPHS:
        _GRAPHS[n] = sparse_graph(n)
    return _GRAPHS[n]


# --------------------------------------------------------------------------- the Python twin


def _ell_direct(e, N):
    if e <= 0 or e >= N:
        return 0.0
    p = e / N
    return e * math.log(p) + (N - e) * math.log1p(-p)


# As the kernel: ell(e, N) for N <= 32 from a table (the same values), else computed.
_SMALL_ELL = [_ell_direct(e, N) for N in range(33) for e in range(N + 1)]


def _ell(e, N):
    if N <= 32:
        return _SMALL_ELL[N * (N + 1) // 2 + e]
    return _ell_direct(e, N)


class PythonChain:
    """The CMN chain with LCA edge labels in plain Python lists."""

    def __init__(self, n, edges, rng):
        self.n, self.rng = n, rng
        self.eu = [int(a) for a in edges[:, 0]]
        self.ev = [int(b) for b in edges[:, 1]]
        self.inc = [[] for _ in range(n)]
        for e, (a, b) in enumerate(zip(self.eu, self.ev)):
            self.inc[a].append(e)
            self.inc[b].append(e)
        size = 2 * n - 1
        self.parent, self.ch = [-1] * size, [[-1, -1] for _ in range(size)]
        act = list(range(n))
        for i in range(n - 1):  # random merges, independent of the graph
            a = act.pop(int(rng.integers(len(act))))
            j = int(rng.integers(len(act)))
            self.ch[n + i] = [a, act[j]]
            self.parent[a] = self.parent[act[j]] = n + i
            act[j] = n + i
        self.root = 2 * n - 2
        self.nleaves = [1] * n + [0] * (n - 1)
        self.vol = [len(x) for x in self.inc] + [0] * (n - 1)
        leafset = [None] * size
        for x in range(n):
            leafset[x] = {x}
        for x in range(n, size):  # children have smaller ids after random merges
            a, b = self.ch[x]
            leafset[x] = leafset[a] | leafset[b]
            self.nleaves[x] = len(leafset[x])
            self.vol[x] = self.vol[a] + self.vol[b]
        self.lca = [0] * len(self.eu)
        for e in range(len(self.eu)):
            x = self.parent[self.eu[e]]
            while self.ev[e] not in leafset[x]:
                x = self.parent[x]
            self.lca[e] = x
        self.E = [0] * size
        for x in self.lca:
            self.E[x] += 1
        self.ellc = [0.0] * size
        for x in range(n, size):
            a, b = self.ch[x]
            self.ellc[x] = _ell(self.E[x], self.nleaves[a] * self.nleaves[b])
        self.logl = sum(self.ellc)

    def _collect(self, x, s, r, want_r):
        """Edges at the leaves of subtree x labelled s, and (if want_r) those labelled r."""
        to_s, to_r, stack = [], [], [x]
        n, ch, inc, lca = self.n, self.ch, self.inc, self.lca
        while stack:
            y = stack.pop()
            if y >= n:
                stack.extend(ch[y])
                continue
            for e in inc[y]:
                if lca[e] == s:
                    to_s.append(e)
                elif want_r and lca[e] == r:
                    to_r.append(e)
        return to_s, to_r

    def run(self, steps):
        n = self.n
        nodes = self.rng.integers(n, 2 * n - 1, size=2 * steps + 16).tolist()
        bits = self.rng.integers(0, 2, size=steps).tolist()
        unif = self.rng.random(steps).tolist()
        it = iter(nodes)
        for t in range(steps):
            r = next(it)
            while r == self.root:
                r = next(it)
            s = self.parent[r]
            a, b = self.ch[r]
            c = self.ch[s][1] if self.ch[s][0] == r else self.ch[s][0]
            k, m = (a, b) if bits[t] else (b, a)
            lk, lm, lc = self.nleaves[k], self.nleaves[m], self.nleaves[c]
            e_s = self.E[s]
            if e_s == 0:  # no r-c edge: E_kc = 0 without a walk; option B relabels nothing
                walk_k, to_s, e_kc, e_top = False, (), 0, self.E[r]
                l_in, l_top = 0.0, _ell(e_top, (lk + lc) * lm)
                delta = l_top - self.ellc[r]
            else:
                walk_k = self.vol[k] + self.nleaves[k] <= self.vol[m] + self.nleaves[m]
                to_s, to_r = self._collect(k if walk_k else m, s, r, walk_k)
                e_kc = len(to_s) if walk_k else e_s - len(to_s)
                e_top = self.E[r] + e_s - e_kc
                l_in, l_top = _ell(e_kc, lk * lc), _ell(e_top, (lk + lc) * lm)
                delta = l_in + l_top - self.ellc[r] - self.ellc[s]
            # Metropolis at temperature 1; as the kernel, no exp when delta < -21.5 and the
            # uniform is >= 2**-31 (then exp(delta) < 2**-31 <= u: reject either way).
            u = unif[t]
            if delta < 0 and ((delta < -21.5 and u >= _TWO_M31) or u >= math.exp(delta)):
                continue
            if walk_k:
                for e in to_r:
                    self.lca[e] = s
                for e in to_s:
                    self.lca[e] = r
                self.ch[r] = [k, c]
                self.parent[c] = r
                self.ch[s] = [r, m]
                self.parent[m] = s
                inner, top = r, s
            else:
                for e in to_s:
                    self.lca[e] = r
                g = self.parent[s]
                self.nleaves[r], self.vol[r] = self.nleaves[s], self.vol[s]
                self.ch[s] = [k, c]
                self.parent[k] = s
                self.ch[r] = [s, m]
                self.parent[s] = r
                self.parent[r] = g
                if g < 0:
                    self.root = r
                else:
                    self.ch[g][self.ch[g].index(s)] = r
                inner, top = s, r
            self.nleaves[inner] = lk + lc
            self.vol[inner] = self.vol[k] + self.vol[c]
            self.E[inner], self.E[top] = e_kc, e_top
            self.ellc[inner], self.ellc[top] = l_in, l_top
            self.logl += delta
        return self.logl


# --------------------------------------------------------------------------- checks


def check_loglik(logl, n, m):
    """Any dendrogram's log-likelihood is <= 0 and >= that of an Erdos-Renyi fit minus slack."""
    assert math.isfinite(logl) and logl <= 1e-9
    pairs = n * (n - 1) / 2
    p = m / pairs
    er = m * math.log(p) + (pairs - m) * math.log1p(-p)
    assert logl >= 1.5 * er, (logl, er)


# --------------------------------------------------------------------------- contenders


@pytest.mark.parametrize("nodes", GRAPH_SIZES)
@pytest.mark.parametrize("size", [STEPS], indirect=True)
def test_dpcore_fit_hrg(benchmark, nodes, size):
    dpcore_api()
    from dpcore.graph import fit_hrg

    edges = graph(nodes)
    record(benchmark, n=size, contender="dpcore-fit_hrg", role=DPCORE, group=f"hrg-n{nodes}")
    d = benchmark(fit_hrg, edges, n_nodes=nodes, n_steps=size, random_state=1)
    check_loglik(d.log_likelihood, nodes, len(edges))
    assert int(d.edge_counts.sum()) == len(edges)


@pytest.mark.parametrize("nodes", GRAPH_SIZES)
@pytest.mark.parametrize("size", [TWIN_STEPS, STEPS], indirect=True)
def test_dpcore_chain(benchmark, nodes, size):
    dpcore_api()
    from dpcore import _hrg
    from dpcore._random import bitgen_handle

    edges = graph(nodes).astype(np.int32)
    h = bitgen_handle(2)
    states = []

    def fresh():  # untimed: a new random start for every round (same phase as the twin)
        state = _hrg.HRGState(nodes, edges[:, 0], edges[:, 1])
        state.random_tree(h)
        states.append(state)
        return (state, size), {}

    record(benchmark, n=size, contender="dpcore-chain", role=DPCORE, group=f"hrg-n{nodes}")
    benchmark.pedantic(lambda state, steps: state.run(steps, 1.0, h), setup=fresh,
                       rounds=5, iterations=1)
    state = states[-1]
    check_loglik(state.log_likelihood, nodes, len(edges))
    check = _hrg.HRGState(nodes, edges[:, 0], edges[:, 1])
    a = state.arrays()
    check.set_tree(a["parent"], a["ch0"], a["ch1"], state.root_id)
    assert abs(check.log_likelihood - state.log_likelihood) <= 1e-6 * abs(state.log_likelihood)


@pytest.mark.peer
@pytest.mark.parametrize("nodes", GRAPH_SIZES)
@pytest.mark.parametrize("size", [TWIN_STEPS], indirect=True)
def test_python_twin(benchmark, nodes, size):
    dpcore = dpcore_api("default_rng")
    edges = graph(nodes)
    rng = dpcore.default_rng(3)
    chains = []

    def fresh():  # untimed: a new random start for every round
        chains.append(PythonChain(nodes, edges, rng))
        return (chains[-1], size), {}

    record(benchmark, n=size, contender="python-twin", role=NAIVE, group=f"hrg-n{nodes}")
    benchmark.pedantic(lambda chain, steps: chain.run(steps), setup=fresh, rounds=3, iterations=1)
    check_loglik(chains[-1].logl, nodes, len(edges))
    assert sum(chains[-1].E) == len(edges)


@pytest.fixture(scope="session")
def igraph_driver():
    """Path of the compiled igraph driver, or skip (no libigraph-dev / no compiler)."""
    header = "/usr/include/igraph/igraph.h"
    cc = shutil.which("cc") or shutil.which("gcc")
    if not os.path.exists(header) or cc is None:
        pytest.skip("peer igraph not usable: needs Debian's libigraph-dev and a C compiler")
    out = os.path.join(tempfile.mkdtemp(prefix="dpcore-igraph-"), "igraph_hrg_driver")
    cmd = [cc, "-O2", os.path.join(_HERE, "igraph_hrg_driver.c"), "-I/usr/include/igraph",
           "-o", out, "-ligraph"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"peer igraph not usable: driver build failed: {proc.stderr[-500:]}")
    return out


@pytest.mark.peer
@pytest.mark.parametrize("nodes", GRAPH_SIZES)
@pytest.mark.parametrize("size", [STEPS], indirect=True)
def test_igraph_hrg_fit(benchmark, igraph_driver, nodes, size, tmp_path):
    edges = graph(nodes)
    path = tmp_path / "edges.txt"
    np.savetxt(path, edges, fmt="%d")
    record(benchmark, n=size, contender="igraph-hrg_fit", role=PEER, group=f"hrg-n{nodes}")
    internal = []

    def run():
        proc = subprocess.run([igraph_driver, str(path), str(nodes), str(size), "1", "1"],
                              capture_output=True, text=True, check=True)
        internal.append(float(proc.stdout.split()[0]))

    benchmark.pedantic(run, rounds=3, iterations=1)
    benchmark.extra_info["internal_seconds"] = sorted(internal)[len(internal) // 2]
    assert all(t > 0 for t in internal)


# --------------------------------------------------------------------------- utility (docs/user_guide/graphs.md)


def _graph_stats(G, rng, sources=100):
    """Degree histogram, average clustering, mean shortest path from sampled sources (largest
    component)."""
    import networkx as nx

    degrees = np.array([d for _, d in G.degree()])
    comp = max(nx.connected_components(G), key=len) if G.number_of_edges() else {next(iter(G))}
    H = G.subgraph(comp)
    nodes = list(H)
    picks = rng.choice(len(nodes), size=min(sources, len(nodes)), replace=False)
    total = count = 0
    for i in picks:
        lengths = nx.single_source_shortest_path_length(H, nodes[i])
        total += sum(lengths.values())
        count += len(lengths) - 1
    return {
        "edges": G.number_of_edges(),
        "degrees": degrees,
        "clustering": nx.average_clustering(G),
        "path": total / count if count else float("nan"),
        "giant": len(comp) / G.number_of_nodes(),
    }


def _degree_tv(a, b):
    top = max(a.max(initial=0), b.max(initial=0)) + 1
    pa = np.bincount(a, minlength=top) / a.size
    pb = np.bincount(b, minlength=top) / b.size
    return 0.5 * np.abs(pa - pb).sum()


def utility_table(epsilons=(0.5, 1.0, 2.0, 5.0), reps=3, seed=1):
    """Markdown table: synthetic-graph utility of release_hrg against the input graph."""
    import networkx as nx

    from dpcore.graph import fit_hrg, release_hrg, sample_graph

    graphs = {
        "karate (n=34, m=78)": nx.karate_club_graph(),
        "powerlaw-cluster (n=1000, m~4000)": nx.powerlaw_cluster_graph(1000, 4, 0.3, seed=seed),
    }
    rng = np.random.default_rng(seed)  # only picks path-length sources (not a release)
    lines = ["| graph | epsilon | edges | degree TV distance | avg clustering | avg shortest path |",
             "|---|---|---|---|---|---|"]
    for name, G in graphs.items():
        G = nx.convert_node_labels_to_integers(G)
        ref = _graph_stats(G, rng)
        lines.append(f"| {name} | input | {ref['edges']} | 0 | {ref['clustering']:.3f} | "
                     f"{ref['path']:.2f} |")
        rows = []
        for r in range(reps):  # reference: the non-private best fit, sampled the same way
            d = fit_hrg(G, random_state=seed + r)
            st = _graph_stats(sample_graph(d, random_state=seed + r, as_networkx=True), rng)
            rows.append((st["edges"], _degree_tv(ref["degrees"], st["degrees"]),
                         st["clustering"], st["path"]))
        e, tv, cc, path = np.mean(rows, axis=0)
        lines.append(f"| {name} | fit_hrg (not private) | {e:.0f} | {tv:.3f} | {cc:.3f} | {path:.2f} |")
        for eps in epsilons:
            rows = []
            for r in range(reps):
                rel = release_hrg(G, epsilon=eps, random_state=seed + 1000 * r + int(10 * eps))
                S = rel.to_networkx()
                st = _graph_stats(S, rng)
                rows.append((st["edges"], _degree_tv(ref["degrees"], st["degrees"]),
                             st["clustering"], st["path"]))
            e, tv, cc, path = np.mean(rows, axis=0)
            lines.append(f"| {name} | {eps:g} | {e:.0f} | {tv:.3f} | {cc:.3f} | {path:.2f} |")
    return "\n".join(lines)


# --------------------------------------------------------------------------- floor (docs/user_guide/graphs.md)


def floor_table(n=1000, steps=TWIN_STEPS, reps=5):
    """Markdown table: time per step on a graph with no edges (every move accepted, no walk, no
    logarithm) of the Python twin, the kernel, and hrg_move_floor.c (the pointer work of a move
    alone, in C, with a fast non-cryptographic generator), each against the twin."""
    import time

    from dpcore import _hrg, default_rng
    from dpcore._random import bitgen_handle

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise SystemExit("needs a C compiler for hrg_move_floor.c")
    exe = os.path.join(tempfile.mkdtemp(prefix="dpcore-floor-"), "hrg_move_floor")
    subprocess.run([cc, "-O3", "-march=native", os.path.join(_HERE, "hrg_move_floor.c"), "-o", exe],
                   check=True)
    empty = np.zeros((0, 2), dtype=np.int64)
    twin = []
    for _ in range(reps):
        chain = PythonChain(n, empty, default_rng(3))
        t = time.perf_counter()
        chain.run(steps)
        twin.append((time.perf_counter() - t) / steps)
    h = bitgen_handle(2)
    kernel = []
    for _ in range(reps * 20):
        state = _hrg.HRGState(n, empty[:, 0].astype(np.int32), empty[:, 1].astype(np.int32))
        state.random_tree(h)
        t = time.perf_counter()
        state.run(steps, 1.0, h)
        kernel.append((time.perf_counter() - t) / steps)
    out = subprocess.run([exe, str(n), str(steps), str(reps * 100)], capture_output=True, text=True,
                         check=True)
    floor = float(out.stdout.split()[0]) * 1e-9
    t_twin, t_kernel = float(np.median(twin)), float(np.median(kernel))
    lines = [f"Graph with no edges, n = {n}, {steps} steps from a random start (medians)", "",
             "| implementation | per step | twin / this |", "|---|---|---|"]
    for name, t in [("Python twin", t_twin), ("dpcore kernel (`HRGState.run`)", t_kernel),
                    ("`hrg_move_floor.c` (pointer work only)", floor)]:
        lines.append(f"| {name} | {t * 1e9:.1f} ns | {t_twin / t:.0f}x |")
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["floor"]:  # python bench/test_hrg.py floor: the floor table (docs/user_guide/graphs.md)
        print(floor_table())
    else:  # python bench/test_hrg.py: the utility table of docs/user_guide/graphs.md
        print("release_hrg utility, default 1000 n steps, epsilon_split 0.5, mean of 3 releases")
        print()
        print(utility_table())
