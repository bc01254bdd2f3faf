"""Privacy budget accounting: charge releases, refuse overspending, report what was spent.

An :class:`Accountant` holds a budget (epsilon, delta) and a history of charges. Each release is
charged *before* it is made; a charge that would overspend raises :class:`BudgetExceeded` and
records nothing, so the release is never made. Supported compositions:

* sequential (basic) composition of pure and approximate DP charges (summation);
* rho-zCDP charges (summed, converted to (epsilon, delta) with the tight conversion);
* parallel composition over disjoint partitions (:meth:`Accountant.parallel`);
* advanced composition of k repeated releases (:meth:`Accountant.charge_repeated`).

All sums are kept exactly (as the rationals the doubles represent) and the budget check is
exact; the accountant's decisions depend only on the public charge parameters, never on data.
"""
from __future__ import annotations

import math
import threading
from dataclasses import asdict, dataclass
from fractions import Fraction

from dpcore import _validation as check
from dpcore import calibration
from dpcore._floats import round_down as _down, round_up as _up

__all__ = ["Accountant", "BudgetExceeded", "Charge", "ParallelBlock"]

_ZERO = Fraction(0)
#: Relative amount by which a total may exceed the budget: the binary representation error of
#: decimal fractions such as 0.1, summed over up to ~10**4 charges (see Accountant).
BUDGET_TOLERANCE = Fraction(1, 2**40)


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
        One release; the maximum over disjoint partitions (``count`` partitions); or ``count``
        repetitions composed (basic or advanced, see ``composition``).
    count : int
        Number of partitions (parallel) or repetitions (repeated); 1 for a single release.
    composition : {"basic", "advanced"} or None
        For a repeated charge: which composition theorem gave its (epsilon, delta).
    rho_implied : float or None
        For charges that are pure DP release by release (delta = 0 for each release): the zCDP
        parameter they also satisfy (epsilon**2 / 2 per release, summed over repetitions, max
        over partitions). The accountant may count them this way when it is tighter.
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
            eps += sign * Fraction(c.epsilon)
            delta += sign * Fraction(c.delta)
            if c.rho_implied is not None:
                ce += sign * Fraction(c.epsilon)
                cd += sign * Fraction(c.delta)
                cr += sign * Fraction(c.rho_implied)
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

    def __getstate__(self):
        """Pickling copies the budget and the history (not the lock): the copy is a separate
        accountant, so charges to it do not reach the original."""
        with self._lock:
            state = self.__dict__.copy()
        del state["_lock"]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.RLock()

    def __repr__(self):
        eps, delta = self.spent
        return (
            f"Accountant(epsilon={self.epsilon!r}, delta={self.delta!r}; "
            f"spent=({eps!r}, {delta!r}), charges={len(self._history)})"
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
            If the total would exceed the budget; nothing is recorded.
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
            If neither composition fits; nothing is recorded.

        Examples
        --------
        >>> import dpcore
        >>> acc = dpcore.Accountant(8.0, 1e-5)
        >>> c = acc.charge_repeated(0.1, k=100, delta_prime=1e-6)
        >>> c.composition, round(c.epsilon, 3), c.delta
        ('advanced', 6.308, 1e-06)
        """
        epsilon = check.nonnegative(epsilon, "epsilon")
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

        Inside ``with acc.parallel() as block:``, charge each partition's release to ``block``
        (``block.charge(...)``, or pass ``accountant=block`` to a release function). The
        accountant holds one entry for the whole block: the maximum epsilon and delta (or rho)
        over the partitions charged so far. Each partition charge is checked and recorded when
        it is made (so a release is never made unpaid) and nothing is refunded if the block ends
        early or by an exception.

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
        record touches one partition, so the block costs the maximum over partitions. Under
        replace-one neighbours a changed record can move between two partitions: charge twice
        the block (or use add/remove sensitivities). Partitions charged in one block must all be
        (epsilon, delta) charges or all zCDP charges.

        Examples
        --------
        >>> import dpcore
        >>> acc = dpcore.Accountant(1.0)
        >>> with acc.parallel(label="per-sector counts") as block:
        ...     for eps in (0.5, 0.3, 0.5):
        ...         _ = block.charge(epsilon=eps)
        >>> acc.spent
        (0.5, 0.0)
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
            rho = check.nonnegative(rho, "rho")
            return Charge(None, None, rho, label, kind)
        if epsilon is None:
            raise ValueError("epsilon (with optional delta) or rho is required")
        epsilon = check.nonnegative(epsilon, "epsilon")
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
        if (spent is None or spent.epsilon > self._limit_eps or spent.delta > self._limit_delta):
            if spent is None:
                total = (math.inf, self.delta)
                why = ("zCDP charges need a delta budget left for the conversion to "
                       "(epsilon, delta)" if self._budget_delta > sums.delta else
                       "the delta budget is exhausted")
            else:
                total = (_up(spent.epsilon), _up(spent.delta))
                why = f"the total would be epsilon={total[0]!r}, delta={total[1]!r}"
            what = (f"rho={entry.rho!r}" if entry.rho is not None
                    else f"epsilon={entry.epsilon!r}, delta={entry.delta!r}")
            raise BudgetExceeded(
                f"charge {what}{' (' + entry.label + ')' if entry.label else ''} refused: {why}, "
                f"over the budget epsilon={self.epsilon!r}, delta={self.delta!r}; nothing was charged",
                charge=entry, spent=total, budget=self.budget,
            )
        self._sums = sums
        self._spent = spent
        if replace_index is None:
            self._history.append(entry)
            return len(self._history) - 1
        self._history[replace_index] = entry
        return replace_index


class ParallelBlock:
    """Charges for releases on disjoint partitions; see :meth:`Accountant.parallel`.

    Use as a context manager; :meth:`charge` has the signature of :meth:`Accountant.charge`,
    so a block can be passed as ``accountant=`` to release functions.
    """

    def __init__(self, accountant, label=None):
        self._acc = accountant
        self._label = label
        self._index = None
        self._entry = None
        self._closed = False

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self._closed = True
        return False

    @property
    def entry(self):
        """The block's current :class:`Charge` (None before the first partition charge)."""
        return self._entry

    def charge(self, epsilon=None, delta=None, *, rho=None, label=None):
        """Charge one partition's release; the block's entry becomes the maximum so far.

        Returns
        -------
        Charge
            The block's entry after this charge.

        Raises
        ------
        BudgetExceeded
            If the raised maximum does not fit; nothing changes.
        RuntimeError
            If the block has been closed.
        ValueError
            When mixing zCDP and (epsilon, delta) charges in one block, or invalid parameters.
        """
        if self._closed:
            raise RuntimeError("this parallel block is closed; open a new one with accountant.parallel()")
        part = self._acc._make_entry(epsilon, delta, rho, label)
        with self._acc._lock:
            old = self._entry
            if old is None:
                count = 1
                if part.rho is not None:
                    new = Charge(None, None, part.rho, self._label, "parallel", count)
                else:
                    new = Charge(part.epsilon, part.delta, None, self._label, "parallel", count,
                                 None, part.rho_implied)
            else:
                if (old.rho is None) != (part.rho is None):
                    raise ValueError(
                        "cannot mix zCDP (rho) and (epsilon, delta) charges in one parallel block"
                    )
                count = old.count + 1
                if part.rho is not None:
                    new = Charge(None, None, max(old.rho, part.rho), self._label, "parallel",
                                 count)
                else:
                    implied = None
                    if old.rho_implied is not None and part.rho_implied is not None:
                        implied = max(old.rho_implied, part.rho_implied)
                    new = Charge(max(old.epsilon, part.epsilon), max(old.delta, part.delta), None,
                                 self._label, "parallel", count, None, implied)
            self._index = self._acc._commit(new, replace_index=self._index)
            self._entry = new
        return new
