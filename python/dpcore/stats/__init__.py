"""Differentially private statistics: counts, sums, means, variances, quantiles and histograms.

Every function here takes the data ``x`` (any shape; **each element is one record**), the
public bounds that determine the sensitivity, the privacy parameters, ``random_state`` and
``accountant``, and returns a numpy-like result.

Conventions shared by all of them (see each function's Privacy section):

* **Neighbouring relation: add/remove one record** by default. The number of records n is
  private: means and variances carry it inside one Laplace release of non-negative per-record
  weights (Bernstein sums), or estimate it with a noisy count (Gaussian). ``n=`` gives a public
  n (used only after the noise) to sums, means, variances and histograms;
  ``relation="replace"`` calibrates for replace-one neighbours (then the size of the data is
  public). Without it, under replace-one neighbours the guarantees hold with (at most) twice
  the epsilon (a replacement is a removal plus an addition).
* **Bounds are public and required.** Records are clipped to ``bounds`` before anything is
  computed (histograms: records outside ``range`` are not counted, as in numpy); bounds are
  never inferred from the data.
* **Sums are exact.** Each clipped record is mapped to integers (a power-of-two grid about
  2**-36 of the noise scale) and the integers are added exactly, so the sensitivity in integer
  units is exact and cannot be underestimated through floating-point rounding of a long sum
  (Casacuberta et al. 2022). Exact discrete Laplace or discrete Gaussian noise is added to the
  integers; the released floats are post-processing.
* **Accounting.** The accountant is charged the requested ``epsilon`` (and ``delta``) once,
  before anything is drawn; if the budget would be overspent it raises ``BudgetExceeded`` and
  nothing is released. The guarantee actually given is at most what is charged.
* ``random_state=None`` is dpcore's cryptographically secure generator; seeds are for tests.
"""
from dpcore._floats import GRID_BITS as GRID_BITS  # public: the sums' grid resolution
from dpcore._release.bins import MAX_HISTOGRAM_CELLS as MAX_HISTOGRAM_CELLS  # public limit
from dpcore._release.quantiles import MAX_QUANTILE_GRID as MAX_QUANTILE_GRID  # public limit
from dpcore._release.quantiles import QUANTILE_BITS as QUANTILE_BITS  # the levels' resolution
from dpcore.mestimators import perturbed_histogram
from dpcore.stats._histograms import histogram, histogramdd
from dpcore.stats._moments import count, mean, std, sum, var
from dpcore.stats._quantiles import median, quantile

__all__ = ["count", "sum", "mean", "var", "std", "quantile", "median", "histogram", "histogramdd",
           "perturbed_histogram"]
