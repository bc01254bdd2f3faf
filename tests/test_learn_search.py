"""Private grid search (CMS 2011, Algorithm 3)."""
import numpy as np
import pytest

pytest.importorskip("sklearn")

import dpcore  # noqa: E402
from dpcore.learn import _search  # noqa: E402
from dpcore.learn._erm import LogisticRegression  # noqa: E402
from dpcore.learn._search import PrivateGridSearch  # noqa: E402


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(6000, 4))
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
    return X, y


def test_budget_is_epsilon_via_parallel_block(data):
    X, y = data
    acc = dpcore.Accountant(1.0)
    s = PrivateGridSearch(LogisticRegression(data_norm=4.0), {"alpha": [1e-3, 1e-2, 1e-1]},
                          epsilon=1.0, classes=[0, 1], random_state=0, accountant=acc).fit(X, y)
    assert acc.spent[0] == pytest.approx(1.0)
    assert s.n_candidates_ == 3 and s.best_params_ in [{"alpha": a} for a in (1e-3, 1e-2, 1e-1)]
    assert s.score(X, y) > 0.85
    assert not hasattr(s, "validation_errors_")   # the exact counts are private


def test_each_candidate_fits_on_its_own_part(monkeypatch, data):
    X, y = data
    sizes = []
    real = LogisticRegression.fit

    def spy(self, X, y):
        sizes.append(X.shape[0])
        return real(self, X, y)

    monkeypatch.setattr(LogisticRegression, "fit", spy)
    PrivateGridSearch(LogisticRegression(data_norm=4.0), {"alpha": [1e-3, 1e-2, 1e-1]},
                      epsilon=1.0, classes=[0, 1], random_state=0).fit(X, y)
    assert sizes == [1500, 1500, 1500]      # 6000 records in m + 1 = 4 parts


def test_selection_prefers_the_best_candidate(monkeypatch, data):
    # with a huge epsilon the exponential mechanism picks the fewest validation errors
    X, y = data
    seen = {}
    real = _search.validation_errors

    def spy(models, Xv, yv):
        seen["errors"] = real(models, Xv, yv)
        return seen["errors"]

    monkeypatch.setattr(_search, "validation_errors", spy)
    s = PrivateGridSearch(LogisticRegression(data_norm=4.0), {"alpha": [1e-3, 10.0]},
                          epsilon=1e6, classes=[0, 1], random_state=1).fit(X, y)
    assert s.best_index_ == int(np.argmin(seen["errors"]))


def test_errors(data):
    X, y = data
    with pytest.raises(ValueError, match="epsilon"):
        PrivateGridSearch(LogisticRegression(data_norm=1.0), {"alpha": [1.0]}, epsilon=0).fit(X, y)
    from sklearn.linear_model import LogisticRegression as SkLR
    with pytest.raises(ValueError, match="no epsilon parameter"):
        PrivateGridSearch(SkLR(), {"C": [1.0]}).fit(X, y)
    with pytest.raises(ValueError, match="samples"):
        PrivateGridSearch(LogisticRegression(data_norm=1.0), {"alpha": [1.0, 2.0]},
                          classes=[0, 1]).fit(X[:2], y[:2])


def test_candidates_never_share_noise(monkeypatch, data):
    # the template's int seed must not be reused by every candidate (shared noise across the
    # parts would let one fit reveal another's noise)
    from dpcore.learn import _erm
    X, y = data
    drawn = []
    real = _erm._noise_vector

    def spy(d, scale, rng, size=None):
        drawn.append(real(d, scale, rng, size))
        return drawn[-1]

    monkeypatch.setattr(_erm, "_noise_vector", spy)
    PrivateGridSearch(LogisticRegression(data_norm=4.0, random_state=0), {"alpha": [0.01, 0.01]},
                      epsilon=1.0, classes=[0, 1], random_state=0).fit(X, y)
    assert len(drawn) == 2 and not np.allclose(drawn[0], drawn[1])


