"""The trees' development sets and studies (issue 28 item 3), run through bench/dev_suite.py
(``tree``, ``forest``, ``tree-prep``, ``tree-small``, ``tree-rules``, ``tree-split-law``; the
module docstring there says what each prints). Generated tables only, none of the reporting sets
of bench/tree_accuracy.py."""

import numpy as np
from sklearn.datasets import make_classification
from sklearn.model_selection import train_test_split

from dev_common import DevSet, mean_score, median_score, peer_class
from dpcore.learn import DecisionTreeClassifier, RandomForestClassifier
from dpcore.learn._tree_grow import random_split as _default_split

TREE_EPSILONS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0)
# name, n, d, classes, informative features, redundant features, class_sep, seed; the "r"
# tables have redundant (correlated, informative) features, as real tables often do
TREE_SHAPES = [("150x4 k3", 150, 4, 3, 3, 0, 1.5, 11), ("180x13 k3", 180, 13, 3, 5, 0, 1.2, 12),
               ("1800x64 k10", 1800, 64, 10, 20, 0, 1.5, 13),
               ("570x30 k2", 570, 30, 2, 6, 0, 1.0, 14), ("300x8 k2", 300, 8, 2, 4, 0, 0.8, 15),
               ("1000x20 k5", 1000, 20, 5, 8, 0, 1.2, 16),
               ("5000x10 k2", 5000, 10, 2, 5, 0, 0.7, 17),
               ("150x4 k3 r", 150, 4, 3, 2, 2, 1.5, 21), ("180x13 k3 r", 180, 13, 3, 4, 6, 1.2, 22),
               ("570x30 k2 r", 570, 30, 2, 5, 15, 1.0, 23),
               ("1800x64 k10 r", 1800, 64, 10, 16, 30, 1.5, 24)]
# tables whose features are exp(x / 2): right-skewed like areas, amounts and counts, so that
# most records sit in the first bins of the public range
TREE_SKEWED = [("150x4 k3 r skewed", 150, 4, 3, 2, 2, 1.5, 31),
               ("400x30 k2 r skewed", 400, 30, 2, 5, 15, 1.0, 32),
               ("180x13 k3 r skewed", 180, 13, 3, 4, 6, 1.2, 33)]


# issue 28 item 3, widened: large tables (10^4 records and more, some with 2 clusters per
# class), few-feature tables as separable as small public ones, and 10 classes with signal
# (name, n, d, classes, informative, redundant, class_sep, seed, clusters per class)
TREE_WIDE_SUITE = [("12000x10 k2", 12_000, 10, 2, 5, 2, 0.8, 41, 2),
                   ("20000x16 k3", 20_000, 16, 3, 6, 3, 1.0, 42, 2),
                   ("30000x30 k4", 30_000, 30, 4, 8, 6, 1.0, 43, 2),
                   ("15000x8 k5", 15_000, 8, 5, 5, 1, 1.5, 44, 1),
                   ("150x4 k3 sep", 150, 4, 3, 2, 1, 2.5, 45, 1),
                   ("120x5 k3 sep", 120, 5, 3, 3, 1, 2.0, 46, 1),
                   ("210x7 k3 sep", 210, 7, 3, 3, 2, 2.0, 47, 1),
                   ("200x6 k2 sep", 200, 6, 2, 2, 2, 2.0, 48, 1),
                   ("3000x16 k10", 3_000, 16, 10, 10, 3, 2.5, 49, 1),
                   ("1500x64 k10", 1_500, 64, 10, 24, 8, 2.5, 50, 1),
                   ("25000x40 k2", 25_000, 40, 2, 8, 8, 0.8, 53, 2)]
GLYPHS = [("glyphs 1800x64 k10", 1_800, 51), ("glyphs 1200x64 k10", 1_200, 52)]


