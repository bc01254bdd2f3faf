"""Private model selection (parameter tuning) with the exponential mechanism.

Chaudhuri, Monteleoni and Sarwate (2011, Algorithm 3): to choose among m hyper-parameter values,
split the data into m + 1 disjoint parts, fit candidate i privately on part i, score every
candidate on the held-out part m + 1 (e.g. its number of errors there) and pick one with the
exponential mechanism. :func:`select_candidate` is the last step, for any scores of known
sensitivity; :func:`validation_errors` computes the usual score.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence
import numpy as np

from dpcore import _validation as check
from dpcore.selection import ExponentialMechanism

if TYPE_CHECKING:
    from numpy.typing import ArrayLike
    from dpcore.random import RandomStateLike
    from dpcore.accounting import AccountantLike

__all__ = ["select_candidate", "validation_errors"]


def _scores(scores):
    if isinstance(scores, (str, bytes)):
        raise TypeError(f"scores must be a 1-d array of real numbers, got {type(scores).__name__}")
    arr = check.finite_array(scores, "scores")
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(
            f"scores must be a non-empty 1-d array (one score per candidate), got shape {arr.shape}"
        )
    return arr


def select_candidate(scores: ArrayLike, *, epsilon: float, sensitivity: float = 1.0,
                     higher_is_better: bool = True, monotonic: bool = False, method: str = "exact",
                     random_state: RandomStateLike = None, accountant: AccountantLike | None = None
                     ) -> int:
    """Choose one candidate from its held-out scores with the exponential mechanism.

    Candidate i is chosen with probability proportional to exp(epsilon s_i / (2 sensitivity)),
    with s_i = score_i if ``higher_is_better`` else -score_i (without the 2 when
    ``monotonic``).

    Parameters
    ----------
    scores : array_like of float, shape (m,)
        One score per candidate, computed on a held-out (validation) part of the data that no
        candidate was fitted on: e.g. the number of validation errors
        (:func:`validation_errors`, then ``higher_is_better=False``) or of correct predictions.
        Finite values only.
    epsilon : float
        Privacy parameter of the selection, > 0.
    sensitivity : float, default=1.0
        Public bound > 0 on how much any one score can change when one record of the held-out
        part is added or removed. 1 for counts of errors or of correct predictions; b - a for a
        sum of per-record losses clipped to [a, b].
    higher_is_better : bool, default=True
        False for losses and error counts.
    monotonic : bool, default=False
        Declare that adding a record moves all scores in the same direction (true for counts
        of errors, or of correct predictions, under add/remove neighbours): halves the noise.
        Not valid under replace-one neighbours. Never inferred.
    method : {"exact", "gumbel", "permute-and-flip", "inverse-cdf"}, default="exact"
        Sampler, as in :func:`dpcore.selection.exponential`; ``"exact"`` has exactly the
        mechanism's law in floating point. ``"permute-and-flip"`` has its own (never worse) law.
    random_state : None, int, numpy Generator or BitGenerator, optional
        None (default): dpcore's process-wide cryptographically secure generator. Seeds are for
        tests and reproducibility only.
    accountant : dpcore.Accountant or ParallelBlock, optional
        Charged with the selection's effective epsilon before anything is drawn; if the budget
        would be overspent it raises ``BudgetExceeded`` and nothing is released. For the whole
        procedure, pass the parallel block the fits were charged to (see Privacy).

    Returns
    -------
    int
        Index of the chosen candidate (use ``candidates[index]``).

    Raises
    ------
    ValueError
        Empty, non-1-d or non-finite scores (naming ``scores``), epsilon or sensitivity <= 0,
        an unknown method.
    TypeError
        Non-numeric scores or parameters.

    Privacy
    -------
    The selection: pure epsilon-DP with respect to the held-out part, for scores whose
    sensitivity is at most ``sensitivity`` under the neighbouring relation it was derived for
    (add/remove for ``monotonic=True``; add/remove or replace-one otherwise), with the
    candidates themselves treated as fixed (McSherry-Talwar; the score scale is rounded down, so
    the charged ``epsilon_effective`` <= epsilon).

    The whole tuning procedure (CMS 2011, Algorithm 3): split the records into m + 1 disjoint
    parts by a rule that looks at each record alone (a public attribute, or an independent
    uniform draw per record; never a sort of the data set), fit candidate i on part i with an
    epsilon_i-DP learner, score all candidates on part m + 1 and call this function with
    epsilon_s. Every record lies in exactly one part and affects one mechanism: a record of part
    i changes only candidate i (an epsilon_i-DP release; the selection is post-processing of it
    for fixed validation data), a validation record changes only the selection. By parallel
    composition the procedure (the chosen candidate, or all of them) is
    max(epsilon_1, ..., epsilon_m, epsilon_s)-DP under add/remove neighbours: the fits' budgets
    compose in parallel, and the selection's epsilon is paid on the held-out part, which is
    disjoint from them. Charge all m + 1 releases to one ``accountant.parallel()`` block to have
    the accountant record that maximum. If the validation data overlaps the training parts, the
    costs add up instead (sequential composition): charge the selection to the accountant
    itself.

    References
    ----------
    .. [CMS11] K. Chaudhuri, C. Monteleoni, A. Sarwate, "Differentially private empirical risk
       minimization", JMLR 12, 2011 (Algorithm 3).
    .. [MT07] F. McSherry, K. Talwar, "Mechanism design via differential privacy", FOCS 2007.

    Examples
    --------
    Three candidates were fitted privately (1.0-DP each) on three disjoint parts; the fourth
    part gave their validation error counts:

    >>> import dpcore
    >>> from dpcore.tuning import select_candidate
    >>> errors = [412, 57, 130]
    >>> acc = dpcore.Accountant(1.0)
    >>> with acc.parallel(label="tuning") as block:
    ...     for _ in range(3):
    ...         _ = block.charge(epsilon=1.0)          # the three private fits
    ...     best = select_candidate(errors, epsilon=1.0, higher_is_better=False,
    ...                             random_state=0, accountant=block)
    >>> best, acc.spent
    (1, (1.0, 0.0))
    """
    values = _scores(scores)
    if not isinstance(higher_is_better, (bool, np.bool_)):
        raise TypeError(
            f"higher_is_better must be True or False, got {type(higher_is_better).__name__}"
        )
    mech = ExponentialMechanism.calibrate(
        sensitivity=sensitivity, epsilon=epsilon, monotonic=monotonic, method=method
    )
    utility = values if higher_is_better else -values
    return mech.select(utility, random_state=random_state, accountant=accountant)


def validation_errors(models: Sequence[Any], X: ArrayLike, y: ArrayLike) -> np.ndarray:
    """Number of misclassified validation records for each model (a score of sensitivity 1).

    Not a release: the counts are exact and private; pass them to :func:`select_candidate`
    with ``higher_is_better=False`` and ``sensitivity=1``.

    Parameters
    ----------
    models : sequence
        Fitted models, each with a ``predict(X)`` method, or callables ``f(X)`` returning the
        predicted labels.
    X : array_like
        Validation inputs (held out: no model was fitted on them).
    y : array_like, shape (n,)
        Validation labels.

    Returns
    -------
    ndarray of int64, shape (len(models),)
        Errors per model. Adding or removing one validation record changes each count by at
        most 1, all in the same direction.

    Raises
    ------
    ValueError
        No models, or predictions whose shape differs from ``y``'s.

    Privacy
    -------
    Not a release: the counts are exact functions of the private validation data and must only
    be passed to a mechanism such as :func:`select_candidate`. Under add/remove neighbours (one
    validation record) each count has sensitivity 1 and all move in the same direction
    (``monotonic=True`` is valid); under replace-one the sensitivity is 1 but not monotone.
    Nothing is drawn or charged.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcore.tuning import validation_errors
    >>> X = np.array([[-2.0], [-1.0], [1.0], [3.0]])
    >>> y = np.array([0, 0, 1, 1])
    >>> by_sign = lambda X: (X[:, 0] > 0).astype(int)
    >>> always_one = lambda X: np.ones(len(X), dtype=int)
    >>> validation_errors([by_sign, always_one], X, y)
    array([0, 2])
    """
    models = list(models)
    if not models:
        raise ValueError("models must contain at least one model")
    labels = np.asarray(y)
    errors = np.empty(len(models), dtype=np.int64)
    for i, model in enumerate(models):
        predict = model if callable(model) and not hasattr(model, "predict") else model.predict
        predicted = np.asarray(predict(X))
        if predicted.shape != labels.shape:
            raise ValueError(
                f"model {i} predicted shape {predicted.shape}, but y has shape {labels.shape}"
            )
        errors[i] = np.count_nonzero(predicted != labels)
    return errors
