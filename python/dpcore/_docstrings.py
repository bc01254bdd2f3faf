"""Docstring pieces: numpydoc text that sibling releases share, written once.

A docstring names a shared piece with a placeholder line ``{name}``, alone on its line and
indented like the text it stands for (a parameter entry, a paragraph of a Privacy section).
:func:`fill` replaces each placeholder with its piece, re-indented to the placeholder's
indentation, when the function or class is defined: ``help()``, the doctests and the API pages
(numpydoc) all read the complete docstring. A placeholder without a piece, or a piece that no
placeholder asks for, is an error at import time, so a typo cannot leave a hole.

Under ``python -OO`` there are no docstrings and nothing is filled.
"""
from __future__ import annotations

import re
import textwrap
from typing import Callable, Mapping, TypeVar

__all__ = ["RANDOM_STATE", "fill", "render", "RELATION"]

T = TypeVar("T")

_PLACEHOLDER = re.compile(r"^([ \t]*)\{(\w+)\}[ \t]*$")

#: The ``random_state`` parameter of every release.
RANDOM_STATE = """\
random_state : None, int, numpy Generator or BitGenerator, optional
    None (default): dpcore's process-wide cryptographically secure generator. Seeds are for
    tests and reproducibility only."""

#: The ``relation`` attribute of the calibrated mechanisms (plans).
RELATION = """\
relation : str
    The neighbouring relation the sensitivity was derived for (default: add/remove one
    record); plans compose only with plans of the same relation."""


def render(doc: str, pieces: Mapping[str, str], where: str = "docstring") -> str:
    """``doc`` with every placeholder line ``{name}`` replaced by ``pieces[name]`` (the
    indentation common to all its lines removed, then each line indented like the placeholder:
    write a piece as it reads at the left margin, e.g. ``"name : type\n    description"``).
    ``where`` names the docstring in errors: a placeholder without a piece, or a piece no
    placeholder uses, is a ValueError."""
    out: list[str] = []
    used: set[str] = set()
    for line in doc.splitlines():
        match = _PLACEHOLDER.match(line)
        if match is None:
            out.append(line)
            continue
        indent, name = match.groups()
        if name not in pieces:
            raise ValueError(f"{where}: no docstring piece named {name!r}")
        used.add(name)
        out.extend(indent + text if text.strip() else ""
                   for text in textwrap.dedent(pieces[name]).strip("\n").splitlines())
    unused = sorted(set(pieces) - used)
    if unused:
        raise ValueError(f"{where}: no placeholder for the docstring pieces {unused}")
    return "\n".join(out)


def fill(**pieces: str) -> Callable[[T], T]:
    """Decorator: the function's or class's docstring with its placeholders filled
    (:func:`render`); the object itself is returned unchanged otherwise."""

    def decorate(obj: T) -> T:
        doc = getattr(obj, "__doc__", None)
        if doc is not None:  # None under python -OO
            where = getattr(obj, "__qualname__", repr(obj))
            obj.__doc__ = render(doc, pieces, where)
        return obj

    return decorate
