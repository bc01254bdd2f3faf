"""The documentation's own code: the Privacy-section rendering in docs/conf.py, the API pages
covering every public name, and the gallery scripts in examples/ (static checks always; running
them is `slow` and needs matplotlib)."""
import ast
import importlib
import importlib.util
import inspect
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
EXAMPLES = sorted((ROOT / "examples").glob("plot_*.py"))

pytestmark = pytest.mark.skipif(not (DOCS / "conf.py").exists(), reason="no docs/ in this tree")


@pytest.fixture(scope="module")
def conf():
    spec = importlib.util.spec_from_file_location("dpcore_docs_conf", DOCS / "conf.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


DOC = """Release a thing.

More about it.

Parameters
----------
x : float

Privacy
-------
Pure epsilon-DP under add/remove.

* bullet

Examples
--------
>>> 1
1
""".splitlines()


def test_privacy_section_becomes_an_admonition_after_the_summary(conf):
    lines = list(DOC)
    conf.privacy_admonition(lines)
    text = "\n".join(lines)
    assert "Privacy\n-------" not in text
    block = text.index(".. admonition:: Privacy")
    assert text.index("More about it.") < block < text.index("Parameters\n----------")
    assert "   Pure epsilon-DP under add/remove." in lines
    assert "   * bullet" in lines
    assert text.index("Examples\n--------") > text.index("   * bullet")


def test_docstring_without_privacy_section_is_unchanged(conf):
    lines = [line for line in DOC if line not in ("Privacy", "-------")]
    before = list(lines)
    conf.privacy_admonition(lines)
    assert lines == before


def test_plain_math_is_escaped_outside_literals_and_doctests(conf):
    lines = ["P(z) ~ exp(-|z| / s), ``a|b``, sigma**2, mean_ here", ">>> 1 | 2", "3"]
    conf.escape_plain_math(lines)
    assert lines[0] == r"P(z) ~ exp(-\|z\| / s), ``a|b``, sigma\*\*2, mean\_ here"
    assert lines[1:] == [">>> 1 | 2", "3"]


def _public_modules(conf):
    names = []
    for modname in conf.PUBLIC_MODULES + ["dpcore"]:
        if modname == "dpcore.learn" and importlib.util.find_spec("sklearn") is None:
            continue
        names.append(modname)
    return names


def test_every_public_name_has_an_api_entry(conf):
    for modname in _public_modules(conf):
        module = importlib.import_module(modname)
        page = DOCS / "api" / f"{modname}.rst"
        assert page.exists(), modname
        missing = set(module.__all__) - {"__version__"} - conf._documented_names(page)
        assert not missing, f"{page.name} lacks {sorted(missing)}"


def test_every_privacy_section_is_rendered(conf):
    seen = 0
    for modname in _public_modules(conf):
        module = importlib.import_module(modname)
        for name in module.__all__:
            doc = inspect.getdoc(getattr(module, name))
            if not doc or "\nPrivacy\n-------\n" not in doc:
                continue
            lines = doc.splitlines()
            conf.escape_plain_math(lines)
            conf.privacy_admonition(lines)
            text = "\n".join(lines)
            assert "Privacy\n-------" not in text, f"{modname}.{name}"
            assert ".. admonition:: Privacy" in text, f"{modname}.{name}"
            seen += 1
    assert seen >= 30


# Public parameters each dpcore estimator must be given in an example (never inferred from data).
ESTIMATORS = {"LogisticRegression": {"classes", "data_norm"}, "LinearSVC": {"classes", "data_norm"},
              "GaussianNB": {"classes", "bounds"}, "PCA": {"data_norm"},
              "LinearRegression": {"bounds_X", "bounds_y"}}
BOUNDED = {"mean": "bounds", "median": "bounds", "quantile": "bounds", "sum": "bounds",
           "var": "bounds", "std": "bounds", "histogram": "range"}


def _dpcore_calls(tree):
    """(name, keywords) of calls of dpcore estimators and bounded statistics."""
    from_dpcore = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dpcore"):
            from_dpcore |= {alias.asname or alias.name for alias in node.names}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        keywords = {k.arg for k in node.keywords}
        if isinstance(func, ast.Name) and func.id in ESTIMATORS and func.id in from_dpcore:
            yield func.id, keywords
        if (isinstance(func, ast.Attribute) and func.attr in BOUNDED
                and isinstance(func.value, ast.Attribute) and func.value.attr == "stats"):
            yield func.attr, keywords


def test_gallery_has_at_least_eight_examples():
    assert len(EXAMPLES) >= 8


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_gives_classes_and_bounds(path):
    source = path.read_text()
    tree = ast.parse(source)
    doc = ast.get_docstring(tree)
    assert doc and "epsilon" in doc, "the example states its epsilon"
    for name, keywords in _dpcore_calls(tree):
        if name in ESTIMATORS:
            missing = ESTIMATORS[name] - keywords
            assert not missing, f"{path.name}: {name} without {sorted(missing)}"
        else:
            assert BOUNDED[name] in keywords, f"{path.name}: stats.{name} without {BOUNDED[name]}="


@pytest.mark.slow
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(path, monkeypatch):
    pytest.importorskip("matplotlib")
    pytest.importorskip("sklearn")
    pytest.importorskip("networkx")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    monkeypatch.setattr(plt, "show", lambda *args, **kwargs: None)
    try:
        runpy.run_path(str(path), run_name="__main__")
        assert plt.get_fignums(), f"{path.name} draws nothing"
    finally:
        plt.close("all")


def test_citations_that_cannot_resolve_become_plain_text(conf):
    lines = ["Summary after [A1]_.", "", "Body cites [A1]_ and [B2]_.", "",
             "References", "----------", ".. [A1] Someone, 2020."]
    conf.plain_citations(lines)
    assert lines[0] == "Summary after [A1]."
    assert lines[2] == "Body cites [A1]_ and [B2]."


def test_module_references_become_a_list(conf):
    lines = ["Module.", "", "References", "----------", ".. [A1] Someone, a title,", "   2020.",
             ".. [B2] Other."]
    conf.module_references(lines)
    assert ".. rubric:: References" in lines
    assert "* [A1] Someone, a title," in lines and "  2020." in lines and "* [B2] Other." in lines
    assert not any(line.lstrip().startswith(".. [") for line in lines)
