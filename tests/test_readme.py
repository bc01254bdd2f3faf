"""The README's tour and every code block of the user guide run as written, and each value they
show (expression statements and assigned names) is finite (skipped where the tests run without
the source tree)."""
import ast
import numbers
import pathlib
import re

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
GUIDE = ROOT / "docs" / "user_guide"


def _blocks(path):
    """(first line number, code) of each Python block: ```python fences, rst code-blocks."""
    text = path.read_text()
    if path.suffix == ".md":
        for m in re.finditer(r"```python\n(.*?)```", text, re.S):
            yield text.count("\n", 0, m.start()) + 2, m.group(1)
    else:
        for m in re.finditer(r"\.\. code-block:: python\n\n((?:(?:    .*)?\n)+)", text):
            code = "\n".join(line[4:] for line in m.group(1).splitlines())
            yield text.count("\n", 0, m.start()) + 3, code


def _document_blocks():
    for path in [README, *sorted(GUIDE.glob("*.md")), *sorted(GUIDE.glob("*.rst"))]:
        if path.exists():
            for line, code in _blocks(path):
                yield pytest.param(path, line, code, id=f"{path.name}:{line}")


def non_finite(value, depth=0):
    """A description of the first non-finite number in ``value`` (numbers, arrays, sequences,
    dicts and the public attributes of result objects), or None."""
    if isinstance(value, (bool, np.bool_, str, bytes)) or value is None:
        return None
    if isinstance(value, numbers.Number):
        return None if np.isfinite(complex(value)) else repr(value)
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "fc" and not np.all(np.isfinite(value)):
            return "an array with NaN or inf"
        return None
    if depth > 2:
        return None
    if isinstance(value, dict):
        items = list(value.values())
    elif isinstance(value, (tuple, list)):
        items = list(value)
    elif hasattr(value, "__dict__") and not callable(value):
        items = [v for k, v in vars(value).items() if not k.startswith("_")]
    else:
        return None
    for item in items:
        found = non_finite(item, depth + 1)
        if found:
            return found
    return None


def test_the_tour_and_the_guide_have_code():
    if not README.exists():
        pytest.skip("README.md is not beside the tests (tests copied out of the source tree)")
    assert "## A tour\n\n```python" in README.read_text()
    assert len(list(_document_blocks())) >= 5


@pytest.mark.parametrize("path, line, code", list(_document_blocks()))
def test_document_code_runs_and_shows_finite_values(path, line, code):
    if "sklearn" in code or "learn" in code:
        pytest.importorskip("sklearn", reason="the block uses dpcore.learn ('.[learn]')")
    namespace = {"__name__": "__doc_block__"}
    tree = ast.parse(code, filename=f"{path}:{line}")
    for node in tree.body:
        where = f"{path.name}:{line + node.lineno - 1}"
        if isinstance(node, ast.Expr):
            value = eval(compile(ast.Expression(node.value), where, "eval"), namespace)
            bad = non_finite(value)
            assert bad is None, f"{where} shows {bad}"
            continue
        exec(compile(ast.Module([node], []), where, "exec"), namespace)
        if isinstance(node, ast.Assign):
            for target in ast.walk(ast.Tuple(node.targets, ast.Load())):
                if isinstance(target, ast.Name):
                    bad = non_finite(namespace[target.id])
                    assert bad is None, f"{where} assigns {target.id} = {bad}"


def test_non_finite_finds_nan_inside_results():
    class Result:
        def __init__(self):
            self.estimate = np.array([1.0, np.nan])

    assert non_finite(Result()) and non_finite((1.0, [float("inf")])) and non_finite(float("nan"))
    assert non_finite({"a": np.arange(3.0), "b": 2}) is None
