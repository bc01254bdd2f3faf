"""The contract every private learner shares (dpcore.learn._base, issue 14): clones share the
accountant and the generator, every argument is checked before the charge, nothing un-noised
is stored, and errors quote no private value."""
import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.base import BaseEstimator, clone  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402

import dpcore  # noqa: E402
from dpcore.accounting import PrivacyWarning  # noqa: E402
from dpcore.learn import (  # noqa: E402
    PCA,
    GaussianNB,
    LinearRegression,
    LinearSVC,
    LogisticRegression,
    PrivateGridSearch,
    RandomFourierFeatures,
)

_rng = np.random.default_rng(0)  # insecure-ok: test data
_X = _rng.uniform(-1, 1, (300, 4))
_yc = (_X[:, 0] + _X[:, 1] > 0).astype(int)
_yr = _X @ np.array([0.3, -0.2, 0.1, 0.0])

# name -> (make(random_state, accountant), X, y); every estimator with a random_state
ESTIMATORS = {
    "LogisticRegression": (lambda rs, acc: LogisticRegression(
        data_norm=2.0, classes=[0, 1], random_state=rs, accountant=acc), _X, _yc),
    "LinearSVC": (lambda rs, acc: LinearSVC(
        data_norm=2.0, classes=[0, 1], random_state=rs, accountant=acc), _X, _yc),
    "LinearRegression": (lambda rs, acc: LinearRegression(
        bounds_X=(-1, 1), bounds_y=(-1, 1), random_state=rs, accountant=acc), _X, _yr),
    "GaussianNB": (lambda rs, acc: GaussianNB(
        bounds=(-1, 1), classes=[0, 1], random_state=rs, accountant=acc), _X, _yc),
    "PCA": (lambda rs, acc: PCA(2, data_norm=2.0, random_state=rs, accountant=acc), _X, None),
    "PrivateGridSearch": (lambda rs, acc: PrivateGridSearch(
        LogisticRegression(data_norm=2.0), {"alpha": [0.01, 0.1]}, classes=[0, 1],
        random_state=rs, accountant=acc), _X, _yc),
    "RandomFourierFeatures": (lambda rs, acc: RandomFourierFeatures(
        n_components=5, random_state=rs), _X, None),
}


def _has_accountant(est):
    return "accountant" in est.get_params(deep=False)


@pytest.mark.parametrize("generator", ["Generator", "BitGenerator", "RandomState"])
@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_clone_shares_accountant_and_generator(name, generator):
    """sklearn.base.clone (cross_val_score, GridSearchCV) must not deep-copy the accountant (the
    clone's fits would never be charged) nor the generator (clones would draw the same noise)."""
    make, X, y = ESTIMATORS[name]
    gen = {"Generator": dpcore.default_rng(1), "BitGenerator": dpcore.ChaCha20(1),
           "RandomState": np.random.RandomState(1)}[generator]  # insecure-ok: test only
    acc = dpcore.Accountant(100.0)
    est = make(gen, acc)
    twin = clone(est)
    assert twin.random_state is gen
    if _has_accountant(est):
        assert twin.accountant is acc
    first = clone(est).fit(X, y)
    second = twin.fit(X, y)
    if _has_accountant(est):
        assert acc.spent[0] == pytest.approx(2.0)   # both clones charged the original
    # the shared generator advanced: the two clones drew different noise
    out = {"LogisticRegression": "coef_", "LinearSVC": "coef_", "LinearRegression": "coef_",
           "GaussianNB": "theta_", "PCA": "components_", "RandomFourierFeatures": "frequencies_"}
    if name in out:
        assert not np.allclose(getattr(first, out[name]), getattr(second, out[name]))


@pytest.mark.parametrize("bad", ["abc", 1.5, -3, [], object()], ids=repr)
@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_bad_random_state_raises_before_the_charge(name, bad):
    make, X, y = ESTIMATORS[name]
    acc = dpcore.Accountant(10.0)
    with pytest.raises((TypeError, ValueError)):
        make(bad, acc).fit(X, y)
    assert acc.spent == (0.0, 0.0) and acc.history == []


