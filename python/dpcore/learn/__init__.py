"""scikit-learn compatible private estimators (needs the optional dependency scikit-learn: the
``learn`` extra, ``pip install ".[learn]"`` from the source tree). ``import dpcore`` does not
import this package; ``dpcore.learn`` does on first use."""
try:
    import sklearn  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without scikit-learn
    raise ImportError(
        "dpcore.learn needs scikit-learn: `pip install scikit-learn`, or the `learn` extra "
        "(`pip install \".[learn]\"` from dpcore's source tree)"
    ) from exc

from dpcore.learn._erm import LinearSVC, LogisticRegression
from dpcore.learn._erm_calibration import (
    auto_alpha,
    multinomial_perturbation_calibration,
    objective_perturbation_calibration,
    output_perturbation_beta,
)
from dpcore.learn._feature_selection import PrivateKD, SelectKBest
from dpcore.learn._functional import (
    LinearRegression,
    functional_mechanism_noise_norm,
    functional_mechanism_sensitivity,
)
from dpcore.learn._kernel import RandomFourierFeatures
from dpcore.learn._kmeans import KMeans
from dpcore.learn._naive_bayes import CategoricalNB, GaussianNB, gaussian_nb_budget
from dpcore.learn._pca import PCA
from dpcore.learn._search import PrivateGridSearch
from dpcore.learn._tree import DecisionTreeClassifier, RandomForestClassifier, SingleLeafWarning

__all__ = [
    "LogisticRegression",
    "LinearSVC",
    "LinearRegression",
    "GaussianNB",
    "CategoricalNB",
    "PCA",
    "RandomFourierFeatures",
    "PrivateGridSearch",
    "DecisionTreeClassifier",
    "RandomForestClassifier",
    "KMeans",
    "SelectKBest",
    "PrivateKD",
    "SingleLeafWarning",
    "auto_alpha",
    "output_perturbation_beta",
    "objective_perturbation_calibration",
    "multinomial_perturbation_calibration",
    "functional_mechanism_sensitivity",
    "functional_mechanism_noise_norm",
    "gaussian_nb_budget",
]
