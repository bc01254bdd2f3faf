"""dpcore.tuning: the selection's law against the exponential mechanism's on small score vectors
(orientation, sensitivity, monotonic), validation error counts, the accountant (alone and in a
parallel block, CMS Algorithm 3), errors."""
import doctest
import inspect
import math
import re
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats as sps

from _gof import ALPHA, chisquare_pvalue

import dpcore
from dpcore import tuning
from dpcore.tuning import select_candidate, validation_errors

N = 20_000
ERRORS = np.array([7.0, 3.0, 4.0, 9.0, 3.0, 5.0])  # validation error counts of six candidates


def em_law(utility, scale):
    """P(i) proportional to exp(scale * u_i), from exact differences to the maximum."""
    u = [Fraction(float(v)) for v in utility]
    top = max(u)
    w = np.array([math.exp(float(scale * (v - top))) for v in u])
    return w / w.sum()


def power(p_true, p_null, n_draws):
    p_true, p_null = np.asarray(p_true), np.asarray(p_null)
    lam = n_draws * np.sum((p_true - p_null) ** 2 / p_null)
    df = len(p_null) - 1
    return sps.ncx2.sf(sps.chi2.isf(ALPHA, df), df, lam)


def draw(scores, seed, n_draws=N, **kwargs):
    gen = np.random.Generator(dpcore.ChaCha20(seed))
    picks = [select_candidate(scores, random_state=gen, **kwargs) for _ in range(n_draws)]
    return np.bincount(picks, minlength=len(scores))


@pytest.mark.parametrize("method", ["exact", "gumbel", "inverse-cdf"])
def test_law_of_error_counts(method):
    """Fewer errors is better: P(i) proportional to exp(-epsilon z_i / 2) (CMS Algorithm 3)."""
    counts = draw(ERRORS, 1, epsilon=1.0, higher_is_better=False, method=method)
    law = em_law(-ERRORS, 0.5)
    assert chisquare_pvalue(counts, law) > ALPHA
    wrong = em_law(-ERRORS, 0.6)
    assert power(law, wrong, N) > 1 - 1e-6
    assert chisquare_pvalue(counts, wrong) < ALPHA
    # the orientation matters: the law of "higher is better" is far off
    assert chisquare_pvalue(counts, em_law(ERRORS, 0.5)) < ALPHA


def test_law_higher_is_better_and_sensitivity():
    accuracy = np.array([0.902, 0.9, 0.8995, 0.897])  # accuracy on 1000 records: sensitivity 1e-3
    counts = draw(accuracy, 2, epsilon=2.0, sensitivity=1e-3)
    scale = dpcore.selection.ExponentialMechanism.calibrate(sensitivity=1e-3, epsilon=2.0).scale
    assert scale == pytest.approx(1000.0)
    law = em_law(accuracy, scale)
    assert chisquare_pvalue(counts, law) > ALPHA
    assert chisquare_pvalue(counts, em_law(accuracy, scale * 1.1)) < ALPHA


def test_monotonic_error_counts_drop_the_factor_two():
    counts = draw(ERRORS, 3, epsilon=1.0, higher_is_better=False, monotonic=True)
    law = em_law(-ERRORS, 1.0)
    assert chisquare_pvalue(counts, law) > ALPHA
    assert power(law, em_law(-ERRORS, 0.5), N) > 1 - 1e-6
    assert chisquare_pvalue(counts, em_law(-ERRORS, 0.5)) < ALPHA


def test_permute_and_flip_prefers_the_best_at_least_as_often():
    counts_pf = draw(ERRORS, 4, epsilon=1.0, higher_is_better=False, method="permute-and-flip")
    law = em_law(-ERRORS, 0.5)
    best = counts_pf[[1, 4]].sum() / N
    assert best >= law[[1, 4]].sum() - 4 * math.sqrt(0.25 / N)


def test_returns_a_python_int_and_reproduces():
    a = select_candidate([1.0, 2.0, 3.0], epsilon=1.0, random_state=9)
    b = select_candidate([1.0, 2.0, 3.0], epsilon=1.0, random_state=9)
    assert isinstance(a, int) and a == b


# ------------------------------------------------------------------------------------------------
# validation errors


class Threshold:
    def __init__(self, t):
        self.t = t

    def predict(self, X):
        return (np.asarray(X)[:, 0] > self.t).astype(int)


