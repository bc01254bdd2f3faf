"""The accountant: a budget, a history, and the check-and-charge that refuses overspending."""
from __future__ import annotations

import math
import threading
from dataclasses import asdict
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from dpcore import _validation as check
from dpcore import calibration
from dpcore._floats import round_down as _down, round_up as _up
from dpcore.accounting._composition import (PldComposition, RdpComposition, Spent,
                                            ZcdpComposition, _CurveCache)
from dpcore.accounting._entries import BUDGET_TOLERANCE, BudgetExceeded, Charge, implied_rho
from dpcore.accounting._parallel import ParallelBlock
from dpcore.curves import (DEFAULT_INTERVAL, DEFAULT_ORDERS, ApproxDP, PrivacyCurve, PureDP,
                           check_orders)

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

_ZERO = Fraction(0)
#: The composition methods of :class:`Accountant` (``method=``).
METHODS = ("zcdp", "rdp", "pld")


class Accountant:
    """A privacy budget (epsilon, delta) that releases are charged against.

    Parameters
    ----------
    epsilon : float
        Total epsilon budget, > 0.
    delta : float, optional
        Total delta budget, 0 <= delta < 1; None (the default) or 0 for a pure epsilon-DP
        budget (read back as 0.0). zCDP charges need delta > 0 (a zCDP guarantee implies no
        pure epsilon-DP guarantee).
    method : {"zcdp", "rdp", "pld"}, default="zcdp"
        How charges compose (see Privacy). ``"zcdp"``: (epsilon, delta) charges by summation,
        rho charges in zCDP. ``"rdp"`` and ``"pld"``: the charges' privacy curves (a release
        states its curve when it charges; a plain charge composes as its (epsilon, delta) or
        rho) in Rényi DP, or as privacy-loss distributions composed by FFT. Every method also
        runs the ``"zcdp"`` analysis and reports the smaller total.
    orders : sequence of float, optional
        Rényi orders (> 1) of ``method="rdp"`` and ``"pld"``; default
        :data:`dpcore.curves.DEFAULT_ORDERS` (1.1 .. 1024).
    pld_interval : float, default=1e-4
        Grid step of the privacy-loss distributions (``method="pld"``), in (0, 1].

    Attributes
    ----------
    epsilon, delta : float
        The budget (read-only).
    method : str
        The composition method (read-only).
    detached : bool
        True for a pickled copy, which refuses every charge (read-only; see below).

    Privacy
    -------
    Guarantee: the sequence of all releases charged to the accountant (chosen adaptively, each
    charged *before* it is made) is (``spent[0]``, ``spent[1]``)-DP, which never exceeds the
    budget. Neighbouring relation: the one every charged release was calibrated for; all
    charges to one accountant must use the same relation (add/remove or replace-one).

    How the total is computed with ``method="zcdp"`` (exact rational arithmetic on the doubles
    charged):

    * (epsilon, delta) charges compose by summation (basic sequential composition).
    * zCDP charges: their rho add up to R, converted with the tight conversion
      (:func:`dpcore.calibration.zcdp_epsilon`) at delta_R = the delta budget minus the summed
      delta of the (epsilon, delta) charges, so total = (sum eps_i + eps(R, delta_R), budget
      delta). All of the remaining delta goes to the conversion because that minimises the
      total epsilon; a later (epsilon, delta) charge takes its delta from that share (the whole
      history is re-analysed at every charge), so ``remaining[1]`` reads 0 after a zCDP charge
      even though further (epsilon, delta) charges can still be accepted.
    * Pure epsilon-DP charges are also zCDP: eps**2/2 (Bun-Steinke 2016, Prop. 1.4), or less
      when the charge carries a curve that says so (``curve.implied_rho()``,
      ``Charge.rho_implied``): a :class:`~dpcore.curves.BoundedRange` curve, which the
      exponential mechanism and top-k state (:func:`dpcore.exponential`, :func:`dpcore.top_k`,
      ``ExponentialMechanism.cost``), counts eps**2/8 (an eps-bounded-range mechanism is
      eps**2/8-zCDP, Cesar-Rogers 2021; proof in ``BoundedRange.implied_rho``), a quarter
      of the rho, so k selections convert like a Gaussian composition of rho = k eps**2/8.
      Three analyses are computed: pure charges summed as epsilon ("basic"); pure charges
      moved into R ("pure-as-zcdp"); only the charges counted at their curve's bound moved
      into R, the other pure charges summed ("curves-as-zcdp"; the zCDP ones need a delta
      budget for the conversion). ``spent`` is the one with the smaller epsilon, named in
      ``report()["analysis"]``. All are valid for the same releases, and the choice depends
      only on public parameters; a plain ``charge(epsilon=...)`` without a curve counts
      eps**2/2 as before.
    * Parallel composition (:meth:`parallel`) and advanced composition (:meth:`charge_repeated`)
      record a single entry each; the zCDP bound of a block is the maximum over partitions of
      each partition's summed bounds (curves included), that of ``charge_repeated`` k times
      one release's (its ``curve=`` included).

    With ``method="rdp"``: each charge's curve (``Charge.curve``, else PureDP(epsilon),
    ApproxDP(epsilon, delta) or ZCDP(rho)) gives an RDP bound per order; the bounds add up and
    are converted once with the improved conversion (Balle et al. 2020, Canonne-Kamath-Steinke
    2020) at the best order, with the delta budget minus the delta of the charges that have no
    RDP bound (delta > 0; those are summed as (epsilon, delta)). Pure charges are tried both in
    the RDP sum and summed as epsilon beside it. With ``method="pld"``: the charges with a
    dominating pair compose as privacy-loss distributions (pessimistic grid of step
    ``pld_interval``, connect-the-dots split, FFT convolution; Gaussian curves merged exactly
    first); those without one (zCDP, the discrete Gaussian) compose in RDP, and the two parts
    are joined by splitting delta between them; the RDP analysis is run too. These analyses
    assume each release's curve (its privacy parameters) is fixed before the releases start,
    the releases themselves may depend on earlier outputs; parameters chosen from earlier
    outputs are covered by the ``"zcdp"`` analysis (basic and zCDP composition are valid for
    adaptively chosen parameters), not by RDP/PLD conversions optimised after the fact. All
    curves must state the same neighbouring relation (or none).

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

    def __init__(self, epsilon: float, delta: float | None = None, *, method: str = "zcdp",
                 orders: ArrayLike | None = None, pld_interval: float = DEFAULT_INTERVAL) -> None:
        self._epsilon = check.positive(epsilon, "epsilon")
        self._delta = 0.0 if delta is None else check.probability(delta, "delta", open_low=False)
        if method not in METHODS:
            raise ValueError(f"method must be 'zcdp', 'rdp' or 'pld', got {method!r}")
        self._method = method
        orders = check_orders(DEFAULT_ORDERS if orders is None else orders)
        pld_interval = check.positive(pld_interval, "pld_interval")
        if pld_interval > 1.0:
            raise ValueError(f"pld_interval must be <= 1, got {pld_interval!r}")
        self._budget_eps = Fraction(self._epsilon)
        self._budget_delta = Fraction(self._delta)
        # the limits a total is checked against (see BUDGET_TOLERANCE)
        self._limit_eps = self._budget_eps * (1 + BUDGET_TOLERANCE)
        self._limit_delta = self._budget_delta * (1 + BUDGET_TOLERANCE)
        self._lock = threading.RLock()
        self._history: list[Charge] = []
        cache = _CurveCache(orders, pld_interval)
        self._analyses: list = [ZcdpComposition()]
        if method in ("rdp", "pld"):
            self._analyses.append(RdpComposition(cache))
        if method == "pld":
            self._analyses.append(PldComposition(cache))
        self._relation = None  # the neighbouring relation the curves charged so far state
        self._spent = Spent("basic", _ZERO, _ZERO, _ZERO)
        self._detached = False

    # ----------------------------------------------------------------------------------------
    # reading

    @property
    def epsilon(self) -> float:
        """The epsilon budget (read-only)."""
        return self._epsilon

    @property
    def delta(self) -> float:
        """The delta budget (read-only)."""
        return self._delta

    @property
    def method(self) -> str:
        """The composition method (read-only)."""
        return self._method

    @property
    def detached(self) -> bool:
        """True for a pickled copy: it reads as the original did but refuses every charge."""
        return self._detached

    @property
    def budget(self) -> tuple[float, float]:
        """(epsilon, delta) budget."""
        return (self.epsilon, self.delta)

    @property
    def spent(self) -> tuple[float, float]:
        """(epsilon, delta) guarantee of everything charged so far, each rounded up."""
        with self._lock:
            return (_up(self._spent.epsilon), _up(self._spent.delta))

    @property
    def remaining(self) -> tuple[float, float]:
        """(budget - spent) for epsilon and delta, each rounded down and >= 0."""
        with self._lock:
            eps = max(self._budget_eps - self._spent.epsilon, _ZERO)
            delta = max(self._budget_delta - self._spent.delta, _ZERO)
            return (_down(eps), _down(delta))

    @property
    def history(self) -> list[Charge]:
        """List (a copy) of the :class:`Charge` entries, oldest first."""
        with self._lock:
            return list(self._history)

    def share(self, k: int) -> float:
        """The largest epsilon e such that k further pure charges of e fit the remaining budget.

        Computed exactly (k * e <= remaining epsilon as rationals), so splitting a budget with it
        never fails for rounding reasons. With ``method="rdp"`` or ``"pld"`` the remaining
        epsilon is that of the tight total, which does not grow additively: a split that the
        tight analysis cannot fit is refused like any other charge.

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

    def report(self) -> dict[str, Any]:
        """A JSON-friendly summary: budget, spent, remaining, the analysis used, the history.

        Returns
        -------
        dict
            Keys ``budget``, ``spent``, ``remaining`` (each ``{"epsilon": ..., "delta": ...}``),
            ``method``, ``analysis`` (which analysis gave ``spent``: "basic", "pure-as-zcdp",
            "curves-as-zcdp", "rdp" or "pld"; see Privacy), ``rho`` (the zCDP total of the zcdp
            analyses, None for the others), ``rho_from_curves`` (how many history entries that
            analysis counted at their curve's zCDP bound, e.g. exponential mechanisms at
            epsilon**2 / 8; 0 for the others), ``charges`` (count) and ``history`` (list of
            dicts; a curve appears as its repr; ``rho_implied`` and ``rho_from_curve`` show
            each entry's zCDP bound and whether its curve gave it).

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
                "method": self._method,
                "analysis": self._spent.analysis,
                "rho": None if self._spent.rho is None else _up(self._spent.rho),
                "rho_from_curves": self._spent.from_curves,
                "charges": len(self._history),
                "history": [_entry_dict(c) for c in self._history],
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

    def charge(self, epsilon: float | None = None, delta: float | None = None, *,
               rho: float | None = None, label: str | None = None,
               curve: PrivacyCurve | None = None) -> Charge:
        """Charge one release: (epsilon, delta)-DP, or rho-zCDP, and optionally its curve.

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
        curve : dpcore.curves.PrivacyCurve, optional
            The release's privacy curve, composed by ``method="rdp"`` and ``"pld"``; every
            method's zCDP analyses count a pure charge at the smaller of epsilon**2 / 2 and
            ``curve.implied_rho()`` (epsilon**2 / 8 for a bounded-range curve). Given
            alone, epsilon/delta or rho are taken from its plain guarantee
            (``curve.fallback()``); a curve without one (e.g. a Poisson-subsampled Gaussian)
            can only be charged to an ``"rdp"`` or ``"pld"`` accountant.

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
            Invalid parameters (naming the parameter), or a curve whose neighbouring relation
            differs from that of the curves charged before.

        Examples
        --------
        >>> import dpcore
        >>> from dpcore.curves import Gaussian
        >>> acc = dpcore.Accountant(3.0, 1e-6, method="pld")
        >>> step = Gaussian(sigma=1.0).poisson(0.01)
        >>> _ = acc.charge(curve=step.repeat(1000), label="1000 noisy gradient steps")
        >>> round(acc.spent[0], 1)
        2.1
        """
        entry = self._make_entry(epsilon, delta, rho, label, curve=curve,
                                 plain=self._method == "zcdp")
        with self._lock:
            self._commit(entry)
        return entry

    def charge_repeated(self, epsilon: float, delta: float | None = None, *, k: int,
                        delta_prime: float | None = None, label: str | None = None,
                        curve: PrivacyCurve | None = None) -> Charge:
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
        delta : float, optional
            Per-release delta, 0 <= delta < 1; None (the default) or 0: pure epsilon-DP.
        k : int
            Number of releases, >= 1.
        delta_prime : float, optional
            0 < delta_prime < 1; enables advanced composition.
        label : str, optional
        curve : dpcore.curves.PrivacyCurve, optional
            The privacy curve of *one* of the k releases (e.g. ``BoundedRange(epsilon)`` for k
            exponential mechanisms): the zCDP analyses count each release at the smaller of
            epsilon**2 / 2 and ``curve.implied_rho()`` (epsilon**2 / 8 for bounded range), and
            ``"rdp"``/``"pld"`` accountants compose ``curve.repeat(k)``. It must describe the
            releases: epsilon and delta stay what basic and advanced composition use.

        Returns
        -------
        Charge

        Raises
        ------
        BudgetExceeded
            If neither composition fits, or the accountant is detached; nothing is recorded.
        TypeError
            ``curve`` is not a :class:`dpcore.curves.PrivacyCurve`.

        Examples
        --------
        >>> import dpcore
        >>> acc = dpcore.Accountant(8.0, 1e-5)
        >>> c = acc.charge_repeated(0.1, k=100, delta_prime=1e-6)
        >>> c.composition, round(c.epsilon, 3), c.delta
        ('advanced', 6.308, 1e-06)
        """
        epsilon = check.privacy_loss(epsilon, "epsilon", check.MAX_EPSILON)
        delta = 0.0 if delta is None else check.probability(delta, "delta", open_low=False)
        k = check.integer(k, "k", minimum=1)
        if delta_prime is not None:
            delta_prime = check.probability(delta_prime, "delta_prime")
        label = self._check_label(label)
        if curve is not None and not isinstance(curve, PrivacyCurve):
            raise TypeError("curve must be a dpcore.curves.PrivacyCurve or None, got "
                            f"{type(curve).__name__}")
        implied, from_curve = implied_rho(epsilon, delta, curve)
        rho_implied = None if implied is None else _up(k * implied)
        # rdp/pld accountants compose the k releases' curve (the (epsilon, delta) of each)
        composed = None
        if curve is not None:
            composed = curve.repeat(k)
        elif self._method != "zcdp":
            composed = (PureDP(epsilon) if delta == 0.0 else ApproxDP(epsilon, delta)).repeat(k)
        candidates = [
            Charge(_up(k * Fraction(epsilon)), min(1.0, _up(k * Fraction(delta))), None, label,
                   "repeated", k, "basic", rho_implied, composed, from_curve)
        ]
        if delta_prime is not None:
            eps_adv, delta_adv = calibration.advanced_composition(epsilon, delta, k, delta_prime)
            candidates.append(
                Charge(eps_adv, delta_adv, None, label, "repeated", k, "advanced", rho_implied,
                       composed, from_curve)
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

    def parallel(self, label: str | None = None) -> ParallelBlock:
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

    def _make_entry(self, epsilon, delta, rho, label, kind="single", *, curve=None, plain=True):
        """The entry of a charge, validated. A curve given alone lends its plain guarantee;
        ``plain``: one is required (a "zcdp" accountant, a parallel block)."""
        label = self._check_label(label)
        if curve is not None:
            if not isinstance(curve, PrivacyCurve):
                raise TypeError("curve must be a dpcore.curves.PrivacyCurve or None, got "
                                f"{type(curve).__name__}")
            if epsilon is None and delta is None and rho is None:
                fallback = curve.fallback()
                if fallback is None:
                    if plain:
                        raise ValueError(
                            f"the curve {curve!r} has no plain (epsilon, delta) or rho guarantee: "
                            "give epsilon/delta or rho with it, or use an accountant with "
                            "method='rdp' or 'pld' (not a parallel block)")
                    return Charge(None, None, None, label, kind, curve=curve)
                epsilon, delta, rho = (fallback.get("epsilon"), fallback.get("delta"),
                                       fallback.get("rho"))
            entry = self._make_entry(epsilon, delta, rho, label, kind)
            implied, from_curve = implied_rho(entry.epsilon, entry.delta, curve)
            return Charge(entry.epsilon, entry.delta, entry.rho, label, kind, entry.count, None,
                          None if implied is None else _up(implied), curve, from_curve)
        if rho is not None:
            if epsilon is not None or delta is not None:
                raise ValueError("give either rho (zCDP) or epsilon and delta, not both")
            rho = check.privacy_loss(rho, "rho", check.MAX_RHO)
            return Charge(None, None, rho, label, kind)
        if epsilon is None:
            raise ValueError("epsilon (with optional delta) or rho is required")
        epsilon = check.privacy_loss(epsilon, "epsilon", check.MAX_EPSILON)
        delta = 0.0 if delta is None else check.probability(delta, "delta", open_low=False)
        implied, _ = implied_rho(epsilon, delta, None)
        return Charge(epsilon, delta, None, label, kind, 1, None,
                      None if implied is None else _up(implied))

    def _commit(self, entry, replace_index=None):
        """Check the history with ``entry`` added (or replacing one entry) and record it.
        Must be called with the lock held."""
        relation = self._relation
        if entry.curve is not None and entry.curve.relation is not None:
            if relation is not None and entry.curve.relation != relation:
                raise ValueError(
                    f"the curve {entry.curve!r} holds for {entry.curve.relation} neighbours, the "
                    f"curves charged before for {relation}: one accountant composes one relation")
            relation = entry.curve.relation
        if replace_index is None:
            analyses = [a.add(entry) for a in self._analyses]
        else:
            old = self._history[replace_index]
            entries = list(self._history)
            entries[replace_index] = entry
            analyses = [a.replace(old, entry, entries) for a in self._analyses]
        found = [s for s in (a.evaluate(self._budget_delta) for a in analyses) if s is not None]
        spent = min(found, key=lambda o: (o.epsilon, o.delta)) if found else None
        total = (math.inf, self.delta) if spent is None else (_up(spent.epsilon), _up(spent.delta))
        what = entry.describe()
        if self._detached:
            raise BudgetExceeded(
                f"charge {what} refused: this accountant is a pickled copy (detached), and its "
                "charges would not reach the original budget; releases must run in the process "
                "holding the original accountant (n_jobs=1 in scikit-learn); nothing was charged",
                charge=entry, spent=total, budget=self.budget,
            )
        if (spent is None or spent.epsilon > self._limit_eps or spent.delta > self._limit_delta):
            if spent is None:
                why = analyses[0].why_none(self._budget_delta)
            else:
                why = f"the total would be epsilon={total[0]!r}, delta={total[1]!r}"
            raise BudgetExceeded(
                f"charge {what} refused: {why}, over the budget epsilon={self.epsilon!r}, "
                f"delta={self.delta!r}; nothing was charged",
                charge=entry, spent=total, budget=self.budget,
            )
        self._analyses = analyses
        self._spent = spent
        self._relation = relation
        if replace_index is None:
            self._history.append(entry)
            return len(self._history) - 1
        self._history[replace_index] = entry
        return replace_index


def _entry_dict(entry):
    """A history entry as a JSON-friendly dict (the curve as its repr)."""
    out = asdict(entry)
    out["curve"] = None if entry.curve is None else repr(entry.curve)
    return out
