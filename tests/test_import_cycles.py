"""No import cycle inside `runs/`: computing never imports presentation back.

The module graph is read from the source: every `import` and `from ... import`
in `runs/**/*.py`, also inside functions and under `TYPE_CHECKING`, that names
a `runs` module (`from runs.x import y` counts as importing `runs.x.y` when
that is a module, else `runs.x`). A package's `__init__` is the package's node;
the parent packages Python loads on the way are not counted as imports.
"""

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

Graph = dict[str, set[str]]


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(node: ast.Import | ast.ImportFrom, package: str, modules: set[str]) -> set[str]:
    """The modules of `modules` an import statement in `package` loads (relative ones too)."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names} & modules
    base = node.module or ""
    if node.level:
        parts = package.split(".")
        anchor = parts[: len(parts) - node.level + 1]
        base = ".".join([*anchor, base] if base else anchor)
    named = {f"{base}.{alias.name}" for alias in node.names}
    return (named & modules) or ({base} & modules)


def import_graph(package: str) -> Graph:
    """Module -> the modules of `package` it imports."""
    paths = {module_name(path): path for path in (REPO / package).rglob("*.py")}
    modules = set(paths)
    graph: Graph = {}
    for module, path in paths.items():
        home = module if path.name == "__init__.py" else module.rpartition(".")[0]
        tree = ast.parse(path.read_text(), filename=str(path))
        targets = set[str]().union(
            *(
                imported(node, home, modules)
                for node in ast.walk(tree)
                if isinstance(node, ast.Import | ast.ImportFrom)
            )
        )
        graph[module] = targets - {module}
    return graph


def find_cycle(graph: Graph) -> list[str]:
    """One cycle as the modules along it (first repeated at the end), or [] when none."""
    done: set[str] = set()
    path: list[str] = []

    def visit(module: str) -> list[str]:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return []
        path.append(module)
        for target in sorted(graph.get(module, ())):
            if cycle := visit(target):
                return cycle
        path.pop()
        done.add(module)
        return []

    for module in sorted(graph):
        if cycle := visit(module):
            return cycle
    return []


def test_finding_a_cycle_names_the_modules_along_it() -> None:
    graph = {"runs.a": {"runs.b"}, "runs.b": {"runs.c"}, "runs.c": {"runs.a"}, "runs.d": set()}

    assert find_cycle(graph) == ["runs.a", "runs.b", "runs.c", "runs.a"]
    assert find_cycle({"runs.a": {"runs.b"}, "runs.b": set()}) == []


def test_the_graph_counts_imports_inside_functions() -> None:
    graph = import_graph("runs")

    assert "runs.control.worker" in graph["runs.apps"], "imported in AppConfig.ready"


def test_nothing_in_runs_imports_itself_back() -> None:
    graph = import_graph("runs")

    assert graph, "no lab sources found"
    assert find_cycle(graph) == []


def test_computing_does_not_import_drawing() -> None:
    graph = import_graph("runs")
    computing = [m for m in graph if m.startswith(("runs.timelines", "runs.analysis"))]

    assert computing, "no timeline or analysis modules found"
    assert {m: sorted(t for t in graph[m] if t.startswith("runs.charts")) for m in computing} == {
        m: [] for m in computing
    }