def test_validation_errors_models_and_callables():
    X = np.array([[-2.0], [-1.0], [0.5], [1.0], [3.0]])
    y = np.array([0, 0, 1, 1, 1])
    models = [Threshold(0.0), Threshold(2.0), lambda X: np.zeros(len(X), dtype=int)]
    errors = validation_errors(models, X, y)
    assert errors.dtype == np.int64
    assert errors.tolist() == [0, 2, 3]
    # sensitivity 1, all in the same direction: adding a record changes every count by 0 or 1
    X2, y2 = np.vstack([X, [[1.5]]]), np.append(y, 0)
    diff = validation_errors(models, X2, y2) - errors
    assert set(diff.tolist()) <= {0, 1}


def test_validation_errors_checks():
    with pytest.raises(ValueError, match="models must contain"):
        validation_errors([], np.zeros((2, 1)), np.zeros(2))
    with pytest.raises(ValueError, match="model 0 predicted shape"):
        validation_errors([lambda X: np.zeros(3)], np.zeros((2, 1)), np.zeros(2))


# ------------------------------------------------------------------------------------------------
# accountant


def test_accountant_charged_and_refusal_draws_nothing():
    acc = dpcore.Accountant(1.0)
    select_candidate(ERRORS, epsilon=0.6, higher_is_better=False, accountant=acc, random_state=0)
    (entry,) = acc.history
    assert entry.epsilon <= 0.6 and entry.epsilon == pytest.approx(0.6)
    gen = np.random.Generator(dpcore.ChaCha20(5))
    before = gen.bit_generator.state
    with pytest.raises(dpcore.BudgetExceeded):
        select_candidate(ERRORS, epsilon=0.6, accountant=acc, random_state=gen)
    assert gen.bit_generator.state == before
    assert len(acc.history) == 1


def test_cms_pipeline_costs_the_maximum_in_a_parallel_block():
    """Fits on m disjoint parts (charged to a parallel block) and the selection on the held-out
    part (charged to the same block): the accountant records max, as the Privacy section says."""
    acc = dpcore.Accountant(1.0)
    with acc.parallel(label="tuning") as block:
        for eps_fit in (0.5, 1.0, 0.75):
            block.charge(epsilon=eps_fit)
        i = select_candidate(ERRORS[:3], epsilon=0.8, higher_is_better=False, random_state=0,
                             accountant=block)
    assert 0 <= i < 3
    assert acc.spent == (1.0, 0.0)
    assert acc.history[-1].count == 4
    # charged to the accountant itself (validation data overlapping the fits), it adds up
    acc2 = dpcore.Accountant(2.0)
    acc2.charge(epsilon=1.0)
    select_candidate(ERRORS, epsilon=0.8, random_state=0, accountant=acc2)
    assert acc2.spent[0] == pytest.approx(1.8)


# ------------------------------------------------------------------------------------------------
# errors and documentation


@pytest.mark.parametrize("scores, kwargs, exc, match", [
    ([1.0, np.nan], {}, ValueError, "scores must not contain NaN"),
    ([1.0, np.inf], {}, ValueError, "scores must not contain NaN or infinite"),
    ([], {}, ValueError, "scores must be a non-empty 1-d array"),
    ([[1.0, 2.0]], {}, ValueError, "scores must be a non-empty 1-d array"),
    ("abc", {}, TypeError, "scores"),
    ([1.0, 2.0], {"epsilon": 0.0}, ValueError, "epsilon must be > 0"),
    ([1.0, 2.0], {"sensitivity": -1.0}, ValueError, "sensitivity must be > 0"),
    ([1.0, 2.0], {"higher_is_better": "no"}, TypeError, "higher_is_better"),
    ([1.0, 2.0], {"method": "fast"}, ValueError, "method must be one of"),
])
def test_errors_name_the_parameter(scores, kwargs, exc, match):
    kwargs = {"epsilon": 1.0, **kwargs}
    with pytest.raises(exc, match=match):
        select_candidate(scores, **kwargs)


def test_privacy_section_and_examples():
    doc = inspect.getdoc(select_candidate)
    flat = " ".join(doc.split())
    assert re.search(r"^Privacy\n-------\n", doc, flags=re.MULTILINE)
    assert "parallel composition" in flat and "max(epsilon_1, ..., epsilon_m, epsilon_s)-DP" in flat
    result = doctest.testmod(tuning, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 5
