"""Continual counting: a running count of a stream, released after every event (the
binary-tree mechanism)."""
from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np

from dpcore import _publish
from dpcore import _validation as check
from dpcore._release import Cost, release
from dpcore._release.sums import IntegerNoise
from dpcore.mechanisms import discrete_laplace

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from dpcore.accounting import AccountantLike
    from dpcore.random import RandomStateLike

__all__ = ["ContinualCounter"]

#: Events and horizons are kept so that max_increment * horizon < 2**62: int64 sums never
#: overflow.
_MAX_TOTAL = 2**62


class ContinualCounter:
    """Running count of a stream, released after every event (binary-tree mechanism).

    Parameters
    ----------
    epsilon : float
        Privacy parameter for the whole output sequence, > 0.
    horizon : int
        Public maximum number of events T >= 1; the counter refuses events beyond it.
    max_increment : int, default=1
        Public: the most one event adds to the count; each event is an integer clipped to
        [0, max_increment] (0/1 events: 1).
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's process-wide cryptographically secure generator. Seeds are for
        tests and reproducibility only.
    accountant : dpcore.Accountant, optional
        Charged ``epsilon`` once, here, for all T releases; if the budget would be overspent it
        raises ``BudgetExceeded`` and no counter is made.
    bound : int, optional
        Deprecated name of ``max_increment`` (with a DeprecationWarning; removed in the next
        release).

    Attributes
    ----------
    levels : int
        Levels of dyadic blocks, floor(log2 T) + 1: each event is in that many blocks.
    noise : IntegerNoise
        Per-block discrete Laplace noise, scale max_increment * levels / epsilon (rounded up).
    t : int
        Events received so far.
    count : int
        The count released after the last event (0 before the first).

    Raises
    ------
    ValueError
        epsilon <= 0, horizon < 1, max_increment < 1, max_increment * horizon >= 2**62, a
        scale beyond the exact sampler's range.
    TypeError
        Non-integer horizon or max_increment; both max_increment and bound given.

    Privacy
    -------
    Pure epsilon-DP for the whole sequence of T releases under event-level add/remove (or
    change) of one event's value within [0, max_increment]. Event t is in exactly one dyadic
    block per level (blocks that are ever released: levels = floor(log2 T) + 1 of them), so the
    vector of all block sums has L1 sensitivity max_increment * levels; each block gets
    independent discrete Laplace noise of scale max_increment * levels / epsilon (rounded up)
    when it closes. The release at step t sums the noisy blocks of t's binary decomposition
    (post-processing). Events are clipped to [0, max_increment], never rejected by value.
    Charged: ``epsilon`` once, at construction.

    Notes
    -----
    The error at step t is the sum of popcount(t) independent block noises: variance
    popcount(t) * node_variance (:meth:`variance`), O(log(T)**3 / epsilon**2) at worst, against
    t * 2 / epsilon**2 for summing individually noised events. A counter cannot be copied or
    pickled (a copy would spend the same budget twice).

    Examples
    --------
    >>> from dpcore import publish
    >>> c = publish.ContinualCounter(1.0, 1000, random_state=0)
    >>> out = c.extend([1] * 600)
    >>> c.t, bool(abs(out[-1] - 600) < 150)
    (600, True)
    """

    def __init__(self, epsilon: float, horizon: int, *, max_increment: int = 1,
                 random_state: RandomStateLike = None,
                 accountant: AccountantLike | None = None, bound: int | None = None) -> None:
        if bound is not None:
            warnings.warn("ContinualCounter(bound=...) is deprecated and will be removed in the "
                          "next release: pass the same value as max_increment=...",
                          DeprecationWarning, stacklevel=2)
            if max_increment != 1:
                raise TypeError("ContinualCounter takes max_increment or its deprecated name "
                                "bound, not both")
            max_increment = bound
        epsilon = check.epsilon(epsilon)
        horizon = check.integer(horizon, "horizon", minimum=1)
        max_increment = check.integer(max_increment, "max_increment", minimum=1)
        if max_increment * horizon >= _MAX_TOTAL:
            raise ValueError(f"max_increment * horizon must be < 2**62, got "
                             f"max_increment={max_increment}, horizon={horizon}")
        self.epsilon = epsilon
        self.horizon = horizon
        self.max_increment = max_increment
        self.levels = horizon.bit_length()
        self.noise = IntegerNoise.calibrate("laplace", max_increment * self.levels, epsilon, 0.0)
        self._rng = release(lambda rng: rng, cost=Cost(epsilon), accountant=accountant,
                            random_state=random_state, label="publish.ContinualCounter")
        self._psum = np.zeros(self.levels, dtype=np.int64)
        self._noisy = np.zeros(self.levels, dtype=np.int64)
        self._one = np.zeros(3, dtype=np.int64)  # event, noise, release of update()
        # update()'s views of them, made once (a one-event update costs a few microseconds)
        self._event, self._draw, self._out = self._one[0:1], self._one[1:2], self._one[2:3]
        self.t = 0
        self.count = 0

    @property
    def bound(self) -> int:
        """Deprecated name of ``max_increment`` (with a DeprecationWarning; removed in the next
        release)."""
        warnings.warn("ContinualCounter.bound is deprecated and will be removed in the next "
                      "release: read max_increment", DeprecationWarning, stacklevel=2)
        return self.max_increment

    @property
    def node_variance(self) -> float:
        """Variance of each block's noise (exact, discrete Laplace)."""
        return self.noise.variance

    def variance(self, t: ArrayLike) -> float | np.ndarray:
        """Exact variance of the count released at step(s) t (1 <= t <= horizon):
        popcount(t) * node_variance, whatever the events."""
        steps = check.real_array(t, "t")
        if not np.issubdtype(steps.dtype, np.integer):
            raise TypeError(f"t must be integer steps, got dtype {steps.dtype}")
        if np.any(steps < 1) or np.any(steps > self.horizon):
            raise ValueError(f"t must be in [1, horizon = {self.horizon}]")
        pop = np.bitwise_count(steps.astype(np.uint64)).astype(np.float64)
        out = pop * self.node_variance
        return float(out) if out.ndim == 0 else out

    def extend(self, events: ArrayLike) -> np.ndarray:
        """Feed events (1-d integers or bools, each clipped to [0, max_increment]); returns the
        count released after each of them (int64)."""
        ev = check.real_array(events, "events")
        if not (np.issubdtype(ev.dtype, np.integer) or ev.dtype == np.bool_):
            raise TypeError(f"events must be integers or bools, got dtype {ev.dtype}")
        if ev.ndim != 1:
            raise ValueError(f"events must be 1-d, got shape {ev.shape}")
        if ev.size > self.horizon - self.t:
            raise ValueError(f"events would exceed horizon = {self.horizon} "
                             f"({self.t} events received, {ev.size} given)")
        if ev.dtype == np.uint64:  # large unsigned values would wrap in int64: clip first
            ev = np.minimum(ev, self.max_increment)
        ev = np.ascontiguousarray(ev, dtype=np.int64)
        out = np.empty(ev.size, dtype=np.int64)
        if ev.size:
            draws = self.noise.draw(ev.size, self._rng)
            self.count = int(_publish.counter_extend(self._psum, self._noisy, self.t,
                                                     self.count, ev, self.max_increment, draws,
                                                     out))
            self.t += ev.size
        return out

    def update(self, event: int) -> int:
        """Feed one event (an integer or bool, clipped to [0, max_increment]); returns the count
        released after it."""
        if isinstance(event, (bool, np.bool_)):
            event = int(event)
        event = check.integer(event, "event")
        if self.t >= self.horizon:
            raise ValueError(f"events would exceed horizon = {self.horizon} "
                             f"({self.t} events received, 1 given)")
        # the one-event path without extend's array checks: the same draw, the same kernel
        self._one[0] = min(max(event, 0), self.max_increment)
        discrete_laplace(self.noise.scale, out=self._draw, random_state=self._rng)
        self.count = int(_publish.counter_extend(self._psum, self._noisy, self.t, self.count,
                                                 self._event, self.max_increment,
                                                 self._draw, self._out))
        self.t += 1
        return self.count

    def __copy__(self):
        raise TypeError("a ContinualCounter cannot be copied (the copy would reuse its budget)")

    def __deepcopy__(self, memo):
        self.__copy__()

    def __reduce_ex__(self, protocol):
        raise TypeError("a ContinualCounter cannot be pickled (the copy would reuse its budget)")
