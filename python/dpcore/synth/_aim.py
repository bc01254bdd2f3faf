"""AIM (McKenna, Mullins, Sheldon and Miklau 2022): workload-driven adaptive selection of
marginals with the exponential mechanism, budget annealing, and a graphical model fitted to the
noisy marginals after every round."""
from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np

from dpcore import _validation as check
from dpcore._docstrings import fill
from dpcore._floats import round_down, round_up
from dpcore.selection import ExponentialMechanism
from dpcore.synth._base import (BUDGET_PARAMETERS, COST_ATTRIBUTE, STATE_PARAMETERS,
                                Synthesizer)
from dpcore.synth._estimate import Measurement, fit_model, pool_one_way
from dpcore.synth._junction import model_cells
from dpcore.synth._marginals import MarginalNoise, cells, count_marginals, normalise_cliques
from dpcore.synth._tree import size_groups

from dpcore.synth._marginals import Budget

if TYPE_CHECKING:
    from dpcore.accounting import AccountantLike
    from dpcore.random import RandomStateLike
    from dpcore.synth._domain import Domain
    from dpcore.synth._junction import JunctionTree

__all__ = ["AIM", "AIMPlan", "candidate_weights", "mean_absolute_noise", "noisy_record_count",
           "sized_rounds"]

#: Share of each round's budget spent on the measurement (the rest selects), as in the paper.
MEASURE_SHARE = Fraction(9, 10)
#: Mirror-descent iterations after each round (warm started) and for the final model.
ROUND_ITERATIONS = 100
FINAL_ITERATIONS = 1000
#: Bytes per model cell (float64), for the model-size cap in MiB.
CELL_BYTES = 8
#: Before the final fit, pool the 1-way measurements of columns with the same number of codes
#: (:func:`dpcore.synth._estimate.pool_one_way`; chosen on development data).
POOL_ONE_WAY = True
#: The paper's default number of rounds per column (T = 16 d), the most the default allows.
ROUNDS_PER_COLUMN = 16
#: Default ``rounds``: spend ``COUNT_SHARE`` of the budget on a noisy record count and take the
#: largest T (between d and 16 d) whose 1-way noise has a standard deviation per cell of at most
#: ``NOISE_TO_SIGNAL`` times the mean count per cell (count / cells, averaged over the columns);
#: chosen on development data (bench/synth_marginal_dev.py). False: T = 16 d, no count.
SIZED_ROUNDS = True
COUNT_SHARE = Fraction(1, 100)
NOISE_TO_SIGNAL = 0.25


def candidate_weights(workload: Iterable[Sequence[int]]) -> dict:
    """AIM's candidates: every non-empty subset r of a workload marginal, weighted
    w_r = sum over the workload of |r intersect s| (integers)."""
    subsets: set = set()
    for s in workload:
        for k in range(1, len(s) + 1):
            subsets.update(itertools.combinations(s, k))
    return {r: sum(len(set(r) & set(s)) for s in workload)
            for r in sorted(subsets, key=lambda c: (len(c), c))}


def mean_absolute_noise(noise: MarginalNoise) -> float:
    """E|Z| of one cell's noise: sqrt(2/pi) sigma for the Gaussian (the paper's bias term),
    2q / (1 - q**2) with q = exp(-1/scale) for the discrete Laplace."""
    if noise.mechanism == "gaussian":
        return math.sqrt(2.0 / math.pi) * noise.scale
    q = math.exp(-1.0 / noise.scale)
    return 2.0 * q / (1.0 - q * q)


def noisy_record_count(noise: MarginalNoise, n: int, rng: np.random.Generator) -> int:
    """n plus one exact draw of ``noise`` (discrete Gaussian or Laplace; may be negative)."""
    return int(noise.draw(np.array([n], dtype=np.int64), rng)[0])


def sized_rounds(mechanism: str, rest: Fraction, shape: Sequence[int], count: int) -> int:
    """The default T from public values and the released record ``count``: the largest T in
    [d, 16 d] whose 1-way noise (a round's measurement share 9/10 rest / T per marginal) has a
    standard deviation per cell of at most ``NOISE_TO_SIGNAL`` * count / mean cells. Gaussian:
    sigma**2 = T / (1.8 rest); discrete Laplace: std ~ sqrt(2) T / (0.9 rest)."""
    d = len(shape)
    allowed = NOISE_TO_SIGNAL * max(count, 0) / (sum(shape) / d)
    if mechanism == "gaussian":
        largest = 2 * float(MEASURE_SHARE) * float(rest) * allowed ** 2
    else:
        largest = float(MEASURE_SHARE) * float(rest) * allowed / math.sqrt(2.0)
    return int(min(max(math.floor(largest), d), ROUNDS_PER_COLUMN * d))


