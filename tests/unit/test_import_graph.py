"""The import graph of core/ and app_pages/, read with `ast` (nothing is imported): no cycle, function-level
imports included, and a function-level import only where it loads a heavy module that its module does not load
already, with the reason said once near the top of the module.

Edges: `import a.b` -> a.b; `from a import b` -> a.b when a.b is a module of the project, else -> a. Importing a.b
also runs the package a's __init__, so an import of a.b is an edge to a too, unless the importer lives in a
itself (its package is already being initialised then, and a package that imports its own submodules is no cycle).
"""

from __future__ import annotations

import ast
import graphlib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("core", "app_pages")

# Each of these costs a command's start a noticeable time (measured on the dev machine, numpy already loaded:
# datasets ~580 ms, fpdf ~480 ms, huggingface_hub's snapshot_download ~220 ms, pypdf ~160 ms; torch and
# transformers seconds), so `python -m core --help`, the studies list and a page that does not need them import
# them inside the function that does. safetensors.torch imports torch.
HEAVY_THIRD_PARTY = ("torch", "transformers", "captum", "faiss", "umap", "sklearn", "scipy", "matplotlib", "vl_convert",
                     "accelerate", "pandas", "datasets", "fpdf", "pypdf", "huggingface_hub", "safetensors.torch",
                     "nnsight", "transformer_lens")

# The folders whose function-level imports this file checks (issue 38 item 4); core/commands, core/lens.py,
# core/views.py and app_pages are left out for now: other branches of issue 38 are rewriting them.
WARM_UP = ("app_pages.shell.launch",)
REASON_MARK = "imported in functions"

# attention_dataset <-> prefetch belongs to the registry helper's branch (issue 38 item 1); the lead removes this
# entry when that branch lands.
KNOWN_UNTIL_REGISTRY: set = set()


@dataclass(frozen=True)
class Import:
    importer: str
    target: str
    line: int
    in_function: bool
    name: str  # the dotted name as written: `a.b`, or `a.b.c` for `from a.b import c`


def module_names(root: Path, packages=PACKAGES) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under the packages."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _resolve_relative(module: str, is_package: bool, level: int, name: str | None) -> str:
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def imports_of(module: str, path: Path, known: set[str]) -> list[Import]:
    """Every import statement in the file, at any depth, as edges to modules of `known` (others are dropped)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[Import] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                for alias in child.names:
                    found.append(Import(module, alias.name, child.lineno, in_function, alias.name))
            elif isinstance(child, ast.ImportFrom):
                source = (_resolve_relative(module, path.name == "__init__.py", child.level, child.module)
                          if child.level else child.module)
                for alias in child.names:
                    full = f"{source}.{alias.name}"
                    found.append(Import(module, full if full in known else source, child.lineno, in_function, full))
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(tree, False)
    return found


def all_imports(root: Path = ROOT, packages=PACKAGES) -> tuple[dict[str, Path], list[Import]]:
    modules = module_names(root, packages)
    return modules, [i for m, p in modules.items() for i in imports_of(m, p, set(modules))]


def graph_of(imports: list[Import], known: set[str], dropped: set[tuple[str, str]] = frozenset()) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in known}
    for i in imports:
        own_packages = set(_packages_above(i.importer)) | {i.importer}
        for target in [i.target] + _packages_above(i.target):
            if target in known and target not in own_packages and (i.importer, target) not in dropped:
                graph[i.importer].add(target)
    return graph


def first_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of the graph as [m0, m1, ..., m0] (m0 imports m1 ...), or None."""
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as error:
        return list(reversed(error.args[1]))  # graphlib lists it dependency-first; an import chain reads forwards
    return None


def _where(imports: list[Import], cycle: list[str]) -> str:
    steps = []
    for a, b in zip(cycle, cycle[1:]):
        lines = sorted({i.line for i in imports if i.importer == a and b in [i.target] + _packages_above(i.target)})
        steps.append(f"{a} (line {', '.join(map(str, lines))}) imports {b}")
    return "; ".join(steps)