@pytest.mark.parametrize("name", [n for n in ESTIMATORS if n != "RandomFourierFeatures"])
def test_bad_accountant_raises_before_drawing(name):
    make, X, y = ESTIMATORS[name]
    rng = dpcore.default_rng(2)
    state = rng.bit_generator.state
    with pytest.raises(TypeError, match="accountant"):
        make(rng, object()).fit(X, y)
    assert rng.bit_generator.state == state


@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_no_unnoised_diagnostics_are_stored(name):
    make, X, y = ESTIMATORS[name]
    est = make(3, None).fit(X, y)
    for attr in ("n_iter_", "gradient_norm_", "converged_", "trace_", "validation_errors_",
                 "acceptance_rate_"):
        assert not hasattr(est, attr), attr


# ------------------------------------------------------------------------------------------------
# PrivateGridSearch checks every candidate (every step, every estimator type) before the charge

@pytest.mark.parametrize("estimator, grid", [
    (GaussianNB(bounds=(-1, 1)), {"var_floor": [1e-3, -1.0]}),
    (GaussianNB(bounds=(-1, 1)), {"priors": [None, [0.2, 0.3, 0.5]]}),
    (LinearSVC(data_norm=2.0), {"h": [0.5, -1.0]}),
    (LinearRegression(bounds_y=(-1, 1)), {"bounds_X": [(-1, 1), (np.zeros(3), np.ones(3))]}),
    (make_pipeline(PCA(data_norm=2.0), LogisticRegression(data_norm=2.0)),
     {"pca__n_components": [2, 4]}),          # ppca needs n_components < n_features = 4
    (make_pipeline(PCA(2, data_norm=2.0), LogisticRegression(data_norm=2.0)),
     {"logisticregression__alpha": [0.1, 0.0]}),
    (make_pipeline(RandomFourierFeatures(n_components=5), LinearSVC(data_norm=1.0)),
     {"randomfourierfeatures__random_state": [0, "abc"]}),
], ids=["nb-var_floor", "nb-priors", "svc-h", "linreg-bounds", "pca-k", "pipe-alpha", "rff-seed"])
def test_search_checks_every_candidate_before_the_charge(estimator, grid):
    acc = dpcore.Accountant(10.0)
    with pytest.raises((ValueError, TypeError)):
        PrivateGridSearch(estimator, grid, classes=[0, 1], random_state=0,
                          accountant=acc).fit(_X, _yc)
    assert acc.history == []


def test_search_pipeline_charges_sum_on_each_partition():
    """PCA -> LogisticRegression charges epsilon twice per candidate: the charges sum on the
    candidate's partition, and the block costs the largest partition total."""
    acc = dpcore.Accountant(10.0)
    pipe = make_pipeline(PCA(2, data_norm=2.0), LogisticRegression(data_norm=2.0))
    PrivateGridSearch(pipe, {"logisticregression__alpha": [0.01, 0.1]}, epsilon=1.0,
                      classes=[0, 1], random_state=0, accountant=acc).fit(_X, _yc)
    assert acc.spent[0] == pytest.approx(2.0)


# ------------------------------------------------------------------------------------------------
# Errors quote no private value

@pytest.mark.parametrize("name", ["LogisticRegression", "LinearSVC", "LinearRegression",
                                  "GaussianNB", "PCA", "PrivateGridSearch"])
def test_input_errors_quote_no_private_value(name):
    make, X, y = ESTIMATORS[name]
    secret = 123456.789
    x1 = np.full(300, secret)                       # a 1-d X: scikit-learn dumps the array
    with pytest.raises(ValueError) as info:
        make(0, None).fit(x1, y)
    assert "123456" not in str(info.value) and "Reshape" in str(info.value)
    if y is not None:                               # inconsistent lengths: counts not quoted
        with pytest.raises(ValueError) as info:
            make(0, None).fit(np.vstack([X, X[:7]]), y)
        assert "307" not in str(info.value) and "300" not in str(info.value)
    Xs = X.astype(object)
    Xs[5, 1] = "patient-4711"                       # a string in X: numpy quotes it
    with pytest.raises(ValueError) as info:
        make(0, None).fit(Xs, y)
    assert "4711" not in str(info.value)


