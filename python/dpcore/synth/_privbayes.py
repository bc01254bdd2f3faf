"""PrivBayes (Zhang, Cormode, Procopiuc, Srivastava and Xiao 2014/2017): a Bayesian network of
degree k chosen greedily with the exponential mechanism, noisy conditionals, ancestral
sampling."""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dpcore import _validation as check
from dpcore._docstrings import fill
from dpcore.selection import ExponentialMechanism
from dpcore.synth._base import (BUDGET_PARAMETERS, COST_ATTRIBUTE, STATE_PARAMETERS,
                                Synthesizer)
from dpcore.synth._marginals import MarginalNoise, cells, count_marginals
from dpcore.synth._tree import draw_categorical, sample_conditional

if TYPE_CHECKING:
    from dpcore.accounting import AccountantLike
    from dpcore.random import RandomStateLike
    from dpcore.synth._domain import Domain
    from dpcore.synth._marginals import Budget

__all__ = ["DEPENDENCE_SENSITIVITY", "PrivBayes", "PrivBayesPlan", "clipped_noise_mean",
           "dependence_score"]

#: Scores are floored to multiples of 2**-SCORE_BITS (exact in doubles), which adds at most
#: 2**-SCORE_BITS to their sensitivity.
SCORE_BITS = 10
#: Sensitivity of the floored L1 dependence score under add/remove one record: 2 (see
#: :func:`dependence_score`) plus the flooring's 2**-10.
DEPENDENCE_SENSITIVITY = 2.0 + 2.0**-SCORE_BITS
#: Pseudo-counts added to each cell of a conditional, in units of the mean a cell without
#: records keeps after clipping (E max(noise, 0)), spread as the child's pooled distribution
#: (see ``PrivBayes._conditional``). Chosen on development data, as ``network_share``.
PRIOR_WEIGHT = 1.0


