"""No import cycle inside the agent: its modules import one another in one direction.

The graph is read from the source: every `import agents...` and `from ... import`
(relative ones too), at module level, inside functions and under
`if TYPE_CHECKING:`, since a type-only import is still a dependency the next edit
turns into a runtime one. `from agents.x import y` depends on the module
`agents.x.y` when there is one, else on `agents.x` (a name it defines).
"""

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
AGENTS = REPO / "agents"


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def agent_modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(AGENTS.rglob("*.py"))}


def absolute(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    """The module a `from` import names, with a relative one resolved against `importer`."""
    if node.level == 0:
        return node.module or ""
    package = importer.split(".") if is_package else importer.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def imported(path: Path, importer: str, modules: set[str]) -> Iterator[str]:
    """The agent modules one file imports."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom):
            source = absolute(node, importer, is_package)
            for alias in node.names:
                if f"{source}.{alias.name}" in modules:
                    yield f"{source}.{alias.name}"
                elif source in modules:
                    yield source


def import_graph() -> dict[str, set[str]]:
    modules = agent_modules()
    return {
        name: set(imported(path, name, set(modules))) - {name} for name, path in modules.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected group of modules (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = stack[stack.index(node) :]
            del stack[stack.index(node) :]
            if len(group) > 1:
                found.append(cycle_within(graph, set(group)))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def cycle_within(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """A path from the group's first module back to itself, staying inside the group."""
    start = min(group)
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for target in sorted(graph[node] & group):
            if target == start:
                return [*paths[node], start]
            if target not in paths:
                paths[target] = [*paths[node], target]
                queue.append(target)
    raise AssertionError(f"no cycle found in the strongly connected group {sorted(group)}")


def test_the_agent_modules_import_one_another_without_a_cycle() -> None:
    graph = import_graph()

    assert len(graph) > 50, "the agent's modules were not found"
    assert [" -> ".join(cycle) for cycle in cycles(graph)] == []


def test_the_cycle_search_finds_a_cycle_through_a_function_level_import() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}

    assert cycles(graph) == [["a", "b", "c", "a"]]


def test_relative_and_from_imports_resolve_to_the_module_they_name() -> None:
    tree = ast.parse("from .pgbench import command\nfrom . import sweep\n")
    first, second = (node for node in tree.body if isinstance(node, ast.ImportFrom))

    assert absolute(first, "agents.job", is_package=False) == "agents.pgbench"
    assert absolute(second, "agents.pgbench", is_package=True) == "agents.pgbench"
