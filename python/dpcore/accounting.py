"""Privacy budget accounting: charge releases, refuse overspending, report what was spent.

An :class:`Accountant` holds a budget (epsilon, delta) and a history of charges. Each release is
charged *before* it is made; a charge that would overspend raises :class:`BudgetExceeded` and
records nothing, so the release is never made. Supported compositions:

* sequential (basic) composition of pure and approximate DP charges (summation);
* rho-zCDP charges (summed, converted to (epsilon, delta) with the tight conversion);
* parallel composition over disjoint partitions (:meth:`Accountant.parallel`), the charges
  on one partition summed (:meth:`ParallelBlock.partition`);
* advanced composition of k repeated releases (:meth:`Accountant.charge_repeated`).

All sums are kept exactly (as the rationals the doubles represent) and the budget check is
exact; the accountant's decisions depend only on the public charge parameters, never on data.

An accountant is a handle on one budget: ``copy.copy`` and ``copy.deepcopy`` return it itself,
and a pickled copy (what a joblib worker receives) is *detached*: it refuses every charge (see
:class:`Accountant`, "Copies, pickling and n_jobs").
"""
from __future__ import annotations

import math
import threading
from typing import Union, cast
from dataclasses import asdict, dataclass
from fractions import Fraction

from dpcore import _validation as check
from dpcore import calibration
from dpcore._floats import round_down as _down, round_up as _up

__all__ = ["Accountant", "AccountantLike", "BudgetExceeded", "Charge", "ParallelBlock",
           "Partition", "PrivacyWarning"]

_ZERO = Fraction(0)
#: Relative amount by which a total may exceed the budget: the binary representation error of
#: decimal fractions such as 0.1, summed over up to ~10**4 charges (see Accountant).
BUDGET_TOLERANCE = Fraction(1, 2**40)


class PrivacyWarning(UserWarning):
    """A release reads something from the private data that its guarantee does not cover
    (e.g. a classifier's label set when ``classes`` is not given). The release still happens;
    give the public value the message names to get the stated guarantee."""


class BudgetExceeded(RuntimeError):
    """A charge would overspend the accountant's budget; nothing was charged.

    A subclass of ``RuntimeError`` rather than ``ValueError``: the charge's parameters are
    valid, it is refused because of the accountant's state (what was spent before), and code that
    catches ``ValueError`` for bad arguments should not silently swallow a refusal.

    Attributes
    ----------
    charge : Charge
        The refused charge (as it would have been recorded).
    spent : tuple of float
        (epsilon, delta) the history would total with the charge (epsilon may be ``inf`` when
        no valid analysis exists, e.g. a zCDP charge with no delta budget).
    budget : tuple of float
        The accountant's (epsilon, delta) budget.
    """

    def __init__(self, message, *, charge=None, spent=None, budget=None):
        super().__init__(message)
        self.charge = charge
        self.spent = spent
        self.budget = budget


@dataclass(frozen=True)
class Charge:
    """One entry of an accountant's history.

    Attributes
    ----------
    epsilon, delta : float or None
        The (epsilon, delta)-DP guarantee charged; None for a zCDP charge.
    rho : float or None
        The rho-zCDP guarantee charged; None for an (epsilon, delta) charge.
    label : str or None
        Free text naming the release.
    kind : {"single", "parallel", "repeated"}
        One release; the maximum over disjoint partitions (``count`` partitions, each the sum
        of its own charges); or ``count`` repetitions composed (basic or advanced, see
        ``composition``).
    count : int
        Number of partitions charged (parallel) or repetitions (repeated); 1 for a single
        release.
    composition : {"basic", "advanced"} or None
        For a repeated charge: which composition theorem gave its (epsilon, delta).
    rho_implied : float or None
        For charges that are pure DP release by release (delta = 0 for each release): the zCDP
        parameter they also satisfy (epsilon**2 / 2 per release, summed over repetitions and
        over the charges of one partition, max over partitions). The accountant may count them
        this way when it is tighter.
    """

    epsilon: float | None
    delta: float | None
    rho: float | None
    label: str | None = None
    kind: str = "single"
    count: int = 1
    composition: str | None = None
    rho_implied: float | None = None

    @property
    def is_zcdp(self):
        return self.rho is not None