def test_single_label_error_quotes_no_label():
    y = np.full(_X.shape[0], 987)
    with pytest.raises(ValueError, match="class") as info, pytest.warns(PrivacyWarning):
        LogisticRegression(data_norm=2.0).fit(_X, y)
    assert "987" not in str(info.value)


def test_priors_error_quotes_no_class_count():
    # with classes taken from y, the number of classes present is private
    y = np.arange(_X.shape[0]) % 7
    with pytest.raises(ValueError, match="priors") as info, pytest.warns(PrivacyWarning):
        GaussianNB(bounds=(-1, 1), priors=[0.5, 0.5]).fit(_X, y)
    assert "7" not in str(info.value)


@pytest.mark.parametrize("make", [
    lambda c: LogisticRegression(data_norm=2.0, classes=c, random_state=0),
    lambda c: LinearSVC(data_norm=2.0, classes=c, random_state=0),
    lambda c: GaussianNB(bounds=(-1, 1), classes=c, random_state=0),
], ids=["LogisticRegression", "LinearSVC", "GaussianNB"])
def test_label_set_read_from_y_warns_and_names_no_label(make):
    """classes=None reads the label set from the private y: a PrivacyWarning says so (quoting
    no label); with the public classes there is no warning (warnings are errors in this suite)."""
    y = np.where(_X[:, 0] > 0, 4321, 8765)
    with pytest.warns(PrivacyWarning, match="classes=None") as record:
        make(None).fit(_X, y)
    assert not any(s in str(w.message) for w in record for s in ("4321", "8765"))
    make([4321, 8765]).fit(_X, y)


def test_2d_y_error_quotes_no_row_count():
    # GaussianNB is private under add/remove: the number of rows is private
    y = np.column_stack([_yc, _yc])
    with pytest.raises(ValueError, match="1d array") as info:
        GaussianNB(bounds=(-1, 1), classes=[0, 1]).fit(_X, y)
    assert "300" not in str(info.value)


@pytest.mark.parametrize("classes, match", [([0, 1, 1], "must not repeat a label"),
                                            ([[0, 1], [2, 3]], "1-d list"),
                                            ([4], "at least 2 distinct")])
@pytest.mark.parametrize("make", [
    lambda c, acc: GaussianNB(bounds=(-1, 1), classes=c, accountant=acc),
    lambda c, acc: LogisticRegression(data_norm=2.0, classes=c, accountant=acc),
    lambda c, acc: dpcore.learn.DecisionTreeClassifier(bounds=(-1, 1), classes=c, accountant=acc),
    lambda c, acc: dpcore.learn.SelectKBest(2, bounds=(-1, 1), classes=c, accountant=acc),
])
def test_bad_public_classes_are_refused_before_the_charge(make, classes, match):
    acc = dpcore.Accountant(10.0)
    with pytest.raises(ValueError, match=match):
        make(classes, acc).fit(_X, _yc)
    assert acc.history == []


def test_budget_running_out_in_cross_validation_says_why():
    """Issue 25: the folds refused by the accountant score NaN and the warning names the
    refused charge (scikit-learn's FitFailedWarning carries BudgetExceeded's message)."""
    from sklearn.exceptions import FitFailedWarning
    from sklearn.model_selection import cross_val_score

    acc = dpcore.Accountant(1.5)
    clf = LogisticRegression(epsilon=0.5, data_norm=2.0, classes=[0, 1], accountant=acc)
    with pytest.warns(FitFailedWarning, match=r"(?s)BudgetExceeded.*over the budget"):
        scores = cross_val_score(clf, _X, _yc, cv=5)
    assert np.isnan(scores).sum() == 2 and acc.spent[0] == pytest.approx(1.5)


