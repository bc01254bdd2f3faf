"""The public surface: every exported name exists, every release function states its privacy
guarantee, and the docstring examples run."""
import doctest
import importlib
import inspect
import re

import pytest

# Modules that need the optional scikit-learn: their tests skip, with the reason, without it.
NEEDS_SKLEARN = {"dpcore.learn", "dpcore.learn._pca", "dpcore.learn._erm",
                 "dpcore.learn._erm_calibration", "dpcore.learn._functional",
                 "dpcore.learn._naive_bayes", "dpcore.learn._kernel", "dpcore.learn._search",
                 "dpcore.learn._tree", "dpcore.learn._kmeans", "dpcore.learn._feature_selection"}
NEEDS_DASK = {"dpcore.distributed"}


def _import(module_name):
    if module_name in NEEDS_SKLEARN:
        pytest.importorskip("sklearn", reason=f"{module_name} needs scikit-learn ('.[learn]')")
    if module_name in NEEDS_DASK:
        pytest.importorskip("dask", reason=f"{module_name}'s examples need dask ('.[dask]')")
    return importlib.import_module(module_name)


PUBLIC_MODULES = [
    "dpcore", "dpcore.mechanisms", "dpcore.random", "dpcore.accounting", "dpcore.calibration",
    "dpcore.curves",
    "dpcore.selection", "dpcore.stats", "dpcore.tuning", "dpcore.graph",
    "dpcore.mestimators", "dpcore.learn", "dpcore.bingham", "dpcore.learn._pca", "dpcore.local",
    "dpcore.robust", "dpcore.publish", "dpcore.plans", "dpcore.synth", "dpcore.graph_stats",
]
# Modules whose public functions draw noise or release data: each must carry a Privacy section.
RELEASE_MODULES = [
    "dpcore.mechanisms", "dpcore.selection", "dpcore.stats", "dpcore.tuning", "dpcore.graph",
    "dpcore.mestimators", "dpcore.distributed", "dpcore.bingham", "dpcore.local",
    "dpcore.robust", "dpcore.publish", "dpcore.synth", "dpcore.graph_stats",
]


def _public_functions(module_name):
    module = importlib.import_module(module_name)
    return [(module_name, name) for name in module.__all__ if inspect.isfunction(getattr(module, name))]


RELEASE_FUNCTIONS = [pair for m in RELEASE_MODULES for pair in _public_functions(m)]


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_all_names_exist(module_name):
    module = _import(module_name)
    assert module.__all__, module_name
    for name in module.__all__:
        assert hasattr(module, name), f"{module_name}.{name} in __all__ but missing"


def _has_privacy_section(obj):
    doc = inspect.getdoc(obj) or ""
    return re.search(r"^Privacy\n-------\n", doc, flags=re.MULTILINE) is not None


def test_release_functions_are_found():
    names = {name for _, name in RELEASE_FUNCTIONS}
    assert {"laplace", "gaussian", "exponential", "top_k", "median", "histogram", "release_hrg"} <= names


@pytest.mark.parametrize("module_name, name", RELEASE_FUNCTIONS)
def test_release_functions_have_privacy_section(module_name, name):
    assert _has_privacy_section(getattr(importlib.import_module(module_name), name))


def test_privacy_check_can_fail():
    def undocumented():
        """Adds noise.

        Parameters
        ----------
        x : float
        """

    assert not _has_privacy_section(undocumented)


# doctest reads the names defined in a module, not those it re-exports: the learners', the local
# families' and the statistics' own modules and the kernel holding ChaCha20 are listed too.
PACKAGES = ("dpcore.learn", "dpcore.local", "dpcore.robust", "dpcore.synth", "dpcore.stats",
            "dpcore.graph_stats", "dpcore.calibration")
DOCTEST_MODULES = [m for m in PUBLIC_MODULES[1:] if m not in PACKAGES] + [
    "dpcore.stats._moments", "dpcore.stats._quantiles", "dpcore.stats._histograms",
    "dpcore.distributed", "dpcore.local._frequency", "dpcore.local._numeric", "dpcore.local._planar",
    "dpcore.learn._erm", "dpcore.learn._erm_calibration", "dpcore.learn._functional",
    "dpcore.learn._naive_bayes",
    "dpcore.learn._kernel", "dpcore.learn._search", "dpcore.learn._tree",
    "dpcore.learn._kmeans", "dpcore.learn._feature_selection", "dpcore._random",
    "dpcore.robust._median", "dpcore.robust._aggregate", "dpcore.robust._ptr",
    "dpcore.robust._svt", "dpcore.synth._domain", "dpcore.synth._marginals",
    "dpcore.synth._mst", "dpcore.synth._evaluate", "dpcore.synth._privbayes",
    "dpcore.graph_stats._degrees", "dpcore.graph_stats._triangles", "dpcore.graph_stats._kstars",
    "dpcore.calibration._laplace", "dpcore.calibration._gaussian",
    "dpcore.calibration._discrete_gaussian", "dpcore.calibration._zcdp",
    "dpcore.calibration._composition",
    "dpcore.synth._aim",
]


@pytest.mark.parametrize("module_name", DOCTEST_MODULES)
def test_docstring_examples(module_name):
    module = _import(module_name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_import_dpcore_loads_no_heavy_dependency():
    """`import dpcore` stays light (issue 15: under 0.25 s): scipy (0.3 s on its own),
    scikit-learn and dask are imported only by the functions that need them."""
    import subprocess
    import sys

    code = ("import sys, dpcore; print(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'scipy', 'sklearn', 'dask', 'pandas'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_learn_is_reachable_from_import_dpcore():
    """`dpcore.learn` after a bare `import dpcore` (imported on first use, not before)."""
    import subprocess
    import sys

    pytest.importorskip("sklearn", reason="dpcore.learn needs scikit-learn ('.[learn]')")
    code = ("import sys, dpcore; before = 'dpcore.learn' in sys.modules; "
            "print(before, dpcore.learn.LogisticRegression.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "LogisticRegression"]
    with pytest.raises(AttributeError, match="no attribute 'not_a_module'"):
        getattr(importlib.import_module("dpcore"), "not_a_module")


# delta=None means pure everywhere (issue 26 item 5); 0.0 is still accepted.


def _delta_defaults():
    """(where, default) of every public function's or method's ``delta`` parameter."""
    seen = set()
    for module_name in PUBLIC_MODULES + ["dpcore.distributed"]:
        module = _import(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            members = [(name, obj)]
            if inspect.isclass(obj):
                members += [(f"{name}.{m}", f) for m, f in vars(obj).items()
                            if (m == "__init__" or not m.startswith("_")) and callable(f)]
            for where, f in members:
                if id(f) in seen or not callable(f):
                    continue
                seen.add(id(f))
                try:
                    parameter = inspect.signature(f).parameters.get("delta")
                except (TypeError, ValueError):
                    continue
                if parameter is not None and parameter.default is not inspect.Parameter.empty:
                    yield f"{getattr(f, '__module__', module_name)}:{where}", parameter.default


def test_delta_defaults_to_none():
    found = list(_delta_defaults())
    assert len(found) > 20  # the walk reaches the releases
    zero = [w for w, default in found if default is not None]
    assert zero == []
