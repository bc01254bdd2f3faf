"""Data sets for the synthetic-data benchmarks (dpcore.synth): an adult-like generated table with
planted dependence, and scikit-learn's bundled breast cancer data set, each with its public Domain.

Shared by ``bench/test_synth.py`` (dpcore's own runs) and ``bench/synth_peers.py`` (the peers,
run in their own environment): both must see the same records and the same integer codes.
Only numpy and pandas are needed here (dpcore for the Domain).
"""
from __future__ import annotations

import numpy as np

WORKCLASS = ["private", "self-emp", "self-emp-inc", "federal", "local", "state", "unpaid",
             "never"]
EDUCATION = ["preschool", "1st-4th", "5th-6th", "7th-8th", "9th", "10th", "11th", "12th",
             "hs-grad", "some-college", "assoc-voc", "assoc-acdm", "bachelors", "masters",
             "prof-school", "doctorate"]
MARITAL = ["never-married", "married-civ", "divorced", "separated", "widowed",
           "married-absent", "married-af"]
OCCUPATION = ["tech-support", "craft-repair", "other-service", "sales", "exec-managerial",
              "prof-specialty", "handlers-cleaners", "machine-op", "adm-clerical",
              "farming-fishing", "transport-moving", "priv-house-serv", "protective-serv",
              "armed-forces"]
RELATIONSHIP = ["husband", "wife", "own-child", "not-in-family", "other-relative", "unmarried"]
RACE = ["white", "black", "asian-pac", "amer-indian", "other"]
SEX = ["female", "male"]
COUNTRIES = [f"country-{i:02d}" for i in range(40)]
INCOME = ["<=50K", ">50K"]
LABEL = "income"


def adult_like_domain():
    """The public domain of :func:`adult_like` (15 columns: 6 numeric, 9 categorical)."""
    from dpcore.synth import Categorical, Domain, Numeric

    return Domain({
        "age": Numeric(17, 90, bins=16, integer=True),
        "workclass": Categorical(WORKCLASS),
        "fnlwgt": Numeric(1e4, 1e6, bins=20),
        "education": Categorical(EDUCATION),
        "education_num": Numeric(1, 16, bins=16, integer=True),
        "marital_status": Categorical(MARITAL),
        "occupation": Categorical(OCCUPATION),
        "relationship": Categorical(RELATIONSHIP),
        "race": Categorical(RACE),
        "sex": Categorical(SEX),
        "capital_gain": Numeric(0, 1e5, bins=10, integer=True),
        "capital_loss": Numeric(0, 5e3, bins=10, integer=True),
        "hours_per_week": Numeric(1, 99, bins=14, integer=True),
        "native_country": Categorical(COUNTRIES),
        LABEL: Categorical(INCOME),
    })


def _pick(rng, weights_by_row, labels=None):
    """One categorical draw per row from row-specific weights (n x k)."""
    w = np.asarray(weights_by_row, dtype=float)
    w = w / w.sum(axis=1, keepdims=True)
    u = rng.random(w.shape[0])[:, None]
    idx = (np.cumsum(w, axis=1) < u).sum(axis=1)
    idx = np.minimum(idx, w.shape[1] - 1)
    return idx if labels is None else np.asarray(labels, dtype=object)[idx]


