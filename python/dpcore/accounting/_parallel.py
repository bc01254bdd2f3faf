"""Parallel composition: a block of releases on disjoint partitions, charged as one entry."""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any, cast

from dpcore._floats import round_up as _up
from dpcore.accounting._entries import Charge, implied_rho

if TYPE_CHECKING:
    from dpcore.curves import PrivacyCurve

_ZERO = Fraction(0)


@dataclass(frozen=True)
class _PartSum:
    """Exact totals of one partition's charges (basic composition: everything sums)."""

    n: int = 0  # number of charges
    zcdp: bool = False  # rho charges (a block never mixes the two kinds)
    eps: Fraction = _ZERO
    delta: Fraction = _ZERO
    rho: Fraction = _ZERO
    # sum of each charge's zCDP bound (eps**2 / 2, or its curve's: implied_rho); None after a
    # delta > 0 charge
    rho_implied: Fraction | None = _ZERO
    rho_from_curve: bool = False  # a curve's bound counted in rho_implied

    def add(self, c: Charge) -> _PartSum:
        if c.rho is not None:
            return _PartSum(self.n + 1, True, rho=self.rho + Fraction(c.rho), rho_implied=None)
        implied, from_curve = None, False
        if self.rho_implied is not None:
            one, from_curve = implied_rho(c.epsilon, c.delta, c.curve)
            if one is not None:
                implied = self.rho_implied + one
        return _PartSum(self.n + 1, False, self.eps + Fraction(cast(float, c.epsilon)),
                        self.delta + Fraction(cast(float, c.delta)), _ZERO, implied,
                        implied is not None and (self.rho_from_curve or from_curve))


def _max_implied(a, b):
    return None if a is None or b is None else max(a, b)


class ParallelBlock:
    """Charges for releases on disjoint partitions; see :meth:`Accountant.parallel`.

    Use as a context manager. :meth:`partition` opens a partition whose charges sum;
    :meth:`charge` (the signature of :meth:`Accountant.charge`, so a block can be passed as
    ``accountant=`` to release functions) is one release on a partition of its own.
    """

    # accountant: a dpcore.Accountant (typed Any: its module imports this one)
    def __init__(self, accountant: Any, label: str | None = None) -> None:
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
    def entry(self) -> Charge | None:
        """The block's current :class:`Charge` (None before the first partition charge)."""
        return self._entry

    def _check_open(self):
        if self._closed:
            raise RuntimeError("this parallel block is closed; open a new one with accountant.parallel()")

    def partition(self, label: str | None = None) -> Partition:
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

    def charge(self, epsilon: float | None = None, delta: float | None = None, *,
               rho: float | None = None, label: str | None = None,
               curve: PrivacyCurve | None = None) -> Charge:
        """Charge one release on a partition of its own (``self.partition().charge(...)``);
        the block's entry becomes the maximum over partitions. A ``curve`` is read for its plain
        guarantee (when epsilon and rho are not given) and its zCDP bound (``implied_rho``,
        e.g. epsilon**2 / 8 for a bounded-range curve) only: partitions compose by summation.

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
        return self.partition().charge(epsilon, delta, rho=rho, label=label, curve=curve)

    def charge_partitions(self, charges: list[list[dict[str, Any]]],
                          labels: list[str] | None = None) -> list[Partition]:
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
                                          c.get("label"), curve=c.get("curve"), plain=True)
                    for c in cs] for cs in charges]
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
        implied = _max_implied(m.rho_implied, total.rho_implied)
        return _PartSum(eps=max(m.eps, total.eps), delta=max(m.delta, total.delta),
                        rho_implied=implied, rho_from_curve=implied is not None and (
                            m.rho_from_curve or total.rho_from_curve))

    def _block_entry(self, m, count, zcdp):
        if zcdp:
            return Charge(None, None, _up(m.rho), self._label, "parallel", count)
        implied = None if m.rho_implied is None else _up(m.rho_implied)
        return Charge(_up(m.eps), min(1.0, _up(m.delta)), None, self._label, "parallel", count,
                      None, implied, rho_from_curve=m.rho_from_curve)

    def _charge(self, part, epsilon, delta, rho, label, curve):
        """Add a charge to ``part``'s total and re-record the block's entry (see
        :meth:`Partition.charge`)."""
        self._check_open()
        part._check_open()
        c = self._acc._make_entry(epsilon, delta, rho, label, curve=curve, plain=True)
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

    def __init__(self, block: ParallelBlock, label: str | None = None) -> None:
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
    def label(self) -> str | None:
        return self._label

    @property
    def block(self) -> ParallelBlock:
        return self._block

    @property
    def total(self) -> Charge | None:
        with self._block._acc._lock:
            t = self._sum
        if t.n == 0:
            return None
        if t.zcdp:
            return Charge(None, None, _up(t.rho), self._label, "repeated", t.n, "basic")
        implied = None if t.rho_implied is None else _up(t.rho_implied)
        return Charge(_up(t.eps), min(1.0, _up(t.delta)), None, self._label, "repeated", t.n,
                      "basic", implied, rho_from_curve=t.rho_from_curve)

    def _check_open(self):
        if self._closed:
            raise RuntimeError("this partition is closed; open a new one with block.partition()")

    def charge(self, epsilon: float | None = None, delta: float | None = None, *,
               rho: float | None = None, label: str | None = None,
               curve: PrivacyCurve | None = None) -> Charge:
        """Charge one release on this partition; its total grows by the charge.

        Parameters are those of :meth:`Accountant.charge`; a ``curve`` is read for its plain
        guarantee and its zCDP bound only (partitions compose by summation: epsilons, deltas,
        rhos and the pure charges' zCDP bounds each sum).

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
        return self._block._charge(self, epsilon, delta, rho, label, curve)
