"""The one path every release takes: validate everything, charge the budget once, then draw.

A release function checks its arguments first (data, bounds, parameters) and computes its
calibration from public values only. It then calls :func:`release` with the privacy cost, the
accountant and ``random_state``: the accountant and the generator are checked *before* anything
is charged, the cost is charged exactly once, and only then is the draw made. So a bad argument
never costs budget, and a release is never made unpaid.
"""
from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from dpcore import _validation as check
from dpcore.accounting import Accountant, ParallelBlock, Partition, PrivacyWarning
from dpcore.curves import PrivacyCurve
from dpcore.random import check_random_state

if TYPE_CHECKING:
    from dpcore.accounting import AccountantLike
    from dpcore.random import RandomStateLike

T = TypeVar("T")

__all__ = ["Cost", "LARGE_DELTA", "check_accountant", "public_arithmetic", "release"]

#: A release with a larger delta warns (PrivacyWarning): for any data set of 100 or more records,
#: delta above 1/n admits releasing a record outright.
LARGE_DELTA = 0.01


@dataclass(frozen=True)
class Cost:
    """What one release is charged: (epsilon, delta)-DP or rho-zCDP (validated on creation),
    and optionally the release's privacy curve (:mod:`dpcore.curves`).

    The (epsilon, delta) or rho is the guarantee every accountant can compose; ``curve``
    describes the same release more finely (an RDP bound per order, a privacy-loss
    distribution) for accountants with ``method="rdp"`` or ``"pld"``. A cost without a curve
    composes as its (epsilon, delta) or rho everywhere.
    """

    epsilon: float | None = None
    delta: float = 0.0
    rho: float | None = None
    curve: PrivacyCurve | None = None

    def __post_init__(self):
        if self.curve is not None and not isinstance(self.curve, PrivacyCurve):
            raise TypeError("curve must be a dpcore.curves.PrivacyCurve or None, got "
                            f"{type(self.curve).__name__}")
        if self.rho is not None:
            if self.epsilon is not None:
                raise ValueError("a cost is either rho (zCDP) or (epsilon, delta), not both")
            object.__setattr__(self, "rho", check.privacy_loss(self.rho, "rho", check.MAX_RHO))
            return
        if self.epsilon is None:
            raise ValueError("a cost needs epsilon (with optional delta) or rho")
        object.__setattr__(
            self, "epsilon", check.privacy_loss(self.epsilon, "epsilon", check.MAX_EPSILON)
        )
        object.__setattr__(
            self, "delta", check.probability(self.delta, "delta", open_low=False)
        )
        if self.delta > LARGE_DELTA:
            warnings.warn(
                f"delta = {self.delta:g} is large: an (epsilon, delta)-DP release may publish a "
                "whole record with probability delta; use delta well below 1/n (e.g. 1e-6)",
                PrivacyWarning, stacklevel=3)

    def charge(self, accountant: AccountantLike | None, label: str | None) -> Any:
        """Charge ``accountant`` (if not None) for this cost, once. The curve goes to dpcore's
        accountants (other objects with a ``charge`` method get the plain guarantee only)."""
        if accountant is None:
            return None
        extra: dict[str, Any] = {}
        if self.curve is not None and isinstance(accountant, (Accountant, ParallelBlock, Partition)):
            extra["curve"] = self.curve
        if self.rho is not None:
            return accountant.charge(rho=self.rho, label=label, **extra)
        return accountant.charge(epsilon=self.epsilon, delta=self.delta, label=label, **extra)


def check_accountant(accountant: Any) -> AccountantLike | None:
    """None, or an object with a ``charge`` method (an Accountant, a parallel block or a
    partition); anything else is a TypeError naming ``accountant``."""
    if accountant is not None and not callable(getattr(accountant, "charge", None)):
        raise TypeError(
            "accountant must be a dpcore.Accountant (or a parallel block / partition) or None, "
            f"got {type(accountant).__name__}"
        )
    return accountant


def release(draw: Callable[[np.random.Generator], T], *, cost: Cost,
            accountant: AccountantLike | None, random_state: RandomStateLike, label: str) -> T:
    """Check ``accountant`` and ``random_state``, charge ``cost`` once, then return ``draw(rng)``.

    Parameters
    ----------
    draw : callable
        ``draw(rng)`` makes the release with the generator ``rng`` (a `numpy.random.Generator`);
        it must not validate anything that could fail for a bad argument (do that before).
    cost : Cost
        The guarantee charged.
    accountant : Accountant, ParallelBlock, Partition or None
    random_state : see :func:`dpcore.random.check_random_state`
    label : str
        Names the release in the accountant's history.
    """
    check_accountant(accountant)
    rng = check_random_state(random_state)
    cost.charge(accountant, label)
    return draw(rng)


@contextlib.contextmanager
def public_arithmetic(names: str) -> Iterator[None]:
    """Calibration arithmetic on public parameters: an overflow, underflow to zero or division
    by zero there means the parameters are out of the supported range. Raise that as a
    ValueError naming them (never a FloatingPointError/OverflowError/ZeroDivisionError), before
    anything is charged. Use only around computations on public values: the message says which
    parameters, never a data value."""
    try:
        with np.errstate(over="raise", divide="raise", invalid="raise"):
            yield
    except ArithmeticError as exc:  # FloatingPointError, OverflowError, ZeroDivisionError
        raise ValueError(
            f"{names} are out of the supported range: the calibration overflows "
            f"({type(exc).__name__}); use values of moderate magnitude (e.g. epsilon <= 100, "
            "sensitivity and bounds within 1e-150..1e150)"
        ) from None
