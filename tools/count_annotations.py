"""Count the public functions and methods of python/dpcore that are fully annotated (issue 26
item 8), read from the source with ``ast``.

Public: a module-level function or a method of a module-level class, whose name and whose
class's name do not start with an underscore (``__init__`` and ``__call__`` of a public class
count too). Fully annotated: every parameter but ``self``/``cls`` and the return value carry an
annotation (``__init__`` needs no return annotation). Nested functions are not counted.

    python tools/count_annotations.py [PREFIX ...]

prints "annotated / total" for the whole package, then per top-level module or subpackage
(only those whose dotted name starts with one of the PREFIXes, when given); ``--missing`` lists
the functions still unannotated.
"""
import ast
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1] / "python"
COUNTED_DUNDERS = {"__init__", "__call__"}


def module_name(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_public(name):
    return not name.startswith("_") or name in COUNTED_DUNDERS


def annotated(fn, method):
    args = fn.args
    params = args.posonlyargs + args.args + args.kwonlyargs
    if method and params and params[0].arg in ("self", "cls") and not any(
            isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list):
        params = params[1:]
    extra = [a for a in (args.vararg, args.kwarg) if a is not None]
    if any(p.annotation is None for p in params + extra):
        return False
    return fn.returns is not None or fn.name == "__init__"


def public_functions(path):
    """Yield (qualified name, annotated) for the public functions and methods of one file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    for node in tree.body:
        if isinstance(node, functions) and not node.name.startswith("_"):
            yield node.name, annotated(node, method=False)
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            for item in node.body:
                if isinstance(item, functions) and is_public(item.name):
                    yield f"{node.name}.{item.name}", annotated(item, method=True)


def group_of(module):
    """dpcore.publish._mwem -> dpcore.publish; dpcore._release.bins -> dpcore._release.bins."""
    parts = module.split(".")
    if len(parts) >= 3 and parts[1] == "_release":
        return ".".join(parts[:3])
    return ".".join(parts[:2])


def main(argv):
    missing = "--missing" in argv
    prefixes = [a for a in argv if not a.startswith("--")]
    totals = {}
    unannotated = []
    for path in sorted((ROOT / "dpcore").rglob("*.py")):
        module = module_name(path)
        for name, ok in public_functions(path):
            done, total = totals.get(group_of(module), (0, 0))
            totals[group_of(module)] = (done + ok, total + 1)
            if not ok:
                unannotated.append(f"{module}:{name}")
    done = sum(d for d, _ in totals.values())
    total = sum(t for _, t in totals.values())
    print(f"python/dpcore: {done} / {total} public functions and methods annotated")
    selected = {g: v for g, v in sorted(totals.items())
                if not prefixes or any(g == p or g.startswith(p + ".") for p in prefixes)}
    if prefixes:
        sd = sum(d for d, _ in selected.values())
        st = sum(t for _, t in selected.values())
        print(f"selected: {sd} / {st}")
    for group, (d, t) in selected.items():
        print(f"  {group}: {d} / {t}")
    if missing:
        for entry in unannotated:
            if not prefixes or any(entry.startswith(p + ".") or entry.startswith(p + ":")
                                   for p in prefixes):
                print("missing", entry)


if __name__ == "__main__":
    main(sys.argv[1:])
