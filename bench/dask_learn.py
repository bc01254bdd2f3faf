"""The learners on Dask (issue 30 item 3): fit time with 2 local worker processes against 1, and
the released model of both against each other (the same seed must give the same model).

    PYTHONPATH=python python bench/dask_learn.py [--rows 10000000] [--chunk-rows 1000000]
        [--repeats 2] [--gd-steps 10]
        [--learners NAME ...]

Data (test data, not noise): X ~ N(0, I_20) in chunks of --chunk-rows rows (default 10**6),
chunk i drawn on a worker from ``numpy.random.default_rng([2026, i])`` (the same data whatever
the worker count), labels 1{x . w + N(0, 1) > 0} with a fixed w. Every array of chunk i (X, labels,
targets, categories) is made by one task on one worker, as the columns of one partition of a
file would be, and the chunks are spread evenly in contiguous runs (chunk i on worker
floor(i k / m) of k, m chunks): the placement the fits' map-reduce then follows; all persisted
on the cluster before the timing. Learners: ``LogisticRegression(method="gd",
n_steps=--gd-steps)`` (each step one pass over every row: the lattice gradient sums per chunk)
and ``GaussianNB`` (one pass: exact integer counts, sums, squares), at epsilon 1 (gd:
delta 1e-6), seed 0, and ``KMeans(4, init="sphere")`` (5 Lloyd iterations, each a pass: exact
counts and sums per chunk); ``LinearRegression`` (default ``method="ssp"``: one pass of exact
lattice sums X^T X, X^T y, X^T 1, sum y) on y = x . w + N(0, 1) with bounds_X = (-4, 4),
bounds_y = (-10, 10), and ``CategoricalNB`` (one pass of exact counts) on the features
floor(clip(x, -2, 1.99)) + 2 (4 categories each); ``DecisionTreeClassifier`` (defaults,
bounds (-4, 4): one pass binning every chunk and counting the root's table, the codes kept on
the workers, then one pass per level: exact count tables per chunk). For each worker count the cluster is started once
(``LocalCluster(n_workers=k, threads_per_worker=1, processes=True)``) and the fits are timed
``--repeats`` times (wall time; the cluster counts alternate 1, 2, 1, 2, ...); reported: the min
per learner and worker count, the ratio, the CPU seconds of the fit (calling process plus every
worker: the work, which load does not inflate much), the load average, and whether the models of
1 and 2 workers are identical. Wall times on a shared machine overstate an idle one's and understate the
ratio: rerun idle for a speed claim.
"""
import argparse
import operator
import os
import time

import numpy as np

import dask.array as da
from distributed import Client, LocalCluster, wait

from dpcore.learn import (CategoricalNB, DecisionTreeClassifier, GaussianNB, KMeans,
                          LinearRegression, LogisticRegression)

D = 20


def chunk(i, rows):
    """Chunk i on its worker: (X, class labels, regression targets, categorical X)."""
    rng = np.random.default_rng([2026, i])
    X = rng.normal(size=(rows, D))
    score = X @ np.linspace(-1.0, 1.0, D) + rng.normal(size=rows)
    return X, (score > 0).astype(int), score, (np.floor(np.clip(X, -2.0, 1.99)) + 2).astype(int)