def glyphs(n, seed, side=8, k=10):
    """Digit-like images without digits: k class prototypes on a side x side grid (2 or 3
    Gaussian strokes each, inside a one-pixel margin), records shifted by a pixel along each
    axis with probability 0.3, their ink scaled and noised, below 2 blank, rounded to 0 .. 16:
    sparse integer features, the border pixels
    almost always 0, strongly correlated neighbours, 10 classes with signal."""
    rng = np.random.default_rng(seed)  # insecure-ok: benchmark data, not noise
    grid = np.stack(np.meshgrid(np.arange(side), np.arange(side), indexing="ij"), axis=-1)
    protos = np.zeros((k, side, side))
    for c in range(k):
        for _ in range(rng.integers(2, 4)):
            a, b = rng.uniform(1.5, side - 2.5, size=(2, 2))
            for t in np.linspace(0.0, 1.0, 6):   # a stroke from a to b
                centre = a + t * (b - a)
                protos[c] += np.exp(-((grid - centre) ** 2).sum(axis=-1) / 1.2)
        protos[c] *= 16.0 / protos[c].max()
    y = rng.integers(k, size=n)
    X = np.empty((n, side * side))
    for i in range(n):
        shift = rng.integers(-1, 2, size=2) * (rng.random(2) < 0.3)
        img = np.roll(protos[y[i]], shift, axis=(0, 1))
        img = img * rng.uniform(0.8, 1.2) + rng.normal(0.0, 1.5, size=img.shape)
        X[i] = np.where(img < 2.0, 0.0, np.clip(np.round(img), 0, 16)).ravel()   # blank paper
    return X, y


def tree_data_sets(reps=2):
    """The trees' development sets (module docstring): DevSet with ``raw`` only."""
    from sklearn.datasets import load_diabetes

    tables = []
    for name, n, d, k, informative, redundant, sep, seed in TREE_SHAPES + TREE_SKEWED:
        X, y = make_classification(n_samples=n, n_features=d, n_informative=informative,
                                   n_redundant=redundant, n_classes=k, n_clusters_per_class=1,
                                   class_sep=sep, random_state=seed)
        if "skewed" in name:
            X = np.exp(X / 2.0)
        tables.append((f"make_classification {name}", X, y))
    X, target = load_diabetes(return_X_y=True)
    tables.append(("diabetes > median", X, (target > np.median(target)).astype(int)))
    for name, n, d, k, informative, redundant, sep, seed, clusters in TREE_WIDE_SUITE:
        X, y = make_classification(n_samples=n, n_features=d, n_informative=informative,
                                   n_redundant=redundant, n_classes=k,
                                   n_clusters_per_class=clusters, class_sep=sep,
                                   random_state=seed)
        tables.append((f"make_classification {name}", X, y))
    for name, n, seed in GLYPHS:
        tables.append((name,) + glyphs(n, seed))
    out = []
    for name, X, y in tables:
        lo, hi = X.min(axis=0), X.max(axis=0)
        bounds = (lo, np.where(hi > lo, hi, lo + 1.0))   # a glyph's blank pixel: a unit range
        for rep in range(reps):
            a, b, ya, yb = train_test_split(X, y, test_size=0.3, random_state=200 + rep,
                                            stratify=y)
            out.append(DevSet(f"{name} s{rep}", ya, yb, (a, b, bounds), None))
    return out


def tree_cells(sets, seeds, epsilons=None):
    rules = {"tree_defaults": {}, "depth 2, share 0.7": {"max_depth": 2, "split_share": 0.7},
             "depth 4, share 0.7": {"max_depth": 4, "split_share": 0.7},
             "depth 3, share 0.2, 16 bins": {"max_depth": 3, "split_share": 0.2, "n_bins": 16},
             "depth 4, share 0.1": {"max_depth": 4, "split_share": 0.1, "n_bins": 32},
             "depth 5, share 0.1, 16 bins": {"max_depth": 5, "split_share": 0.1, "n_bins": 16},
             "depth 6, share 0.1": {"max_depth": 6, "split_share": 0.1, "n_bins": 32},
             "random depth 5": {"max_depth": 5, "split_share": 0.0, "n_bins": 32},
             "random depth 5, 16 bins": {"max_depth": 5, "split_share": 0.0, "n_bins": 16}}
    yield from _tree_like_cells(sets, seeds, "DecisionTreeClassifier", DecisionTreeClassifier,
                                rules, epsilons)


