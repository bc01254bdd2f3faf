"""The module boundaries of python/dpcore (issue 15), read from the source with ``ast``.

* No module uses an underscore name of another dpcore module (imported by name, or reached as an
  attribute of an imported module), except from the shared layers: ``_validation``, ``_floats``,
  ``_release`` (with its submodules), ``_exact`` (the exact slow paths behind the kernels' fast
  decisions), ``_progress`` (the progress bar), ``_edges`` (graph input checks), ``_smooth``
  (the smooth-sensitivity grid, exact samplers and plans of ``robust`` and ``graph_stats``),
  ``_docstrings`` (docstring pieces shared by sibling releases) and the compiled kernels
  (``dpcore/_*.pyx``). A package's ``__init__`` may import its own private submodules.
* Inside a subpackage (``dpcore.learn``, ``dpcore.local``, ...), one concept split over several
  modules, the modules may use each other's private modules and names (e.g. ``learn._base``,
  ``local._epsilon``); nothing outside the subpackage may.
* The import graph (module-level and function-level imports alike) has no cycle.
"""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SOURCE = ROOT / "python"
KERNELS = {f"dpcore.{p.stem}" for p in (ROOT / "dpcore").glob("_*.pyx")}
SHARED = {"dpcore._validation", "dpcore._floats", "dpcore._release", "dpcore._exact",
          "dpcore._progress", "dpcore._edges", "dpcore._smooth", "dpcore._docstrings"}


def module_name(path):
    parts = list(path.relative_to(SOURCE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted((SOURCE / "dpcore").rglob("*.py"))}

# The checks read the source tree; tests copied out of it (tools/check_wheel.sh) skip them.
pytestmark = pytest.mark.skipif(not (SOURCE / "dpcore").is_dir(),
                                reason="python/dpcore is not beside the tests")


def is_package(name):
    return MODULES[name].name == "__init__.py"


def is_private(name):
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def is_shared(module):
    """A module others may take underscore names from (or import although it is private)."""
    return module in KERNELS or any(module == s or module.startswith(s + ".") for s in SHARED)


def resolve(importer, node):
    """The absolute module a ``from ... import`` statement reads from."""
    if node.level == 0:
        return node.module
    base = importer.split(".") if is_package(importer) else importer.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(name):
    """Yield (lineno, imported module, imported name or None) for every import in ``name``;
    ``from package import submodule`` yields the submodule."""
    tree = ast.parse(MODULES[name].read_text(), filename=str(MODULES[name]))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, None
        elif isinstance(node, ast.ImportFrom):
            source = resolve(name, node)
            for alias in node.names:
                full = f"{source}.{alias.name}"
                if full in MODULES or full in KERNELS:
                    yield node.lineno, full, None
                else:
                    yield node.lineno, source, alias.name


def private_module_part(module):
    """The shortest private prefix of a dotted module path (dpcore.learn._linear -> itself)."""
    parts = module.split(".")
    for k in range(1, len(parts)):
        if is_private(parts[k]):
            return ".".join(parts[: k + 1])
    return None


def same_subpackage(name, module):
    """``name`` lies in the subpackage that holds ``module`` (dpcore itself is not one)."""
    parent = module.rsplit(".", 1)[0]
    return parent != "dpcore" and (name == parent or name.startswith(parent + "."))


def boundary_violations(name):
    found = []
    module_aliases = {}
    for lineno, module, imported in imports(name):
        if not module.startswith("dpcore") or module == name:
            continue
        private = private_module_part(module)
        own_private_submodule = (
            is_package(name) and private is not None and private.rsplit(".", 1)[0] == name
        )
        if private and not (is_shared(private) or own_private_submodule
                            or same_subpackage(name, private)):
            found.append(f"{name}:{lineno} imports private module {module}")
        if (imported is not None and is_private(imported) and not is_shared(module)
                and not (private and same_subpackage(name, private))):
            found.append(f"{name}:{lineno} imports {imported} from {module}")
    tree = ast.parse(MODULES[name].read_text())
    for node in ast.walk(tree):  # names bound to dpcore modules
        if isinstance(node, ast.ImportFrom):
            source = resolve(name, node)
            for alias in node.names:
                full = f"{source}.{alias.name}"
                if full in MODULES:
                    module_aliases[alias.asname or alias.name] = full
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES and alias.asname:
                    module_aliases[alias.asname] = alias.name
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in module_aliases and is_private(node.attr)):
            target = module_aliases[node.value.id]
            inside = private_module_part(target) and same_subpackage(name, target)
            if not is_shared(target) and target != name and not inside:
                found.append(f"{name}:{node.lineno} uses {target}.{node.attr}")
    return found


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_private_name_crosses_a_module_boundary(name):
    assert boundary_violations(name) == []


def import_graph():
    graph = {}
    for name in MODULES:
        edges = set()
        for _, module, _ in imports(name):
            if module in MODULES and module != name and not module.startswith(name + "."):
                edges.add(module)  # a package importing its own submodules is not a cycle
        graph[name] = edges
    return graph


