"""The README's tour runs as written (skipped where the tests run without the source tree)."""
import pathlib
import re

import pytest

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def test_readme_tour_runs():
    if not README.exists():
        pytest.skip("README.md is not beside the tests (tests copied out of the source tree)")
    block = re.search(r"## A tour\n\n```python\n(.*?)```", README.read_text(), re.S)
    assert block, "the README has no tour block"
    exec(compile(block.group(1), str(README), "exec"), {})
