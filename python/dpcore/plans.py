"""Calibrated release plans: a release's cost known from public inputs before any data is read.

A plan is built from public parameters only (sensitivity, bounds, epsilon, shapes). It knows
its ``cost`` (the :class:`~dpcore._release.Cost` it will charge: epsilon and delta, or rho) and
the neighbouring relation that cost is stated for, before it sees data. ``release(data,
accountant=, random_state=)`` then checks the data, charges the cost once and draws; a failed
check costs nothing. Drawing without a charge is never public.

Plans compose before any data is touched: :func:`sequential` (several releases on the same
data, their costs added) and :func:`parallel` (one plan on each part of a public partition,
costing what one part costs).

Privacy
-------
A plan's guarantee is its ``cost`` under its ``relation``; composition follows basic
sequential composition (costs added, rounded up) and parallel composition over disjoint parts
decided by a public rule (the maximum part cost).

Examples
--------
>>> import numpy as np
>>> from dpcore import plans
>>> from dpcore.mechanisms import LaplaceMechanism
>>> count = plans.wrap(LaplaceMechanism.calibrate(sensitivity=1.0, epsilon=0.5), "count")
>>> both = plans.sequential(count, count)
>>> both.cost.epsilon                # known before any data
1.0
>>> out = both.release((120.0, 75.0), random_state=0)
>>> len(out)
2
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from fractions import Fraction
from typing import Any, Sequence

from dpcore import _validation as check
from dpcore._floats import round_up
from dpcore._release import Cost, release

__all__ = ["Plan", "parallel", "sequential", "total_cost", "wrap"]

ADD_REMOVE = "add/remove one record"


def total_cost(costs: Sequence[Cost]) -> Cost:
    """Basic sequential composition: epsilons and deltas added (or rhos added), each sum rounded
    up exactly to a double. Mixing zCDP and (epsilon, delta) costs is refused: convert one with
    an accountant, which composes both."""
    costs = list(costs)
    if not costs:
        raise ValueError("costs must hold at least one cost")
    rhos = [c.rho for c in costs if c.rho is not None]
    if rhos and len(rhos) != len(costs):
        raise ValueError("cannot add rho-zCDP and (epsilon, delta) costs: compose them with an "
                         "Accountant, which converts zCDP at its delta")
    if rhos:
        return Cost(rho=round_up(sum((Fraction(r) for r in rhos), Fraction(0))))
    epsilon = round_up(sum((Fraction(c.epsilon or 0.0) for c in costs), Fraction(0)))
    delta = min(1.0, round_up(sum((Fraction(c.delta) for c in costs), Fraction(0))))
    return Cost(epsilon, delta)


class Plan(ABC):
    """A release calibrated from public parameters only (see the module docstring).

    Subclasses give ``cost``, ``label`` and ``relation``, and implement ``_prepare`` (check the
    data; nothing is charged) and ``_draw`` (sample, given prepared data and a generator; no
    checks, no charge). ``release`` is the only public way to draw.
    """

    label: str = "plan"
    relation: str = ADD_REMOVE

    @property
    @abstractmethod
    def cost(self) -> Cost:
        """What ``release`` charges, once."""

    def _prepare(self, data: Any) -> Any:
        return data

    @abstractmethod
    def _draw(self, prepared: Any, rng: Any) -> Any:
        """The release from checked data (not charged here: ``release`` charges)."""

    def release(self, data: Any, *, accountant: Any = None, random_state: Any = None) -> Any:
        """Check ``data``, charge ``cost`` to ``accountant`` once, then draw.

        A bad argument raises before anything is charged; an accountant without budget raises
        ``BudgetExceeded`` and nothing is drawn.
        """
        prepared = self._prepare(data)
        return release(lambda rng: self._draw(prepared, rng), cost=self.cost,
                       accountant=accountant, random_state=random_state, label=self.label)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.label!r}: {self.cost}, {self.relation}>"


class _Wrapped(Plan):
    """A calibrated mechanism (anything with ``release(value, random_state=, accountant=)`` and
    a guarantee) as a plan."""

    def __init__(self, mechanism: Any, label: str, cost: Cost, relation: str):
        self._mechanism, self.label, self._cost, self.relation = mechanism, label, cost, relation

    @property
    def cost(self) -> Cost:
        return self._cost

    def _prepare(self, data: Any) -> Any:
        values = check.finite_array(data, "value")
        size = getattr(self._mechanism, "size", values.size)
        if values.size != size:
            raise ValueError(f"value has {values.size} elements, the plan was calibrated for "
                             f"{size}")
        return values

    def _draw(self, prepared: Any, rng: Any) -> Any:
        # checked in _prepare; no accountant here: Plan.release charged this plan's cost
        return self._mechanism.release(prepared, random_state=rng)


def wrap(mechanism: Any, label: str, *, relation: str = ADD_REMOVE) -> Plan:
    """A calibrated mechanism of :mod:`dpcore.mechanisms` (``LaplaceMechanism``,
    ``GaussianMechanism``) as a plan: its cost is the effective guarantee it was calibrated to
    (``epsilon_effective``/``delta_effective``, or rho).

    Privacy
    -------
    The mechanism's guarantee, under ``relation`` (the relation its sensitivity was derived
    for); nothing is charged until ``release``.
    """
    if hasattr(mechanism, "epsilon_effective"):
        cost = Cost(mechanism.epsilon_effective, mechanism.delta_effective)
    elif getattr(mechanism, "epsilon", None) is None and hasattr(mechanism, "rho"):
        cost = Cost(rho=mechanism.rho)
    elif hasattr(mechanism, "delta"):
        cost = Cost(mechanism.epsilon, mechanism.delta or 0.0)
    else:
        raise TypeError(f"cannot read a guarantee from {type(mechanism).__name__}")
    return _Wrapped(mechanism, label, cost, relation)


class _Sequential(Plan):
    def __init__(self, plans: Sequence[Plan]):
        self.plans = tuple(plans)
        relations = {p.relation for p in self.plans}
        if len(relations) != 1:
            raise ValueError(f"plans state different neighbouring relations: {sorted(relations)}")
        self.relation = relations.pop()
        self.label = " + ".join(p.label for p in self.plans)
        self._cost = total_cost([p.cost for p in self.plans])

    @property
    def cost(self) -> Cost:
        return self._cost

    def _prepare(self, data: Any) -> Any:
        data = tuple(data)
        if len(data) != len(self.plans):
            raise ValueError(f"data must hold one input per plan ({len(self.plans)}), "
                             f"got {len(data)}")
        return tuple(p._prepare(d) for p, d in zip(self.plans, data))

    def _draw(self, prepared: Any, rng: Any) -> Any:
        return tuple(p._draw(d, rng) for p, d in zip(self.plans, prepared))


def sequential(*plans: Plan) -> Plan:
    """Several releases on the same data set, charged once as their sum (basic composition).

    ``release(data)`` takes one input per plan, in order, and returns one output per plan.

    Privacy
    -------
    The sum of the plans' costs (:func:`total_cost`), under their common relation.
    """
    if not plans or not all(isinstance(p, Plan) for p in plans):
        raise TypeError("sequential takes one or more plans")
    return _Sequential(plans)


class _Parallel(Plan):
    def __init__(self, plan: Plan, n_parts: int):
        self.plan, self.n_parts = plan, n_parts
        self.relation = plan.relation
        self.label = f"{plan.label} on {n_parts} disjoint parts"

    @property
    def cost(self) -> Cost:
        return self.plan.cost

    def _prepare(self, data: Any) -> Any:
        parts = tuple(data)
        if len(parts) != self.n_parts:
            raise ValueError(f"data must hold {self.n_parts} parts, got {len(parts)}")
        return tuple(self.plan._prepare(part) for part in parts)

    def _draw(self, prepared: Any, rng: Any) -> Any:
        return tuple(self.plan._draw(part, rng) for part in prepared)


def parallel(plan: Plan, n_parts: int) -> Plan:
    """One plan on each part of a partition decided by a public rule applied to each record
    alone (a public attribute, a fixed grid cell): charged once, as one part.

    Privacy
    -------
    Parallel composition: one record is in one part only, so the release costs ``plan.cost``
    under the plan's relation, whatever the number of parts.
    """
    if not isinstance(plan, Plan):
        raise TypeError(f"plan must be a Plan, got {type(plan).__name__}")
    return _Parallel(plan, check.integer(n_parts, "n_parts", minimum=1))
