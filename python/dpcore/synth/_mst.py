"""MST (McKenna, Miklau and Sheldon 2021): noisy 1-way marginals, a private maximum spanning
tree over the attribute pairs, noisy 2-way marginals on its edges, a tree model, sampling."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from dpcore import _validation as check
from dpcore._docstrings import fill
from dpcore.selection import ExponentialMechanism
from dpcore.synth._base import (BUDGET_PARAMETERS, COST_ATTRIBUTE, STATE_PARAMETERS,
                                Synthesizer)
from dpcore.synth._compress import Compression
from dpcore.synth._marginals import MarginalNoise, all_cliques, count_marginals
from dpcore.synth._tree import TreeModel, size_groups

#: Shrink the 1-way estimates of columns with the same number of codes toward their mean
#: (:func:`dpcore.synth._tree.pool_marginals`; chosen on development data).
POOL_ONE_WAY = True

if TYPE_CHECKING:
    from dpcore.synth._domain import Domain
    from dpcore.synth._marginals import Budget

__all__ = ["MST", "MSTPlan"]


@dataclass(frozen=True)
class MSTPlan:
    """MST's calibration, from public values: the noise of the d 1-way marginals, the
    exponential mechanism of each of the d - 1 tree selections (None for fewer than three
    columns: the tree is then forced), the noise of the d - 1 2-way marginals."""

    one_way: MarginalNoise
    selection: ExponentialMechanism | None
    two_way: MarginalNoise | None


@fill(budget=BUDGET_PARAMETERS, state=STATE_PARAMETERS, cost=COST_ATTRIBUTE)
class MST(Synthesizer):
    """Synthetic data by MST: 1-way marginals, a maximum spanning tree chosen privately, 2-way
    marginals on the tree, then records sampled from the tree-structured model.

    Parameters
    ----------
    {budget}
    {state}

    Attributes
    ----------
    {cost}
    plan_ : MSTPlan
        The calibrated noise and selection.
    one_way_ : list of ndarray
        Noisy 1-way counts of each column (the domain's codes).
    compression_ : Compression
        Per column, the codes whose noisy count reached three noise standard deviations (the
        others are merged into one code for the 2-way marginals and the model).
    edges_ : list of (str, str)
        The tree's edges, in the order selected.
    two_way_ : list of ndarray
        Noisy 2-way counts on each edge (compressed codes).
    model_ : TreeModel
        The consistent tree model (compressed codes).
    n_records_ : float
        The model's estimate of the number of records (from noisy counts).

    Privacy
    -------
    rho-zCDP under add/remove one record (or pure epsilon-DP; or (epsilon, delta)-DP through
    zCDP). The domain is public. With d columns the budget is split in thirds (exact rationals,
    rounded down): (1) the d 1-way marginals with discrete Gaussian noise, sigma**2 >= d /
    (2 rho/3) (discrete Laplace scale d / (epsilon/3)); (2) d - 1 exponential mechanisms
    (``dpcore.selection``, method "exact") picking the tree by Kruskal's rule, each of epsilon_s
    with (d - 1) epsilon_s**2 / 8 <= rho/3 (bounded range, Cesar and Rogers 2021; pure: epsilon_s
    = (epsilon/3) / (d - 1)), score of a pair the L1 distance between its exact 2-way counts and
    the rounded counts of the independent model fitted to step (1) (integers; sensitivity 1);
    (3) the d - 1 chosen 2-way marginals with sigma**2 >= (d - 1) / (2 rho/3). Two columns skip
    (2) (halves to (1) and (3)); one column spends everything on (1). Compression, the model and
    sampling read only the noisy outputs: post-processing. Charged ``cost`` once.

    References
    ----------
    .. [MMS21] R. McKenna, G. Miklau, D. Sheldon, "Winning the NIST contest: a scalable and
       general approach to differentially private synthetic data", Journal of Privacy and
       Confidentiality 11(3), 2021.
    .. [CR21] M. Cesar, R. Rogers, "Bounding, concentrating, and truncating: unifying privacy
       loss composition for data analytics", ALT 2021.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore.synth import MST, Categorical, Domain, Numeric
    >>> rng = np.random.default_rng(0)  # insecure-ok: example data
    >>> x = rng.integers(0, 3, 2000)
    >>> data = {"a": x, "b": (x + rng.integers(0, 2, 2000)) % 3, "c": rng.uniform(0, 1, 2000)}
    >>> dom = Domain({"a": Categorical([0, 1, 2]), "b": Categorical([0, 1, 2]),
    ...               "c": Numeric(0, 1, bins=4)})
    >>> mst = MST(rho=1.0, domain=dom, random_state=0).fit(data)
    >>> mst.cost.rho  # known before fit
    1.0
    >>> ("a", "b") in mst.edges_
    True
    >>> mst.sample(5, output="dict")["a"].shape
    (5,)
    """

    label = "synth.MST"

    def _plan(self, domain: Domain, budget: Budget) -> MSTPlan:
        d = len(domain)
        shape = domain.shape
        pair_cells = sum(shape[a] * shape[b] for a, b in all_cliques(d, 2))
        check.memory(40 * pair_cells + 16 * sum(shape), "the domain's 2-way marginals")
        if d == 1:
            return MSTPlan(MarginalNoise.calibrate(budget.mechanism, 1, budget.total,
                                                   budget.names), None, None)
        weights = [1, 0, 1] if d == 2 else [1, 1, 1]
        one, select, two = budget.parts(weights)
        selection = None
        if d > 2:
            selection = ExponentialMechanism.calibrate(
                sensitivity=1.0, epsilon=budget.selection_epsilon(select, d - 1), method="exact")
        return MSTPlan(MarginalNoise.calibrate(budget.mechanism, d, one, budget.names),
                       selection,
                       MarginalNoise.calibrate(budget.mechanism, d - 1, two, budget.names))

    def _fit_codes(self, codes, domain, plan, rng):
        d = len(domain)
        exact_one = count_marginals(codes, domain.shape, [(i,) for i in range(d)])
        self.plan_ = plan
        self.one_way_ = [plan.one_way.draw(x, rng) for x in exact_one]
        compression = Compression.from_noisy(self.one_way_, plan.one_way.std)
        sizes = compression.sizes
        compressed = compression.codes(codes)
        one_way = [compression.one_way(y, plan.one_way.std ** 2, i)
                   for i, y in enumerate(self.one_way_)]
        edges = self._select_tree(compressed, sizes, one_way, plan, rng)
        two_way = []
        if edges:
            exact_two = count_marginals(compressed, sizes, edges)
            two_way = [plan.two_way.draw(x, rng) for x in exact_two]
        self.compression_ = compression
        self.edges_ = [(domain.names[a], domain.names[b]) for a, b in edges]
        self.two_way_ = two_way
        variance = plan.two_way.std ** 2 if plan.two_way is not None else 1.0
        groups = size_groups(sizes, [keep.all() for keep in compression.supports]) \
            if POOL_ONE_WAY else []
        self.model_ = TreeModel.estimate(sizes, one_way, edges,
                                         [(t, variance) for t in two_way], groups)
        self.n_records_ = self.model_.total

    @staticmethod
    def _select_tree(compressed, sizes, one_way, plan, rng) -> list:
        """Kruskal's maximum spanning tree with each edge picked by the exponential mechanism;
        score of a pair: L1 distance between its exact counts and the independent model's."""
        d = len(sizes)
        if d < 2:
            return []
        if plan.selection is None:
            return [(0, 1)]
        independent = TreeModel.estimate(sizes, one_way, [], [])
        pairs = all_cliques(d, 2)
        exact = count_marginals(compressed, sizes, pairs)
        total = independent.total
        scores = np.array([
            np.abs(np.rint(np.outer(independent.marginals[a], independent.marginals[b]) / total)
                   - x).sum() for (a, b), x in zip(pairs, exact)])
        component = np.arange(d)
        first = np.array([a for a, _ in pairs])
        second = np.array([b for _, b in pairs])
        edges = []
        for _ in range(d - 1):
            # pairs joining two components are candidates; the others are excluded publicly
            # (the components depend only on earlier selections)
            joins = component[first] != component[second]
            utility = np.where(joins, scores, -np.inf)
            k = plan.selection.select(utility, random_state=rng)
            a, b = pairs[k]
            component[component == component[b]] = component[a]
            edges.append((a, b))
        return edges

    def _sample_codes(self, n, rng):
        return self.compression_.expand(self.model_.sample(n, rng), rng)
