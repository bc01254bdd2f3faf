"""Development study of the noisy-gradient learners' public rules: ``method="sgd"``'s plan
(:func:`dpcore.learn._sgd.sgd_plan`) and ``method="gd"``'s number of steps and averaging.

    PYTHONPATH=python python bench/sgd_dev.py sgd [--seeds 5]   # steps, noise multiplier, clip, lr
    PYTHONPATH=python python bench/sgd_dev.py gd [--seeds 3]    # n_steps and tail averaging

Data: the classification sets of ``bench/dev_suite.py`` (adult-like with seed 101, two splits of
the TRAINING rows of breast cancer and digits, four make_classification problems; unit rows,
``data_norm=1``), disjoint from the test splits that bench/learn_accuracy.py reports. epsilon in
{0.5, 1, 2, 5}, delta = 1e-6; ``n_hint`` is the training size (a user's guess would be rougher:
it only scales the steps). Each cell is the median test accuracy over the noise seeds; the
summary gives each rule's mean difference from the first rule and its wins / losses.
"""
import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import dev_suite  # noqa: E402

from dpcore.learn import LinearSVC, LogisticRegression, _sgd  # noqa: E402

DELTA = 1e-6

# name -> module constants of dpcore.learn._sgd for that rule (the first is the library's)
_ALL = ("logistic", "softmax", "huber", "squared")
SGD_RULES = {
    "library": {},
    "T=1000": {"SGD_MIN_STEPS": 1000, "SGD_MAX_STEPS": 1000},
    "C=1": {"SGD_CLIPS": dict.fromkeys(_ALL, 1.0)},
    "C=1/2": {"SGD_CLIPS": dict.fromkeys(_ALL, 0.5)},
    "C=1/2 lr=2": {"SGD_CLIPS": dict.fromkeys(_ALL, 0.5), "SGD_LEARNING_RATE": 2.0},
    "T=2000 C=1/2": {"SGD_MIN_STEPS": 2000, "SGD_MAX_STEPS": 2000,
                     "SGD_CLIPS": dict.fromkeys(_ALL, 0.5)},
    "z=0.7": {"SGD_NOISE_MULTIPLIER": 0.7},
    "z=1.5": {"SGD_NOISE_MULTIPLIER": 1.5},
}

# name -> module constants of dpcore.learn._sgd for gd's n_steps="auto" and averaging
GD_RULES = {
    "library": {},   # 2 sqrt(n epsilon) within [300, 1000], tail averaging
    "old: T=300 all": {"GD_STEPS_PER_ROOT_N": 1.0, "GD_MIN_STEPS": 300, "GD_MAX_STEPS": 300,
                       "GD_TAIL": 0.0},
    "T=300 tail": {"GD_STEPS_PER_ROOT_N": 1.0, "GD_MIN_STEPS": 300, "GD_MAX_STEPS": 300,
                   "GD_TAIL": 0.5},
    "2rn tail": {"GD_STEPS_PER_ROOT_N": 2.0, "GD_MIN_STEPS": 10, "GD_MAX_STEPS": 1000,
                 "GD_TAIL": 0.5},
    "1rn tail": {"GD_STEPS_PER_ROOT_N": 1.0, "GD_MIN_STEPS": 10, "GD_MAX_STEPS": 1000,
                 "GD_TAIL": 0.5},
}


class patched:
    """Set module constants of dpcore.learn._sgd for the duration of a block."""

    def __init__(self, **values):
        self.values = values

    def __enter__(self):
        self.saved = {k: getattr(_sgd, k) for k in self.values}
        for k, v in self.values.items():
            setattr(_sgd, k, v)
        _sgd.noise_multiplier_for.cache_clear()

    def __exit__(self, *exc):
        for k, v in self.saved.items():
            setattr(_sgd, k, v)
        _sgd.noise_multiplier_for.cache_clear()


def _models(k):
    models = [("LogisticRegression", LogisticRegression)]
    if k == 1:
        models.append(("LinearSVC", LinearSVC))
    return models


def cells(study, sets, seeds):
    for s in sets:
        classes = np.unique(s.ytr)
        k = 1 if classes.size == 2 else classes.size
        Xtr, Xte = s.linear
        n = Xtr.shape[0]
        for model, est in _models(k):
            for eps in dev_suite.EPSILONS:
                row = {}
                rules = SGD_RULES if study == "sgd" else GD_RULES
                for rule, setting in rules.items():
                    kw = dict(method="sgd", n_hint=n) if study == "sgd" else dict(method="gd")
                    constants = setting

                    def make(seed, est=est, eps=eps, kw=kw):
                        return est(epsilon=eps, delta=DELTA, data_norm=1.0, classes=classes,
                                   random_state=seed, **kw)
                    with patched(**constants):
                        row[rule] = dev_suite.median_score(make, Xtr, s.ytr, Xte, s.yte, seeds)
                yield (s.name, model, eps), row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("study", choices=["sgd", "gd"])
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args(argv)
    found = {}
    for key, row in cells(args.study, dev_suite.data_sets(), args.seeds):
        found[key] = row
        name, model, eps = key
        print(f"{name:40s} {model:18s} eps {eps:<4g}",
              " ".join(f"{r}: {v:.3f}" for r, v in row.items()), flush=True)
    dev_suite.summarise(found)


if __name__ == "__main__":
    main()