def forest_cells(sets, seeds, epsilons=None):
    rules = {"forest_defaults": {}, "1 tree": {"n_estimators": 1},
             "2 trees": {"n_estimators": 2}, "3 trees": {"n_estimators": 3},
             "5 trees": {"n_estimators": 5}, "10 trees": {"n_estimators": 10},
             "20 trees": {"n_estimators": 20},
             "3 trees, depth + 1": "deeper 3", "5 trees, depth - 1": "shallower 5",
             "random trees (before)": {"algorithm": "random"}}
    yield from _tree_like_cells(sets, seeds, "RandomForestClassifier", RandomForestClassifier,
                                rules, epsilons)


def tree_prep_cells(sets, seeds, epsilons=None):
    """DecisionTreeClassifier's rules under the preprocessings of issue 28 item 2
    (tree_accuracy.preprocess, on each set's training and test rows together; min-max divided
    by sqrt(d) is min-max for a tree, so it is left out)."""
    import tree_accuracy

    rules = {"tree_defaults": {}, "depth 5, 32 bins": {"max_depth": 5, "n_bins": 32},
             "depth 6, 16 bins": {"max_depth": 6, "n_bins": 16}}
    for prep in ("minmax", "standardised", "unit rows"):
        prepared = []
        for s in sets:
            Xtr, Xte, _ = s.raw
            X, bounds = tree_accuracy.preprocess(np.vstack([Xtr, Xte]), prep)
            prepared.append(DevSet(f"{s.name} / {prep}", s.ytr, s.yte,
                                   (X[:len(Xtr)], X[len(Xtr):], bounds), None))
        yield from _tree_like_cells(prepared, seeds, "DecisionTreeClassifier",
                                    DecisionTreeClassifier, rules, epsilons)


def tree_small_cells(sets, seeds, epsilons=None):
    """The ``tree-small`` study (module docstring): cells keyed by width ("narrow"/"wide")."""
    import warnings

    import tree_accuracy
    from dpcore.learn._tree_grid import WIDE

    rules = {"narrow rule": {"max_depth": 5, "split_share": 0.1, "split_levels": 5}}
    for depth, share, levels in ((5, 0.3, 1), (5, 0.5, 1), (5, 0.7, 1), (5, 0.6, 2),
                                 (4, 0.5, 1), (6, 0.5, 1)):
        rules[f"depth {depth}, {share:g} on {levels} level(s)"] = {
            "max_depth": depth, "split_share": share, "split_levels": levels}
    for bins in (64, 128, 256):
        rules[f"narrow rule, {bins} bins"] = {"max_depth": 5, "split_share": 0.1,
                                              "split_levels": 5, "n_bins": bins}
    rules["depth 4, 0.5 on 1 level(s), 128 bins"] = {"max_depth": 4, "split_share": 0.5,
                                                     "split_levels": 1, "n_bins": 128}
    rules["tree_defaults"] = {}
    for s in sets:
        classes = np.unique(s.ytr)
        for prep in ("minmax", "standardised", "unit rows"):
            X, bounds = tree_accuracy.preprocess(np.vstack(s.raw[:2]), prep)
            Xtr, Xte = X[:len(s.ytr)], X[len(s.ytr):]
            width = "wide" if X.shape[1] >= WIDE else "narrow"
            for eps in (0.1, 0.15) if epsilons is None else epsilons:
                row = {}
                for rule, kw in rules.items():
                    kw = {"n_bins": 32, **kw}
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        row[rule] = float(np.mean([
                            DecisionTreeClassifier(epsilon=eps, bounds=bounds, classes=classes,
                                                   random_state=1000 + seed, **kw)
                            .fit(Xtr, s.ytr).score(Xte, s.yte) for seed in range(seeds)]))
                yield (f"{s.name} / {prep}", f"tree {width}", eps), row


