"""Privacy curves: the guarantee of each release as something an accountant can compose tightly.

A curve describes one release's privacy: its neighbouring relation, its Rényi-DP epsilon(alpha)
on a grid of orders, a privacy-loss distribution (pessimistically discretised: every delta
derived from it is an upper bound) where a dominating pair is known, and a plain
(epsilon, delta) or rho-zCDP guarantee where one exists. Releases attach their curve to the cost
they charge (``Cost(..., curve=...)``), and ``Accountant(..., method="rdp" | "pld")`` composes
the curves; the default ``method="zcdp"`` reads a pure charge's curve for a zCDP bound tighter
than epsilon**2/2 (:meth:`PrivacyCurve.implied_rho`: epsilon**2/8 for :class:`BoundedRange`):

* :class:`PureDP`, :class:`ApproxDP`, :class:`ZCDP`: the generic guarantees;
* :class:`Gaussian`, :class:`Laplace`: the continuous mechanisms;
* :class:`DiscreteLaplace`, :class:`DiscreteGaussian`: dpcore's exact integer noise (the
  discrete Gaussian through its proven zCDP/RDP bound only);
* :class:`BoundedRange`: the exponential mechanism (epsilon-bounded-range, hence
  epsilon**2/8-zCDP: a tighter RDP than pure DP);
* :class:`PoissonSubsampled` (add/remove), :class:`SampledWithoutReplacement` (substitution),
  :class:`Repeated` (k-fold composition), :class:`Composed` (different releases composed in
  one charge).

Examples
--------
>>> from dpcore.curves import Gaussian
>>> step = Gaussian(sigma=1.0).poisson(0.01)
>>> eps = step.repeat(1000).epsilon_for(1e-6)
>>> round(eps, 1)
2.1

Privacy
-------
Curves are arithmetic on public parameters: building or evaluating one releases nothing and
spends no budget. Each class's docstring states the guarantee it describes and the result it
relies on.
"""
from dpcore.curves._bounded_range import BoundedRange
from dpcore.curves._curves import (
    DEFAULT_INTERVAL,
    RELATIONS,
    ApproxDP,
    Composed,
    DiscreteGaussian,
    DiscreteLaplace,
    Gaussian,
    Laplace,
    PoissonSubsampled,
    PrivacyCurve,
    PureDP,
    Repeated,
    SampledWithoutReplacement,
    ZCDP,
    gaussian_pld,
)
from dpcore.curves._pld import LossDistribution, PrivacyLossDistribution
from dpcore.curves._rdp import DEFAULT_ORDERS, check_orders, delta_from_rdp, epsilon_from_rdp

__all__ = [
    "PrivacyCurve",
    "PureDP",
    "ApproxDP",
    "ZCDP",
    "Gaussian",
    "Laplace",
    "DiscreteLaplace",
    "DiscreteGaussian",
    "PoissonSubsampled",
    "SampledWithoutReplacement",
    "Repeated",
    "PrivacyLossDistribution",
    "LossDistribution",
    "DEFAULT_ORDERS",
    "DEFAULT_INTERVAL",
    "RELATIONS",
    "check_orders",
    "epsilon_from_rdp",
    "delta_from_rdp",
    "gaussian_pld",
    "BoundedRange",
    "Composed",
]
