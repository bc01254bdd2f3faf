"""DP-SGD at scale (issue 30 item 2): ``LogisticRegression(method="sgd")`` on a 10**6 x 20
synthetic problem at epsilon 1, delta 1e-6, against non-private scikit-learn and against
``method="gd"`` at equal epsilon.

    PYTHONPATH=python /work/benchenv/bin/python bench/sgd_scale.py [--seeds 5] [--gd-seeds 5] [--sizes 10000 100000 1000000]

Generator (:func:`problem`): X ~ N(0, I_20) (seed 2026 + size), a fixed direction w* with
||w*|| = 3 (seed 7), labels y ~ Bernoulli(sigmoid(x . w* + 0.5)); 10**5 extra rows drawn the
same way form the test set. ``data_norm = 7``: the row norm is chi with 20 degrees of freedom,
above 7 with probability 3e-4 (those rows are clipped; the bound is public, chosen from the
generator, never from the data). ``n_hint`` = the true training size.

Reported per size n: the median (and min / max) test accuracy over the noise seeds of
``method="sgd"`` and ``method="gd"`` (default steps), both at (epsilon, delta) = (1, 1e-6)
(sgd: add/remove neighbours; gd: replace-one, its relation), non-private scikit-learn
``LogisticRegression()`` (C = 1, lbfgs), and fit times: CPU time of the process
(``time.process_time``, which counts every thread) and wall time, with the load average
(``os.getloadavg``) before the runs. The machine is shared: wall times under load overstate an
idle machine's; rerun the command on an idle machine for those.
"""
import argparse
import os
import time

import numpy as np
from sklearn.linear_model import LogisticRegression as SkLogisticRegression

from dpcore.learn import LogisticRegression

D = 20
DATA_NORM = 7.0
EPSILON, DELTA = 1.0, 1e-6
TEST_ROWS = 100_000


def problem(n):
    """(X_train, y_train, X_test, y_test) of the documented generator."""
    w = np.random.default_rng(7).normal(size=D)  # test data, not noise
    w *= 3.0 / np.linalg.norm(w)
    rng = np.random.default_rng(2026 + n)  # test data, not noise
    X = rng.normal(size=(n + TEST_ROWS, D))
    p = 1.0 / (1.0 + np.exp(-(X @ w + 0.5)))
    y = (rng.random(n + TEST_ROWS) < p).astype(int)
    return X[:n], y[:n], X[n:], y[n:]


def timed(fit):
    cpu, wall = time.process_time(), time.perf_counter()
    model = fit()
    return model, time.process_time() - cpu, time.perf_counter() - wall


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--gd-seeds", type=int, default=None,
                        help="noise seeds for method='gd' (default: --seeds; 0 skips gd)")
    args = parser.parse_args(argv)
    print(f"load average before: {os.getloadavg()}, cores: {os.cpu_count()}")
    for n in args.sizes:
        Xtr, ytr, Xte, yte = problem(n)
        sk, sk_cpu, sk_wall = timed(lambda: SkLogisticRegression().fit(Xtr, ytr))
        sk_acc = sk.score(Xte, yte)
        print(f"\nn = {n}: non-private scikit-learn accuracy {sk_acc:.4f} "
              f"(fit {sk_cpu:.2f} s CPU, {sk_wall:.2f} s wall)")
        gd_seeds = args.seeds if args.gd_seeds is None else args.gd_seeds
        for method, seeds in (("sgd", args.seeds), ("gd", gd_seeds)):
            if seeds == 0:
                continue
            accs, cpus, walls = [], [], []
            for seed in range(seeds):
                kw = dict(n_hint=n) if method == "sgd" else {}
                est = LogisticRegression(epsilon=EPSILON, delta=DELTA, method=method,
                                         data_norm=DATA_NORM, classes=[0, 1],
                                         random_state=seed, **kw)
                model, cpu, wall = timed(lambda: est.fit(Xtr, ytr))
                accs.append(model.score(Xte, yte))
                cpus.append(cpu)
                walls.append(wall)
            accs = np.array(accs)
            print(f"  {method:4s} accuracy median {np.median(accs):.4f} "
                  f"[min {accs.min():.4f}, max {accs.max():.4f}] "
                  f"(scikit-learn - median: {sk_acc - np.median(accs):+.4f}, "
                  f"- min: {sk_acc - accs.min():+.4f}); fit CPU median {np.median(cpus):.2f} s, "
                  f"wall median {np.median(walls):.2f} s (min {min(walls):.2f})", flush=True)
    print(f"\nload average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
