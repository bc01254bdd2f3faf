"""Digests of released trees and forests over seeds, configurations and thread counts (1, 2, 8):
to check that a change to the tree code leaves every seeded release bit-identical.

    PYTHONPATH=/path/to/reference/python python bench/tree_identity.py > before.txt
    PYTHONPATH=python python bench/tree_identity.py > after.txt
    cmp before.txt after.txt

Each line: threads, configuration, seed, the first 16 hex digits of the SHA-256 of every node
array and the leaf values. Within one run the lines of the three thread counts must agree too
(the kernels' output does not depend on the thread count). Data: test data, not noise.
"""
import hashlib
import warnings

import numpy as np

import dpcore
from dpcore.learn import DecisionTreeClassifier, RandomForestClassifier


def data(n, d, k, seed, clip=False):
    """n records of d features in [0, 1] (in [-0.2, 1.2] with clip: some clipped), k classes."""
    g = np.random.default_rng(seed)  # insecure-ok: test data, not noise
    X = g.random((n, d)) * (1.4 if clip else 1.0) - (0.2 if clip else 0.0)
    y = (X[:, 0] + X[:, 1] * (k - 1) + g.normal(0, 0.2, n)).clip(0, k - 1).astype(int)
    return X, y


CONFIGS = [
    ("tree", dict(), (3000, 5, 2)),
    ("tree", dict(epsilon=5.0, max_depth=4), (20000, 30, 2)),
    ("tree", dict(epsilon=0.1), (5000, 25, 3)),
    ("tree", dict(epsilon=2.0, max_depth=5, n_bins=300, criterion="gini"), (40000, 8, 3)),
    ("tree", dict(epsilon=1.0, max_depth=3, n_bins=[4, 8, 16, 2, 5]), (9000, 5, 2)),
    ("tree", dict(epsilon=1.0, split_share=0.0), (2000, 6, 2)),
    ("tree", dict(epsilon=1.0, max_depth=6, split_levels=2), (300000, 12, 2)),
    ("tree", dict(), (100000, 30, 2)),
    ("forest", dict(), (100000, 30, 2)),
    ("forest", dict(n_estimators=7, max_depth=3), (50000, 10, 3)),
    ("forest", dict(n_estimators=3, max_depth=5, epsilon=3.0), (400000, 6, 2)),
    ("forest", dict(algorithm="random", n_estimators=4), (20000, 6, 2)),
]


def main():
    out = []
    warnings.simplefilter("ignore")
    for threads in (1, 2, 8):
        dpcore.set_num_threads(threads)
        for ci, (kind, kw, (n, d, k)) in enumerate(CONFIGS):
            for seed in (0, 1, 2):
                X, y = data(n, d, k, 100 + ci, clip=ci % 2 == 1)
                cls = DecisionTreeClassifier if kind == "tree" else RandomForestClassifier
                est = cls(bounds=(0.0, 1.0), classes=list(range(k)), random_state=seed,
                          **kw).fit(X, y)
                t = est.tree_
                h = hashlib.sha256()
                for a in (t.feature, t.threshold, t.left, t.right, t.slot, t.roots, t.values):
                    h.update(np.ascontiguousarray(a).tobytes())
                h.update(str(t.depth).encode())
                out.append(f"{threads} {ci} {seed} {h.hexdigest()[:16]}")
    print("\n".join(out))
    by_config = {}
    for line in out:
        _, ci, seed, digest = line.split()
        by_config.setdefault((ci, seed), set()).add(digest)
    assert all(len(v) == 1 for v in by_config.values()), "a thread count changed a release"


if __name__ == "__main__":
    main()
