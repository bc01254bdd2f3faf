"""What every synthesiser shares: its public parameters, the cost known before ``fit``, one
charge per ``fit``, and ``sample`` as post-processing.

Privacy
-------
The shared fit protocol of the synthesizers: every step is calibrated from the public domain and
budget before the data is read, fit charges the cost once (rho-zCDP, or (epsilon, delta) through
zCDP, under add/remove one record), and sampling is post-processing; each synthesizer's Privacy
section states its split.
"""
from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
import math
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from dpcore import _validation as check
from dpcore._release import Cost, release
from dpcore.synth._domain import Domain
from dpcore.synth._marginals import Budget

if TYPE_CHECKING:
    from dpcore.accounting import AccountantLike
    from dpcore.random import RandomStateLike

__all__ = ["Synthesizer"]

#: Most synthetic records one ``sample`` call draws (its arrays take about 100 bytes a record
#: and column).
MAX_SAMPLE_RECORDS = 2**31

_S = TypeVar("_S", bound="Synthesizer")

# Docstring pieces of the synthesisers' constructors (``dpcore._docstrings.fill``): the
# parameters every Synthesizer takes, stated once.

#: ``rho``, ``epsilon``, ``delta`` and ``domain``.
BUDGET_PARAMETERS = """\
rho : float, optional
    zCDP budget (> 0): exact discrete Gaussian noise on the marginals (the default kind).
epsilon : float, optional
    Instead of rho: pure epsilon-DP (discrete Laplace noise, pure exponential mechanism),
    or with ``delta`` (epsilon, delta)-DP through zCDP (the largest rho whose conversion is
    (epsilon, delta)-DP).
delta : float, optional
    With ``epsilon``: 0 < delta < 1.
domain : Domain
    The public domain (required; never read from the data)."""

#: ``random_state`` and ``accountant``.
STATE_PARAMETERS = """\
random_state : None, int, numpy Generator or BitGenerator, optional
    None (default): dpcore's secure generator, for the fit and (by default) for sampling.
    Seeds are for tests only.
accountant : dpcore.Accountant, optional
    Charged ``cost`` once per ``fit``, before anything is drawn."""

#: The ``cost`` entry of the Attributes section.
COST_ATTRIBUTE = """\
cost : Cost
    What ``fit`` charges, known from the parameters before fitting."""


class Synthesizer(ABC):
    """Base of the synthesisers: scikit-learn's conventions (every parameter a keyword stored
    unchanged, validation in ``fit``, fitted attributes ending in ``_``)."""

    #: names the release in the accountant's history
    label = "synth"
    #: fitted: the model's estimate of the number of records (from noisy counts)
    n_records_: float

    def __init__(self, *, rho: float | None = None, epsilon: float | None = None,
                 delta: float | None = None, domain: Domain | None = None,
                 random_state: RandomStateLike = None,
                 accountant: AccountantLike | None = None):
        self.rho = rho
        self.epsilon = epsilon
        self.delta = delta
        self.domain = domain
        self.random_state = random_state
        self.accountant = accountant

    # -- scikit-learn-like parameters ----------------------------------------------------------

    @classmethod
    def _param_names(cls):
        sig = inspect.signature(cls.__init__)
        return [p for p in sig.parameters if p != "self"]

    def get_params(self, deep: bool = True) -> dict:
        """The constructor's parameters (as scikit-learn's ``get_params``)."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self: _S, **params: Any) -> _S:
        """Set constructor parameters (as scikit-learn's ``set_params``)."""
        valid = set(self._param_names())
        for name, value in params.items():
            if name not in valid:
                raise ValueError(f"{type(self).__name__} has no parameter {name!r}")
            setattr(self, name, value)
        return self

    def __repr__(self):
        shown = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items()
                          if v is not None and k != "domain")
        return f"{type(self).__name__}({shown})"

    # -- the release -----------------------------------------------------------------------------

    # What ``fit`` charges, known from the parameters alone: ``Cost(rho=rho)``, ``Cost(epsilon)``
    # or ``Cost(epsilon, delta)``. Documented in each synthesiser's Attributes section, not here:
    # numpydoc links an attribute that has a docstring by its bare name, which the API pages
    # cannot resolve (every plan and mechanism has a ``cost``).
    @property
    def cost(self) -> Cost:
        return Budget.make(self.rho, self.epsilon, self.delta).cost

    def _checked_domain(self) -> Domain:
        if self.domain is None:
            raise ValueError("domain is required: give the public Domain (its categories, bounds "
                             "and bins); it is never read from the data")
        if not isinstance(self.domain, Domain):
            raise TypeError(f"domain must be a dpcore.synth.Domain, got "
                            f"{type(self.domain).__name__}")
        return self.domain

    @abstractmethod
    def _plan(self, domain: Domain, budget: Budget):
        """Calibrate every step from public values (raise before anything is charged)."""

    @abstractmethod
    def _fit_codes(self, codes, domain: Domain, plan, rng):
        """Measure and estimate (inside the charged release); sets the fitted attributes."""

    @abstractmethod
    def _sample_codes(self, n: int, rng) -> np.ndarray:
        """Draw n rows of codes from the fitted model (post-processing)."""

    def fit(self: _S, data: Any) -> _S:
        """Fit the synthesiser to ``data`` (charged ``cost`` once, before any draw).

        Parameters
        ----------
        data : pandas DataFrame, mapping of column -> values, 2-d array, or CSV path
            Encoded by ``domain`` (:meth:`Domain.encode`): every value goes to a code by its
            column's public rule, a missing column is an error.

        Returns
        -------
        self
        """
        domain = self._checked_domain()
        budget = Budget.make(self.rho, self.epsilon, self.delta)
        plan = self._plan(domain, budget)
        codes = domain.encode(data)

        def draw(rng):
            self._fit_codes(codes, domain, plan, rng)
            return rng

        # the fit's generator continues into sample(): seeded fits sample reproducibly
        self._rng = release(draw, cost=budget.cost, accountant=self.accountant,
                            random_state=self.random_state, label=self.label)
        self.domain_ = domain
        return self

    def sample(self, n: int | None = None, *, random_state: RandomStateLike = None,
               output: str = "frame") -> Any:
        """Synthetic records (post-processing: costs nothing).

        Parameters
        ----------
        n : int, optional
            Number of records; default: the noisy record count (``n_records_`` rounded).
        random_state : None, int, numpy Generator or BitGenerator, optional
            None: continue the generator ``fit`` used (dpcore's secure generator unless
            ``random_state`` was given to the constructor).
        output : {"frame", "dict", "codes"}, default="frame"
            A pandas DataFrame, a dict column -> array, or the integer codes (records x columns).
        """
        from dpcore.random import check_random_state

        if not hasattr(self, "domain_"):
            raise ValueError(f"this {type(self).__name__} is not fitted: call fit first")
        if output not in ("frame", "dict", "codes"):
            raise ValueError(f"output must be 'frame', 'dict' or 'codes', got {output!r}")
        if n is None:
            n = max(int(math.floor(self.n_records_ + 0.5)), 0)
        n = check.integer(n, "n", minimum=0, maximum=MAX_SAMPLE_RECORDS)
        rng = self._rng if random_state is None else check_random_state(random_state)
        codes = self._sample_codes(n, rng)
        if output == "codes":
            return codes
        return self.domain_.decode(codes, random_state=rng, output=output)