def test_no_import_cycle():
    modules, imports = all_imports()
    cycle = first_cycle(graph_of(imports, set(modules), KNOWN_UNTIL_REGISTRY))
    assert cycle is None, f"import cycle {' -> '.join(cycle)}: {_where(imports, cycle)}"


def test_known_cycle_entries_are_still_needed():
    """An entry of KNOWN_UNTIL_REGISTRY whose edge is gone is stale: say so, so the exemption does not outlive it."""
    modules, imports = all_imports()
    edges = {(i.importer, i.target) for i in imports}
    assert KNOWN_UNTIL_REGISTRY <= edges, f"remove {sorted(KNOWN_UNTIL_REGISTRY - edges)} from KNOWN_UNTIL_REGISTRY"


def test_a_cycle_through_a_function_level_import_is_found(tmp_path):
    """The checker itself: a cycle closed only inside a function, through `from package import submodule`."""
    (tmp_path / "core" / "inner").mkdir(parents=True)
    (tmp_path / "app_pages").mkdir()
    (tmp_path / "core" / "__init__.py").write_text("")
    (tmp_path / "core" / "inner" / "__init__.py").write_text("")
    (tmp_path / "core" / "a.py").write_text("from core.inner import b\n")
    (tmp_path / "core" / "inner" / "b.py").write_text("def f():\n    from ..c import thing\n")
    (tmp_path / "core" / "c.py").write_text("import core.a\nthing = 1\n")
    modules, imports = all_imports(tmp_path)
    assert first_cycle(graph_of(imports, set(modules))) in (
        ["core.a", "core.inner.b", "core.c", "core.a"], ["core.inner.b", "core.c", "core.a", "core.inner.b"],
        ["core.c", "core.a", "core.inner.b", "core.c"])
    (tmp_path / "core" / "c.py").write_text("thing = 1\n")
    assert first_cycle(graph_of(all_imports(tmp_path)[1], set(modules))) is None
    # through a package's __init__: importing core.inner.b runs core/inner/__init__.py, which imports core.c
    (tmp_path / "core" / "inner" / "__init__.py").write_text("from core import c\n")
    (tmp_path / "core" / "c.py").write_text("def f():\n    from core.inner.b import g\n")
    (tmp_path / "core" / "inner" / "b.py").write_text("def g():\n    pass\n")
    assert first_cycle(graph_of(all_imports(tmp_path)[1], set(modules))) in (
        ["core.c", "core.inner", "core.c"], ["core.inner", "core.c", "core.inner"])


def _checked(module: str) -> bool:
    """Every module of core/ and app_pages/, but the warm-up: app.py imports it before the server answers, and its
    thread imports the app's modules in order while the server already serves (its own comment says so)."""
    return module not in WARM_UP


def heavy_costs(modules: dict[str, Path], imports: list[Import]) -> dict[str, set[str]]:
    """Project module -> the heavy third-party modules importing it loads: those it imports at its top, and those of
    the project modules it imports at its top and of the packages it lives in (Python runs their __init__ first)."""
    cost = {m: {_heavy_root(i.name) for i in imports if i.importer == m and not i.in_function
                and _heavy_root(i.name)} for m in modules}
    feeds = {m: {p for p in _packages_above(m) if p in modules} for m in modules}
    for i in imports:
        if not i.in_function and i.target in modules:
            feeds[i.importer].add(i.target)
    while True:
        grew = False
        for m in modules:
            more = set().union(*(cost[f] for f in feeds[m]))
            if not more <= cost[m]:
                cost[m] |= more
                grew = True
        if not grew:
            return cost


def _heavy_root(name: str) -> str | None:
    """The heavy module importing `name` loads (safetensors.torch: torch), or None."""
    root = next((h for h in HEAVY_THIRD_PARTY if name == h or name.startswith(h + ".")), None)
    return "torch" if root == "safetensors.torch" else root


def unjustified(modules: dict[str, Path], imports: list[Import]) -> list[Import]:
    """The function-level imports that load nothing heavy beyond what their module loads already."""
    cost = heavy_costs(modules, imports)
    found = []
    for i in imports:
        if not i.in_function:
            continue
        adds = cost[i.target] if i.target in modules else {_heavy_root(i.name)} - {None}
        if not adds - cost[i.importer]:
            found.append(i)
    return found


