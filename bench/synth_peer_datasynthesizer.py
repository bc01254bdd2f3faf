"""DataSynthesizer's PrivBayes (correlated attribute mode) on the synthetic-data benchmark's codes,
in its own environment.

DataSynthesizer 0.1.13 pins nothing that clashes with Python 3.11, but it brings its own pandas
and scikit-learn: it gets its own virtual environment::

    python -m venv /work/env-ds
    /work/env-ds/bin/pip install DataSynthesizer==0.1.13

Protocol (the same as ``synth_peers.py``; ``python bench/test_synth.py`` drives it):

1. ``bench/test_synth.py export DIR`` writes each data set's training codes (``DIR/<name>.npy``)
   and the privacy parameters (``DIR/spec.json``);
2. this script, ``/work/env-ds/bin/python bench/synth_peer_datasynthesizer.py DIR [--k=K]
   [--seeds=A-B] [cell ...]``, writes each cell's codes to a CSV, describes it with
   ``DataDescriber().describe_dataset_in_correlated_attribute_mode(csv, k=K, epsilon, seed)``
   (every column declared a categorical Integer whose categories are the public Domain's codes,
   passed as ``categorical_attribute_domain_file``), samples as many records as the data set has
   with ``DataGenerator().generate_dataset_in_correlated_attribute_mode(n, description, seed)``
   and writes ``DIR/<name>-datasynthesizer-k<K>-<seed>.npz`` (key ``sample``) and
   ``DIR/datasynthesizer-times.json`` (wall-clock fit and fit + sample, and the CPU time of fit +
   sample, including the ``multiprocessing`` pools in which its network search runs);
3. ``bench/test_synth.py report DIR`` computes the errors and the comparison.

``K = 0`` is DataSynthesizer's default (``calculate_k`` with its default epsilon 0.1, not the
epsilon passed: 3 on both cells here); dpcore's ``PrivBayes`` defaults to ``degree=1``.

Notes on the peer (DataSynthesizer 0.1.13, read from its source): its epsilon is pure
(Laplace noise, numpy's floating-point sampler); ``epsilon / 2`` chooses the network (d - 1
exponential mechanisms on mutual information, whose sensitivity uses the true record count) and
``epsilon / 2`` the d - k noisy marginals (Laplace scale ``(d - k) / (epsilon / 2)`` on counts).
Besides that, correlated mode first runs independent mode at the same epsilon: noisy 1-way
distributions (sensitivity ``2 / n``, n the true count) that the sampler uses where a parent
combination has no conditional. Reads of the private data dpcore does not make: the record count
(sensitivities, ``calculate_k``), whether a column is binary (``unique().size <= 2``, which picks
the sensitivity formula), and each marginal's extent (``range(max + 1)`` of the codes present, so
codes above a column's largest observed one get no cells). Its sampler is i.i.d. ancestral
sampling from the fitted network.
"""
from __future__ import annotations

import contextlib
import io
import json
import pathlib
import sys
import tempfile
import time

from synth_peers import save_times  # bench/ is on sys.path when run as a script


def run(directory, k=0, seeds=range(10), names=None):
    import numpy as np
    import pandas as pd
    from DataSynthesizer.DataDescriber import DataDescriber
    from DataSynthesizer.DataGenerator import DataGenerator

    directory = pathlib.Path(directory)
    spec = json.loads((directory / "spec.json").read_text())
    times: dict = {}
    for name, params in spec.items():
        if names and name not in names:
            continue
        codes = np.load(directory / f"{name}.npy")
        columns = [f"c{j}" for j in range(codes.shape[1])]
        sizes = params["sizes"]  # the public Domain's code counts (written by export)
        with tempfile.TemporaryDirectory() as scratch:
            scratch = pathlib.Path(scratch)
            csv = scratch / "data.csv"
            pd.DataFrame(codes, columns=columns).to_csv(csv, index=False)
            domains = scratch / "domains.json"
            domains.write_text(json.dumps({c: list(range(s)) for c, s in zip(columns, sizes)}))
            for seed in seeds:
                out = directory / f"{name}-datasynthesizer-k{k}-{seed}.npz"
                if out.exists():  # resumable: a finished seed is kept
                    continue
                description = scratch / f"description-{seed}.json"
                start, cpu = time.perf_counter(), _cpu()
                degree = k or _default_k(codes)
                with contextlib.redirect_stdout(io.StringIO()):  # it prints every choice
                    describer = DataDescriber()
                    describer.describe_dataset_in_correlated_attribute_mode(
                        str(csv), k=degree, epsilon=params["epsilon"],
                        attribute_to_datatype={c: "Integer" for c in columns},
                        attribute_to_is_categorical={c: True for c in columns},
                        categorical_attribute_domain_file=str(domains), seed=seed)
                    describer.save_dataset_description_to_file(str(description))
                    fitted = time.perf_counter()
                    generator = DataGenerator()
                    generator.generate_dataset_in_correlated_attribute_mode(
                        len(codes), str(description), seed=seed)
                total, cpu = time.perf_counter() - start, _cpu() - cpu
                sample = np.asarray(generator.synthetic_dataset[columns], dtype=np.int64)
                degree = max(len(parents) for _, parents in describer.bayesian_network)
                np.savez(out, sample=sample)
                times[f"k{k}/{name}/{seed}"] = {"fit": fitted - start, "fit+sample": total,
                                                "cpu": cpu, "degree": degree}
                print(f"{name} k={k} (used {degree}) seed {seed}: fit {fitted - start:.1f} s, "
                      f"fit+sample {total:.1f} s, CPU {cpu:.1f} s", flush=True)
                _save(directory, times)
    _save(directory, times)


def _default_k(codes):
    """DataSynthesizer's k for ``k=0`` (greedy_bayes calls the same ``calculate_k(d, n)``).
    Resolved here because ``calculate_k`` turns every warning into an error for the rest of the
    process (``warnings.filterwarnings("error")``, never undone): with pandas 3.1 the
    ``reset_index(inplace=True)`` deprecation then aborts the fit after the network search."""
    import warnings

    from DataSynthesizer.lib.PrivBayes import calculate_k

    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        return int(calculate_k(codes.shape[1], codes.shape[0]))


def _cpu():
    """CPU seconds of this process and its finished children (the network search's pools)."""
    import resource

    own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                          resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _save(directory, times):
    save_times(directory, times, "datasynthesizer-times.json")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    options = dict(a[2:].split("=", 1) for a in sys.argv[2:] if a.startswith("--"))
    low, high = map(int, options.get("seeds", "0-9").split("-"))
    run(sys.argv[1], int(options.get("k", 0)), range(low, high + 1),
        [a for a in sys.argv[2:] if not a.startswith("--")])
