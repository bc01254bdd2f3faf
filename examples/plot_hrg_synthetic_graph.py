"""
A synthetic graph from PrivHRG beside the original
==================================================

:func:`dpcore.graph.release_hrg` releases a synthetic graph under edge-DP (neighbouring graphs on
the same public vertex set differ in one edge): an MCMC chain fits a hierarchical random graph
(a dendrogram) with half of epsilon, noisy edge counts of its internal nodes use the other half,
and a synthetic graph is sampled from the result.

The guarantee of the dendrogram half holds for the chain's *stationary* law, not for a finite
run; the number of steps is public (here the default, 1000 steps per node). The input is
Zachary's karate club (34 members, 78 friendships, bundled with NetworkX). No seed: the noise and
the chain use dpcore's secure generator.
"""

import matplotlib.pyplot as plt
import networkx as nx
import numpy as np

import dpcore

G = nx.karate_club_graph()
n = G.number_of_nodes()                       # public: the vertex set
edges = np.array(G.edges(), dtype=np.int64)

releases = {eps: dpcore.graph.release_hrg(edges, n_nodes=n, epsilon=eps) for eps in (0.5, 2.0)}
for eps, rel in releases.items():
    print(f"epsilon = {eps}: {len(rel.edges)} synthetic edges (input: {len(edges)})")


def graph_of(edge_array):
    H = nx.Graph()
    H.add_nodes_from(range(n))
    H.add_edges_from(map(tuple, edge_array))
    return H


# %%
# The graphs (the same layout, computed from the input, for all three) and their degree
# distributions. At small epsilon the noisy counts, clamped at zero, add edges (the README's
# table measures this over repeated releases).

graphs = {"input (karate club)": G}
graphs.update({f"PrivHRG, epsilon = {eps}": graph_of(rel.edges) for eps, rel in releases.items()})
pos = nx.spring_layout(G, seed=3)             # the layout only; it does not touch the release

fig, axes = plt.subplots(2, 3, figsize=(12, 7.5))
for ax, (title, H) in zip(axes[0], graphs.items()):
    nx.draw_networkx(H, pos, ax=ax, node_size=40, with_labels=False, width=0.5)
    ax.set_title(f"{title}\n{H.number_of_edges()} edges", fontsize=10)
    ax.axis("off")
bins = np.arange(0, 20) - 0.5
for ax, (title, H) in zip(axes[1], graphs.items()):
    degrees = [d for _, d in H.degree()]
    ax.hist(degrees, bins=bins, color="tab:blue", alpha=0.7, label=title)
    if H is not G:
        ax.hist([d for _, d in G.degree()], bins=bins, histtype="step", color="k", label="input")
    ax.set_xlabel("degree")
    ax.set_ylabel("nodes")
    ax.legend(fontsize=8)
fig.tight_layout()
plt.show()