@pytest.mark.parametrize("make, fit_y", [
    (lambda acc: dpcore.learn.KMeans(n_clusters=10**10, bounds=(-1, 1), accountant=acc), False),
    (lambda acc: dpcore.learn.KMeans(n_clusters=2**26, bounds=(-1, 1), accountant=acc), False),
    (lambda acc: dpcore.learn.DecisionTreeClassifier(bounds=(-1e308, 1e308), classes=[0, 1],
                                                     accountant=acc), True),
    (lambda acc: dpcore.learn.DecisionTreeClassifier(bounds=(0.0, 1e-320), classes=[0, 1],
                                                     accountant=acc), True),
    (lambda acc: GaussianNB(bounds=(-1e308, 1e308), classes=[0, 1], accountant=acc), True),
    (lambda acc: LinearRegression(bounds_X=(-1e308, 1e308), bounds_y=(-1, 1), accountant=acc),
     "regression"),
])
def test_unusable_public_sizes_and_bounds_are_refused_before_the_charge(make, fit_y):
    """Issue 25: these used to be charged, then fail (MemoryError, ZeroDivisionError)."""
    acc = dpcore.Accountant(10.0)
    est = make(acc)
    y = _yr if fit_y == "regression" else (_yc if fit_y else None)
    with pytest.raises(ValueError, match="n_clusters|bounds"):
        est.fit(_X, y)
    assert acc.history == []


class _Bare(BaseEstimator):
    """An estimator scikit-learn's validation may set attributes on."""


_SHORT_CASES = {   # (X, y, options): inputs the short path takes
    "X only": (_X, None, {"dtype": np.float64}),
    "X and int y, C order": (_X, _yc, {"dtype": np.float64, "order": "C"}),
    "float y, not finite-checked X": (_X, _yr, {"dtype": np.float64,
                                               "ensure_all_finite": False}),
}
_LONG_CASES = {   # inputs scikit-learn converts, warns about or refuses
    "list": (_X.tolist(), None, {"dtype": np.float64}),
    "float32": (_X.astype(np.float32), None, {"dtype": np.float64}),
    "Fortran order asked C": (np.asfortranarray(_X), None, {"dtype": np.float64, "order": "C"}),
    "NaN": (np.where(_X > 0.9, np.nan, _X), None, {"dtype": np.float64}),
    "column y": (_X, _yc[:, None], {"dtype": np.float64}),
    "string y": (_X, _yc.astype(str), {"dtype": np.float64}),
    "dtype None": (_X, None, {"dtype": None}),
}


@pytest.mark.parametrize("case", sorted(_SHORT_CASES))
def test_validation_short_path_matches_scikit_learn(case):
    from sklearn.utils.validation import validate_data as sk_validate

    from dpcore.learn import _base

    X, y, kw = _SHORT_CASES[case]
    args = (X,) if y is None else (X, y)
    assert _base._passes_unchanged(_Bare(), X, _base.NO_Y if y is None else y, True, kw)
    ours, theirs = _Bare(), _Bare()
    ours.feature_names_in_ = theirs.feature_names_in_ = np.array(["a", "b", "c", "d"])
    out = _base.validate_data(ours, *args, reset=True, **kw)
    expected = sk_validate(theirs, *args, reset=True, **kw)
    for a, b in zip(out if y is not None else (out,), expected if y is not None else (expected,)):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    assert vars(ours).keys() == vars(theirs).keys() and ours.n_features_in_ == 4
    # refit with the fitted estimator: reset=False checks the width the same way
    assert _base.validate_data(ours, X, reset=False, dtype=np.float64) is X
    with pytest.raises(ValueError, match="features"):
        _base.validate_data(ours, X[:, :3], reset=False, dtype=np.float64)


@pytest.mark.parametrize("case", sorted(_LONG_CASES))
def test_validation_long_path_for_what_scikit_learn_changes_or_refuses(case):
    from dpcore.learn import _base

    X, y, kw = _LONG_CASES[case]
    assert not _base._passes_unchanged(_Bare(), X, _base.NO_Y if y is None else y, True, kw)
