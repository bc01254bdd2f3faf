"""The GitHub workflows (.github/workflows): valid YAML, every action pinned to a commit, least
privilege. They cannot run here; this keeps them well-formed and their policy checked."""
import re
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml", reason="PyYAML (installed with the 'test' extra via dask)")

_DIR = Path(__file__).resolve().parents[1] / ".github" / "workflows"
if not _DIR.is_dir():
    pytest.skip("not in a source checkout (tests copied next to an installed wheel)",
                allow_module_level=True)
WORKFLOWS = sorted(_DIR.glob("*.yml"))


def _steps(doc):
    for job in doc["jobs"].values():
        yield from job.get("steps", [])


def test_workflows_present():
    assert {p.name for p in WORKFLOWS} >= {"tests.yml", "wheels.yml"}


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_actions_pinned_to_commits(path):
    doc = yaml.safe_load(path.read_text())
    uses = [s["uses"] for s in _steps(doc) if "uses" in s]
    assert uses
    for u in uses:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", u), f"{path.name}: {u} is not pinned to a commit"
    text = path.read_text()
    for line in text.splitlines():
        if "uses:" in line:
            assert re.search(r"#\s*v\d", line), f"{path.name}: pinned action without its version: {line}"


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_least_privilege(path):
    doc = yaml.safe_load(path.read_text())
    assert doc["permissions"] == {"contents": "read"}
    for name, job in doc["jobs"].items():
        perms = job.get("permissions")
        if perms is not None:
            assert perms == {"id-token": "write"} and name == "publish", (name, perms)
    for step in _steps(doc):
        if step.get("uses", "").startswith("actions/checkout@"):
            assert step.get("with", {}).get("persist-credentials") is False