# tree-rules candidates: name -> (max_depth, split_share, split_levels, n_bins)
TREE_RULES = {"narrow (5, .1, 5)": (5, 0.1, 5, 32), "random 4": (4, 0.0, 0, 32),
              "random 5": (5, 0.0, 0, 32), "random 6": (6, 0.0, 0, 32),
              "random 5, 64 bins": (5, 0.0, 0, 64), "(5, .05, 5)": (5, 0.05, 5, 32),
              "(5, .2, 5)": (5, 0.2, 5, 32), "(6, .1, 6)": (6, 0.1, 6, 32),
              "(5, .1, 1)": (5, 0.1, 1, 32), "(5, .2, 1)": (5, 0.2, 1, 32),
              "wide (4, .5, 1)": (4, 0.5, 1, 32), "(5, .3, 1)": (5, 0.3, 1, 32),
              "(5, .5, 1)": (5, 0.5, 1, 32), "(6, .5, 1)": (6, 0.5, 1, 32),
              "(5, .3, 2)": (5, 0.3, 2, 32)}


# from epsilon 0.2 on: changes to tree_defaults (max_depth: added to its depth)
TREE_RULES_ABOVE = {"depth - 1": {"max_depth": -1}, "depth + 1": {"max_depth": 1},
                    "depth + 2": {"max_depth": 2}, "share 0.5": {"split_share": 0.5},
                    "share 0.85": {"split_share": 0.85}, "16 bins": {"n_bins": 16},
                    "64 bins": {"n_bins": 64}}


def prepared(sets):
    """(set, its classes, preprocessing, X train, X test, public bounds, public group) for every
    set under the three preprocessings of ``tree-prep``; the group names the width, the classes
    and the size (the size is private: it only tells the reader where a rule wins)."""
    import tree_accuracy
    from dpcore.learn._tree_grid import WIDE

    for s in sets:
        classes = np.unique(s.ytr)
        n = len(s.ytr) + len(s.yte)
        for prep in ("minmax", "standardised", "unit rows"):
            X, bounds = tree_accuracy.preprocess(np.vstack(s.raw[:2]), prep)
            group = (f"{'wide' if X.shape[1] >= WIDE else 'narrow'}, "
                     f"{'k<=3' if classes.size <= 3 else 'k>=4'}, "
                     f"{'n>=1e4' if n >= 10_000 else 'n<1e4'}")
            yield s, classes, prep, X[:len(s.ytr)], X[len(s.ytr):], bounds, group


