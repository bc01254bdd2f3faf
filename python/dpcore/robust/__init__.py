"""Releases with data-dependent noise: smooth sensitivity, sample-and-aggregate,
propose-test-release and the sparse vector technique.

Global sensitivity calibrates noise to the worst data set; these frameworks calibrate it to the
data at hand, privately:

* :func:`median` adds noise scaled by the smooth sensitivity of the median (Nissim,
  Raskhodnikova, Smith 2007), computed in O(n log n) by the ``_robust`` kernel
  (:func:`smooth_sensitivity_median`).
* :func:`trimmed_mean` does the same for the trimmed mean, with a smooth bound built from the
  order statistics just outside the kept window.
* :func:`sample_aggregate` runs any estimator on disjoint blocks and releases a widened
  winsorized mean of the block estimates (NRS 2007; Smith 2011).
* :func:`ptr_median`, :func:`ptr_iqr`, :func:`ptr_trimmed_mean`: propose-test-release (Dwork,
  Lei 2009): test privately that the data are far from any data set whose local sensitivity
  exceeds the caller's proposed bound, then release with noise for that bound, or refuse
  (:class:`PTRResult`).
* :func:`sparse_vector` / :func:`above_threshold` answer "is this query above the threshold?"
  over a stream, paying only for the positives (Lyu, Su, Li 2017).

Conventions shared by the releases here (each Privacy section says which apply):

* **Bounds are public and required**; records are clipped to them. Nothing is inferred from the
  data.
* **Real outputs are grid points, drawn exactly.** :func:`median`, :func:`trimmed_mean` and the
  PTR releases round the clipped records to the public grid g = 2**floor(log2((upper - lower)
  2**-40)) and compute in integers; the smooth-sensitivity noise is drawn exactly (rational
  arithmetic on lazily refined uniforms, ``dpcore._exact``) and the other releases use the exact
  discrete Laplace of :func:`dpcore.laplace` and the exact exponential mechanism, so each output
  law is exactly the one documented and floating point leaks nothing. The sparse vector
  technique compares integers only.
* **Validate, charge once, draw** (``dpcore._release.release``): a bad argument raises before
  anything is charged; error messages never quote data values or the number of records.
* ``random_state=None`` is dpcore's cryptographically secure generator; seeds are for tests.
"""
from __future__ import annotations

from dpcore import _smooth
from dpcore._smooth import LIPSCHITZ_H4 as LIPSCHITZ_H4  # public: the h4 noise's constant
from dpcore._smooth import SmoothMedianPlan
from dpcore.robust import _aggregate
from dpcore.robust._aggregate import sample_aggregate
from dpcore.robust._median import median, smooth_sensitivity_median, trimmed_mean
from dpcore.robust._ptr import PTRResult, ptr_iqr, ptr_median, ptr_trimmed_mean
from dpcore.robust._svt import SparseVectorPlan, above_threshold, sparse_vector

__all__ = [
    "smooth_sensitivity_median", "median", "trimmed_mean", "sample_aggregate", "ptr_median",
    "ptr_iqr", "ptr_trimmed_mean", "PTRResult", "sparse_vector", "above_threshold",
    "SmoothMedianPlan", "SparseVectorPlan", "SMOOTH_GRID_BITS", "MIN_SMOOTH_EPSILON",
    "MAX_SMOOTH_EPSILON", "AGGREGATE_GRID", "WIDEN",
    # deprecated aliases, removed in the next release
    "GRID_BITS", "MIN_EPSILON", "MAX_EPSILON",
]

#: Records are rounded to a grid of 2**-SMOOTH_GRID_BITS of the bounds' width (and outputs lie
#: on it). Finer than the library's automatic noise grids (``dpcore.stats.GRID_BITS`` = 36).
SMOOTH_GRID_BITS = _smooth.SMOOTH_GRID_BITS
#: Smallest epsilon accepted by the smooth-sensitivity releases (keeps beta far above rounding).
MIN_SMOOTH_EPSILON = _smooth.MIN_SMOOTH_EPSILON
#: Largest epsilon accepted by the releases here (keeps exp(epsilon) and the calibration
#: finite); the library-wide limit is 2**40.
MAX_SMOOTH_EPSILON = _smooth.MAX_SMOOTH_EPSILON
#: Default number of public grid points the aggregation's quartiles are chosen from.
AGGREGATE_GRID = _aggregate.AGGREGATE_GRID
#: The winsorizing interval is [q1 - WIDEN iqr, q3 + WIDEN iqr] (Smith 2011's widening).
WIDEN = _aggregate.WIDEN

#: Deprecated alias of :data:`SMOOTH_GRID_BITS` (removed in the next release).
GRID_BITS = SMOOTH_GRID_BITS
#: Deprecated alias of :data:`MIN_SMOOTH_EPSILON` (removed in the next release).
MIN_EPSILON = MIN_SMOOTH_EPSILON
#: Deprecated alias of :data:`MAX_SMOOTH_EPSILON` (removed in the next release).
MAX_EPSILON = MAX_SMOOTH_EPSILON
