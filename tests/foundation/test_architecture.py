"""The import rules of docs/architecture.md, read from the source with `ast` (nothing is imported).

Parts: the engine (`scheduling/engine/`), the adapters (`scheduling/adapters/`), the loop
(`scheduling/loop/`, `scheduling/tasks.py`), the faces (pages, API, admin, /metrics, commands) and
the mirror (the models and the modules that read and write them: everything else). Wiring
(settings, urls' root, wsgi/asgi, Celery app, AppConfigs) may import anything.

Every import counts, at module level or inside a function (a function-local import is still a
dependency, only a later one); only imports under `if TYPE_CHECKING:` are left out, since they never
run."""

from __future__ import annotations

import ast
import sys
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("karpweb", "accounts", "fleet", "reservations", "scheduling")

# Third-party modules the engine may use: pure Python, no I/O. pyinstrument profiles the
# consolidation benchmark when asked (`--profile`), and only then is imported.
ENGINE_PURE_DEPENDENCIES = {"pyinstrument"}
FACE_PARTS = {"views", "api", "admin", "admin_forms", "admin_mixins", "tables", "filtersets", "forms", "urls",
              "templatetags", "context_processors", "views_generic", "widgets", "whatif", "whatif_edits",
              "metrics", "management", "bench", "overview", "exports", "csvexport"}
WIRING = {"karpweb", "karpweb.settings", "karpweb.wsgi", "karpweb.asgi", "karpweb.celery", "karpweb.pytest_env"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def modules() -> dict[str, Path]:
    return {module_name(path): path
            for package in PACKAGES for path in (ROOT / package).rglob("*.py")
            if "migrations" not in path.parts}


def part(name: str) -> str:
    pieces = name.split(".")
    if name.startswith("scheduling.engine"):
        return "engine"
    if name.startswith("scheduling.adapters"):
        return "adapters"
    if name.startswith("scheduling.loop") or name == "scheduling.tasks":
        return "loop"
    if name in WIRING or pieces[-1] == "apps":
        return "wiring"
    if name == "karpweb.urls" or (len(pieces) > 1 and pieces[1] in FACE_PARTS):
        return "faces"
    return "mirror"


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return getattr(test, "id", None) == "TYPE_CHECKING" or getattr(test, "attr", None) == "TYPE_CHECKING"


def imports(name: str) -> list[tuple[str, list[str]]]:
    """(module, the names taken from it as full dotted names) for every import that can run."""
    path = modules()[name]
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: list[tuple[str, list[str]]] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for statement in child.orelse:
                    visit_statement(statement)
            else:
                visit_statement(child)

    def visit_statement(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found.append((module, [f"{module}.{alias.name}" for alias in node.names]))
        visit(node)

    visit(ast.parse(path.read_text(), str(path)))
    return found


@cache
def graph() -> dict[str, frozenset[str]]:
    """Module -> the project modules it imports. `from package import submodule` depends on the
    submodule only; a module's own parent packages are always imported before it, so they are no
    edge."""
    known = modules()
    edges = {}
    for name in known:
        targets = set()
        for module, names in imports(name):
            submodules = [n for n in names if n in known]
            for target in submodules if names and len(submodules) == len(names) else [module, *submodules]:
                if target in known and target != name and not name.startswith(target + "."):
                    targets.add(target)
        edges[name] = frozenset(targets)
    return edges


def cycles(edges: dict[str, frozenset[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def forbidden(source_part: str, target_parts: set[str]) -> list[str]:
    return sorted(f"{name} -> {target}"
                  for name, targets in graph().items() if part(name) == source_part
                  for target in targets if part(target) in target_parts)


def test_the_engine_imports_only_itself_the_standard_library_and_pure_dependencies():
    outside = []
    for name in modules():
        if part(name) != "engine":
            continue
        for module, _ in imports(name):
            top = module.split(".")[0]
            inside = module.startswith("scheduling.engine")
            if not inside and top not in sys.stdlib_module_names and top not in ENGINE_PURE_DEPENDENCIES:
                outside.append(f"{name} imports {module}")
    assert outside == []


def test_adapters_never_import_faces_or_the_loop():
    assert forbidden("adapters", {"faces", "loop"}) == []


def test_the_loop_never_imports_faces():
    assert forbidden("loop", {"faces"}) == []


def test_the_mirror_never_imports_faces_or_the_loop():
    assert forbidden("mirror", {"faces", "loop"}) == []


def test_no_import_cycles_among_modules():
    assert cycles(graph()) == []


def test_the_checks_see_what_they_check():
    """The scan finds the engine, each part, and the imports it must judge: an empty graph would
    pass every rule above."""
    parts = {part(name) for name in modules()}
    assert parts == {"engine", "adapters", "loop", "faces", "mirror", "wiring"}
    assert "scheduling.engine.scheduler" in graph()["scheduling.engine.planning"]
    assert "scheduling.engine.rejection" in graph()["scheduling.engine.topology"]
    assert cycles({"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a"}), "d": frozenset()}) == [["a", "b", "c"]]