def tree_rules_cells(sets, seeds, epsilons=None, first_seed=1000):
    """The ``tree-rules`` study: DecisionTreeClassifier below epsilon 0.2 under the candidate
    :data:`TREE_RULES` (from 0.2 on: tree_defaults changed by :data:`TREE_RULES_ABOVE`),
    tree_defaults and diffprivlib, on every development set under the
    three preprocessings of ``tree-prep``; a cell's score is the MEAN test accuracy over the
    seeds. Cells are keyed (set / preprocessing, group, epsilon), the group naming the public
    inputs a rule may read (fewer or at least ``_tree_grid.WIDE`` features; 2-3 or more
    classes) and, for the reader only, whether the table has 10^4 records (private). Noise seeds
    ``first_seed`` onwards (a new study takes seeds no earlier study used)."""
    import warnings

    from dpcore.learn._tree_grid import SMALL_EPSILON, tree_defaults

    peer = peer_class("DecisionTreeClassifier")
    small = {name: {"max_depth": depth, "split_share": share, "split_levels": levels,
                    "n_bins": bins} for name, (depth, share, levels, bins) in TREE_RULES.items()}
    small["tree_defaults"] = {}

    def candidates(eps, k, d):
        if eps < SMALL_EPSILON:
            return small
        depth, bins, share, _ = tree_defaults(eps, k, d)
        out = {"tree_defaults": {}}
        for name, change in TREE_RULES_ABOVE.items():
            kw = {"max_depth": depth, "n_bins": bins, "split_share": share, **change}
            if "max_depth" in change:
                kw["max_depth"] = max(1, depth + change["max_depth"])
            kw["split_levels"] = kw["max_depth"]
            out[name] = kw
        return out

    for s, classes, prep, Xtr, Xte, bounds, group in prepared(sets):
        for eps in (0.1, 0.15) if epsilons is None else epsilons:
            row = {}
            rules = candidates(eps, classes.size, Xtr.shape[1])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for rule, kw in rules.items():
                    def make(seed, eps=eps, kw=kw):
                        return DecisionTreeClassifier(epsilon=eps, bounds=bounds,
                                                      classes=classes, random_state=seed, **kw)
                    row[rule] = mean_score(make, Xtr, s.ytr, Xte, s.yte, seeds, first_seed)
                if peer is not None:
                    def make_peer(seed, eps=eps):
                        return peer(epsilon=eps, bounds=bounds, classes=classes,
                                    random_state=seed)
                    row["diffprivlib"] = mean_score(make_peer, Xtr, s.ytr, Xte, s.yte, seeds,
                                                    first_seed)
            yield (f"{s.name} / {prep}", group, eps), row


def _uniform_split(inside, rng):
    """The random levels' former law: a feature uniformly among those with candidates, then one
    of its candidates uniformly."""
    usable = np.flatnonzero(inside.any(axis=1))
    f = int(usable[rng.integers(usable.size)])
    row = np.flatnonzero(inside[f])
    return f * inside.shape[1] + int(row[rng.integers(row.size)])


def _uniform_feature_middle(inside, rng):
    """A feature uniformly among those with candidates, cut at the middle of them."""
    usable = np.flatnonzero(inside.any(axis=1))
    f = int(usable[rng.integers(usable.size)])
    row = np.flatnonzero(inside[f])
    middle = (row.size - 1) // 2 + (row.size % 2 == 0 and rng.integers(2) == 1)
    return f * inside.shape[1] + int(row[middle])


def _half_middle_half_uniform(inside, rng):
    """With probability 1/2 the default law (a feature by its candidates, cut at their
    middle), otherwise the former uniform one: bisection where the rows fill the public box,
    a chance to cut where they fill only a corner of it (unit-norm rows)."""
    return _uniform_split(inside, rng) if rng.integers(2) else _default_split(inside, rng)


def tree_split_law_cells(sets, seeds, epsilons=None, first_seed=3000):
    """The ``tree-split-law`` study: DecisionTreeClassifier with its defaults, the levels that
    do not look at the data drawn by the default law (``_tree_grow.random_split``), by the
    former uniform law, by a uniform feature cut at its middle and by a coin between the default
    and the former law; diffprivlib. Keyed as
    ``tree-rules``; a cell's score is the mean test accuracy over the seeds (``first_seed``
    onwards)."""
    import warnings

    from dpcore.learn import _tree_grow

    peer = peer_class("DecisionTreeClassifier")
    laws = {"room, middle (default)": _tree_grow.random_split, "uniform": _uniform_split,
            "uniform feature, middle": _uniform_feature_middle,
            "half middle, half uniform": _half_middle_half_uniform}
    default = _tree_grow.random_split
    for s, classes, prep, Xtr, Xte, bounds, group in prepared(sets):
        for eps in (0.1, 0.5) if epsilons is None else epsilons:
            row = {}

            def make(seed, eps=eps):
                return DecisionTreeClassifier(epsilon=eps, bounds=bounds, classes=classes,
                                              random_state=seed)

            def make_peer(seed, eps=eps):
                return peer(epsilon=eps, bounds=bounds, classes=classes, random_state=seed)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    for name, law in laws.items():
                        _tree_grow.random_split = law
                        row[name] = mean_score(make, Xtr, s.ytr, Xte, s.yte, seeds,
                                               first_seed)
                finally:
                    _tree_grow.random_split = default
                if peer is not None:
                    row["diffprivlib"] = mean_score(make_peer, Xtr, s.ytr, Xte, s.yte, seeds,
                                                    first_seed)
            yield (f"{s.name} / {prep}", group, eps), row