def data(client, rows, chunk_rows):
    """(X, class labels, regression targets, categorical X), Dask arrays persisted on the
    cluster, chunk i of every array on worker floor(i k / m)."""
    workers = sorted(client.scheduler_info()["workers"])
    sizes = [min(chunk_rows, rows - start) for start in range(0, rows, chunk_rows)]
    parts = [client.submit(chunk, i, size, workers=[workers[i * len(workers) // len(sizes)]],
                           allow_other_workers=False) for i, size in enumerate(sizes)]
    arrays = []
    for j, (width, dtype) in enumerate([(D, float), (None, int), (None, float), (D, int)]):
        pieces = [da.from_delayed(client.submit(operator.itemgetter(j), part),
                                  shape=(size,) if width is None else (size, width), dtype=dtype)
                  for part, size in zip(parts, sizes)]
        arrays.append(da.concatenate(pieces))
    arrays = client.persist(arrays)
    wait(arrays)
    return arrays


def fits(gd_steps):
    return {
        "LogisticRegression(gd)": lambda: LogisticRegression(
            epsilon=1.0, delta=1e-6, method="gd", n_steps=gd_steps, data_norm=6.0,
            classes=[0, 1], random_state=0),
        "GaussianNB": lambda: GaussianNB(epsilon=1.0, bounds=(-4, 4), classes=[0, 1],
                                         random_state=0),
        "KMeans": lambda: KMeans(4, epsilon=1.0, bounds=(-4, 4), init="sphere",
                                 random_state=0),
        "LinearRegression(ssp)": lambda: LinearRegression(epsilon=1.0, bounds_X=(-4, 4),
                                                          bounds_y=(-10, 10), random_state=0),
        "CategoricalNB": lambda: CategoricalNB(epsilon=1.0, categories=[[0, 1, 2, 3]] * D,
                                               classes=[0, 1], random_state=0),
        "DecisionTreeClassifier": lambda: DecisionTreeClassifier(
            epsilon=1.0, bounds=(-4, 4), classes=[0, 1], random_state=0),
    }


def fit(name, est, X, y, target, Xcat):
    """The learner fitted on its data: clusters on X, regression on the scores, categories on
    the binned features, the rest on (X, labels)."""
    if name == "KMeans":
        return est.fit(X)
    if name.startswith("LinearRegression("):
        return est.fit(X, target)
    if name == "CategoricalNB":
        return est.fit(Xcat, y)
    return est.fit(X, y)


def model(est):
    if hasattr(est, "tree_"):
        t = est.tree_
        return np.concatenate([t.feature, t.threshold, t.left, t.values.ravel()])
    if hasattr(est, "coef_"):
        return np.concatenate([est.coef_.ravel(), np.ravel(est.intercept_)])
    if hasattr(est, "cluster_centers_"):
        return est.cluster_centers_.ravel()
    if hasattr(est, "category_count_"):
        return np.concatenate([est.class_count_] + [t.ravel() for t in est.category_count_])
    return np.concatenate([est.theta_.ravel(), est.var_.ravel(), est.class_count_])


def run(workers, rows, chunk_rows, gd_steps, learners):
    times, models = {}, {}
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        arrays = data(client, rows, chunk_rows)

        def cpu():   # CPU seconds of this process and of every worker process
            return time.process_time() + sum(client.run(time.process_time).values())

        for name, make in fits(gd_steps).items():
            if name not in learners:
                continue
            start, start_cpu = time.perf_counter(), cpu()
            est = fit(name, make(), *arrays)
            times[name] = (time.perf_counter() - start, cpu() - start_cpu)
            models[name] = model(est)
    return times, models


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10**7)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--chunk-rows", type=int, default=10**6)
    parser.add_argument("--gd-steps", type=int, default=10)
    parser.add_argument("--learners", "--only", nargs="+", default=list(fits(10)),
                        help="which rows (default: all)")
    args = parser.parse_args(argv)
    print(f"load average before: {os.getloadavg()}, cores: {os.cpu_count()}, rows {args.rows}")
    best, cpus, models = {}, {}, {}
    for _ in range(args.repeats):
        for workers in (1, 2):
            times, fitted = run(workers, args.rows, args.chunk_rows, args.gd_steps,
                                 args.learners)
            for name, (t, c) in times.items():
                best[name, workers] = min(best.get((name, workers), np.inf), t)
                cpus[name, workers] = min(cpus.get((name, workers), np.inf), c)
                models.setdefault(name, {})[workers] = fitted[name]
    for name in args.learners:
        one, two = best[name, 1], best[name, 2]
        same = np.array_equal(models[name][1], models[name][2])
        print(f"{name:24s} 1 worker {one:7.2f} s  2 workers {two:7.2f} s  ratio {one / two:.2f}x  "
              f"(cpu {cpus[name, 1]:.2f} s / {cpus[name, 2]:.2f} s)  same model: {same}")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