def adult_like(n, seed):
    """``n`` records of an adult-like table with planted dependence (a pandas DataFrame).

    The structure (a Bayesian network): age -> marital status -> relationship <- sex; age and
    sex -> education -> education_num (a noisy copy); education and sex -> occupation ->
    workclass; occupation and sex -> hours; race -> native country; income from a logistic
    model of age, education, marital status, hours, sex and occupation; capital gain and loss
    mostly zero, more often positive with a high income. A few cells are missing or out of the
    domain (as in real exports).
    """
    import pandas as pd

    rng = np.random.default_rng(seed)
    age = np.clip(np.round(17 + rng.gamma(4.0, 5.5, n)), 17, 90).astype(int)
    sex = rng.choice(2, n, p=[0.33, 0.67])
    young = (age < 28)[:, None]
    old = (age > 55)[:, None]
    base_marital = np.array([0.33, 0.46, 0.14, 0.03, 0.03, 0.01, 0.001])
    marital = _pick(rng, np.where(young, [0.8, 0.15, 0.02, 0.02, 0.001, 0.01, 0.001],
                                  np.where(old, [0.05, 0.55, 0.17, 0.03, 0.18, 0.01, 0.001],
                                           base_marital)))
    married = marital == 1
    rel_w = np.tile([0.01, 0.01, 0.15, 0.5, 0.05, 0.28], (n, 1))
    rel_w[married & (sex == 1)] = [0.95, 0.0, 0.01, 0.02, 0.02, 0.0]
    rel_w[married & (sex == 0)] = [0.0, 0.9, 0.02, 0.04, 0.04, 0.0]
    rel_w[young[:, 0] & ~married] = [0.0, 0.0, 0.6, 0.3, 0.05, 0.05]
    relationship = _pick(rng, rel_w)
    ed_score = rng.normal(8.5 + 1.2 * (age > 25) + 0.3 * sex, 2.4, n)
    education = np.clip(np.round(ed_score), 0, 15).astype(int)
    education_num = education + 1 + (rng.random(n) < 0.03) * rng.integers(-1, 2, n)
    occ_w = np.ones((n, len(OCCUPATION)))
    occ_w[:, 4] += 0.25 * education  # exec-managerial with education
    occ_w[:, 5] += 0.5 * np.maximum(education - 10, 0) ** 1.5  # professional
    occ_w[:, 1] += 3.0 * sex * (education < 11)  # craft-repair
    occ_w[:, 8] += 2.5 * (1 - sex)  # adm-clerical
    occ_w[:, 11] *= 0.1
    occ_w[:, 13] *= 0.02
    occupation = _pick(rng, occ_w)
    wc_w = np.tile([0.7, 0.08, 0.03, 0.03, 0.06, 0.04, 0.005, 0.002], (n, 1))
    wc_w[occupation == 12] = [0.2, 0.0, 0.0, 0.3, 0.3, 0.2, 0.0, 0.0]
    wc_w[occupation == 9] = [0.4, 0.4, 0.1, 0.02, 0.02, 0.02, 0.04, 0.0]
    wc_w[occupation == 5] = [0.5, 0.1, 0.08, 0.08, 0.12, 0.12, 0.0, 0.0]
    workclass = _pick(rng, wc_w)
    hours = np.clip(np.round(rng.normal(36 + 6 * sex + 4 * (occupation == 4), 10, n)), 1, 99)
    race = rng.choice(5, n, p=[0.85, 0.09, 0.03, 0.01, 0.02])
    country_w = np.tile(np.r_[30.0, 1.0 / np.arange(1, 40)], (n, 1))
    country_w[race == 2, 1:6] += 6.0
    country_w[race == 4, 6:10] += 4.0
    native = _pick(rng, country_w)
    logit = (-8.2 + 0.045 * np.minimum(age, 65) + 0.33 * education + 1.9 * married
             + 0.025 * hours + 0.45 * sex + 0.8 * (occupation == 4) + 0.9 * (occupation == 5))
    income = (rng.random(n) < 1.0 / (1.0 + np.exp(-logit))).astype(int)
    gain = np.where(rng.random(n) < 0.04 + 0.12 * income, rng.lognormal(8.5, 1.0, n), 0.0)
    loss = np.where(rng.random(n) < 0.02 + 0.04 * income, rng.normal(1900, 300, n), 0.0)
    fnlwgt = np.exp(rng.normal(12.1 - 0.1 * (race == 1), 0.5, n))
    frame = pd.DataFrame({
        "age": age, "workclass": np.array(WORKCLASS, dtype=object)[workclass],
        "fnlwgt": fnlwgt, "education": np.array(EDUCATION, dtype=object)[education],
        "education_num": education_num,
        "marital_status": np.array(MARITAL, dtype=object)[marital],
        "occupation": np.array(OCCUPATION, dtype=object)[occupation],
        "relationship": np.array(RELATIONSHIP, dtype=object)[relationship],
        "race": np.array(RACE, dtype=object)[race], "sex": np.array(SEX, dtype=object)[sex],
        "capital_gain": np.round(gain), "capital_loss": np.round(np.maximum(loss, 0)),
        "hours_per_week": hours, "native_country": np.array(COUNTRIES, dtype=object)[native],
        LABEL: np.array(INCOME, dtype=object)[income],
    })
    # real exports have holes: ~1% missing occupation / workclass, a few unknown countries
    holes = rng.random(n) < 0.01
    frame.loc[holes, "occupation"] = None
    frame.loc[holes & (rng.random(n) < 0.5), "workclass"] = "?"
    frame.loc[rng.random(n) < 0.002, "native_country"] = "unknown-land"
    return frame


def breast_cancer_domain(bins=8):
    """The public domain of :func:`breast_cancer`: 30 numeric columns on the (min, max) bounds
    printed in the data set's documentation (its DESCR summary table, published with it), with
    ``bins`` equal-width bins each, and the class (0 malignant, 1 benign)."""
    from sklearn.datasets import load_breast_cancer

    from dpcore.synth import Categorical, Domain, Numeric

    bunch = load_breast_cancer()
    table = bunch.DESCR.split("Summary Statistics:")[1].split(":Missing")[0]
    rows = [line.rsplit(None, 2) for line in table.splitlines() if line.count(":") == 1
            and not line.strip().startswith("=")]
    bounds = [(float(lo), float(hi)) for _, lo, hi in rows]
    assert len(bounds) == len(bunch.feature_names) == 30
    columns = {name: Numeric(lo, hi, bins=bins) for name, (lo, hi) in
               zip(bunch.feature_names, bounds)}
    columns["target"] = Categorical([0, 1])
    return Domain(columns)


def breast_cancer():
    """scikit-learn's bundled breast cancer data set (569 records, 30 features, the class
    ``target``) as a DataFrame."""
    from sklearn.datasets import load_breast_cancer

    return load_breast_cancer(as_frame=True).frame