@dataclass(frozen=True)
class _Sums:
    """Exact totals over the history (Fractions)."""

    eps: Fraction = _ZERO  # sum of epsilon over (epsilon, delta) charges
    delta: Fraction = _ZERO
    rho: Fraction = _ZERO  # sum of rho over zCDP charges
    conv_eps: Fraction = _ZERO  # the part of eps/delta/rho_implied from pure-DP charges
    conv_delta: Fraction = _ZERO
    conv_rho: Fraction = _ZERO

    def add(self, c: Charge, sign: int = 1) -> _Sums:
        eps, delta, rho = self.eps, self.delta, self.rho
        ce, cd, cr = self.conv_eps, self.conv_delta, self.conv_rho
        if c.rho is not None:
            rho += sign * Fraction(c.rho)
        else:
            eps += sign * Fraction(cast(float, c.epsilon))
            delta += sign * Fraction(cast(float, c.delta))
            if c.rho_implied is not None:
                ce += sign * Fraction(cast(float, c.epsilon))
                cd += sign * Fraction(cast(float, c.delta))
                cr += sign * Fraction(cast(float, c.rho_implied))
        return _Sums(eps, delta, rho, ce, cd, cr)


@dataclass(frozen=True)
class _Spent:
    analysis: str
    epsilon: Fraction
    delta: Fraction
    rho: Fraction


