"""Shared docstring pieces (dpcore._docstrings): placeholders filled at definition time,
re-indented, with typos caught at import; no public docstring keeps a placeholder."""
import importlib
import inspect
import re

import pytest

from dpcore import _docstrings
from dpcore._docstrings import fill, render

DOC = """Summary.

    Parameters
    ----------
    x : float
        The value.
    {shared}

    Privacy
    -------
    Pure epsilon-DP.
    {tail}
    """

SHARED = """\
random_state : None or int
    The generator.

    A second paragraph.
accountant : Accountant
    Charged once."""


def test_pieces_are_indented_like_their_placeholder():
    out = render(DOC, {"shared": SHARED, "tail": "Charged ``epsilon``."})
    assert out.splitlines()[6:13] == [
        "    random_state : None or int",
        "        The generator.",
        "",
        "        A second paragraph.",
        "    accountant : Accountant",
        "        Charged once.",
        "",
    ]
    assert "    Pure epsilon-DP.\n    Charged ``epsilon``.\n" in out
    # a piece written indented (e.g. inside a module) reads the same
    indented = "\n".join("        " + line if line else "" for line in SHARED.splitlines())
    assert render(DOC, {"shared": indented, "tail": "x"}) == render(DOC, {"shared": SHARED,
                                                                           "tail": "x"})


def test_missing_and_unused_pieces_are_errors():
    with pytest.raises(ValueError, match="no docstring piece named 'tail'"):
        render(DOC, {"shared": SHARED}, "f")
    with pytest.raises(ValueError, match=r"no placeholder for the docstring pieces \['extra'\]"):
        render(DOC, {"shared": SHARED, "tail": "x", "extra": "y"}, "f")
    # braces inside text are not placeholders: only a {name} alone on its line is
    assert render("a {x} b\n    {0, 1}\n", {}) == "a {x} b\n    {0, 1}"


def test_fill_on_functions_classes_and_no_docstring():
    def f():
        pass

    f.__doc__ = DOC
    assert fill(shared=SHARED, tail="t")(f) is f and "{shared}" not in f.__doc__

    @fill(piece="x : int\n    An int.")
    class C:
        """C.

        Attributes
        ----------
        {piece}
        """

    assert "        x : int\n            An int." in C.__doc__

    def bare():
        pass

    assert fill(anything="x")(bare) is bare and bare.__doc__ is None  # python -OO


PUBLIC = ["dpcore.publish", "dpcore.graph_stats", "dpcore.synth", "dpcore.robust"]
PLACEHOLDER = re.compile(r"^\s*\{\w+\}\s*$", re.MULTILINE)


@pytest.mark.parametrize("modname", PUBLIC)
def test_no_public_docstring_keeps_a_placeholder(modname):
    module = importlib.import_module(modname)
    objects = [getattr(module, name) for name in module.__all__]
    objects += [m for obj in objects if inspect.isclass(obj) for m in vars(obj).values()]
    filled = [obj for obj in objects if PLACEHOLDER.search(inspect.getdoc(obj) or "")]
    assert not filled


def test_random_state_piece_is_a_numpydoc_parameter():
    first, *rest = _docstrings.RANDOM_STATE.splitlines()
    assert first.startswith("random_state : ") and all(line.startswith("    ") for line in rest)


def _templated():
    from dpcore import graph_stats, publish, robust, synth

    return [publish.hierarchical_histogram, publish.quadtree_histogram, publish.privelet,
            publish.matrix_mechanism, publish.mwem, graph_stats.degree_sequence,
            graph_stats.degree_distribution, graph_stats.degree_distribution_node_dp,
            graph_stats.triangle_count, graph_stats.kstar_count, robust.ptr_median,
            robust.ptr_iqr, synth.MST, synth.PrivBayes, synth.AIM]


@pytest.mark.parametrize("obj", _templated(), ids=lambda o: o.__name__)
def test_filled_docstrings_document_every_parameter(obj):
    """The pieces land as numpydoc entries: every parameter of the signature is documented,
    once, and the Raises/Returns (or Attributes) sections are still parsed."""
    import warnings

    docscrape = pytest.importorskip("numpydoc.docscrape")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # numpydoc does not know "Privacy"
        doc = (docscrape.ClassDoc(obj) if inspect.isclass(obj) else docscrape.FunctionDoc(obj))
    names = [n.strip() for p in doc["Parameters"] for n in p.name.split(",")]
    target = obj.__init__ if inspect.isclass(obj) else obj
    expected = [n for n in inspect.signature(target).parameters if n != "self"]
    assert sorted(names) == sorted(expected)
    assert doc["Attributes"] if inspect.isclass(obj) else (doc["Raises"] and doc["Returns"])
    assert "Privacy" in (obj.__doc__ or "")
