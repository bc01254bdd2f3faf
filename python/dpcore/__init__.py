"""dpcore: differential privacy with exact, floating-point-safe samplers in Cython kernels.

The public thin API; see the README for a tour. ``random_state=None`` everywhere means dpcore's
cryptographically secure ChaCha20 generator.
"""
from dpcore._version import __version__
from dpcore.accounting import Accountant, BudgetExceeded, PrivacyWarning
from dpcore.mechanisms import discrete_gaussian, discrete_laplace, gaussian, laplace
from dpcore.random import ChaCha20, default_rng
from dpcore.selection import exponential, top_k
from dpcore.bingham import bingham
from dpcore.tuning import select_candidate
from dpcore._threads import get_num_threads, set_num_threads
from dpcore import stats  # noqa: E402  (a public submodule: dpcore.stats.median, ...)
from dpcore import graph  # noqa: E402  (a public submodule: dpcore.graph.release_hrg, ...)
from dpcore import mestimators  # noqa: E402  (Lei 2011 M-estimators from one perturbed histogram)
from dpcore import distributed  # noqa: E402  (Dask jobs; dask is imported only when called)
from dpcore import local  # noqa: E402  (local DP: randomized response, frequency oracles, ...)
from dpcore import publish  # noqa: E402  (many consistent counts: trees, streams)
from dpcore import robust  # noqa: E402  (data-dependent noise: smooth sensitivity, PTR, SVT, ...)
from dpcore import plans  # noqa: E402  (calibrated plans: costs known before data, composition)


def __getattr__(name):
    # dpcore.learn and dpcore.synth on first use (PEP 562): scikit-learn is slow to import and
    # optional, and synthetic data is a wing of its own.
    if name in ("learn", "synth"):
        import importlib

        return importlib.import_module(f"dpcore.{name}")
    raise AttributeError(f"module 'dpcore' has no attribute {name!r}")


__all__ = [
    "__version__",
    "Accountant",
    "BudgetExceeded",
    "bingham",
    "ChaCha20",
    "default_rng",
    "distributed",
    "discrete_gaussian",
    "discrete_laplace",
    "exponential",
    "gaussian",
    "graph",
    "laplace",
    "local",
    "mestimators",
    "plans",
    "PrivacyWarning",
    "publish",
    "robust",
    "select_candidate",
    "stats",
    "top_k",
    "get_num_threads",
    "set_num_threads",
]