class Accountant:
    """A privacy budget (epsilon, delta) that releases are charged against.

    Parameters
    ----------
    epsilon : float
        Total epsilon budget, > 0.
    delta : float, default=0.0
        Total delta budget, 0 <= delta < 1. zCDP charges need delta > 0 (a zCDP guarantee
        implies no pure epsilon-DP guarantee).

    Attributes
    ----------
    epsilon, delta : float
        The budget (read-only).
    detached : bool
        True for a pickled copy, which refuses every charge (read-only; see below).

    Privacy
    -------
    Guarantee: the sequence of all releases charged to the accountant (chosen adaptively, each
    charged *before* it is made) is (``spent[0]``, ``spent[1]``)-DP, which never exceeds the
    budget. Neighbouring relation: the one every charged release was calibrated for; all
    charges to one accountant must use the same relation (add/remove or replace-one).

    How the total is computed (exact rational arithmetic on the doubles charged):

    * (epsilon, delta) charges compose by summation (basic sequential composition).
    * zCDP charges: their rho add up to R, converted with the tight conversion
      (:func:`dpcore.calibration.zcdp_epsilon`) at delta_R = the delta budget minus the summed
      delta of the (epsilon, delta) charges, so total = (sum eps_i + eps(R, delta_R), budget
      delta). All of the remaining delta goes to the conversion because that minimises the
      total epsilon; a later (epsilon, delta) charge takes its delta from that share (the whole
      history is re-analysed at every charge), so ``remaining[1]`` reads 0 after a zCDP charge
      even though further (epsilon, delta) charges can still be accepted.
    * Pure epsilon-DP charges are also eps**2/2-zCDP. Two analyses are computed: pure charges
      summed as epsilon ("basic"), and pure charges moved into R ("pure-as-zcdp", only when
      the delta budget allows a conversion); ``spent`` is the one with the smaller epsilon.
      Both are valid for the same releases, and the choice depends only on public parameters.
    * Parallel composition (:meth:`parallel`) and advanced composition (:meth:`charge_repeated`)
      record a single entry each.

    The budget check is exact but for one tolerance: a total may exceed the budget by a relative
    ``BUDGET_TOLERANCE`` (2**-40, about 9e-13). Decimal fractions are not exact in binary (the
    double 0.1 is slightly above 1/10), so without it ten charges of 0.1 would overspend a budget
    of 1.0; the tolerance covers that representation error for thousands of charges and changes
    the guarantee by a factor of at most 1 + 2**-40. :meth:`share` splits what remains exactly.

    Caveat: the guarantees of MCMC-based mechanisms hold only at stationarity; charging them
    here does not change that.

    Thread safety: a lock covers every check-and-charge, so concurrent charges never overspend.

    Copies, pickling and n_jobs: an accountant is a handle on one budget, so ``copy.copy(acc)``
    and ``copy.deepcopy(acc)`` return ``acc`` itself (sharing is the only sound copy; this also
    makes scikit-learn's ``clone`` share it). Pickling (``pickle``, joblib workers, e.g.
    ``cross_val_score(..., n_jobs=2)``) gives a *detached* copy: it keeps the budget and the
    history for reading (``spent``, ``remaining``, :meth:`report`, ``history``), but every
    charge on it (:meth:`charge`, :meth:`charge_repeated`, parallel block and partition charges)
    raises :class:`BudgetExceeded` and records nothing, because its charges would never reach the
    original budget. Releases must run in the process holding the original accountant
    (``n_jobs=1`` in scikit-learn). A detached copy pickled again stays detached.

    Examples
    --------
    >>> import dpcore
    >>> acc = dpcore.Accountant(1.0, 1e-6)
    >>> acc.charge(epsilon=0.5, label="count").epsilon
    0.5
    >>> acc.charge(rho=0.005, label="mean").rho
    0.005
    >>> eps, delta = acc.spent
    >>> 0.5 < eps <= 1.0 and delta == 1e-6
    True
    >>> try:
    ...     acc.charge(epsilon=0.6)
    ... except dpcore.BudgetExceeded:
    ...     print("refused")
    refused
    >>> len(acc.history)
    2
    >>> import copy, pickle
    >>> copy.deepcopy(acc) is acc
    True
    >>> pickle.loads(pickle.dumps(acc)).detached
    True
    """

    def __init__(self, epsilon, delta=0.0):
        self._epsilon = check.positive(epsilon, "epsilon")
        self._delta = check.probability(delta, "delta", open_low=False)
        self._budget_eps = Fraction(self._epsilon)
        self._budget_delta = Fraction(self._delta)
        # the limits a total is checked against (see BUDGET_TOLERANCE)
        self._limit_eps = self._budget_eps * (1 + BUDGET_TOLERANCE)
        self._limit_delta = self._budget_delta * (1 + BUDGET_TOLERANCE)
        self._lock = threading.RLock()
        self._history: list[Charge] = []
        self._sums = _Sums()
        self._spent = _Spent("basic", _ZERO, _ZERO, _ZERO)
        self._detached = False

    # ----------------------------------------------------------------------------------------
    # reading

    @property
    def epsilon(self):
        """The epsilon budget (read-only)."""
        return self._epsilon

    @property
    def delta(self):
        """The delta budget (read-only)."""
        return self._delta

    @property
    def detached(self):
        """True for a pickled copy: it reads as the original did but refuses every charge."""
        return self._detached

    @property
    def budget(self):
        """(epsilon, delta) budget."""
        return (self.epsilon, self.delta)

    @property
    def spent(self):
        """(epsilon, delta) guarantee of everything charged so far, each rounded up."""
        with self._lock:
            return (_up(self._spent.epsilon), _up(self._spent.delta))

    @property
    def remaining(self):
        """(budget - spent) for epsilon and delta, each rounded down and >= 0."""
        with self._lock:
            eps = max(self._budget_eps - self._spent.epsilon, _ZERO)
            delta = max(self._budget_delta - self._spent.delta, _ZERO)
            return (_down(eps), _down(delta))

    @property
    def history(self):
        """List (a copy) of the :class:`Charge` entries, oldest first."""
        with self._lock:
            return list(self._history)

    def share(self, k):
        """The largest epsilon e such that k further pure charges of e fit the remaining budget.

        Computed exactly (k * e <= remaining epsilon as rationals), so splitting a budget with it
        never fails for rounding reasons.

        Parameters
        ----------
        k : int
            Number of equal charges, >= 1.

        Returns
        -------
        float

        Examples
        --------
        >>> import dpcore
        >>> acc = dpcore.Accountant(1.0)
        >>> e = acc.share(10)
        >>> for _ in range(10):
        ...     _ = acc.charge(epsilon=e)
        >>> acc.spent[0] <= 1.0
        True
        """
        k = check.integer(k, "k", minimum=1)
        with self._lock:
            return _down(max(self._budget_eps - self._spent.epsilon, _ZERO) / k)

    def report(self):
        """A JSON-friendly summary: budget, spent, remaining, the analysis used, the history.

        Returns
        -------
        dict
            Keys ``budget``, ``spent``, ``remaining`` (each ``{"epsilon": ..., "delta": ...}``),
            ``analysis`` ("basic" or "pure-as-zcdp"), ``rho`` (the zCDP total of that
            analysis), ``charges`` (count) and ``history`` (list of dicts).

        Examples
        --------
        >>> import dpcore
        >>> acc = dpcore.Accountant(1.0)
        >>> _ = acc.charge(epsilon=0.25, label="count")
        >>> r = acc.report()
        >>> r["spent"], r["remaining"]
        ({'epsilon': 0.25, 'delta': 0.0}, {'epsilon': 0.75, 'delta': 0.0})
        """
        with self._lock:
            spent, remaining = self.spent, self.remaining
            return {
                "budget": {"epsilon": self.epsilon, "delta": self.delta},
                "spent": {"epsilon": spent[0], "delta": spent[1]},
                "remaining": {"epsilon": remaining[0], "delta": remaining[1]},
                "analysis": self._spent.analysis,
                "rho": _up(self._spent.rho),
                "charges": len(self._history),
                "history": [asdict(c) for c in self._history],
            }

    def __copy__(self):
        """The accountant itself: a copy with its own budget would duplicate the budget."""
        return self

    def __deepcopy__(self, memo):
        """The accountant itself (see ``__copy__``)."""
        return self

    def __getstate__(self):
        """Pickling gives a detached copy: the budget and the history for reading, no charges
        (charges on it could not reach the original budget)."""
        with self._lock:
            state = self.__dict__.copy()
        del state["_lock"]
        state["_detached"] = True
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._detached = True  # whatever the pickle says: an unpickled accountant is a copy
        self._lock = threading.RLock()

    def __repr__(self):
        eps, delta = self.spent
        return (
            f"Accountant(epsilon={self.epsilon!r}, delta={self.delta!r}; "
            f"spent=({eps!r}, {delta!r}), charges={len(self._history)}"
            f"{', detached' if self._detached else ''})"
        )

    # ----------------------------------------------------------------------------------------
    # charging

    def charge(self, epsilon=None, delta=None, *, rho=None, label=None):
        """Charge one release: (epsilon, delta)-DP, or rho-zCDP.

        Parameters
        ----------
        epsilon : float, optional
            >= 0. Give epsilon (and optionally delta) or rho, not both.
        delta : float, optional
            0 <= delta < 1; default 0 (pure DP).
        rho : float, optional
            zCDP parameter, >= 0.
        label : str, optional
            Names the release in the history.

        Returns
        -------
        Charge
            The recorded entry.

        Raises
        ------
        BudgetExceeded
            If the total would exceed the budget, or the accountant is detached (a pickled
            copy); nothing is recorded.
        ValueError, TypeError
            Invalid parameters (naming the parameter).
        """
        entry = self._make_entry(epsilon, delta, rho, label)
        with self._lock:
            self._commit(entry)
        return entry

    def charge_repeated(self, epsilon, delta=0.0, *, k, delta_prime=None, label=None):
        """Charge k adaptively chosen releases, each (epsilon, delta)-DP, as one entry.

        The entry is the better of basic composition (k epsilon, k delta) and, when
        ``delta_prime`` is given, advanced composition (Dwork-Rothblum-Vadhan:
        epsilon sqrt(2 k ln(1/delta')) + k epsilon (e^epsilon - 1), k delta + delta'): the one with
        the smaller epsilon that fits the budget. Charge before the first of the k releases and
        do not charge them again individually.

        Parameters
        ----------
        epsilon : float
            Per-release epsilon, >= 0.
        delta : float, default=0.0
            Per-release delta, 0 <= delta < 1.
        k : int
            Number of releases, >= 1.
        delta_prime : float, optional
            0 < delta_prime < 1; enables advanced composition.
        label : str, optional

        Returns
        -------
        Charge

        Raises
        ------
        BudgetExceeded
            If neither composition fits, or the accountant is detached; nothing is recorded.

        Examples
        --------
        >>> import dpcore
        >>> acc = dpcore.Accountant(8.0, 1e-5)
        >>> c = acc.charge_repeated(0.1, k=100, delta_prime=1e-6)
        >>> c.composition, round(c.epsilon, 3), c.delta
        ('advanced', 6.308, 1e-06)
        """
        epsilon = check.privacy_loss(epsilon, "epsilon", check.MAX_EPSILON)
        delta = check.probability(delta, "delta", open_low=False)
        k = check.integer(k, "k", minimum=1)
        if delta_prime is not None:
            delta_prime = check.probability(delta_prime, "delta_prime")
        label = self._check_label(label)
        pure = delta == 0.0
        rho_implied = _up(k * Fraction(epsilon) ** 2 / 2) if pure else None
        candidates = [
            Charge(_up(k * Fraction(epsilon)), min(1.0, _up(k * Fraction(delta))), None, label,
                   "repeated", k, "basic", rho_implied)
        ]
        if delta_prime is not None:
            eps_adv, delta_adv = calibration.advanced_composition(epsilon, delta, k, delta_prime)
            candidates.append(
                Charge(eps_adv, delta_adv, None, label, "repeated", k, "advanced", rho_implied)
            )
        candidates.sort(key=lambda c: (c.epsilon, c.delta))
        with self._lock:
            for i, entry in enumerate(candidates):
                try:
                    self._commit(entry)
                except BudgetExceeded:
                    if i == len(candidates) - 1:
                        raise
                else:
                    return entry
        raise AssertionError("unreachable")  # pragma: no cover

    def parallel(self, label=None):
        """A block for releases on disjoint partitions of the data (parallel composition).

        Inside ``with acc.parallel() as block:``, open one ``block.partition()`` per partition
        and charge every release on that partition to it (``part.charge(...)``, or pass
        ``accountant=part`` to a release function): charges on one partition add up. The
        accountant holds one entry for the whole block: the maximum over partitions of each
        partition's total (epsilon and delta maxima, or the rho maximum). ``block.charge(...)``
        is one release on a partition of its own (``block.partition().charge(...)``). Each
        charge is checked and recorded when it is made (so a release is never made unpaid) and
        nothing is refunded if the block ends early or by an exception.

        Parameters
        ----------
        label : str, optional
            Names the block's entry in the history.

        Returns
        -------
        ParallelBlock

        Privacy
        -------
        Valid only if the partitions are disjoint and each record's partition is decided by a
        public rule applied to that record alone (e.g. a public attribute such as a sector or a
        fixed grid cell), never by the data set as a whole. Under add/remove neighbours one
        record touches one partition, so the block costs the maximum over partitions of what
        that partition's releases cost together. Several releases on one partition (a learner
        that charges each of its statistics, a pipeline of two private steps) compose
        sequentially on it: charge them to one ``block.partition()``, where epsilons and deltas
        (or rhos) sum; charged to the block directly, each would count as a partition of its
        own and the block would be under-charged. Under replace-one neighbours a changed record
        can move between two partitions: charge twice the block (or use add/remove
        sensitivities). Charges in one block must all be (epsilon, delta) charges or all zCDP
        charges.

        Examples
        --------
        >>> import dpcore
        >>> acc = dpcore.Accountant(1.0)
        >>> with acc.parallel(label="per-sector counts") as block:
        ...     for eps in (0.5, 0.3, 0.5):
        ...         _ = block.charge(epsilon=eps)     # one release per sector
        >>> acc.spent
        (0.5, 0.0)
        >>> acc.history[-1].count
        3

        Two releases on each sector: they add up on their partition.

        >>> acc = dpcore.Accountant(1.0)
        >>> with acc.parallel(label="per-sector mean and count") as block:
        ...     for sector in ("a", "b", "c"):
        ...         with block.partition(label=sector) as part:
        ...             _ = part.charge(epsilon=0.25, label="sum")
        ...             _ = part.charge(epsilon=0.125, label="count")
        >>> acc.spent
        (0.375, 0.0)
        >>> acc.history[-1].count
        3
        """
        return ParallelBlock(self, self._check_label(label))

    # ----------------------------------------------------------------------------------------
    # internals

    @staticmethod
    def _check_label(label):
        if label is not None and not isinstance(label, str):
            raise TypeError(f"label must be a str or None, got {type(label).__name__}")
        return label

    def _make_entry(self, epsilon, delta, rho, label, kind="single"):
        label = self._check_label(label)
        if rho is not None:
            if epsilon is not None or delta is not None:
                raise ValueError("give either rho (zCDP) or epsilon and delta, not both")
            rho = check.privacy_loss(rho, "rho", check.MAX_RHO)
            return Charge(None, None, rho, label, kind)
        if epsilon is None:
            raise ValueError("epsilon (with optional delta) or rho is required")
        epsilon = check.privacy_loss(epsilon, "epsilon", check.MAX_EPSILON)
        delta = 0.0 if delta is None else check.probability(delta, "delta", open_low=False)
        rho_implied = _up(Fraction(epsilon) ** 2 / 2) if delta == 0.0 else None
        return Charge(epsilon, delta, None, label, kind, 1, None, rho_implied)

    def _analysis(self, name, eps, delta, rho):
        """Total (epsilon, delta) for given exact sums, or None when no conversion exists."""
        if rho == 0:
            return _Spent(name, eps, delta, rho)
        room = _down(self._budget_delta - delta)
        if not room > 0.0:
            return None
        eps_rho = calibration.zcdp_epsilon(_up(rho), room)
        # delta + room <= the delta budget; report the budget (an upper bound, and what the
        # analysis is entitled to use) rather than a value an ulp below it.
        return _Spent(name, eps + Fraction(eps_rho), self._budget_delta, rho)

    def _evaluate(self, sums):
        options = [self._analysis("basic", sums.eps, sums.delta, sums.rho)]
        if sums.conv_rho > 0 and self._budget_delta > 0:
            options.append(self._analysis(
                "pure-as-zcdp", sums.eps - sums.conv_eps, sums.delta - sums.conv_delta,
                sums.rho + sums.conv_rho,
            ))
        options = [o for o in options if o is not None]
        if not options:
            return None
        return min(options, key=lambda o: (o.epsilon, o.delta))

    def _commit(self, entry, replace_index=None):
        """Check the history with ``entry`` added (or replacing one entry) and record it.
        Must be called with the lock held."""
        sums = self._sums.add(entry)
        if replace_index is not None:
            sums = sums.add(self._history[replace_index], sign=-1)
        spent = self._evaluate(sums)
        total = (math.inf, self.delta) if spent is None else (_up(spent.epsilon), _up(spent.delta))
        what = (f"rho={entry.rho!r}" if entry.rho is not None
                else f"epsilon={entry.epsilon!r}, delta={entry.delta!r}")
        what += f" ({entry.label})" if entry.label else ""
        if self._detached:
            raise BudgetExceeded(
                f"charge {what} refused: this accountant is a pickled copy (detached), and its "
                "charges would not reach the original budget; releases must run in the process "
                "holding the original accountant (n_jobs=1 in scikit-learn); nothing was charged",
                charge=entry, spent=total, budget=self.budget,
            )
        if (spent is None or spent.epsilon > self._limit_eps or spent.delta > self._limit_delta):
            if spent is None:
                why = ("zCDP charges need a delta budget left for the conversion to "
                       "(epsilon, delta)" if self._budget_delta > sums.delta else
                       "the delta budget is exhausted")
            else:
                why = f"the total would be epsilon={total[0]!r}, delta={total[1]!r}"
            raise BudgetExceeded(
                f"charge {what} refused: {why}, over the budget epsilon={self.epsilon!r}, "
                f"delta={self.delta!r}; nothing was charged",
                charge=entry, spent=total, budget=self.budget,
            )
        self._sums = sums
        self._spent = spent
        if replace_index is None:
            self._history.append(entry)
            return len(self._history) - 1
        self._history[replace_index] = entry
        return replace_index


