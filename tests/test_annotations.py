"""Issue 26 item 8: every public function and method of python/dpcore is annotated (counted by
tools/count_annotations.py from the source; mypy checks the bodies with check_untyped_defs)."""
import importlib.util
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
TOOL = ROOT / "tools" / "count_annotations.py"
PACKAGE = ROOT / "python" / "dpcore"

requires_sources = pytest.mark.skipif(
    not (TOOL.is_file() and PACKAGE.is_dir()),
    reason="tools/ and python/ are not beside the tests (tests copied out of the tree)")


def _tool():
    spec = importlib.util.spec_from_file_location("count_annotations", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@requires_sources
def test_every_public_function_and_method_is_annotated():
    tool = _tool()
    missing = [f"{path.relative_to(PACKAGE)}:{name}"
               for path in sorted(PACKAGE.rglob("*.py"))
               for name, ok in tool.public_functions(path) if not ok]
    assert missing == []


@requires_sources
def test_the_counter_sees_a_missing_annotation(tmp_path):
    tool = _tool()
    source = tmp_path / "planted.py"
    source.write_text(
        "def full(x: int) -> int:\n    return x\n\n"
        "def no_return(x: int):\n    return x\n\n"
        "def _private(x):\n    return x\n\n"
        "class Public:\n"
        "    def __init__(self, a: int):\n        self.a = a\n\n"
        "    def method(self, b):\n        return b\n")
    found = dict(tool.public_functions(source))
    assert found == {"full": True, "no_return": False, "Public.__init__": True,
                     "Public.method": False}
