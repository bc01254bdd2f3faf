"""The public surface: every exported name exists, every release function states its privacy
guarantee, and the docstring examples run."""
import doctest
import importlib
import inspect
import re

import pytest

import dpcore

PUBLIC_MODULES = [
    "dpcore", "dpcore.mechanisms", "dpcore.random", "dpcore.accounting", "dpcore.calibration",
    "dpcore.selection",
]
# Functions that draw noise or release data must carry a Privacy section.
RELEASE_FUNCTIONS = [
    "laplace", "gaussian", "discrete_laplace", "discrete_gaussian", "exponential", "top_k",
]


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_all_names_exist(module_name):
    module = importlib.import_module(module_name)
    assert module.__all__, module_name
    for name in module.__all__:
        assert hasattr(module, name), f"{module_name}.{name} in __all__ but missing"


def _has_privacy_section(obj):
    doc = inspect.getdoc(obj) or ""
    return re.search(r"^Privacy\n-------\n", doc, flags=re.MULTILINE) is not None


@pytest.mark.parametrize("name", RELEASE_FUNCTIONS)
def test_release_functions_have_privacy_section(name):
    assert _has_privacy_section(getattr(dpcore, name))


def test_privacy_check_can_fail():
    def undocumented():
        """Adds noise.

        Parameters
        ----------
        x : float
        """

    assert not _has_privacy_section(undocumented)


@pytest.mark.parametrize("module_name", ["dpcore.mechanisms", "dpcore.random", "dpcore.accounting",
                                         "dpcore.calibration", "dpcore.selection"])
def test_docstring_examples(module_name):
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