@dataclass(frozen=True)
class _PartSum:
    """Exact totals of one partition's charges (basic composition: everything sums)."""

    n: int = 0  # number of charges
    zcdp: bool = False  # rho charges (a block never mixes the two kinds)
    eps: Fraction = _ZERO
    delta: Fraction = _ZERO
    rho: Fraction = _ZERO
    rho_implied: Fraction | None = _ZERO  # sum of eps**2 / 2; None after a delta > 0 charge

    def add(self, c: Charge) -> _PartSum:
        if c.rho is not None:
            return _PartSum(self.n + 1, True, rho=self.rho + Fraction(c.rho), rho_implied=None)
        implied = None
        if self.rho_implied is not None and c.delta == 0.0:
            implied = self.rho_implied + Fraction(cast(float, c.epsilon)) ** 2 / 2
        return _PartSum(self.n + 1, False, self.eps + Fraction(cast(float, c.epsilon)),
                        self.delta + Fraction(cast(float, c.delta)), _ZERO, implied)


def _max_implied(a, b):
    return None if a is None or b is None else max(a, b)


class ParallelBlock:
    """Charges for releases on disjoint partitions; see :meth:`Accountant.parallel`.

    Use as a context manager. :meth:`partition` opens a partition whose charges sum;
    :meth:`charge` (the signature of :meth:`Accountant.charge`, so a block can be passed as
    ``accountant=`` to release functions) is one release on a partition of its own.
    """

    def __init__(self, accountant, label=None):
        self._acc = accountant
        self._label = label
        self._index = None
        self._entry = None
        self._closed = False
        self._zcdp = None  # kind of the block's charges, fixed by the first accepted one
        # maxima over partitions of their exact totals; partitions' totals only grow, so the
        # maxima are updated from the partition charged
        self._count = 0
        self._max = _PartSum()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self._closed = True
        return False

    @property
    def entry(self):
        """The block's current :class:`Charge` (None before the first partition charge)."""
        return self._entry

    def _check_open(self):
        if self._closed:
            raise RuntimeError("this parallel block is closed; open a new one with accountant.parallel()")

    def partition(self, label=None):
        """Open a partition of the block: the charges made on it add up.

        Parameters
        ----------
        label : str, optional
            Names the partition (shown in its repr).

        Returns
        -------
        Partition
            Pass it as ``accountant=`` to every release on this partition, or use
            ``with block.partition() as part:``.

        Raises
        ------
        RuntimeError
            If the block has been closed.
        """
        label = self._acc._check_label(label)
        self._check_open()
        return Partition(self, label)

    def charge(self, epsilon=None, delta=None, *, rho=None, label=None):
        """Charge one release on a partition of its own (``self.partition().charge(...)``);
        the block's entry becomes the maximum over partitions.

        Returns
        -------
        Charge
            The block's entry after this charge.

        Raises
        ------
        BudgetExceeded
            If the raised maximum does not fit, or the accountant is detached; nothing changes.
        RuntimeError
            If the block has been closed.
        ValueError
            When mixing zCDP and (epsilon, delta) charges in one block, or invalid parameters.
        """
        return self.partition().charge(epsilon, delta, rho=rho, label=label)

    def charge_partitions(self, charges, labels=None):
        """Charge several new partitions at once, all or nothing.

        Parameters
        ----------
        charges : list of list of dict
            ``charges[i]`` holds partition i's charges, each a dict of :meth:`charge`'s keyword
            arguments (``epsilon``, ``delta``, ``rho``, ``label``).
        labels : list of str, optional
            Names of the partitions.

        Returns
        -------
        list of Partition
            The partitions, charged (more charges may follow on them).

        Raises
        ------
        BudgetExceeded
            If the block's new maximum does not fit; nothing is charged on any partition.
        ValueError, TypeError, RuntimeError
            As :meth:`charge`, before anything is charged.
        """
        labels = [None] * len(charges) if labels is None else list(labels)
        if len(labels) != len(charges):
            raise ValueError("labels must have one entry per partition")
        parts = [self.partition(label) for label in labels]
        entries = [[self._acc._make_entry(c.get("epsilon"), c.get("delta"), c.get("rho"),
                                          c.get("label")) for c in cs] for cs in charges]
        with self._acc._lock:
            self._check_open()
            count, m, zcdp = self._count, self._max, self._zcdp
            totals = []
            for part, cs in zip(parts, entries):
                total = part._sum
                for c in cs:
                    zcdp = self._kind(zcdp, c)
                    total = total.add(c)
                count += total.n > 0
                m = self._raised(m, total, zcdp)
                totals.append(total)
            if count == self._count:   # nothing charged
                return parts
            new = self._block_entry(m, count, zcdp)
            self._index = self._acc._commit(new, replace_index=self._index)
            for part, total in zip(parts, totals):
                part._sum = total
            self._count, self._max, self._zcdp, self._entry = count, m, zcdp, new
        return parts

    @staticmethod
    def _kind(zcdp, c):
        """The block's kind after charge ``c`` (a block never mixes zCDP and (epsilon, delta))."""
        kind = c.rho is not None
        if zcdp is not None and zcdp != kind:
            raise ValueError(
                "cannot mix zCDP (rho) and (epsilon, delta) charges in one parallel block"
            )
        return kind

    @staticmethod
    def _raised(m, total, zcdp):
        """The maxima over partitions once a partition's total is ``total``."""
        if zcdp:
            return _PartSum(rho=max(m.rho, total.rho), rho_implied=None)
        return _PartSum(eps=max(m.eps, total.eps), delta=max(m.delta, total.delta),
                        rho_implied=_max_implied(m.rho_implied, total.rho_implied))

    def _block_entry(self, m, count, zcdp):
        if zcdp:
            return Charge(None, None, _up(m.rho), self._label, "parallel", count)
        implied = None if m.rho_implied is None else _up(m.rho_implied)
        return Charge(_up(m.eps), min(1.0, _up(m.delta)), None, self._label, "parallel", count,
                      None, implied)

    def _charge(self, part, epsilon, delta, rho, label):
        """Add a charge to ``part``'s total and re-record the block's entry (see
        :meth:`Partition.charge`)."""
        self._check_open()
        part._check_open()
        c = self._acc._make_entry(epsilon, delta, rho, label)
        with self._acc._lock:
            self._check_open()
            part._check_open()
            zcdp = self._kind(self._zcdp, c)
            total = part._sum.add(c)
            count = self._count + (part._sum.n == 0)
            m = self._raised(self._max, total, zcdp)
            new = self._block_entry(m, count, zcdp)
            self._index = self._acc._commit(new, replace_index=self._index)
            part._sum = total
            self._count, self._max, self._zcdp, self._entry = count, m, zcdp, new
        return new


