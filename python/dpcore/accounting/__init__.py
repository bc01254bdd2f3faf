"""Privacy budget accounting: charge releases, refuse overspending, report what was spent.

An :class:`Accountant` holds a budget (epsilon, delta) and a history of charges. Each release is
charged *before* it is made; a charge that would overspend raises :class:`BudgetExceeded` and
records nothing, so the release is never made. Supported compositions:

* sequential (basic) composition of pure and approximate DP charges (summation);
* rho-zCDP charges (summed, converted to (epsilon, delta) with the tight conversion); pure
  charges may be counted there too, at epsilon**2/2 or the smaller bound their curve states
  (epsilon**2/8 for the exponential mechanism's bounded-range curve), when that is tighter;
* parallel composition over disjoint partitions (:meth:`Accountant.parallel`), the charges
  on one partition summed (:meth:`ParallelBlock.partition`);
* advanced composition of k repeated releases (:meth:`Accountant.charge_repeated`);
* with ``Accountant(..., method="rdp")`` or ``"pld"``: the releases' privacy curves
  (:mod:`dpcore.curves`) composed in Rényi DP or as privacy-loss distributions.

The default sums are kept exactly (as the rationals the doubles represent) and the budget check
is exact; the accountant's decisions depend only on the public charge parameters, never on data.

An accountant is a handle on one budget: ``copy.copy`` and ``copy.deepcopy`` return it itself,
and a pickled copy (what a joblib worker receives) is *detached*: it refuses every charge (see
:class:`Accountant`, "Copies, pickling and n_jobs").

The modules: ``_entries`` (history entries, exceptions), ``_composition`` (the analyses),
``_parallel`` (parallel blocks), ``_ledger`` (the accountant).
"""
from __future__ import annotations

from typing import Union

from dpcore.accounting._entries import BUDGET_TOLERANCE, BudgetExceeded, Charge, PrivacyWarning
from dpcore.accounting._ledger import METHODS, Accountant
from dpcore.accounting._parallel import ParallelBlock, Partition

__all__ = ["Accountant", "AccountantLike", "BudgetExceeded", "Charge", "ParallelBlock",
           "Partition", "PrivacyWarning", "BUDGET_TOLERANCE", "METHODS"]

# the public classes live here (pickles, documentation and reprs name dpcore.accounting)
for _cls in (Accountant, BudgetExceeded, Charge, ParallelBlock, Partition, PrivacyWarning):
    _cls.__module__ = __name__
del _cls

#: What ``accountant`` accepts in every release (besides None): each has ``charge``.
AccountantLike = Union[Accountant, ParallelBlock, Partition]