@dataclass(frozen=True)
class AIMPlan:
    """AIM's calibration from public values.

    ``budget`` is the validated budget (its kind: zCDP or pure); ``count`` is the noise of the
    record count (None when ``rounds`` is given: no count); ``rounds`` is T (before the fit
    with the default rule: 16 d, the most it can be); ``candidates`` maps each candidate
    marginal (ascending column positions) to its weight; ``one_way`` is the noise of the d
    initial 1-way marginals; ``measure`` and ``select`` are a round's initial budget shares
    (rho, or epsilon under pure DP); ``growth`` multiplies both when the budget is annealed (4
    under zCDP: sigma halves and the selection's epsilon doubles;
    2 under pure DP); ``smallest_*`` are the smallest shares a round may get (checked before the
    charge: the noise and the selection can be calibrated at them); ``model_cells`` is the
    model-size cap in cells."""

    budget: Budget
    count: MarginalNoise | None
    rounds: int
    candidates: dict
    one_way: MarginalNoise
    measure: float
    select: float
    growth: int
    smallest_measure: float
    smallest_select: float
    model_cells: int


@fill(budget=BUDGET_PARAMETERS, state=STATE_PARAMETERS, cost=COST_ATTRIBUTE)
class AIM(Synthesizer):
    """Synthetic data by AIM: 1-way marginals, then rounds that each pick the workload marginal
    the current model gets most wrong (exponential mechanism), measure it with exact noise and
    refit a graphical model to every measurement; records are sampled from the final model.

    Parameters
    ----------
    {budget}
    workload : list of tuples of column names, optional
        The marginals the synthetic data should answer. Default: every set of ``degree``
        columns. Marginals with more than ``max_cells`` cells are left out.
    degree : int, default=2
        Width of the default workload's marginals.
    max_cells : int, default=10000
        Largest workload marginal kept (cells).
    rounds : int, optional
        T, the number of rounds the budget is first divided into; annealing spends it faster.
        At least d. Default: 1/100 of the budget buys a noisy record count, and T is the
        largest in [d, 16 d] (16 d is the paper's) whose 1-way noise per cell has a standard
        deviation of at most 1/4 of the count's mean count per cell (:func:`sized_rounds`;
        fewer rounds on small tables at small budgets, the paper's 16 d on large ones).
    max_model_size : float, default=80
        Model-size cap in MiB (8 bytes a cell of the junction tree): when a round brings the
        budget spent to a fraction f, a candidate is eligible only if the model with it stays
        under f * max_model_size (or it lies inside a clique the model already has).
    max_time : float, optional
        Time cap in seconds on the model fits (the clock runs only while the model is fitted to
        released values, never while the data is read): once exceeded, the next round spends
        the whole remaining budget and is the last. None: no cap.
    {state}

    Attributes
    ----------
    {cost}
    plan_ : AIMPlan
    measurements_ : list of (tuple of str, ndarray, MarginalNoise)
        Every released marginal in order (the d 1-way marginals first): its columns, the noisy
        counts (axes in that order) and its noise (mechanism, scale, standard deviation).
    selected_ : list of tuple of str
        The marginals chosen by the adaptive rounds, in order.
    model_ : JunctionTree
        The fitted graphical model (its cliques and log-potentials).
    record_count_ : int or None
        The noisy record count that set the default T (None when ``rounds`` is given).
    n_records_ : float
        The model's estimate of the number of records (from noisy counts).
    budget_spent_ : float
        The budget the releases' guarantees add up to (rho, or epsilon under pure DP; exact
        rational sum, rounded up): at most the total, equal to it unless a final round was too
        small to calibrate.

    Privacy
    -------
    rho-zCDP under add/remove one record (or pure epsilon-DP with discrete Laplace noise and
    pure exponential mechanisms; or (epsilon, delta)-DP through zCDP). The domain is public.
    With the default ``rounds``, B_c = B / 100 (rounded down) is spent first on the record
    count: the exact count plus one discrete Gaussian draw with sigma**2 >= 1 / (2 B_c)
    (sensitivity 1; discrete Laplace with scale 1 / B_c rounded up under pure DP), released
    as ``record_count_``; T is a function of that count and public values only, and the rest
    B - B_c (its exact guarantee subtracted as a rational) is what the rounds divide: the count
    and the rounds compose sequentially (zCDP and pure DP add up), adaptively, T being chosen
    from the released count. With ``rounds`` given there is no count and the rounds divide B.
    With T rounds and budget B' (B, or B - B_c), a round's initial budget is B' / T, 9/10 for
    the measurement (discrete Gaussian, sigma**2 >= 1 / (2 share); discrete Laplace scale
    1 / share) and 1/10 for the selection (exponential mechanism at epsilon_s with
    epsilon_s**2 / 8 <= share under zCDP, bounded range (Cesar and Rogers 2021); epsilon_s =
    share under pure DP). The d 1-way marginals are measured first with the round's measurement
    noise. Each round's selection scores every eligible candidate r by
    w_r (||x_r - round(model_r)||_1 - round(E|noise| cells_r)): the L1 distance between the
    exact counts and the current model's rounded counts changes by at most 1 under add/remove
    one record (the model depends only on earlier releases), so the score's sensitivity is the
    largest eligible weight, and the scores are integers (exact in doubles). The exponential
    mechanism is ``dpcore.selection``'s exact one. Annealing (the new measurement moved the
    model's marginal by less than the expected noise: shares times 4 under zCDP, 2 under pure)
    and the time and model-size caps depend only on released values, public parameters and
    the clock outside the data's reads; the rounds' budgets are chosen adaptively and their
    guarantees add up (exact rationals) to at most B: fully adaptive composition under a
    privacy filter (Feldman and Zrnic 2021; zCDP through the Renyi filter at every order).
    When fewer than two rounds at the current shares remain, the last round spends exactly
    what is left. The final model (its 1-way measurements of columns with the same number of
    codes pooled toward their group's mean) and sampling are post-processing. Charged ``cost``
    once.

    References
    ----------
    .. [MMSM22] R. McKenna, B. Mullins, D. Sheldon, G. Miklau, "AIM: an adaptive and iterative
       mechanism for differentially private synthetic data", PVLDB 15(11), 2022.
    .. [MSM19] R. McKenna, D. Sheldon, G. Miklau, "Graphical-model based estimation and
       inference for differential privacy", ICML 2019.
    .. [FZ21] V. Feldman, T. Zrnic, "Individual privacy accounting via a Renyi filter",
       NeurIPS 2021.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore.synth import AIM, Categorical, Domain
    >>> rng = np.random.default_rng(0)  # insecure-ok: example data
    >>> age = rng.integers(0, 4, 2000)
    >>> data = {"age": age, "job": (age + rng.integers(0, 2, 2000)) % 4,
    ...         "owner": rng.integers(0, 2, 2000)}
    >>> dom = Domain({"age": Categorical(range(4)), "job": Categorical(range(4)),
    ...               "owner": Categorical([0, 1])})
    >>> aim = AIM(rho=1.0, domain=dom, workload=[("age", "job"), ("job", "owner")],
    ...           random_state=0)
    >>> aim.cost.rho  # known before fit
    1.0
    >>> ("age", "job") in aim.fit(data).selected_
    True
    >>> aim.sample(5, output="dict")["age"].shape
    (5,)
    """

    label = "synth.AIM"

    def __init__(self, *, rho: float | None = None, epsilon: float | None = None,
                 delta: float | None = None, domain: Domain | None = None,
                 workload: Sequence[Sequence[str]] | None = None,
                 degree: int = 2, max_cells: int = 10000, rounds: int | None = None,
                 max_model_size: float = 80.0, max_time: float | None = None,
                 random_state: RandomStateLike = None,
                 accountant: AccountantLike | None = None):
        super().__init__(rho=rho, epsilon=epsilon, delta=delta, domain=domain,
                         random_state=random_state, accountant=accountant)
        self.workload = workload
        self.degree = degree
        self.max_cells = max_cells
        self.rounds = rounds
        self.max_model_size = max_model_size
        self.max_time = max_time

    # -- calibration (public values only) ---------------------------------------------------------

    def _plan(self, domain: Domain, budget: Budget) -> AIMPlan:
        d = len(domain)
        shape = domain.shape
        max_cells = check.integer(self.max_cells, "max_cells", minimum=1)
        if self.workload is None:
            degree = check.integer(self.degree, "degree", minimum=1)
            workload = list(itertools.combinations(range(d), min(degree, d)))
        else:
            workload = [tuple(sorted(c)) for c in normalise_cliques(domain, self.workload,
                                                                    "workload")]
        workload = sorted({c for c in workload if cells(shape, c) <= max_cells})
        workload_cells = {c: cells(shape, c) for c in workload}
        rounds = (ROUNDS_PER_COLUMN * d if self.rounds is None
                  else check.integer(self.rounds, "rounds", minimum=d))
        model_mib = check.positive(self.max_model_size, "max_model_size")
        if self.max_time is not None:
            check.positive(self.max_time, "max_time")
        if not workload:
            raise ValueError(f"the workload is empty: every marginal has more than max_cells="
                             f"{max_cells} cells")
        candidates = candidate_weights(workload)
        check.memory(24 * sum(cells(shape, c) for c in candidates)
                     + CELL_BYTES * 8 * (sum(workload_cells.values()) + sum(shape))
                     + int(model_mib * 2**20), "the workload's marginals (workload, max_cells, "
                     "max_model_size)")
        count = None
        rest = Fraction(budget.total)
        if self.rounds is None and SIZED_ROUNDS:
            count = MarginalNoise.calibrate(budget.mechanism, 1, round_down(rest * COUNT_SHARE),
                                            budget.names)
            rest -= self._guarantee(budget, count, None)
        # the smallest shares (T = 16 d) are calibrated here, before the charge
        one_way, measure, select = self._round_shares(budget, rest, d, rounds)
        # the smallest round a fit can reach: a last round gets what is left, at least 1/10 of
        # the budget after the 1-way marginals (T >= d), or after a round at least as large as
        # the initial one; 1/20 of the initial round is below both
        smallest_measure = round_down(Fraction(measure) / 20)
        smallest_select = round_down(Fraction(select) / 20)
        MarginalNoise.calibrate(budget.mechanism, 1, smallest_measure, budget.names)
        ExponentialMechanism.calibrate(
            sensitivity=float(max(candidates.values())),
            epsilon=budget.selection_epsilon(smallest_select, 1), method="exact")
        return AIMPlan(budget, count, rounds, candidates, one_way,
                       measure, select, 4 if budget.kind == "zcdp" else 2, smallest_measure,
                       smallest_select, int(model_mib * 2**20) // CELL_BYTES)

    @staticmethod
    def _round_shares(budget: Budget, rest: Fraction, d: int, rounds: int
                      ) -> tuple[MarginalNoise, float, float]:
        """(the 1-way marginals' noise, a round's measurement share, its selection share) when
        ``rest`` is divided into T = ``rounds`` rounds."""
        per_round = rest / rounds
        measure = round_down(per_round * MEASURE_SHARE)
        select = round_down(per_round - Fraction(measure))
        one_way = MarginalNoise.calibrate(budget.mechanism, d, round_down(d * Fraction(measure)),
                                          budget.names)
        return one_way, measure, select

    @staticmethod
    def _guarantee(budget, noise, selection) -> Fraction:
        """The exact budget of one round: the noise's (k / (2 sigma**2) or k / scale) plus the
        selection's (epsilon**2 / 8 or epsilon)."""
        if noise.mechanism == "gaussian":
            spent = Fraction(noise.k) / (2 * Fraction(noise.scale) ** 2)
        else:
            spent = Fraction(noise.k) / Fraction(noise.scale)
        if selection is not None:
            eps = Fraction(selection.epsilon_effective)
            spent += eps * eps / 8 if budget.kind == "zcdp" else eps
        return spent

    # -- the release ------------------------------------------------------------------------------

    def _fit_codes(self, codes, domain, plan, rng):
        shape = domain.shape
        d = len(shape)
        whole = Fraction(plan.budget.total)
        candidates = plan.candidates
        used = Fraction(0)
        self.record_count_ = None
        if plan.count is not None:
            # the noisy record count sets T (sized_rounds), then the rounds share what is left
            self.record_count_ = noisy_record_count(plan.count, codes.shape[0], rng)
            used = self._guarantee(plan.budget, plan.count, None)
            rounds = sized_rounds(plan.budget.mechanism, whole - used, shape,
                                  self.record_count_)
            one_way, measure, select = self._round_shares(plan.budget, whole - used, d, rounds)
            plan = replace(plan, rounds=rounds, one_way=one_way, measure=measure,
                           select=select)
        answers = dict(zip(candidates, count_marginals(codes, shape, list(candidates))))
        measurements = [Measurement((i,), plan.one_way.draw(answers[(i,)], rng).astype(float),
                                    plan.one_way.std) for i in range(d)]
        noises = [plan.one_way] * d
        used += self._guarantee(plan.budget, plan.one_way, None)
        clock = 0.0
        start = time.monotonic()
        tree, marginals, total, step = fit_model(shape, measurements, ROUND_ITERATIONS)
        clock += time.monotonic() - start
        measure, select = Fraction(plan.measure), Fraction(plan.select)
        selected = []
        while True:
            remaining = whole - used
            last = remaining < 2 * (measure + select) or (
                self.max_time is not None and clock >= self.max_time)
            if last:
                measure = Fraction(round_down(remaining * MEASURE_SHARE))
                select = Fraction(round_down(remaining - measure))
                if measure < Fraction(plan.smallest_measure) or select < Fraction(
                        plan.smallest_select):
                    break  # too little left to calibrate: left unspent
            noise = MarginalNoise.calibrate(plan.budget.mechanism, 1, float(measure))
            # the cap grows with the budget spent, this round's included (as in the paper)
            limit = plan.model_cells * float(min((used + measure + select) / whole, Fraction(1)))
            eligible = self._eligible(tree, candidates, shape, limit)
            selection = ExponentialMechanism.calibrate(
                sensitivity=float(max(candidates[r] for r in eligible)),
                epsilon=plan.budget.selection_epsilon(float(select), 1), method="exact")
            used += self._guarantee(plan.budget, noise, selection)
            assert used <= whole  # by construction: each share is at most what remains
            bias = mean_absolute_noise(noise)
            scores = quality_scores(tree, marginals, total, eligible, candidates, answers, bias)
            chosen = eligible[selection.select(scores, random_state=rng)]
            before = total * tree.project(marginals, chosen)
            measurements.append(Measurement(chosen, noise.draw(answers[chosen], rng)
                                            .astype(float), noise.std))
            selected.append(chosen)
            noises.append(noise)
            start = time.monotonic()
            tree, marginals, total, step = fit_model(shape, measurements, ROUND_ITERATIONS,
                                                     previous=tree, step=step)
            clock += time.monotonic() - start
            if last:
                break
            after = total * tree.project(marginals, chosen)
            if np.abs(after - before).sum() <= bias * before.size:  # anneal
                measure *= plan.growth
                select *= plan.growth
        # the final model: the 1-way measurements of columns with the same number of codes
        # pooled toward their group's mean (post-processing; the rounds above fit them as drawn)
        final = pool_one_way(measurements, size_groups(shape)) if POOL_ONE_WAY else measurements
        tree, marginals, total, _ = fit_model(shape, final, FINAL_ITERATIONS,
                                              previous=tree, step=step)
        names = domain.names
        self.plan_ = plan
        self.measurements_ = [(tuple(names[i] for i in m.clique),
                               np.rint(m.noisy).astype(np.int64), noise)
                              for m, noise in zip(measurements, noises)]
        self.selected_ = [tuple(names[i] for i in c) for c in selected]
        self.model_ = tree
        self.marginals_ = marginals
        self.n_records_ = total
        self.budget_spent_ = round_up(used)

    @staticmethod
    def _eligible(tree, candidates, shape, limit) -> list:
        """Candidates inside a clique of the model, or whose addition keeps the junction tree
        at most ``limit`` cells (public: the model's structure and the budget spent)."""
        current = [tuple(c) for c in tree.cliques]
        inside = [set(c) for c in current]
        out = []
        for r in candidates:
            if any(set(r) <= c for c in inside) or model_cells(shape, current + [r]) <= limit:
                out.append(r)
        return out

    def _sample_codes(self, n, rng):
        return self.model_.sample(self.marginals_, n, rng)


def quality_scores(tree: JunctionTree, marginals: list, total: float,
                   eligible: Sequence[tuple[int, ...]], candidates: dict, answers: dict,
                   bias: float) -> np.ndarray:
    """AIM's quality of each eligible candidate r (integers): w_r (||x_r - round(N mu_r)||_1 -
    round(bias cells_r)), x_r the exact counts, N mu_r the model's counts."""
    out = np.empty(len(eligible))
    for k, r in enumerate(eligible):
        # the model's counts as integers in [0, 2**50] whatever it holds (a non-finite value
        # cast to int64 would wrap the distance and break the score's sensitivity)
        counts = np.nan_to_num(total * tree.project(marginals, r), nan=0.0, posinf=2.0**50,
                               neginf=0.0)
        model = np.rint(np.clip(counts, 0.0, 2.0**50))
        distance = int(np.abs(answers[r] - model.astype(np.int64)).sum())
        out[k] = candidates[r] * (distance - round(bias * model.size))
    return out