class Partition:
    """One partition of a :class:`ParallelBlock`; open it with :meth:`ParallelBlock.partition`.

    The charges on a partition compose sequentially (basic composition: epsilons sum, deltas
    sum; or rhos sum), and the block's entry is the maximum of the partitions' totals. Charge
    every release that reads this partition's records here. :meth:`charge` has the signature
    of :meth:`Accountant.charge`, so a partition can be passed as ``accountant=`` to release
    functions. Usable as a context manager: leaving the ``with`` closes the partition (later
    charges raise ``RuntimeError``), as does closing its block.

    Attributes
    ----------
    label : str or None
    block : ParallelBlock
    total : Charge or None
        This partition's charges composed (``kind="repeated"``, ``composition="basic"``,
        ``count`` charges); None before the first charge.
    """

    def __init__(self, block, label=None):
        self._block = block
        self._label = label
        self._sum = _PartSum()
        self._closed = False

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self._closed = True
        return False

    def __repr__(self):
        label = f"{self._label!r}, " if self._label is not None else ""
        t = self.total
        what = "no charges" if t is None else (
            f"rho={t.rho!r}" if t.rho is not None else f"epsilon={t.epsilon!r}, delta={t.delta!r}")
        return f"Partition({label}{what}{', closed' if self._closed else ''})"

    @property
    def label(self):
        return self._label

    @property
    def block(self):
        return self._block

    @property
    def total(self):
        with self._block._acc._lock:
            t = self._sum
        if t.n == 0:
            return None
        if t.zcdp:
            return Charge(None, None, _up(t.rho), self._label, "repeated", t.n, "basic")
        implied = None if t.rho_implied is None else _up(t.rho_implied)
        return Charge(_up(t.eps), min(1.0, _up(t.delta)), None, self._label, "repeated", t.n,
                      "basic", implied)

    def _check_open(self):
        if self._closed:
            raise RuntimeError("this partition is closed; open a new one with block.partition()")

    def charge(self, epsilon=None, delta=None, *, rho=None, label=None):
        """Charge one release on this partition; its total grows by the charge.

        Parameters are those of :meth:`Accountant.charge`.

        Returns
        -------
        Charge
            The block's entry after this charge.

        Raises
        ------
        BudgetExceeded
            If the block's new maximum does not fit the budget, or the accountant is detached;
            nothing changes (neither this partition's total nor the block's entry).
        RuntimeError
            If this partition or its block has been closed.
        ValueError
            When mixing zCDP and (epsilon, delta) charges in one block, or invalid parameters.
        """
        return self._block._charge(self, epsilon, delta, rho, label)


#: What ``accountant`` accepts in every release (besides None): each has ``charge``.
AccountantLike = Union[Accountant, ParallelBlock, Partition]