def group_summary(cells):
    """Per group of cells (key[1:]: group, epsilon) and over the public part of the group
    (width and classes, every size), each rule's mean score, its mean difference from
    diffprivlib (when present) and the cells where it is below diffprivlib."""
    groups = {}
    for (_, group, eps), row in cells.items():
        public = group.rsplit(", ", 1)[0] + ", every n"
        for g in {(group, eps), (public, eps), ("all", eps)}:
            groups.setdefault(g, []).append(row)
    for (group, eps), rows in sorted(groups.items()):
        print(f"\n{group}, epsilon {eps:g} ({len(rows)} cells): mean, minus diffprivlib, "
              f"cells below it")
        for rule in rows[0]:
            mean = np.mean([r[rule] for r in rows])
            if "diffprivlib" in rows[0]:
                diff = np.array([r[rule] - r["diffprivlib"] for r in rows])
                print(f"  {rule:22s} {mean:.3f} {diff.mean():+.3f} {int((diff < 0).sum())}")
            else:
                print(f"  {rule:22s} {mean:.3f}")


def size_summary(cells):
    """Per number of training records (read from the set's name, "NxD"; diabetes 442) and
    epsilon: each rule's mean score over the cells of the narrow 2-3 class group, where the
    defaults read a noisy record count (the size is private: this only tells the reader where
    a rule wins)."""
    import re

    groups = {}
    for (name, group, eps), row in cells.items():
        if not group.startswith("narrow, k<=3"):
            continue
        found = re.search(r"(\d+)x\d+", name)
        n = round(0.7 * (int(found.group(1)) if found else 442))
        groups.setdefault((n, eps), []).append(row)
    if groups:
        print("\nnarrow, k<=3, by training records (about 70% of the table), epsilon: mean per rule")
    for (n, eps), rows in sorted(groups.items()):
        print(f"  n_train ~{n:6d}, epsilon {eps:g} ({len(rows)} cells): " + " ".join(
            f"{rule}: {np.mean([r[rule] for r in rows]):.3f}" for rule in rows[0]))


def _rule_kwargs(kw, eps, n_classes):
    """A rule's keyword arguments; "deeper T" / "shallower T": T trees of tree_defaults' depth
    plus or minus one."""
    if isinstance(kw, dict):
        return kw
    from dpcore.learn._tree import tree_defaults

    how, trees = kw.split()
    depth = tree_defaults(eps, n_classes)[0] + (1 if how == "deeper" else -1)
    return {"n_estimators": int(trees), "max_depth": max(depth, 1)}


def _tree_like_cells(sets, seeds, model, est, rules, epsilons=None):
    import warnings

    peer = peer_class(model)
    for s in sets:
        classes = np.unique(s.ytr)
        Xtr, Xte, bounds = s.raw
        for eps in TREE_EPSILONS if epsilons is None else epsilons:
            row = {}
            for rule, kw in rules.items():
                kw = _rule_kwargs(kw, eps, classes.size)

                def make(seed, eps=eps, kw=kw):
                    return est(epsilon=eps, bounds=bounds, classes=classes, random_state=seed,
                               **kw)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    row[rule] = median_score(make, Xtr, s.ytr, Xte, s.yte, seeds)
            if peer is not None:
                def make_peer(seed, eps=eps):
                    return peer(epsilon=eps, bounds=bounds, classes=classes, random_state=seed)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    row["diffprivlib"] = median_score(make_peer, Xtr, s.ytr, Xte, s.yte, seeds)
            yield (s.name, model, eps), row