def dependence_score(joint: np.ndarray) -> float:
    """The L1 dependence of a count table (parents x child, any shape whose last axis is the
    child): S = 1/2 sum |c(pi, x) - c(pi) c(x) / n|, floored to a multiple of 2**-10, computed
    exactly from integers.

    Sensitivity under add/remove one record: adding a record (pi0, x0) raises one cell of c by
    1 (1 in L1) and moves the independence table f = c(pi) c(x) / n to f' = (c(pi) + [pi = pi0])
    (c(x) + [x = x0]) / (n + 1); with a = c(pi)/n, b = c(x)/n, f' - f = (-n a b + n a [x = x0] +
    n b [pi = pi0] + [pi = pi0][x = x0]) / (n + 1), whose absolute values sum to at most
    (n + n + n + 1) / (n + 1) < 3. So S moves by at most (1 + 3) / 2 = 2, and the floored score
    by at most 2 + 2**-10 (``DEPENDENCE_SENSITIVITY``).
    """
    c = np.asarray(joint, dtype=np.int64)
    c = c.reshape(-1, c.shape[-1])
    n = int(c.sum())
    if n == 0:
        return 0.0
    rows, cols = c.sum(axis=1), c.sum(axis=0)
    total = int(np.abs(n * c - np.outer(rows, cols)).sum())  # exact: every term < 2**62
    return ((total << SCORE_BITS) // (2 * n)) / 2.0**SCORE_BITS


def clipped_noise_mean(noise: MarginalNoise) -> float:
    """E max(Z, 0) for one draw Z of ``noise``: what clipping leaves, on average, in a cell
    without records. Discrete Laplace of scale b: q / ((1 + q)(1 - q)), q = exp(-1/b);
    discrete Gaussian: the series (sigma / sqrt(2 pi) beyond sigma = 10**4, where the two agree
    to about 1e-9)."""
    if noise.mechanism == "laplace":
        q = math.exp(-1.0 / noise.scale)
        return q / ((1.0 + q) * -math.expm1(-1.0 / noise.scale))
    sigma = noise.scale
    if sigma > 1e4:
        return sigma / math.sqrt(2.0 * math.pi)
    k = np.arange(1, math.ceil(12.0 * sigma) + 2, dtype=np.float64)
    weights = np.exp(-k * k / (2.0 * sigma * sigma))
    return float(np.dot(k, weights) / (1.0 + 2.0 * weights.sum()))


@dataclass(frozen=True)
class PrivBayesPlan:
    """PrivBayes's calibration from public values: the exponential mechanism of each of the
    d - 1 network choices (None for one column), the zCDP or epsilon share of the noisy
    marginals (the noise is calibrated to the number of marginals the network needs, at most d),
    and the worst case of that noise (checked before the charge)."""

    selection: ExponentialMechanism | None
    mechanism: str
    share: float
    names: str


@fill(budget=BUDGET_PARAMETERS, state=STATE_PARAMETERS, cost=COST_ATTRIBUTE)
class PrivBayes(Synthesizer):
    """Synthetic data by PrivBayes: a Bayesian network in which each column has at most
    ``degree`` parents, chosen greedily with the exponential mechanism, then noisy marginals of
    each column with its parents, sampled ancestrally.

    Parameters
    ----------
    {budget}
    degree : int, default=1
        Most parents of a column (k), 1 <= k. The default was chosen on development data
        (the adult-like generator, data seeds 1000 and 1001): at rho = 0.015 and 0.1, k = 1 had
        the lowest 2-way and 3-way errors; at rho = 1, k = 2 with ``max_cells=1000`` was better
        (3-way error 0.061 against 0.072). The paper's rule for k needs the record count.
    network_share : float, default=0.05
        Share of the budget for choosing the network (the paper's beta, 0.3 there), in (0, 1).
        The default was chosen on development data (``bench/synth_privbayes_dev.py``: wine,
        diabetes, digits, adult-like with 400 to 10**5 records; epsilon 0.3 to 3 pure, rho
        0.015 to 1; 42 cells): with the conditionals' prior, against 0.3 without it, the 2-way
        error was 0.71x to 1.00x (median 0.89x), the 3-way error 0.79x to 1.03x (the worst on
        178 records at rho = 1). With few records the network is close to random at any share,
        so the marginals gain more from the budget; with many, a small share still separates
        the scores.
    max_cells : int or None, default=None
        Largest marginal (cells of a column with its parents) a choice may need; larger parent
        sets are not candidates (a public rule). None: no limit but the memory limit.
    {state}

    Attributes
    ----------
    {cost}
    plan_ : PrivBayesPlan
    network_ : list of (str, tuple of str)
        Each column with its parents, in sampling order (the first column, chosen uniformly at
        random, has none).
    measured_ : list of tuple of str
        The noisy marginals (a column with its parents, leaving out those contained in another).
    noisy_marginals_ : list of ndarray
        Their noisy counts (one axis per column, in the order of ``measured_``).
    noise_ : MarginalNoise
        Their noise.
    n_records_ : float
        The estimated number of records (from the noisy marginals' totals).

    Privacy
    -------
    rho-zCDP under add/remove one record (or pure epsilon-DP; or (epsilon, delta)-DP through
    zCDP). The domain, ``degree``, ``network_share`` and ``max_cells`` are public. The first
    column is chosen uniformly at random (no data). Network: d - 1 exponential mechanisms
    (``dpcore.selection``, method "exact") over the candidate (column, parent set) pairs, scored
    by the floored L1 dependence of their exact counts (:func:`dependence_score`, sensitivity
    2 + 2**-10), each with epsilon_s such that (d - 1) epsilon_s**2 / 8 <= network_share rho
    (bounded range), or epsilon_s = network_share epsilon / (d - 1) under pure DP. Marginals:
    the m <= d marginals the network needs, with discrete Gaussian noise sigma**2 >=
    m / (2 (1 - network_share) rho) (discrete Laplace scale m / ((1 - network_share) epsilon));
    m depends only on the released network, and the noise for m = d is checked before the
    charge. Shares are rounded down exactly. Conditionals (clipped at zero, smoothed toward
    the child's pooled distribution) and sampling are post-processing. Charged ``cost`` once.

    References
    ----------
    .. [ZCPSX17] J. Zhang, G. Cormode, C. M. Procopiuc, D. Srivastava, X. Xiao, "PrivBayes:
       private data release via Bayesian networks", ACM TODS 42(4), 2017 (SIGMOD 2014).

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore.synth import Categorical, Domain, PrivBayes
    >>> rng = np.random.default_rng(0)  # insecure-ok: example data
    >>> x = rng.integers(0, 3, 3000)
    >>> data = {"a": x, "b": (x + (rng.random(3000) < 0.1)) % 3, "c": rng.integers(0, 2, 3000)}
    >>> dom = Domain({"a": Categorical([0, 1, 2]), "b": Categorical([0, 1, 2]),
    ...               "c": Categorical([0, 1])})
    >>> pb = PrivBayes(rho=1.0, domain=dom, random_state=0).fit(data)
    >>> len(pb.network_), pb.sample(4, output="codes").shape
    (3, (4, 3))
    """

    label = "synth.PrivBayes"

    def __init__(self, *, rho: float | None = None, epsilon: float | None = None,
                 delta: float | None = None, domain: Domain | None = None, degree: int = 1,
                 network_share: float = 0.05, max_cells: int | None = None,
                 random_state: RandomStateLike = None,
                 accountant: AccountantLike | None = None):
        super().__init__(rho=rho, epsilon=epsilon, delta=delta, domain=domain,
                         random_state=random_state, accountant=accountant)
        self.degree = degree
        self.network_share = network_share
        self.max_cells = max_cells

    def _plan(self, domain: Domain, budget: Budget) -> PrivBayesPlan:
        d = len(domain)
        check.integer(self.degree, "degree", minimum=1)
        share = check.probability(self.network_share, "network_share")
        limit = self.max_cells
        if limit is not None:
            check.integer(limit, "max_cells", minimum=1)
        if d == 1:
            network, marginals = 0.0, budget.total
        else:
            network, marginals = budget.parts([share, 1 - share])
        selection = None
        if d > 1:
            selection = ExponentialMechanism.calibrate(
                sensitivity=DEPENDENCE_SENSITIVITY,
                epsilon=budget.selection_epsilon(network, d - 1), method="exact")
        MarginalNoise.calibrate(budget.mechanism, d, marginals, budget.names)  # the worst case
        largest = math.prod(sorted(domain.shape, reverse=True)[:min(self.degree, d - 1) + 1])
        if limit is not None:
            largest = min(largest, limit)
        check.memory(40 * largest * d, "the largest marginals the network may need (degree, "
                     "max_cells)")
        return PrivBayesPlan(selection, budget.mechanism, marginals, budget.names)

    def _candidates(self, shape, chosen, remaining):
        """(child, parents) pairs: parents are min(degree, |chosen|) chosen columns, fewer when no
        such set fits ``max_cells`` (public: sizes and earlier choices only)."""
        for size in range(min(self.degree, len(chosen)), -1, -1):
            found = [(x, parents) for x in remaining
                     for parents in itertools.combinations(sorted(chosen), size)
                     if self.max_cells is None or cells(shape, parents + (x,)) <= self.max_cells]
            if found:
                return found
        return [(x, ()) for x in remaining]

    def _fit_codes(self, codes, domain, plan, rng):
        d, shape = len(domain), domain.shape
        first = int(rng.integers(d))  # public randomness: no data
        network: list[tuple[int, tuple[int, ...]]] = [(first, ())]
        chosen, remaining = [first], [j for j in range(d) if j != first]
        scores: dict = {}
        while remaining:
            candidates = self._candidates(shape, chosen, remaining)
            todo = [c for c in candidates if c not in scores]
            for (x, parents), joint in zip(todo, count_marginals(
                    codes, shape, [p + (x,) for x, p in todo])):
                scores[(x, parents)] = dependence_score(joint)
            k = plan.selection.select(np.array([scores[c] for c in candidates]),
                                      random_state=rng)
            x, parents = candidates[k]
            network.append((x, parents))
            chosen.append(x)
            remaining.remove(x)
        cliques = [parents + (x,) for x, parents in network]
        measured = [c for i, c in enumerate(cliques)
                    if not any(set(c) <= set(o) and (len(o) > len(c) or j > i)
                               for j, o in enumerate(cliques) if j != i)]
        noise = MarginalNoise.calibrate(plan.mechanism, len(measured), plan.share, plan.names)
        noisy = [noise.draw(x, rng) for x in count_marginals(codes, shape, measured)]
        self.plan_ = plan
        self.noise_ = noise
        self.network_ = [(domain.names[x], tuple(domain.names[p] for p in parents))
                         for x, parents in network]
        self.measured_ = [tuple(domain.names[a] for a in c) for c in measured]
        self.noisy_marginals_ = noisy
        weights = [1.0 / t.size for t in noisy]  # a total's variance: cells x sigma**2
        self.n_records_ = max(float(np.dot(weights, [t.sum() for t in noisy]) / sum(weights)),
                              1.0)
        self._order = network
        prior = PRIOR_WEIGHT * clipped_noise_mean(noise)
        self._conditionals = [self._conditional(c, measured, noisy, prior) for c in cliques]

    @staticmethod
    def _conditional(clique, measured, noisy, prior=0.0):
        """The noisy counts of ``clique`` (parents..., child) as a (parent configurations x child)
        table: the smallest measured marginal containing it, clipped at zero, summed down, plus
        ``prior`` per summed noisy cell spread over each row as the child's pooled distribution
        (the table's column sums). When the counts are within the noise, clipping leaves about
        the same mass in every cell, so each row's own counts say little; the prior pulls such
        rows toward the child's distribution over all rows (post-processing). A row with far
        more records than noise keeps its own distribution."""
        j = min((i for i, m in enumerate(measured) if set(clique) <= set(m)),
                key=lambda i: noisy[i].size)
        table, source = np.maximum(noisy[j], 0).astype(np.float64), measured[j]
        drop = tuple(a for a, name in enumerate(source) if name not in clique)
        table = table.sum(axis=drop) if drop else table
        kept = [name for name in source if name in clique]
        table = np.transpose(table, [kept.index(name) for name in clique])
        table = table.reshape(-1, table.shape[-1])
        pooled = table.sum(axis=0)
        if prior > 0 and pooled.sum() > 0:
            per_row = prior * (noisy[j].size // table.shape[0])  # noisy cells a row sums
            table = table + per_row * pooled / pooled.sum()
        return table

    def _sample_codes(self, n, rng):
        shape = self.domain_.shape
        codes = np.zeros((n, len(shape)), dtype=np.int64)
        for (x, parents), table in zip(self._order, self._conditionals):
            if not parents:
                weights = table.sum(axis=0)
                if not weights.sum() > 0:
                    weights = np.ones(weights.size)
                codes[:, x] = draw_categorical(weights, rng.random(n))
                continue
            dims = tuple(shape[p] for p in parents)
            configuration = np.ravel_multi_index(tuple(codes[:, p] for p in parents), dims)
            if not table.sum() > 0:
                table = np.ones_like(table)
            codes[:, x] = sample_conditional(configuration, table, rng)
        return codes
