"""Calibration and conversion math: noise scales from privacy parameters, and back.

Small pure-Python functions, one formula each, that the mechanisms and the accountant call and
that tests call directly. Every function rounds towards safety: a noise scale is never smaller,
and a reported epsilon or delta never smaller, than the exact mathematical value (up to the
documented relative margins that cover floating-point error in special functions).

* Snapping (Mironov 2012): :func:`snapping_scale`, :func:`snapping_grid`, :func:`snapping_epsilon`
  (exact rational arithmetic).
* Gaussian: :func:`analytic_gaussian_sigma`, :func:`analytic_gaussian_delta` (Balle-Wang exact
  condition for the continuous Gaussian); :func:`discrete_gaussian_sigma`,
  :func:`discrete_gaussian_delta` (Canonne-Kamath-Steinke exact delta for the discrete Gaussian).
* Zero-concentrated DP: :func:`zcdp_delta`, :func:`zcdp_epsilon`, :func:`zcdp_rho_for` (tight
  conversion) and :func:`zcdp_epsilon_simple` (Bun-Steinke).
* Composition: :func:`advanced_composition` (Dwork-Rothblum-Vadhan).
* :func:`laplace_scale`.

Privacy
-------
Nothing here touches data or draws randomness: the inputs are public parameters (epsilon, delta,
rho, sensitivities, bounds), so calling these functions releases nothing and spends no budget.
The guarantees they compute are stated by the mechanisms that use them.

References
----------
.. [Mir12] I. Mironov, "On significance of the least significant bits for differential
   privacy", CCS 2012.
.. [BW18] B. Balle, Y.-X. Wang, "Improving the Gaussian mechanism for differential privacy:
   analytical calibration and optimal denoising", ICML 2018.
.. [CKS20] C. Canonne, G. Kamath, T. Steinke, "The discrete Gaussian for differential privacy",
   NeurIPS 2020.
.. [BS16] M. Bun, T. Steinke, "Concentrated differential privacy: simplifications, extensions,
   and lower bounds", TCC 2016.
.. [DRV10] C. Dwork, G. Rothblum, S. Vadhan, "Boosting and differential privacy", FOCS 2010.
"""
from dpcore.calibration._common import ETA
from dpcore.calibration._composition import advanced_composition
from dpcore.calibration._discrete_gaussian import discrete_gaussian_delta, discrete_gaussian_sigma
from dpcore.calibration._gaussian import analytic_gaussian_delta, analytic_gaussian_sigma
from dpcore.calibration._laplace import laplace_scale, snapping_epsilon, snapping_grid, snapping_scale
from dpcore.calibration._zcdp import zcdp_delta, zcdp_epsilon, zcdp_epsilon_simple, zcdp_rho_for

__all__ = [
    "ETA",
    "laplace_scale",
    "snapping_scale",
    "snapping_grid",
    "snapping_epsilon",
    "analytic_gaussian_delta",
    "analytic_gaussian_sigma",
    "discrete_gaussian_delta",
    "discrete_gaussian_sigma",
    "zcdp_delta",
    "zcdp_epsilon",
    "zcdp_epsilon_simple",
    "zcdp_rho_for",
    "advanced_composition",
]
