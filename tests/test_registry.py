"""Every public release is walked by the test registries (issue 26, item 7).

dpcore's public names that take an ``accountant`` (functions, classes whose constructor takes
one, and plan classes, whose ``release`` does) are discovered from the ``__all__`` of dpcore
and of every public subpackage, and each must appear in the registry that walks it:

- a function or a class taking ``accountant``: ``RELEASES`` or ``ESTIMATORS`` of
  tests/test_release_contract.py (bad arguments charge nothing, one charge of the documented
  cost, a refused release draws nothing, every generator kind, clone and pickle);
- a :class:`dpcore.plans.Plan` subclass: ``MECHANISMS`` of tests/test_plans.py or
  ``REGISTRY`` of tests/test_plans_selection_local.py (its ``cost`` is what ``release``
  charges; its draws are the public function's);
- a learner: also ``ESTIMATORS`` of tests/test_learn_estimator_checks.py (scikit-learn's
  checks), unless waived below with its reason;
- every plan variant of the plan registries (class and method): a goodness-of-fit test of its
  output law, named in ``LAW_TESTS`` (the plan registries check that a plan draws what its
  public function draws, so the function's law test covers the plan).

Those registries stay where they are (other work appends to them); this module is the one
place that reads them together, so a new public release that none of them walks fails here,
naming itself. Exemptions are listed with their reasons.
"""
import importlib
import inspect
import pkgutil

import pytest

import test_plans
import test_plans_selection_local
import test_release_contract as contract

import dpcore
from dpcore import plans

#: Public names that take an accountant but are not releases, with why.
EXEMPT = {
    "accounting.ParallelBlock": "a view of an accountant (charges go through it), not a release",
    "plans.Plan": "the abstract protocol: its public subclasses are walked",
    "learn.PrivateGridSearch": "a meta-estimator, walked in tests/test_learn_search*.py (its "
                               "candidate learners are walked here)",
}

#: Learners outside scikit-learn's generic checks, with why.
NOT_SKLEARN_CHECKED = {
    "CategoricalNB": "needs the public categories of every feature, which scikit-learn's checks "
                     "cannot give (they feed arbitrary data)",
    "PCA": "not yet in the checks: with its default method 'ppca' several checks fail on "
           "n_components (to be settled by the learners' owners)",
}


#: (plan class, variant) -> the goodness-of-fit test of that output law ("module::function").
LAW_TESTS = {
    ("LaplaceMechanism", "discrete"): "test_mechanisms::test_laplace_discrete_law",
    ("LaplaceMechanism", "snapping"): "test_mechanisms::test_snapping_law",
    ("GaussianMechanism", None): "test_mechanisms::test_gaussian_law",
    ("ExponentialMechanism", "exact"): "test_selection::test_exponential_mechanism_law",
    ("ExponentialMechanism", "gumbel"): "test_selection::test_exponential_mechanism_law",
    ("ExponentialMechanism", "inverse-cdf"): "test_selection::test_exponential_mechanism_law",
    ("ExponentialMechanism", "permute-and-flip"):
        "test_selection::test_permute_and_flip_law_and_power",
    ("ExponentialMechanism", "exact-permute-and-flip"): "test_permute_and_flip::test_law_and_power",
    ("ExponentialMechanism", "top-k gumbel"): "test_selection::test_top_k_law_and_power",
    ("FrequencyOracle", "randomized_response"): "test_local::test_randomized_response_law",
    ("FrequencyOracle", "optimized_unary"): "test_local::test_unary_encoding_law",
    ("FrequencyOracle", "symmetric_unary"): "test_local::test_unary_encoding_law",
    ("FrequencyOracle", "local_hashing"): "test_local::test_local_hashing_law",
    ("DuchiMechanism", None): "test_local::test_duchi_law",
    ("PlanarLaplaceMechanism", None): "test_local::test_planar_laplace_law",
}


def _takes_accountant(obj):
    try:
        return "accountant" in inspect.signature(obj).parameters
    except (TypeError, ValueError):
        return False


def public_modules():
    """dpcore and every public subpackage/module (no underscore in its dotted path)."""
    names = ["dpcore"] + [m.name for m in pkgutil.walk_packages(dpcore.__path__, "dpcore.")
                          if not any(part.startswith("_") for part in m.name.split("."))]
    for name in names:
        try:
            yield name, importlib.import_module(name)
        except ModuleNotFoundError:  # dpcore.learn without the optional scikit-learn
            continue


def releases_taking_an_accountant(modules=None):
    """{qualified name (relative to dpcore): object} of the public names taking an accountant,
    in their constructor/signature or (plans) in a public method."""
    found = {}
    for module_name, module in modules or public_modules():
        prefix = "" if module_name == "dpcore" else module_name[len("dpcore."):] + "."
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if inspect.isclass(obj):
                methods = (f for m, f in inspect.getmembers(obj, callable) if not m.startswith("_"))
                if _takes_accountant(obj) or any(_takes_accountant(f) for f in methods):
                    found[prefix + name] = obj
            elif callable(obj) and _takes_accountant(obj):
                found[prefix + name] = obj
    return found