def test_pipeline_with_random_fourier_features(data):
    from sklearn.pipeline import make_pipeline

    from dpcore.learn._kernel import RandomFourierFeatures
    from dpcore.learn._erm import LinearSVC
    X, y = data
    acc = dpcore.Accountant(2.0)
    pipe = make_pipeline(RandomFourierFeatures(gamma=0.1, n_components=50, random_state=0),
                         LinearSVC(data_norm=1.0))
    s = PrivateGridSearch(pipe, {"linearsvc__alpha": [1e-3, 1e-2]}, epsilon=2.0, random_state=0,
                          classes=[0, 1], accountant=acc).fit(X, y)
    assert acc.spent[0] == pytest.approx(2.0)
    assert s.best_estimator_.steps[1][1].epsilon == 2.0
    assert s.score(X, y) > 0.75


@pytest.mark.parametrize("make_step", [
    lambda: __import__("sklearn.preprocessing", fromlist=["StandardScaler"]).StandardScaler(),
    lambda: __import__("sklearn.preprocessing", fromlist=["MinMaxScaler"]).MinMaxScaler(),
])
def test_non_private_pipeline_steps_are_refused_before_the_charge(data, make_step):
    """Issue 25: a StandardScaler step was fitted on the private rows and returned in
    best_estimator_ (its exact var_ exposes an outlier row)."""
    from sklearn.pipeline import make_pipeline

    X, y = data
    acc = dpcore.Accountant(2.0)
    pipe = make_pipeline(make_step(), LogisticRegression(data_norm=4.0))
    with pytest.raises(ValueError, match="neither a private estimator nor data-independent"):
        PrivateGridSearch(pipe, {"logisticregression__alpha": [1e-3, 1e-2]}, epsilon=1.0,
                          classes=[0, 1], accountant=acc, random_state=0).fit(X, y)
    assert acc.history == []


def test_data_independent_pipeline_steps_are_accepted(data):
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    X, y = data
    acc = dpcore.Accountant(2.0)
    pipe = make_pipeline(FunctionTransformer(lambda z: z / 4.0), "passthrough",
                         LogisticRegression(data_norm=1.0))
    PrivateGridSearch(pipe, {"logisticregression__alpha": [1e-3, 1e-2]}, epsilon=1.0,
                      classes=[0, 1], accountant=acc, random_state=0).fit(X, y)
    assert acc.spent[0] == pytest.approx(1.0)


def test_classes_are_public_and_required(data):
    """np.unique(y) would reveal the private label set (issue 14): classes is required and a
    label outside it is refused without quoting it."""
    X, y = data
    acc = dpcore.Accountant(1.0)
    with pytest.raises(ValueError, match="classes is required"):
        PrivateGridSearch(LogisticRegression(data_norm=4.0), {"alpha": [0.01]},
                          accountant=acc).fit(X, y)
    y7 = y.copy()
    y7[0] = 7
    with pytest.raises(ValueError, match="outside classes") as info:
        PrivateGridSearch(LogisticRegression(data_norm=4.0), {"alpha": [0.01]}, classes=[0, 1],
                          accountant=acc).fit(X, y7)
    assert "7" not in str(info.value)
    s = PrivateGridSearch(LogisticRegression(data_norm=4.0), {"alpha": [0.01, 0.1]},
                          classes=[0, 1, 2], random_state=0).fit(X, y)
    assert s.classes_.tolist() == [0, 1, 2]   # the public set, not the labels seen
    assert acc.history == []


def test_multi_charge_fits_sum_on_their_partition(data):
    """GaussianNB's fit is charged once for epsilon; inside the search each candidate's charges
    sum on its own partition, so the search costs epsilon (not epsilon / 3)."""
    from dpcore.learn._naive_bayes import GaussianNB
    X, y = data
    acc = dpcore.Accountant(5.0)
    PrivateGridSearch(GaussianNB(bounds=(-4.0, 4.0)), {"var_floor": [1e-3, 1e-2]}, epsilon=1.0,
                      classes=[0, 1], random_state=0, accountant=acc).fit(X, y)
    assert acc.spent[0] == pytest.approx(1.0)
    assert acc.history[-1].count == 3   # two candidates and the selection


