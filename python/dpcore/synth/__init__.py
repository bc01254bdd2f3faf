"""Differentially private synthetic tabular data from noisy marginals.

* :class:`Domain` (with :class:`Categorical` and :class:`Numeric` columns): the public domain of
  a table, declared by the caller or read from a JSON schema, never inferred from the data;
  encodes records (DataFrame, mapping, array or CSV) into integer codes by public rules and
  decodes synthetic codes back.
* :func:`marginals`: noisy counts of several marginals at once (exact discrete Gaussian or
  discrete Laplace noise).
* :class:`MST`: McKenna, Miklau and Sheldon's MST (noisy 1-way marginals, a maximum spanning
  tree of attribute pairs chosen with the exponential mechanism, noisy 2-way marginals on it, a
  consistent tree model) with ``cost`` known before ``fit`` and ``sample`` as post-processing.
* :class:`PrivBayes`: Zhang et al.'s PrivBayes (a Bayesian network of bounded degree chosen with
  the exponential mechanism on a low-sensitivity L1 dependence score, noisy conditionals).
* :class:`AIM`: McKenna, Mullins, Sheldon and Miklau's AIM (workload marginals chosen
  adaptively with the exponential mechanism, budget annealing, model-size and time caps, a
  junction-tree graphical model fitted to the noisy marginals by mirror descent).
* :func:`workload_error` and :func:`tstr_accuracy`: evaluation of synthetic data against the
  real data (average L1 error over all 2-way and 3-way marginals; a classifier trained on
  synthetic records, tested on real ones). Not releases.

Conventions (see each Privacy section): neighbouring relation add/remove one record; the domain
is public; budgets are rho-zCDP (``rho=``; the default kind of noise, exact discrete Gaussian),
pure epsilon-DP (``epsilon=``; exact discrete Laplace) or (epsilon, delta)-DP through zCDP
(``epsilon=``, ``delta=``); each release is charged once, before anything is drawn; sampling
synthetic records is post-processing. ``random_state=None`` is dpcore's cryptographically secure
generator; seeds are for tests.
"""
from dpcore.synth._domain import MAX_CELL_CHARS, MAX_COLUMN_CODES, Categorical, Domain, Numeric
from dpcore.synth._marginals import marginals
from dpcore.synth._evaluate import tstr_accuracy, workload_error
from dpcore.synth._mst import MST
from dpcore.synth._privbayes import PrivBayes
from dpcore.synth._aim import AIM

__all__ = ["AIM", "Categorical", "Domain", "MAX_CELL_CHARS", "MAX_COLUMN_CODES", "MST", "Numeric",
           "PrivBayes", "marginals", "tstr_accuracy", "workload_error"]