def resolve(key):
    """The object a RELEASES key names: "local.duchi", "laplace/snapping" (a variant after
    "/"), "LogisticRegression(sgd)" (an estimator variant, in dpcore.learn)."""
    dotted = key.split("/")[0].split("(")[0]
    obj = dpcore if "." in dotted or hasattr(dpcore, dotted) else importlib.import_module(
        "dpcore.learn")
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def walked_objects():
    """(ids of the objects the release contract walks, the plan classes walked)."""
    walked = {id(resolve(key)) for key in contract.RELEASES}
    walked |= {id(resolve(key)) for key in contract.ESTIMATORS}
    plan_classes = set(test_plans.MECHANISMS) | {cls for cls, *_ in
                                                 test_plans_selection_local.REGISTRY}
    return walked, plan_classes


def missing_from_the_registries(found):
    walked, plan_classes = walked_objects()
    missing = []
    for name, obj in sorted(found.items()):
        if name in EXEMPT:
            continue
        if inspect.isclass(obj) and issubclass(obj, plans.Plan):
            if obj not in plan_classes:
                missing.append(f"{name} (a plan: add it to test_plans_selection_local.REGISTRY "
                               "or test_plans.MECHANISMS)")
        elif id(obj) not in walked:
            missing.append(f"{name} (add it to RELEASES or ESTIMATORS in "
                           "test_release_contract.py)")
    return missing


def test_every_public_release_is_walked():
    found = releases_taking_an_accountant()
    assert len(found) > 50  # the discovery itself works (81 names when written)
    assert missing_from_the_registries(found) == []


def test_every_exemption_is_still_a_public_name():
    found = releases_taking_an_accountant()
    assert set(EXEMPT) <= set(found)


def test_every_registry_key_names_a_public_release():
    """A renamed or removed release leaves no stale key behind."""
    found = {id(obj) for obj in releases_taking_an_accountant().values()}
    for key in list(contract.RELEASES) + list(contract.ESTIMATORS):
        assert id(resolve(key)) in found, key


def test_every_learner_is_in_the_sklearn_checks():
    checks = pytest.importorskip("test_learn_estimator_checks")
    checked = {type(est).__name__ for est in checks.ESTIMATORS}
    learners = {key.split("(")[0] for key in contract.ESTIMATORS}
    assert learners - checked == set(NOT_SKLEARN_CHECKED)


def test_the_check_catches_a_missing_release(monkeypatch):
    """A public release that no registry walks, and a plan class outside the plan registries,
    are reported by name."""
    def private_total(x, *, epsilon, accountant=None):  # pragma: no cover - never called
        return x

    class UnwalkedMechanism(plans.Plan):  # pragma: no cover - never released
        cost = None

        def _draw(self, prepared, rng):
            return prepared

    monkeypatch.setattr(dpcore.stats, "private_total", private_total, raising=False)
    monkeypatch.setattr(dpcore.stats, "__all__", list(dpcore.stats.__all__) + ["private_total"])
    monkeypatch.setattr(dpcore.local, "UnwalkedMechanism", UnwalkedMechanism, raising=False)
    monkeypatch.setattr(dpcore.local, "__all__",
                        list(dpcore.local.__all__) + ["UnwalkedMechanism"])
    missing = missing_from_the_registries(releases_taking_an_accountant())
    assert [m.split(" ")[0] for m in missing] == ["local.UnwalkedMechanism", "stats.private_total"]


def _variant(plan):
    """The law a calibrated plan draws: its class and method (top-k named apart)."""
    variant = getattr(plan, "mechanism", None) or getattr(plan, "method", None)
    if getattr(plan, "k", None) is not None and type(plan).__name__ == "ExponentialMechanism":
        variant = f"top-k {variant}"
    return type(plan).__name__, variant


def test_every_plan_variant_has_an_output_law_test():
    variants = {_variant(cls.calibrate(**params)) for cls, ps in test_plans.MECHANISMS.items()
                for params in ps}
    variants |= {_variant(test_plans_selection_local.calibrate(cls, params))
                 for cls, params, *_ in test_plans_selection_local.REGISTRY}
    assert variants == set(LAW_TESTS), sorted(variants ^ set(LAW_TESTS), key=str)
    for target in set(LAW_TESTS.values()):
        module_name, function = target.split("::")
        test = getattr(importlib.import_module(module_name), function)
        source = inspect.getsource(test)
        # a goodness-of-fit test against an exact law, at the stated ALPHA (tests/_gof.py)
        assert "ALPHA" in source or "pvalue" in source, target
