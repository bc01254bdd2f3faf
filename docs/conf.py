"""Sphinx configuration for the dpcore documentation.

Build from the repository root with ``sphinx-build -W -b html docs docs/_build/html``. dpcore must
be importable (installed, or ``PYTHONPATH=python`` on a tree whose kernels are built in place).
"""
import importlib
import os
import re
import warnings
from pathlib import Path

import dpcore

DOCS = Path(__file__).resolve().parent

project = "dpcore"
author = "the dpcore developers"
copyright = "the dpcore developers"
release = dpcore.__version__
version = re.match(r"\d+(\.\d+)*", release).group(0) if re.match(r"\d", release) else release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "myst_parser",   # the capability pages of the user guide are Markdown
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}

# Intersphinx needs the network to fetch inventories, and the build must pass offline: it is only
# switched on when DPCORE_DOCS_INTERSPHINX=1 is set.
if os.environ.get("DPCORE_DOCS_INTERSPHINX") == "1":
    extensions.append("sphinx.ext.intersphinx")
    intersphinx_mapping = {
        "python": ("https://docs.python.org/3", None),
        "numpy": ("https://numpy.org/doc/stable", None),
        "sklearn": ("https://scikit-learn.org/stable", None),
    }

templates_path = ["_templates"]
exclude_patterns = ["_build", "**.ipynb_checkpoints", "auto_examples/*.md5"]
html_static_path = ["_static"]
html_css_files = ["dpcore.css"]
html_theme = "pydata_sphinx_theme"
html_title = f"dpcore {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
}

# -- autodoc / autosummary / numpydoc --------------------------------------------------------------
autosummary_generate = True
autosummary_imported_members = True
autodoc_typehints = "none"          # the numpydoc Parameters sections carry the types
autodoc_member_order = "bysource"
numpydoc_show_class_members = False  # members are documented by the autosummary class template
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
# numpydoc knows no "Privacy" section and has no option for custom sections: privacy_admonition
# below turns the section into an admonition before numpydoc renders the docstring. numpydoc's
# signature hook (autodoc-process-signature) also parses the raw docstring, only to look for a
# signature line, and warns about the unknown title there; that one parse is silenced (in
# setup(), so that importing this file, as tests/test_docs_examples.py does, changes nothing).

# -- sphinx-gallery --------------------------------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": str(DOCS.parent / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "remove_config_comments": True,
    "matplotlib_animations": False,
    "min_reported_time": 1,
    "abort_on_example_error": True,
}

# -- The Privacy section ---------------------------------------------------------------------------
_HEADER_UNDERLINE = re.compile(r"^\s*-{3,}\s*$")


def _is_header(lines, i):
    """Line i is a numpydoc section title (followed by an underline of the same length)."""
    return (
        i + 1 < len(lines)
        and lines[i].strip() != ""
        and _HEADER_UNDERLINE.match(lines[i + 1]) is not None
        and len(lines[i + 1].strip()) == len(lines[i].strip())
    )


def privacy_admonition(lines):
    """Move a numpydoc "Privacy" section, as an admonition, in front of the first section.

    The guarantee of a release is the first thing a reader should see after the summary, so the
    section is rendered as a ``.. admonition:: Privacy`` block at the end of the extended summary
    (before Parameters). ``lines`` is modified in place; docstrings without the section are left
    unchanged.
    """
    start = next((i for i in range(len(lines))
                  if lines[i].strip() == "Privacy" and _is_header(lines, i)), None)
    if start is None:
        return
    end = next((i for i in range(start + 2, len(lines)) if _is_header(lines, i)), len(lines))
    indent = len(lines[start]) - len(lines[start].lstrip())
    body = [line[indent:] if line.strip() else "" for line in lines[start + 2:end]]
    while body and not body[-1]:
        body.pop()
    while body and not body[0]:
        body.pop(0)
    del lines[start:end]
    first = next((i for i in range(len(lines)) if _is_header(lines, i)), len(lines))
    pad = " " * indent
    block = [pad + ".. admonition:: Privacy", pad + "   :class: privacy", ""]
    block += [pad + "   " + line if line else "" for line in body]
    block.append("")
    if first > 0 and lines[first - 1].strip():
        block.insert(0, "")
    lines[first:first] = block


# The docstrings write their mathematics in plain text: |z|, ||b||, sigma**2, mean_. In
# reStructuredText those are substitution references, strong emphasis and hyperlink references,
# so outside inline literals and doctest blocks the characters are escaped and shown as written.
_LITERAL = re.compile(r"(``.+?``)")
_TRAILING_UNDERSCORE = re.compile(r"(?<=\w)_(?=[\s).,;:]|$)")
_POWER = re.compile(r"(?<=[\w)'])\*\*(?=[\w(+-])")


def _escape_text(text):
    text = text.replace("|", "\\|")
    text = _TRAILING_UNDERSCORE.sub(r"\\_", text)
    return _POWER.sub(r"\\*\\*", text)


def escape_plain_math(lines):
    """Escape plain-text mathematics in docstring lines (in place), doctest blocks excepted."""
    in_doctest = False
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith(">>>"):
            in_doctest = True
        elif not stripped:
            in_doctest = False
        if in_doctest or stripped.startswith(".. "):
            continue
        parts = _LITERAL.split(line)
        lines[i] = "".join(part if k % 2 else _escape_text(part) for k, part in enumerate(parts))


