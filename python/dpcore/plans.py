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
>>> count = LaplaceMechanism.calibrate(sensitivity=1.0, epsilon=0.5)   # a calibrated plan
>>> count.cost.epsilon
0.5
>>> both = plans.sequential(count, plans.wrap(count, "second count"))
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
from dpcore.curves import ApproxDP, Composed, PrivacyCurve, PureDP, ZCDP

__all__ = ["Plan", "parallel", "sequential", "total_cost", "wrap"]

ADD_REMOVE = "add/remove one record"


def total_cost(costs: Sequence[Cost]) -> Cost:
    """Basic sequential composition: epsilons and deltas added (or rhos added), each sum rounded
    up exactly to a double. Mixing zCDP and (epsilon, delta) costs is refused: convert one with
    an accountant, which composes both. When a cost states a curve, the total states their
    composition (:class:`dpcore.curves.Composed`, the others as their plain guarantee), so
    e.g. exponential mechanisms keep their bounded-range curve (epsilon**2/8-zCDP)."""
    costs = list(costs)
    if not costs:
        raise ValueError("costs must hold at least one cost")
    rhos = [c.rho for c in costs if c.rho is not None]
    if rhos and len(rhos) != len(costs):
        raise ValueError("cannot add rho-zCDP and (epsilon, delta) costs: compose them with an "
                         "Accountant, which converts zCDP at its delta")
    curve = _composed_curve(costs)
    if rhos:
        return Cost(rho=round_up(sum((Fraction(r) for r in rhos), Fraction(0))), curve=curve)
    epsilon = round_up(sum((Fraction(c.epsilon or 0.0) for c in costs), Fraction(0)))
    delta = min(1.0, round_up(sum((Fraction(c.delta) for c in costs), Fraction(0))))
    return Cost(epsilon, delta, curve=curve)


def _composed_curve(costs: list[Cost]) -> PrivacyCurve | None:
    """The costs' curves composed (a cost without one as its plain guarantee), or None when
    none states a curve, or when their relations differ (the plain total is then the cost)."""
    if all(c.curve is None for c in costs):
        return None
    parts: list[PrivacyCurve] = []
    for c in costs:
        if c.curve is not None:
            parts.append(c.curve)
        elif c.rho is not None:
            parts.append(ZCDP(c.rho))
        else:
            epsilon = c.epsilon or 0.0
            parts.append(PureDP(epsilon) if c.delta == 0.0 else ApproxDP(epsilon, c.delta))
    try:
        return Composed(tuple(parts))
    except ValueError:
        return None


class Plan(ABC):
    """A release calibrated from public parameters only (see the module docstring).

    Its descriptor: ``cost`` (epsilon and delta, or rho, with the release's privacy ``curve``
    when it states one, for the RDP/PLD accountants), ``relation`` (the neighbouring relation
    that cost holds under) and ``label`` (the name it is charged under). Subclasses give
    ``cost`` and implement ``_prepare`` (check the data; nothing is charged) and ``_draw``
    (sample, given prepared data and a generator; no checks, no charge). ``release`` is the
    only public way to draw.
    """

    #: the neighbouring relation ``cost`` is stated for
    relation: str = ADD_REMOVE

    @property
    def label(self) -> str:
        """Names the release in the accountant's history."""
        return type(self).__name__

    @property
    @abstractmethod
    def cost(self) -> Cost:
        """What ``release`` charges, once: the effective guarantee, from public values only."""

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
        return self._release_prepared(self._prepare(data), accountant=accountant,
                                      random_state=random_state)

    def _release_prepared(self, prepared: Any, *, accountant: Any, random_state: Any) -> Any:
        """Charge ``cost`` once, then draw from ``prepared`` (what ``_prepare`` returned)."""
        return release(lambda rng: self._draw(prepared, rng), cost=self.cost,
                       accountant=accountant, random_state=random_state, label=self.label)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.label!r}: {self.cost}, {self.relation}>"


class _Restated(Plan):
    """A plan under another label and relation (same cost, same draws)."""

    def __init__(self, plan: Plan, label: str, relation: str):
        self.plan, self._label, self.relation = plan, label, relation

    @property
    def label(self) -> str:
        return self._label

    @property
    def cost(self) -> Cost:
        return self.plan.cost

    def _prepare(self, data: Any) -> Any:
        return self.plan._prepare(data)

    def _draw(self, prepared: Any, rng: Any) -> Any:
        return self.plan._draw(prepared, rng)


def wrap(plan: Plan, label: str, *, relation: str | None = None) -> Plan:
    """``plan`` (e.g. a calibrated :class:`~dpcore.mechanisms.LaplaceMechanism` or
    :class:`~dpcore.mechanisms.GaussianMechanism`, which are plans) charged under ``label``,
    and stated for ``relation`` (default: the plan's own), to compose it with plans of that
    relation. Its cost and its draws are the plan's.

    Privacy
    -------
    The plan's guarantee (``plan.cost``), under ``relation``: the caller asserts that the
    plan's sensitivity was derived for that relation. Nothing is charged until ``release``.
    """
    if not isinstance(plan, Plan):
        raise TypeError(f"plan must be a dpcore.plans.Plan (e.g. a calibrated mechanism), got "
                        f"{type(plan).__name__}")
    if not isinstance(label, str):
        raise TypeError(f"label must be a str, got {type(label).__name__}")
    relation = plan.relation if relation is None else check_relation(relation)
    return _Restated(plan, label, relation)


def check_relation(relation: Any) -> str:
    """A neighbouring relation, checked: a non-empty str (e.g. ``ADD_REMOVE``, "replace one
    record", "edge-DP"), else TypeError/ValueError naming ``relation``. Shared with the
    calibrated mechanisms (not in ``__all__``)."""
    if not isinstance(relation, str):
        raise TypeError(f"relation must be a str naming the neighbouring relation, got "
                        f"{type(relation).__name__}")
    if not relation.strip():
        raise ValueError("relation must name the neighbouring relation, got an empty string")
    return relation


class _Sequential(Plan):
    def __init__(self, plans: Sequence[Plan]):
        self.plans = tuple(plans)
        relations = {p.relation for p in self.plans}
        if len(relations) != 1:
            raise ValueError(f"plans state different neighbouring relations: {sorted(relations)}")
        self.relation = relations.pop()
        self._label = " + ".join(p.label for p in self.plans)
        self._cost = total_cost([p.cost for p in self.plans])

    @property
    def label(self) -> str:
        return self._label

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

    @property
    def label(self) -> str:
        return f"{self.plan.label} on {self.n_parts} disjoint parts"

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
