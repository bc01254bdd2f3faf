"""PCA fit on 1 and 2 threads, BLAS pinned to one thread for both (issue 29: >= 1.5x at
d = 1000).

    PYTHONPATH=python python bench/pca_threads.py [--rows N] [--features D] [--repeats R]

Data (test data, not noise): X ~ N(0, diag(linspace(3, 0.1, d))^2), seed 0, n x d. Fits
``PCA(10, epsilon=1, data_norm=60, random_state=0)`` with its defaults: without delta ("ppca",
the exact deflation sampler with the eigengap allocation) and with delta = 1e-6 ("sulq"). For
each, the min wall-clock of R alternated fits per thread count (``dpcore.set_num_threads``, under
``threadpoolctl.threadpool_limits(1, user_api="blas")``), the CPU time of the last fit, their
ratio, and whether the components of 1 and 2 threads are identical. What is threaded: the
second moment X^T X and the deflation's N^T S N (``dpcore.bingham.transpose_product``); the
eigendecompositions (LAPACK, one thread) are not. Run it on an idle machine (the load average is
printed).
"""
import argparse
import os
import time

import numpy as np
from threadpoolctl import threadpool_limits

import dpcore
from dpcore.learn import PCA


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10**5)
    parser.add_argument("--features", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)  # insecure-ok: benchmark data, not noise
    X = rng.standard_normal((args.rows, args.features)) * np.linspace(3.0, 0.1, args.features)
    print(f"load average before: {os.getloadavg()}")
    previous = dpcore.get_num_threads()
    try:
        with threadpool_limits(limits=1, user_api="blas"):
            for delta in (None, 1e-6):
                pca = PCA(10, epsilon=1.0, delta=delta, data_norm=60.0, random_state=0)
                best = {1: float("inf"), 2: float("inf")}
                cpu, components = {}, {}
                for _ in range(args.repeats):
                    for threads in best:  # alternated, so drifting load hits both
                        dpcore.set_num_threads(threads)
                        start, start_cpu = time.perf_counter(), time.process_time()
                        pca.fit(X)
                        best[threads] = min(best[threads], time.perf_counter() - start)
                        cpu[threads] = time.process_time() - start_cpu
                        components[threads] = pca.components_
                same = np.array_equal(components[1], components[2])
                print(f"{pca.method_:5s} n = {args.rows}, d = {args.features}: 1 thread "
                      f"{best[1]:.3f} s (cpu {cpu[1]:.3f} s), 2 threads {best[2]:.3f} s (cpu "
                      f"{cpu[2]:.3f} s), speed-up {best[1] / best[2]:.2f}x (min of "
                      f"{args.repeats}); same components: {same}")
    finally:
        dpcore.set_num_threads(previous)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
