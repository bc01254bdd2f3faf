"""The learners on Dask (issue 30 item 3): fit time with 2 local worker processes against 1, and
the released model of both against each other (the same seed must give the same model).

    PYTHONPATH=python python bench/dask_learn.py [--rows 10000000] [--repeats 2] [--gd-steps 10]
        [--only DecisionTreeClassifier ...]

Data (test data, not noise): X ~ N(0, I_20) drawn on the workers in chunks of 10**6 rows
(``dask.array.random.default_rng(2026)``), labels 1{x . w + N(0, 1) > 0} with a fixed w, both
persisted on the cluster and waited for before the timing (else the first learner timed pays for
making the data). Learners: ``LogisticRegression(method="gd", n_steps=--gd-steps)`` (each step one
pass over every row: the lattice gradient sums per chunk) and ``GaussianNB`` (one pass: exact
integer counts, sums, squares), at epsilon 1 (gd: delta 1e-6), seed 0, ``KMeans(4, init="sphere")``
(5 Lloyd iterations, each a pass: exact counts and sums per chunk) and ``DecisionTreeClassifier``
(defaults, bounds (-4, 4): one pass binning every chunk and counting the root's table, kept on the
workers as codes, then one pass per level below the root: exact count tables per chunk). ``--only
NAME [NAME ...]`` times some of the learners only. For each worker count the cluster is started
once (``LocalCluster(n_workers=k, threads_per_worker=1, processes=True)``) and the fits are timed
``--repeats`` times (wall time; the cluster counts alternate 1, 2, 1, 2, ...); reported: the min
per learner and worker count, the ratio, the load average, whether the models of 1 and 2 workers
are identical, and the CPU time of the fit summed over the client and the workers (what the load
distorts least; it shows the work, not the parallel gain). Wall times on a shared machine overstate
an idle one's and understate the ratio: rerun idle for a speed claim.
"""
import argparse
import os
import time

import numpy as np

import dask.array as da
from distributed import Client, LocalCluster, wait

from dpcore.learn import DecisionTreeClassifier, GaussianNB, KMeans, LogisticRegression

D = 20


def data(rows):
    rng = da.random.default_rng(2026)
    X = rng.normal(size=(rows, D), chunks=(10**6, D))
    w = np.linspace(-1.0, 1.0, D)
    y = ((X @ w + rng.normal(size=rows, chunks=10**6)) > 0).astype(int)
    return X, y


def fits(gd_steps):
    return {
        "LogisticRegression(gd)": lambda: LogisticRegression(
            epsilon=1.0, delta=1e-6, method="gd", n_steps=gd_steps, data_norm=6.0,
            classes=[0, 1], random_state=0),
        "GaussianNB": lambda: GaussianNB(epsilon=1.0, bounds=(-4, 4), classes=[0, 1],
                                         random_state=0),
        "KMeans": lambda: KMeans(4, epsilon=1.0, bounds=(-4, 4), init="sphere",
                                 random_state=0),
        "DecisionTreeClassifier": lambda: DecisionTreeClassifier(
            epsilon=1.0, bounds=(-4, 4), classes=[0, 1], random_state=0),
    }


def model(est):
    if hasattr(est, "tree_"):
        t = est.tree_
        return np.concatenate([t.feature, t.threshold, t.left, t.values.ravel()])
    if hasattr(est, "coef_"):
        return np.concatenate([est.coef_.ravel(), est.intercept_])
    if hasattr(est, "cluster_centers_"):
        return est.cluster_centers_.ravel()
    return np.concatenate([est.theta_.ravel(), est.var_.ravel(), est.class_count_])


def cpu_seconds(client):
    """CPU time of this process and of every worker process so far."""
    return time.process_time() + sum(client.run(time.process_time).values())


def run(workers, rows, gd_steps, only):
    times, cpu, models = {}, {}, {}
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        X, y = data(rows)
        X, y = X.persist(), y.persist()
        wait([X, y])   # persist returns at once: the first fit timed must not make the data
        for name, make in fits(gd_steps).items():
            if only and name not in only:
                continue
            used = cpu_seconds(client)
            start = time.perf_counter()
            est = make().fit(X, y) if name != "KMeans" else make().fit(X)
            times[name] = time.perf_counter() - start
            cpu[name] = cpu_seconds(client) - used
            models[name] = model(est)
    return times, cpu, models


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10**7)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--gd-steps", type=int, default=10)
    parser.add_argument("--only", nargs="*", default=None)
    args = parser.parse_args(argv)
    print(f"load average before: {os.getloadavg()}, cores: {os.cpu_count()}, rows {args.rows}")
    best, best_cpu, models = {}, {}, {}
    for _ in range(args.repeats):
        for workers in (1, 2):
            times, cpu, fitted = run(workers, args.rows, args.gd_steps, args.only)
            for name, t in times.items():
                best[name, workers] = min(best.get((name, workers), np.inf), t)
                best_cpu[name, workers] = min(best_cpu.get((name, workers), np.inf), cpu[name])
                models.setdefault(name, {})[workers] = fitted[name]
    for name in fits(args.gd_steps):
        if args.only and name not in args.only:
            continue
        one, two = best[name, 1], best[name, 2]
        same = np.array_equal(models[name][1], models[name][2])
        print(f"{name:24s} 1 worker {one:7.2f} s  2 workers {two:7.2f} s  ratio {one / two:.2f}x  "
              f"same model: {same}  (CPU, all processes: {best_cpu[name, 1]:.2f} s, "
              f"{best_cpu[name, 2]:.2f} s)")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