_CITE_REF = re.compile(r"\[([A-Za-z0-9_.-]+)\]_")
_CITE_DEF = re.compile(r"^\s*\.\. +\[([A-Za-z0-9_.-]+)\]")


def module_references(lines):
    """Show a module docstring's References as a plain list (in place).

    numpydoc leaves module docstrings unparsed, so their ``.. [Label]`` entries would be
    citations that no text of the page refers to (a Sphinx warning).
    """
    start = next((i for i in range(len(lines))
                  if lines[i].strip() == "References" and _is_header(lines, i)), None)
    if start is None:
        return
    end = next((i for i in range(start + 2, len(lines)) if _is_header(lines, i)), len(lines))
    entries, other = [], []
    for line in lines[start + 2:end]:
        match = re.match(r"^\s*\.\. +\[([^\]]+)\] *(.*)$", line)
        if match:
            entries.append([match.group(1), [match.group(2)]])
        elif line.strip() and entries:
            entries[-1][1].append(line.strip())
        elif line.strip():
            other.append(line)
    block = [".. rubric:: References", ""] + other + ([""] if other else [])
    for label, text in entries:
        block += [f"* [{label}] {text[0]}"] + [f"  {t}" for t in text[1:]] + [""]
    lines[start:end] = block


def plain_citations(lines):
    """Citation references that cannot resolve become plain text ``[Label]`` (in place).

    That is every reference in the summary paragraph (autosummary copies it into the module
    tables, where the citation does not exist), and references to labels the docstring does
    not define itself (a function citing its module's list, shown on another page).
    """
    defined = {m.group(1) for line in lines for m in [_CITE_DEF.match(line)] if m}
    in_summary = True
    for i, line in enumerate(lines):
        if not line.strip():
            in_summary = False
        def plain(match, in_summary=in_summary):
            keep = match.group(1) in defined and not in_summary
            return match.group(0) if keep else f"[{match.group(1)}]"

        lines[i] = _CITE_REF.sub(plain, line)


def _process_docstring(app, what, name, obj, options, lines):
    plain_citations(lines)
    escape_plain_math(lines)
    privacy_admonition(lines)
    if what == "module":
        module_references(lines)


# -- Every public name is documented ---------------------------------------------------------------
PUBLIC_MODULES = [
    "dpcore.stats", "dpcore.mechanisms", "dpcore.selection", "dpcore.accounting", "dpcore.random",
    "dpcore.calibration", "dpcore.tuning", "dpcore.graph", "dpcore.mestimators",
    "dpcore.distributed", "dpcore.bingham", "dpcore.local", "dpcore.robust", "dpcore.publish",
    "dpcore.synth", "dpcore.learn",
]


def _documented_names(page):
    """Names listed in the autosummary blocks of an API page."""
    names = set()
    in_block = False
    for line in page.read_text().splitlines():
        if line.startswith(".. autosummary::"):
            in_block = True
            continue
        if in_block:
            if line and not line.startswith(" "):
                in_block = False
            elif line.strip() and not line.strip().startswith(":"):
                names.add(line.strip().lstrip("~").rsplit(".", 1)[-1])
    return names


def _check_api_pages(app):
    """Warn (an error under -W) when a name in a public __all__ has no API entry."""
    from sphinx.util import logging

    logger = logging.getLogger("dpcore.docs")
    for modname in PUBLIC_MODULES + ["dpcore"]:
        module = importlib.import_module(modname)
        page = DOCS / "api" / f"{modname}.rst"
        if not page.exists():
            logger.warning(f"docs/api/{modname}.rst is missing: {modname} is public")
            continue
        missing = sorted(set(module.__all__) - {"__version__"} - _documented_names(page))
        if missing:
            logger.warning(f"docs/api/{modname}.rst does not list {', '.join(missing)}")


def _skip_member(app, what, name, obj, skip, options):
    # scikit-learn's metadata-routing methods (set_fit_request, ...) are generated on every
    # estimator class; their docstrings point into scikit-learn's own glossary.
    if re.fullmatch(r"set_\w+_request", name):
        return True
    return None


def _documented_as(name):
    """The documented (public module) full name of ``dpcore.<name>``, or None."""
    obj = getattr(dpcore, name, None)
    for modname in PUBLIC_MODULES:
        module = importlib.import_module(modname)
        if name in module.__all__ and getattr(module, name) is obj:
            return f"{modname}.{name}"
    return None


def _resolve_top_level(app, env, node, contnode):
    # Docstrings refer to the top-level names (`dpcore.laplace`); they are documented in the
    # submodule that defines them (dpcore.mechanisms.laplace), so point the link there.
    if node.get("refdomain") != "py":
        return None
    parts = node.get("reftarget", "").split(".")
    if len(parts) != 2 or parts[0] != "dpcore":
        return None
    target = _documented_as(parts[1])
    if target is None:
        return None
    return env.get_domain("py").resolve_xref(
        env, node["refdoc"], app.builder, node["reftype"], target, node, contnode)


def setup(app):
    warnings.filterwarnings("ignore", message=r"Unknown section Privacy", category=UserWarning)
    app.connect("missing-reference", _resolve_top_level)
    app.connect("autodoc-skip-member", _skip_member)
    # priority < 500: runs before numpydoc's own autodoc-process-docstring handler
    app.connect("autodoc-process-docstring", _process_docstring, priority=400)
    app.connect("builder-inited", _check_api_pages)
    return {"parallel_read_safe": True}