def find_cycle(graph):
    state = {}
    stack = []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_no_import_cycle():
    assert find_cycle(import_graph()) is None


def test_the_checks_catch_what_they_forbid(tmp_path, monkeypatch):
    """The checker itself: a fake module taking a private name, reaching one through a module
    alias, and a two-module cycle are all reported."""
    fake = {
        "dpcore.fake_a": "from dpcore.stats import _Grid\nfrom dpcore import stats as s\n"
                         "s._rank_utility\nimport dpcore.fake_b\n",
        "dpcore.fake_b": "from dpcore import fake_a\n",
    }
    for name, text in fake.items():
        path = tmp_path / (name.split(".")[-1] + ".py")
        path.write_text(text)
        monkeypatch.setitem(MODULES, name, path)
    fake_outside = tmp_path / "fake_c.py"
    fake_outside.write_text("from dpcore.local._epsilon import _check_epsilon\n")
    monkeypatch.setitem(MODULES, "dpcore.fake_c", fake_outside)
    fake_sibling = tmp_path / "fake_d.py"
    fake_sibling.write_text("from dpcore.local._epsilon import _check_epsilon\n")
    monkeypatch.setitem(MODULES, "dpcore.local.fake_d", fake_sibling)
    assert any("imports private module dpcore.local._epsilon" in f
               for f in boundary_violations("dpcore.fake_c"))
    assert boundary_violations("dpcore.local.fake_d") == []
    found = boundary_violations("dpcore.fake_a")
    assert any("imports _Grid from dpcore.stats" in f for f in found)
    assert any("uses dpcore.stats._rank_utility" in f for f in found)
    assert find_cycle(import_graph()) is not None


# ------------------------------------------------------------------------------------------------
# floors (issue 26): imports only go down (or stay on their floor, where the no-cycle test above
# applies). A module is on the floor of its longest listed prefix; every module must have one.

FLOORS = {
    "dpcore._validation": 1, "dpcore._floats": 1, "dpcore._exact": 1, "dpcore._progress": 1,
    "dpcore._version": 1, "dpcore.random": 1, "dpcore._edges": 1,
    "dpcore.calibration": 2, "dpcore.curves": 2,                  # privacy curves (RDP, PLD)
    "dpcore.accounting": 3,
    "dpcore._release": 4, "dpcore.plans": 4,                      # the charge protocol
    "dpcore.mechanisms": 5, "dpcore.selection": 5, "dpcore.bingham": 5,
    "dpcore._release.sums": 6, "dpcore._release.bins": 6, "dpcore._release.quantiles": 6,
    "dpcore._smooth": 6,                                          # query plumbing
    "dpcore.stats": 7, "dpcore.robust": 7, "dpcore.publish": 7, "dpcore.local": 7,
    "dpcore.graph_stats": 7, "dpcore.mestimators": 7, "dpcore.distributed": 7,
    "dpcore.tuning": 7, "dpcore.synth": 7,                          # applications
    "dpcore.graph": 8,
    "dpcore.learn": 9,
    "dpcore.cli": 10, "dpcore.__main__": 10, "dpcore": 10,
    "dpcore._threads": 1,                                         # set_num_threads
    "dpcore._exact_gumbel": 1,                                    # _select's exact fallback
    "dpcore._docstrings": 1,                                      # shared docstring pieces
}


def floor_of(module):
    if module in KERNELS:
        return 0
    parts = module.split(".")
    for k in range(len(parts), 0, -1):
        prefix = ".".join(parts[:k])
        if prefix in FLOORS and (k > 1 or module == "dpcore"):
            return FLOORS[prefix]
    return None


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_go_down_the_floors(name):
    own = floor_of(name)
    assert own is not None, f"{name} has no floor in FLOORS"
    upward = [f"{name}:{lineno} imports {module} (floor {floor_of(module)} > {own})"
              for lineno, module, _ in imports(name)
              if module.startswith("dpcore") and module != name
              and not module.startswith(name + ".") and (floor_of(module) or 0) > own]
    assert upward == []


def test_floors_catch_an_upward_import(tmp_path, monkeypatch):
    fake = tmp_path / "fake_mech.py"
    fake.write_text("from dpcore.stats import mean\n")
    monkeypatch.setitem(MODULES, "dpcore.mechanisms_fake", fake)
    monkeypatch.setitem(FLOORS, "dpcore.mechanisms_fake", 5)
    with pytest.raises(AssertionError, match="floor 7 > 5"):
        test_imports_go_down_the_floors("dpcore.mechanisms_fake")


# ------------------------------------------------------------------------------------------------
# kernel ownership (issue 26 item 2): a compiled kernel is imported only by the module (or
# package) that owns it; the others call that module's public functions.