def test_candidate_parameters_checked_before_the_charge(data):
    X, y = data
    acc = dpcore.Accountant(5.0)
    with pytest.raises(ValueError):
        PrivateGridSearch(LogisticRegression(data_norm=4.0), {"alpha": [0.01, -1.0]},
                          classes=[0, 1], accountant=acc).fit(X, y)
    with pytest.raises((ValueError, TypeError)):
        PrivateGridSearch(LogisticRegression(data_norm=4.0), {"alpha": [0.01]},
                          classes=[0, 1], random_state="seed", accountant=acc).fit(X, y)
    assert acc.history == []


def test_candidates_of_different_cost_are_charged_at_once_before_any_fit(data, monkeypatch):
    """A grid whose candidates cost differently (a private PCA step on or off) is charged for
    its most expensive part before the first fit, all or nothing: a budget that covers only
    the cheap candidates refuses the search with the accountant untouched and nothing fitted."""
    from sklearn.pipeline import Pipeline

    from dpcore.learn._pca import PCA
    X, y = data
    pipe = Pipeline([("pca", PCA(2, data_norm=10.0)), ("lr", LogisticRegression(data_norm=4.0))])
    grid = {"pca": ["passthrough", PCA(2, data_norm=10.0)]}
    fits = []
    real_fit = LogisticRegression.fit
    monkeypatch.setattr(LogisticRegression, "fit",
                        lambda self, *a, **k: fits.append(1) or real_fit(self, *a, **k))
    acc = dpcore.Accountant(1.5)   # the PCA candidate costs 2 epsilon = 2
    with pytest.raises(dpcore.BudgetExceeded):
        PrivateGridSearch(pipe, grid, epsilon=1.0, classes=[0, 1], random_state=0,
                          accountant=acc).fit(X, y)
    assert acc.history == [] and acc.spent == (0.0, 0.0)
    n_probe_fits = len(fits)   # the stand-in fits that learn the costs touch no private data
    acc = dpcore.Accountant(2.0)
    PrivateGridSearch(pipe, grid, epsilon=1.0, classes=[0, 1], random_state=0,
                      accountant=acc).fit(X, y)
    assert acc.spent[0] == pytest.approx(2.0)
    assert acc.history[-1].count == 3   # two candidates and the selection
    assert len(fits) > 2 * n_probe_fits   # the real fits ran only when the charge succeeded


def test_search_never_fits_on_stand_in_data(data, monkeypatch):
    """Issue 26: the costs come from the candidates' ``cost`` (public parameters), so the search
    fits each candidate once, on its part of the real rows, and nothing else."""
    X, y = data
    seen = []
    original = LogisticRegression.fit

    def spy(self, X_part, y_part):
        seen.append(np.asarray(X_part))
        return original(self, X_part, y_part)

    monkeypatch.setattr(LogisticRegression, "fit", spy)
    acc = dpcore.Accountant(1.0)
    PrivateGridSearch(LogisticRegression(data_norm=4.0), {"alpha": [1e-3, 1e-2, 1e-1]},
                      epsilon=1.0, classes=[0, 1], accountant=acc, random_state=0).fit(X, y)
    assert len(seen) == 3
    rows = {r.tobytes() for r in np.asarray(X)}
    assert all(r.tobytes() in rows for part in seen for r in part)
    assert acc.spent[0] == pytest.approx(1.0)


# ------------------------------------------------------------------------------------------------
# selection="random_stopping" (Liu-Talwar 2019; Papernot-Steinke 2022)

def _count_fits(monkeypatch):
    fits = []
    real = LogisticRegression.fit

    def spy(self, X, y):
        fits.append((X.shape[0], self.alpha, self.epsilon))
        return real(self, X, y)

    monkeypatch.setattr(LogisticRegression, "fit", spy)
    return fits


