"""smartnoise-synth's MST on the synthetic-data benchmark's codes, in its own environment.

smartnoise-synth 1.0.8 pins an OpenDP older than the one dpcore's other benchmarks use, and
brings jax and torch: it gets its own virtual environment::

    python -m venv /work/env-synth
    /work/env-synth/bin/pip install smartnoise-synth==1.0.8

Protocol (``python bench/test_synth.py`` drives it; this script only runs the peer):

1. ``bench/test_synth.py export DIR`` writes each data set's training codes (``DIR/<name>.npy``,
   records x columns, the public Domain's codes) and the privacy parameters;
2. this script, ``PYTHONPATH=python /work/env-synth/bin/python bench/synth_peers.py DIR
   [cell ...] [--aim] [--seeds=A-B]``, fits
   smartnoise's ``MSTSynthesizer(epsilon, delta)`` to each for seeds 0..9 (all columns declared
   categorical), samples as many records as the data set has, and writes
   ``DIR/<name>-smartnoise-<seed>.npz`` (the samples, by smartnoise's own sampler and by i.i.d.
   sampling from the same fitted model) and ``DIR/smartnoise-times.json``;
3. ``bench/test_synth.py report DIR`` computes the errors and the comparison.

Notes on the peer (smartnoise-synth 1.0.8 with mbi 1.1.0): its transformer reads each column's
categories from the data, it passes the true record count to the estimator (``known_total``) and
samples ``len(data)`` records by default; those are reads of the private data that dpcore does
not make. Its default sampler (mbi's ``synthetic_data(method="round")``) assigns each column by
the record's rank within its parent group, which correlates columns the model leaves
independent; the i.i.d. samples (``method="sample"``) isolate the fitted model's quality.
"""
from __future__ import annotations

import json
import pathlib
import sys
import time
import warnings


def run(directory, seeds=range(10), names=None, method="mst"):
    import numpy as np
    import pandas as pd
    from snsynth.aim import AIMSynthesizer
    from snsynth.mst import MSTSynthesizer
    from snsynth.utils import cdp_rho

    make = MSTSynthesizer if method == "mst" else AIMSynthesizer
    tag = "smartnoise" if method == "mst" else "smartnoise-aim"

    directory = pathlib.Path(directory)
    spec = json.loads((directory / "spec.json").read_text())
    times = {}
    for name, params in spec.items():
        if names and name not in names:
            continue
        # the rho smartnoise spends (its own conversion of (epsilon, delta)); dpcore is run at it
        times[f"rho/{name}"] = float(cdp_rho(params["epsilon"], params["delta"]))
        codes = np.load(directory / f"{name}.npy")
        frame = pd.DataFrame(codes, columns=[f"c{j}" for j in range(codes.shape[1])])
        for seed in seeds:
            out = directory / f"{name}-{tag}-{seed}.npz"
            if out.exists():  # resumable: a finished seed is kept
                continue
            np.random.seed(seed)  # smartnoise draws from numpy's global generator
            start = time.perf_counter()
            model = make(epsilon=params["epsilon"], delta=params["delta"])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model.fit(frame, categorical_columns=list(frame.columns))
                fitted = time.perf_counter()
                rounded = np.asarray(model.sample(len(frame)), dtype=np.int64)
            total = time.perf_counter() - start
            iid = model.synthesizer.synthetic_data(rows=len(frame), method="sample")
            if method == "mst":
                iid = model.undo_compress_fn(iid).df
            else:  # AIM's model is over columns col0, col1, ... (its transformer's order)
                iid = iid.df[[f"col{j}" for j in range(model._transformer.output_width)]]
            iid = np.asarray(model._transformer.inverse_transform(
                [tuple(row[1:]) for row in iid.itertuples()]), dtype=np.int64)
            np.savez(out, round=rounded, iid=iid)
            times[f"{name}/{seed}" if method == "mst" else f"aim/{name}/{seed}"] = {"fit": fitted - start, "fit+sample": total}
            print(f"{name} seed {seed}: fit {fitted - start:.1f} s, fit+sample {total:.1f} s",
                  flush=True)
            save_times(directory, times)
    save_times(directory, times)


def save_times(directory, times, name="smartnoise-times.json"):
    """Merge ``times`` into DIR/name (a run resumed later keeps the earlier seeds' times)."""
    path = directory / name
    old = json.loads(path.read_text()) if path.exists() else {}
    old.update(times)
    path.write_text(json.dumps(old, indent=1))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    method = "aim" if "--aim" in sys.argv else "mst"
    seeds = range(10)   # --seeds=A-B: a part of them (two parts can run side by side)
    for a in sys.argv[1:]:
        if a.startswith("--seeds="):
            first, last = a.split("=", 1)[1].split("-")
            seeds = range(int(first), int(last) + 1)
    args = [a for a in sys.argv[1:] if a != "--aim" and not a.startswith("--seeds=")]
    run(args[0], seeds, args[1:], method)
