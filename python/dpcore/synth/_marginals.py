"""Marginal counts of integer-coded records and the exact noise they are released with.

One record is one cell of every marginal, so under add/remove one record a set of k marginals
moves by 1 in k cells: L1 and squared-L2 sensitivity k. The noise is dpcore's exact discrete
Gaussian (rho-zCDP: k / (2 sigma**2) for k marginals with the same sigma) or exact discrete
Laplace (epsilon-DP: k / scale), added to the exact integer counts.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np

from dpcore import _validation as check
from dpcore import calibration
from dpcore._floats import round_down, round_up
from dpcore._release import Cost, public_arithmetic, release
from dpcore.mechanisms import (
    MAX_DISCRETE_GAUSSIAN_SIGMA,
    MAX_DISCRETE_LAPLACE_SCALE,
    discrete_gaussian,
    discrete_laplace,
)
from dpcore.synth._domain import Domain

if TYPE_CHECKING:
    from dpcore.accounting import AccountantLike
    from dpcore.random import RandomStateLike

__all__ = ["Budget", "MarginalNoise", "count_marginals", "marginals", "normalise_cliques"]


@dataclass(frozen=True)
class Budget:
    """A synthesiser's privacy budget: rho-zCDP (discrete Gaussian noise, exponential mechanism
    counted as bounded range) or pure epsilon-DP (discrete Laplace noise).

    ``cost`` is what is charged; ``total`` is the budget the parts are cut from (rho, or
    epsilon for pure DP). With (epsilon, delta), ``total`` is the largest rho whose zCDP
    conversion gives (epsilon, delta) and ``cost`` is (epsilon, delta).
    """

    kind: str  # "zcdp" or "pure"
    total: float
    cost: Cost

    @classmethod
    def make(cls, rho: float | None, epsilon: float | None, delta: float | None) -> Budget:
        """Validate (rho, epsilon, delta), naming them: rho alone, epsilon alone (pure), or
        epsilon with 0 < delta < 1 (through zCDP)."""
        if rho is not None:
            if epsilon is not None:
                raise ValueError("give rho (zCDP) or epsilon (with optional delta), not both")
            if delta not in (None, 0, 0.0):
                raise ValueError(f"delta must not be given with rho (a zCDP budget), got "
                                 f"{delta!r}")
            rho = check.privacy_loss(check.positive(rho, "rho"), "rho", check.MAX_RHO)
            return cls("zcdp", rho, Cost(rho=rho))
        if epsilon is None:
            raise ValueError("a privacy budget is required: give rho (zCDP) or epsilon "
                             "(with optional delta)")
        epsilon = check.privacy_loss(check.positive(epsilon, "epsilon"), "epsilon",
                                     check.MAX_EPSILON)
        delta = 0.0 if delta is None else check.probability(delta, "delta", open_low=False)
        if delta == 0.0:
            return cls("pure", epsilon, Cost(epsilon))
        rho = calibration.zcdp_rho_for(epsilon, delta)
        return cls("zcdp", rho, Cost(epsilon, delta))

    @property
    def names(self) -> str:
        """The parameters the budget came from (for error messages)."""
        if self.kind == "pure":
            return "epsilon"
        return "rho" if self.cost.rho is not None else "epsilon, delta"

    @property
    def mechanism(self) -> str:
        return "gaussian" if self.kind == "zcdp" else "laplace"

    def parts(self, weights: Iterable[float | Fraction]) -> list:
        """Shares of ``total`` proportional to ``weights``, each rounded down so that they sum
        to at most ``total`` exactly."""
        whole = Fraction(self.total)
        weights = [Fraction(w) for w in weights]
        denominator = sum(weights)
        return [round_down(whole * w / denominator) for w in weights]

    def selection_epsilon(self, share: float, rounds: int) -> float:
        """Per-round epsilon of ``rounds`` exponential mechanisms spending ``share`` (rho or
        epsilon): epsilon**2 / 8 per round under zCDP (bounded range, Cesar and Rogers),
        epsilon per round under pure DP; rounded down, checked exactly."""
        if self.kind == "pure":
            return round_down(Fraction(share) / rounds)
        eps = math.sqrt(8.0 * share / rounds)
        while rounds * Fraction(eps) ** 2 > 8 * Fraction(share):
            eps = math.nextafter(eps, 0.0)
        return eps


@dataclass(frozen=True)
class MarginalNoise:
    """Exact integer noise for ``k`` marginals released together with a budget share.

    ``"gaussian"``: discrete Gaussian with the smallest double sigma such that k / (2 sigma**2)
    <= rho (exact rational check). ``"laplace"``: discrete Laplace with scale k / epsilon
    rounded up.
    """

    mechanism: str
    k: int
    scale: float  # sigma, or the discrete Laplace scale

    @classmethod
    def calibrate(cls, mechanism: str, k: int, share: float, name: str = "rho"
                  ) -> MarginalNoise:
        k = int(k)
        with public_arithmetic(name):
            if mechanism == "gaussian":
                sigma = math.sqrt(k / (2.0 * share))
                while 2 * Fraction(share) * Fraction(sigma) ** 2 < k:
                    sigma = math.nextafter(sigma, math.inf)
                if not sigma <= MAX_DISCRETE_GAUSSIAN_SIGMA:
                    raise ValueError(f"{name}={share!r} is too small for {k} marginals: sigma "
                                     f"{sigma:.3g} exceeds the exact sampler's limit")
                return cls(mechanism, k, sigma)
            scale = round_up(Fraction(k) / Fraction(share))
            if not scale <= MAX_DISCRETE_LAPLACE_SCALE:
                raise ValueError(f"{name}={share!r} is too small for {k} marginals: scale "
                                 f"{scale:.3g} exceeds the exact sampler's limit")
            return cls(mechanism, k, scale)

    @property
    def guarantee(self) -> float:
        """rho = k / (2 sigma**2) (Gaussian) or epsilon = k / scale (Laplace), rounded up."""
        if self.mechanism == "gaussian":
            return round_up(Fraction(self.k) / (2 * Fraction(self.scale) ** 2))
        return round_up(Fraction(self.k) / Fraction(self.scale))

    @property
    def std(self) -> float:
        """Standard deviation of one noise draw (sigma for the discrete Gaussian: a slight
        overestimate for small sigma)."""
        if self.mechanism == "gaussian":
            return self.scale
        q = math.exp(-1.0 / self.scale)
        return math.sqrt(2.0 * q) / (1.0 - q)

    def draw(self, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """``counts`` (int64) plus independent noise in every cell."""
        if self.mechanism == "gaussian":
            noise = discrete_gaussian(self.scale, counts.shape, random_state=rng)
        else:
            noise = discrete_laplace(self.scale, counts.shape, random_state=rng)
        return counts + noise


def normalise_cliques(domain: Domain, attributes: Iterable[str | Sequence[str]],
                      name: str = "attributes") -> list:
    """Each entry of ``attributes`` (a column name or a sequence of distinct names) as a tuple
    of column positions; errors name ``name``."""
    if isinstance(attributes, (str, bytes)):
        raise TypeError(f"{name} must be a list of column names or of tuples of them, got the "
                        f"text {attributes!r}")
    try:
        entries = list(attributes)
    except TypeError:
        raise TypeError(f"{name} must be a list of column names or tuples of them") from None
    if not entries:
        raise ValueError(f"{name} must hold at least one marginal")
    out = []
    for entry in entries:
        names = (entry,) if isinstance(entry, str) else tuple(entry)
        if not names:
            raise ValueError(f"{name}: a marginal needs at least one column")
        if len(set(names)) != len(names):
            raise ValueError(f"{name}: a marginal repeats a column: {names!r}")
        out.append(tuple(domain.index(n) for n in names))
    return out


def cells(shape: Sequence[int], clique: Iterable[int]) -> int:
    return math.prod(shape[i] for i in clique)


def count_marginals(codes: np.ndarray, shape: Sequence[int],
                    cliques: Iterable[Sequence[int]]) -> list:
    """Exact counts (int64 arrays shaped by the cliques' sizes) of the records ``codes`` (an
    (n, d) int array with codes in range) for every clique of column positions.

    The cells of a clique are its mixed-radix codes (C order); each clique is one bincount.
    """
    codes = np.asarray(codes)
    out = []
    for clique in cliques:
        dims = tuple(shape[i] for i in clique)
        flat = np.zeros(codes.shape[0], dtype=np.int64)
        for i, size in zip(clique, dims):
            flat *= size
            flat += codes[:, i]
        out.append(np.bincount(flat, minlength=math.prod(dims)).reshape(dims))
    return out


def all_cliques(d: int, order: int) -> list:
    """Every set of ``order`` columns out of d, in lexicographic order."""
    return list(itertools.combinations(range(d), order))


def marginals(data: Any, *, domain: Domain, attributes: Iterable[str | Sequence[str]],
              rho: float | None = None,
              epsilon: float | None = None, delta: float | None = None,
              random_state: RandomStateLike = None,
              accountant: AccountantLike | None = None) -> dict:
    """Noisy counts of several marginals of a table over a public domain.

    Parameters
    ----------
    data : pandas DataFrame, mapping, 2-d array or CSV path
        The records, encoded by ``domain`` (:meth:`Domain.encode`: every value goes to a code by
        its column's public rule).
    domain : Domain
        The public domain; the marginals' cells are its codes.
    attributes : list of column names or tuples of column names
        The marginals to release, e.g. ``["age", ("sex", "income")]``.
    rho : float, optional
        zCDP budget (> 0): exact discrete Gaussian noise, the same sigma on every cell.
    epsilon, delta : float, optional
        Instead of rho: epsilon alone is pure epsilon-DP (exact discrete Laplace noise); with
        0 < delta < 1, the largest rho whose zCDP conversion is (epsilon, delta)-DP is used
        with Gaussian noise.
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's secure generator. Seeds are for tests only.
    accountant : dpcore.Accountant, optional
        Charged the budget once, before anything is drawn.

    Returns
    -------
    dict
        Column-name tuple -> int64 array of noisy counts (one axis per column, in the order
        given, each of the column's size).

    Raises
    ------
    ValueError
        No budget or two kinds of budget, a bad rho/epsilon/delta, an unknown column, a
        marginal repeating a column, a column missing from the data.
    TypeError
        A domain that is not a :class:`Domain`, malformed attributes.

    Privacy
    -------
    Under add/remove one record, k marginals change by one in k cells. rho-zCDP with discrete
    Gaussian noise of sigma**2 >= k / (2 rho) on every cell (Canonne, Kamath and Steinke: an
    integer query of L2 sensitivity sqrt(k)); pure epsilon-DP with discrete Laplace noise of
    scale k / epsilon (L1 sensitivity k); (epsilon, delta)-DP through zCDP. Replace-one: twice
    the sensitivity. The domain is public (values outside it are counted in its declared bins,
    never dropped by a data-dependent rule). Charged once: ``Cost(rho=rho)``,
    ``Cost(epsilon)`` or ``Cost(epsilon, delta)``.

    Examples
    --------
    >>> from dpcore.synth import Categorical, Domain, marginals
    >>> dom = Domain({"a": Categorical([0, 1]), "b": Categorical(["x", "y"], other="y")})
    >>> out = marginals({"a": [0, 1, 1], "b": ["x", "y", "z"]}, domain=dom,
    ...                 attributes=[("a", "b")], rho=1.0, random_state=0)
    >>> out[("a", "b")].shape
    (3, 2)
    """
    if not isinstance(domain, Domain):
        raise TypeError(f"domain must be a dpcore.synth.Domain, got {type(domain).__name__}")
    cliques = normalise_cliques(domain, attributes)
    budget = Budget.make(rho, epsilon, delta)
    shape = domain.shape
    total_cells = sum(cells(shape, c) for c in cliques)
    check.memory(16 * total_cells, "the marginals' cells")
    noise = MarginalNoise.calibrate(budget.mechanism, len(cliques), budget.total,
                                    budget.names)
    codes = domain.encode(data)
    exact = count_marginals(codes, shape, cliques)

    def draw(rng):
        return {tuple(domain.names[i] for i in c): noise.draw(x, rng)
                for c, x in zip(cliques, exact)}

    return release(draw, cost=budget.cost, accountant=accountant, random_state=random_state,
                   label="synth.marginals")