def _packages_above(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:k]) for k in range(1, len(parts))]


def test_function_level_imports_are_heavy_and_explained():
    modules, imports = all_imports()
    light = [i for i in unjustified(modules, imports) if _checked(i.importer)]
    assert not light, "move these imports to the top of their module (they load nothing heavy the module does not):\n" + \
        "\n".join(f"{modules[i.importer].relative_to(ROOT)}:{i.line} {i.name}" for i in light)
    unexplained = sorted({str(modules[i.importer].relative_to(ROOT)) for i in imports
                          if i.in_function and _checked(i.importer)
                          and REASON_MARK not in modules[i.importer].read_text(encoding="utf-8")})
    assert not unexplained, f"say once near the top why these import in functions (a comment with {REASON_MARK!r}): {unexplained}"


def test_the_function_level_check_sees_light_and_heavy_imports(tmp_path):
    """The checker itself: a light import in a function is caught, and so is one that loads only what the module
    loads already; one that adds a heavy module (directly, through a project module, or through the package a
    module lives in) is not."""
    (tmp_path / "core" / "model").mkdir(parents=True)
    (tmp_path / "core" / "heavy_package").mkdir()
    (tmp_path / "app_pages").mkdir()
    (tmp_path / "core" / "__init__.py").write_text("")
    (tmp_path / "core" / "model" / "__init__.py").write_text("")
    (tmp_path / "core" / "model" / "big.py").write_text("import torch\n")
    (tmp_path / "core" / "model" / "user.py").write_text(
        "def f():\n    import json\n    import transformers\n    from core.model import big\n"
        "    from core.heavy_package import light\n")
    (tmp_path / "core" / "heavy_package" / "__init__.py").write_text("from core.model.big import *\n")
    (tmp_path / "core" / "heavy_package" / "light.py").write_text("def f():\n    import torch\n    import sklearn\n")
    modules, imports = all_imports(tmp_path)
    assert heavy_costs(modules, imports)["core.heavy_package.light"] == {"torch"}
    assert sorted((i.importer, i.name) for i in unjustified(modules, imports)) == [
        ("core.heavy_package.light", "torch"), ("core.model.user", "json")]


# Layers that must not import a layer above them although no cycle closes (yet): (lower, upper) package prefixes.
# core.training imports core.analyses (watch, tasks); what both need (the classifier format, its predictions, the
# Degeneracy rule) lives below them in core.model (issue 45 item 5).
UPWARD = (("core.analyses", "core.training"),)


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def upward_imports(imports: list[Import], upward=UPWARD) -> list[Import]:
    """The imports, function-level ones included, from a lower layer into an upper one of `upward`."""
    return [i for i in imports for lower, upper in upward
            if _within(i.importer, lower) and (_within(i.target, upper) or _within(i.name, upper))]


def test_analyses_import_nothing_from_training():
    modules, imports = all_imports()
    found = upward_imports(imports)
    assert not found, "core.analyses must not import core.training (move what both need into core.model):\n" + \
        "\n".join(f"{modules[i.importer].relative_to(ROOT)}:{i.line} {i.name}" for i in found)


def test_the_upward_check_sees_top_and_function_level_imports(tmp_path):
    (tmp_path / "core" / "analyses").mkdir(parents=True)
    (tmp_path / "core" / "training").mkdir()
    (tmp_path / "app_pages").mkdir()
    for package in ("core", "core/analyses", "core/training"):
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "core" / "training" / "runs.py").write_text("from core.analyses import a\n")
    (tmp_path / "core" / "analyses" / "a.py").write_text("import numpy\n")
    assert upward_imports(all_imports(tmp_path)[1]) == []
    (tmp_path / "core" / "analyses" / "a.py").write_text("def f():\n    from core import training\n")
    (tmp_path / "core" / "analyses" / "b.py").write_text("from core.training.runs import thing\n")
    found = upward_imports(all_imports(tmp_path)[1])
    assert sorted((i.importer, i.line, i.in_function) for i in found) == [
        ("core.analyses.a", 2, True), ("core.analyses.b", 1, False)]