KERNEL_OWNERS = {
    "dpcore._random": "dpcore.random", "dpcore._noise": "dpcore.mechanisms",
    "dpcore._select": "dpcore.selection", "dpcore._bingham": "dpcore.bingham",
    "dpcore._hrg": "dpcore.graph", "dpcore._graph_stats": "dpcore.graph_stats",
    "dpcore._histogram": "dpcore._release.bins", "dpcore._publish": "dpcore.publish",
    "dpcore._robust": "dpcore.robust", "dpcore._local": "dpcore.local",
    "dpcore._tree": "dpcore.learn._tree", "dpcore._crlog": "dpcore._release.quantiles",
    "dpcore._dpcore_threads": "dpcore._threads", "dpcore._select_exact": "dpcore.selection",
    "dpcore._sgd": "dpcore.learn._sgd",
    "dpcore._noise_grid": "dpcore.mechanisms", "dpcore._noise_snapping": "dpcore.mechanisms",
    "dpcore._noise_planar": "dpcore.local._planar",
    "dpcore._learn_sums": "dpcore.learn",
    "dpcore._tree_scores": "dpcore.learn._tree_grow",
}
# A kernel entry point that serves another concept than its kernel's owner: the concept's module
# owns the entry and may import the kernel, for that name only ((kernel, name): module). None
# now: planar Laplace, built from the noise kernel's C internals, has its own kernel
# (_noise_planar.pyx, through _noise.pxd and _noise_neglog.pxd) owned by local._planar.
KERNEL_ENTRY_OWNERS: dict[tuple[str, str], str] = {}


def kernel_imports():
    for name in MODULES:
        for _, module, _ in imports(name):
            if module in KERNELS:
                yield name, module


def kernel_names_used(name, kernel):
    """The names of ``kernel`` that module ``name`` uses: imported from it, or read as attributes
    of a name bound to it ("*" when such a name is used otherwise, e.g. passed on)."""
    tree = ast.parse(MODULES[name].read_text())
    used, aliases = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = resolve(name, node)
            for alias in node.names:
                if source == kernel:
                    used.add(alias.name)
                elif f"{source}.{alias.name}" == kernel:
                    aliases.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == kernel:
                    aliases.add(alias.asname or alias.name)
    attribute_bases = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in aliases):
            used.add(node.attr)
            attribute_bases.add(id(node.value))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Name) and node.id in aliases
                and id(node) not in attribute_bases):
            used.add("*")
    return used


def kernel_import_allowed(name, kernel):
    owner = KERNEL_OWNERS[kernel]
    if name == owner or name.startswith(owner + "."):
        return True
    entries = {entry for (k, entry), module in KERNEL_ENTRY_OWNERS.items()
               if k == kernel and module == name}
    return bool(entries) and kernel_names_used(name, kernel) <= entries


def test_every_kernel_has_an_owner():
    assert KERNELS <= set(KERNEL_OWNERS), sorted(KERNELS - set(KERNEL_OWNERS))


def test_kernels_are_imported_by_their_owners_only():
    stray = {(name, kernel) for name, kernel in kernel_imports()
             if not kernel_import_allowed(name, kernel)}
    assert not stray, sorted(stray)


def test_an_entry_owner_may_use_its_entry_only(tmp_path, monkeypatch):
    """The entry rule: the entry's owner may call it; another name of the kernel, the kernel
    module passed on, or the same import in a module that owns no entry are all stray."""
    cases = {
        "dpcore.fake_entry": ("from dpcore import _noise\n_noise.planar_laplace_into(o, d, s, r)\n",
                              True),
        "dpcore.fake_other": ("from dpcore import _noise\n_noise.planar_laplace_into(o, d, s, r)\n"
                              "_noise.discrete_laplace_into(o, s, r)\n", False),
        "dpcore.fake_passed": ("from dpcore import _noise as n\nn.planar_laplace_into(o, d, s, r)\n"
                               "f(n)\n", False),
        "dpcore.fake_from": ("from dpcore._noise import planar_laplace_into\n", True),
        "dpcore.fake_nobody": ("from dpcore import _noise\n_noise.planar_laplace_into(o, d, s, r)\n",
                               False),
    }
    for name, (text, _) in cases.items():
        path = tmp_path / (name.split(".")[-1] + ".py")
        path.write_text(text)
        monkeypatch.setitem(MODULES, name, path)
        if name != "dpcore.fake_nobody":
            monkeypatch.setitem(KERNEL_ENTRY_OWNERS, ("dpcore._noise", "planar_laplace_into"), name)
        else:
            monkeypatch.setitem(KERNEL_ENTRY_OWNERS, ("dpcore._noise", "planar_laplace_into"),
                                "dpcore.local._planar")
        assert kernel_import_allowed(name, "dpcore._noise") is cases[name][1], name


# ------------------------------------------------------------------------------------------------
# module size (the project standard: one concept per module, none over 900 lines)

MAX_MODULE_LINES = 900


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_is_over_900_lines(name):
    lines = len(MODULES[name].read_text().splitlines())
    assert lines <= MAX_MODULE_LINES, f"{name} has {lines} lines: split it by concept"