def test_random_stopping_charges_three_trial_epsilons_once(data):
    X, y = data
    acc = dpcore.Accountant(1.0)
    s = PrivateGridSearch(LogisticRegression(data_norm=4.0), {"alpha": [1e-3, 1e-2, 1e-1]},
                          epsilon=1.0, classes=[0, 1], random_state=0, accountant=acc,
                          selection="random_stopping").fit(X, y)
    (entry,) = acc.history
    assert entry.epsilon <= 1.0 and entry.epsilon == pytest.approx(1.0)
    assert entry.epsilon <= 3 * s.epsilon_per_trial_
    assert s.score(X, y) > 0.85
    fitted = [k for k in vars(s) if k.endswith("_")]
    assert [k for k in fitted if "trial" in k] == ["epsilon_per_trial_"]   # K is secret


@pytest.mark.slow
def test_random_stopping_trials_are_geometric_and_uniform(monkeypatch):
    """Over 400 searches with n_trials = 3: the number of fits per search is geometric with
    mean 3 (chi-square against P(K = k) = (1/3)(2/3)^(k-1), alpha 1e-4), each fit sees the four
    fifths of the records at epsilon / 3, and the candidates are tried uniformly (chi-square)."""
    from _gof import ALPHA, chisquare_pvalue

    rng = np.random.default_rng(2)  # test data, not noise
    X = rng.normal(size=(50, 2))
    y = (X[:, 0] > 0).astype(int)
    fits = _count_fits(monkeypatch)
    counts, alphas = [], []
    for seed in range(400):
        before = len(fits)
        PrivateGridSearch(LogisticRegression(data_norm=3.0), {"alpha": [0.1, 0.2, 0.4, 0.8]},
                          epsilon=1.5, classes=[0, 1], random_state=seed, n_trials=3,
                          selection="random_stopping").fit(X, y)
        counts.append(len(fits) - before)
        alphas += [a for _, a, _ in fits[before:]]
    assert {(rows, eps) for rows, _, eps in fits} == {(40, 0.5)}
    k = np.arange(1, 13)
    p = (1 / 3) * (2 / 3) ** (k - 1)
    observed = np.array([np.sum(np.array(counts) == v) for v in k] + [np.sum(np.array(counts) > 12)])
    assert chisquare_pvalue(observed, np.append(p, 1 - p.sum())) > ALPHA
    # power: the same counts are far from a mean of 5 trials
    p5 = 0.2 * 0.8 ** (k - 1)
    assert chisquare_pvalue(observed, np.append(p5, 1 - p5.sum())) < ALPHA
    tried = np.array([np.sum(np.isclose(alphas, a)) for a in (0.1, 0.2, 0.4, 0.8)])
    assert chisquare_pvalue(tried, np.full(4, 0.25)) > ALPHA


def test_random_stopping_returns_the_best_trial_at_huge_epsilon(data):
    """With epsilon = 1e6 the noisy scores are the error counts: a useless candidate (alpha
    huge: coefficients near 0, predicting one class) is never returned when a good one was
    tried."""
    X, y = data
    for seed in range(5):
        s = PrivateGridSearch(LogisticRegression(data_norm=4.0), {"alpha": [1e-3, 1e6]},
                              epsilon=1e6, classes=[0, 1], random_state=seed, n_trials=20,
                              selection="random_stopping").fit(X, y)
        assert s.best_params_ == {"alpha": 1e-3}


@pytest.mark.parametrize("kw, match", [
    (dict(selection="bogus"), "selection"),
    (dict(selection="random_stopping", n_trials=0), "n_trials"),
    (dict(n_trials=5), "n_trials applies"),
    (dict(selection="random_stopping", estimator=LogisticRegression(
        data_norm=4.0, method="gd", delta=1e-6)), "pure epsilon"),
])
def test_random_stopping_arguments_checked_before_the_charge(data, kw, match):
    X, y = data
    acc = dpcore.Accountant(5.0, 1e-3)
    args = dict(estimator=LogisticRegression(data_norm=4.0), param_grid={"alpha": [1e-3, 1e-2]},
                epsilon=1.0, classes=[0, 1], random_state=0, accountant=acc)
    args.update(kw)
    with pytest.raises(ValueError, match=match):
        PrivateGridSearch(**args).fit(X, y)
    assert acc.history == []
