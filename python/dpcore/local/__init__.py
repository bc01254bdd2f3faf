"""Local differential privacy: per-user randomizers and the estimators that decode them.

In the local model each user privatises their own value before it leaves their device; the
collector only ever sees the reports. A randomizer R is epsilon-LDP when for any two values v,
v' of one user and every report y, P(R(v) = y) <= e^epsilon P(R(v') = y). The functions here
apply R independently to a whole array of users (one value per user) in a compiled kernel, and
the estimators (:func:`estimate_frequencies`, :func:`estimate_mean`) are post-processing of the
reports: they cost no privacy.

Exact laws. e^epsilon is irrational, so no sampler can draw probabilities such as
e^epsilon / (e^epsilon + k - 1) exactly. Here every probability is instead an exact rational
chosen from epsilon once, in integer arithmetic, such that the likelihood ratio of the law is
at most a rigorous rational *lower* bound of e^epsilon; the kernel then draws that rational
law exactly (a uniform 64-bit integer compared with an integer threshold, uniform integers by
rejection, a full-precision uniform compared with a double). No probability is ever rounded to
a double. So the guarantee is epsilon-LDP for the requested epsilon (``epsilon_effective`` <=
epsilon) and the estimators, built from the same rationals, are exactly unbiased. The laws are
reported by :func:`frequency_oracle` (``p``, ``q`` as Fractions) and :class:`DuchiMechanism`.

Accounting. A per-user randomizer needs no central accountant; when one is given, it is
charged once per call the local epsilon of every user (parallel composition across users, each
user's value being used once): the *effective* epsilon, ``epsilon_effective`` of the
calibration, under a label naming the requested (nominal) one, e.g.
``"local.randomized_response(epsilon=1.0)"``. The effective epsilon is the exact privacy loss
log(ratio) of the rational law drawn (``ratio`` its largest likelihood ratio), rounded up to a
double proven >= it, and never above the nominal epsilon; it is below the nominal by an ulp or
two, except where the 64-bit thresholds saturate (local epsilons beyond about 44, where the
nominal would overstate the loss). :func:`planar_laplace` is charged its plain LDP epsilon over
the public ``bounds`` it requires for that (a rounded-up bound of the loss over the box). An
empty input releases nothing and charges nothing.

Decoding is post-processing (no charge). Local hashing decodes in O(n k m) integer operations
(n reports, k values, m base-g digits), in the compiled kernel.

Privacy
-------
Every randomizer here is epsilon-LDP for the requested epsilon (neighbouring relation: any two
values of one user; the law drawn has ``epsilon_effective`` <= epsilon), each function's own
Privacy section stating its law; the estimators are post-processing.

Not constant-time: rejection loops run a random number of times (their law does not depend on
the value, but the kernels are not hardened against timing side channels; ALGORITHMS 0.3(4)).

References
----------
.. [War65] S. L. Warner, "Randomized response: a survey technique for eliminating evasive answer
   bias", JASA 1965.
.. [WBLJ17] T. Wang, J. Blocki, N. Li, S. Jha, "Locally differentially private protocols for
   frequency estimation", USENIX Security 2017.
.. [EPK14] U. Erlingsson, V. Pihur, A. Korolova, "RAPPOR", CCS 2014.
.. [DJW13] J. C. Duchi, M. I. Jordan, M. J. Wainwright, "Local privacy and statistical minimax
   rates", FOCS 2013 (JASA 2018).
.. [ABCP13] M. E. Andres, N. E. Bordenabe, K. Chatzikokolakis, C. Palamidessi,
   "Geo-indistinguishability", CCS 2013.
"""
from dpcore.local import _epsilon, _frequency
from dpcore.local._frequency import (
    MAX_HASH_RANGE as MAX_HASH_RANGE,
    FrequencyEstimate,
    FrequencyOracle,
    LocalHashingReports,
    estimate_frequencies,
    frequency_oracle,
    local_hashing,
    randomized_response,
    unary_encoding,
)
from dpcore.local._numeric import DuchiMechanism, MeanEstimate, duchi, estimate_mean
from dpcore.local._planar import MAX_GRID_INDEX as MAX_GRID_INDEX
from dpcore.local._planar import PlanarLaplaceMechanism, planar_laplace

# Bound here with their doc comments: Sphinx reads the ``#:`` comments of the module it documents.
#: Smallest local epsilon accepted: below it the 64-bit thresholds cannot separate the laws.
MIN_EPSILON = _epsilon.MIN_EPSILON
#: Largest domain size k (values are 0 .. k - 1).
MAX_CATEGORIES = _frequency.MAX_CATEGORIES

__all__ = [
    "randomized_response",
    "unary_encoding",
    "local_hashing",
    "estimate_frequencies",
    "duchi",
    "estimate_mean",
    "frequency_oracle",
    "FrequencyOracle",
    "FrequencyEstimate",
    "LocalHashingReports",
    "DuchiMechanism",
    "MeanEstimate",
    "planar_laplace",
    "PlanarLaplaceMechanism",
    "MIN_EPSILON",
    "MAX_CATEGORIES",
]
