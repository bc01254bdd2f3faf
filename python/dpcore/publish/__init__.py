"""Differentially private data publishing: many counts at once, consistent and accurate.

* :func:`hierarchical_histogram`: a k-ary tree of noisy counts over public bins, made
  consistent by Hay et al.'s constrained inference; range counts in O(k log_k N) from the tree.
* :func:`quadtree_histogram`: the same in 2-d (a quadtree, or c x c splits per node), with
  rectangle counts.
* :func:`consistent_tree`: that constrained inference alone (post-processing of any tree).
* :func:`nonnegative_consistent`: non-negative counts consistent with a total (the least-squares
  instance of Lee, Wang and Kifer's constrained maximum likelihood).
* :class:`ContinualCounter`: a running count over a stream, released after every event with the
  binary-tree mechanism.
* :func:`privelet`: Xiao, Wang and Gehrke's Haar-wavelet release, 1-d or multi-d, with range
  counts and their exact variances.
* :func:`matrix_mechanism`: a workload of linear queries answered from a noisy strategy
  (identity, hierarchical, wavelet or the workload's eigen-design) by least squares, with
  :func:`expected_error` exact.
* :func:`mwem`: Hardt, Ligett and McSherry's MWEM, synthetic data (a weighted histogram and
  sampled records) for a workload of counting queries.

Conventions (see each Privacy section): neighbouring relation add/remove one record (one event
for the counter); bounds, bins, horizons and branching factors are public and come from the
caller; noise is dpcore's exact discrete Laplace on exact integer counts (MWEM also selects
with dpcore's exact exponential mechanism); the accountant is charged once, before anything is
drawn; everything after the noise is post-processing.
``random_state=None`` is dpcore's cryptographically secure generator; seeds are for tests.

References
----------
.. [HRMS10] M. Hay, V. Rastogi, G. Miklau, D. Suciu, "Boosting the accuracy of differentially
   private histograms through consistency", PVLDB 3(1), 2010.
.. [QYL13] W. Qardaji, W. Yang, N. Li, "Understanding hierarchical methods for differentially
   private histograms", PVLDB 6(14), 2013.
.. [LWK15] J. Lee, Y. Wang, D. Kifer, "Maximum likelihood postprocessing for differential
   privacy under consistency constraints", KDD 2015.
.. [CSS11] T.-H. H. Chan, E. Shi, D. Song, "Private and continual release of statistics",
   ACM TISSEC 14(3), 2011.
.. [DNPR10] C. Dwork, M. Naor, T. Pitassi, G. N. Rothblum, "Differential privacy under
   continual observation", STOC 2010.
.. [XWG10] X. Xiao, G. Wang, J. Gehrke, "Differential privacy via wavelet transforms", ICDE
   2010.
"""
from dpcore.publish._continual import ContinualCounter
from dpcore.publish._hierarchical import MAX_BRANCHING as MAX_BRANCHING  # public limit
from dpcore.publish._hierarchical import (
    DEFAULT_BRANCHING,
    HierarchicalHistogram,
    QuadtreeHistogram,
    consistent_tree,
    hierarchical_histogram,
    nonnegative_consistent,
    quadtree_histogram,
    tree_levels,
)
from dpcore.publish._matrix import MAX_MATRIX_BINS as MAX_MATRIX_BINS  # public limit
from dpcore.publish._matrix import (
    STRATEGIES,
    MatrixRelease,
    expected_error,
    matrix_mechanism,
    strategy_matrix,
)
from dpcore.publish._mwem import MAX_MWEM_ROUNDS as MAX_MWEM_ROUNDS  # public limit
from dpcore.publish._mwem import MWEM_REPLAY as MWEM_REPLAY  # public default
from dpcore.publish._mwem import MWEMRelease, mwem
from dpcore.publish._wavelet import PriveletHistogram, privelet

__all__ = ["DEFAULT_BRANCHING", "STRATEGIES", "ContinualCounter", "HierarchicalHistogram",
           "MWEMRelease", "MatrixRelease", "PriveletHistogram", "QuadtreeHistogram",
           "consistent_tree", "expected_error", "hierarchical_histogram", "matrix_mechanism",
           "mwem", "nonnegative_consistent", "privelet", "quadtree_histogram",
           "strategy_matrix", "tree_levels"]

# doctest reads only the names a module defines: listing the re-exported functions and classes
# here lets ``doctest.testmod(dpcore.publish)`` run their examples.
__test__ = {name: globals()[name] for name in __all__ if callable(globals()[name])}
