"""The lab's packages in layers: a package imports only from its own layer or lower ones,
and no two packages import each other, directly or around a loop.

The order, lowest first: the pure methods and the contract's link; the models; reads over
them; the analysis of runs; what is derived from it (counters, timelines, flame graphs,
host noise, estimates); the statistics tables; the services (every write); the features
and workers that call services; the figures and template tags; the pages, the API and the
commands. The agent's packages have no cycle either. Read from the source as
tests/test_import_cycles.py reads it.
"""

from collections.abc import Sequence

from tests.test_import_cycles import Graph, find_cycle, import_graph

RUNS_LAYERS: Sequence[tuple[str, ...]] = (
    ("runs", "runs.inference", "runs.agentlink", "runs.tpcc_like", "runs.staticfiles"),
    ("runs.models",),
    ("runs.selectors", "runs.reproduce", "runs.admin", "runs.migrations", "runs.presets"),
    ("runs.analysis",),
    ("runs.counters", "runs.timelines", "runs.flamegraphs", "runs.host_noise", "runs.estimates"),
    ("runs.stats_tables", "runs.queues", "runs.verdict_report"),
    ("runs.services",),
    ("runs.bisection", "runs.forms", "runs.control", "runs.tasks", "runs.sse", "runs.tries"),
    ("runs.charts", "runs.templatetags"),
    ("runs.api", "runs.views", "runs.management", "runs.apps", "runs.urls_pages"),
)


def package_of(module: str, depth: int = 2) -> str:
    """`runs.analysis.compare` -> `runs.analysis`; a top-level module is its own package."""
    return ".".join(module.split(".")[:depth])


def package_graph(modules: Graph) -> Graph:
    """Package -> the other packages its modules import."""
    graph: Graph = {}
    for module, targets in modules.items():
        home = package_of(module)
        graph.setdefault(home, set()).update(
            package_of(target) for target in targets if package_of(target) != home
        )
    return graph


def upward_imports(graph: Graph, layers: Sequence[tuple[str, ...]]) -> list[str]:
    """Each import of a package from a higher layer, as `low -> high`."""
    layer_of = {package: n for n, packages in enumerate(layers) for package in packages}
    return sorted(
        f"{package} -> {target}"
        for package, targets in graph.items()
        for target in targets
        if layer_of[target] > layer_of[package]
    )


def test_every_package_of_runs_has_a_layer() -> None:
    placed = {package for packages in RUNS_LAYERS for package in packages}
    assert set(package_graph(import_graph("runs"))) <= placed, "add the new package to a layer"


def test_no_package_of_runs_imports_from_a_higher_layer() -> None:
    assert upward_imports(package_graph(import_graph("runs")), RUNS_LAYERS) == []


def test_no_two_packages_of_runs_import_each_other() -> None:
    assert find_cycle(package_graph(import_graph("runs"))) == []


def test_no_two_packages_of_the_agent_import_each_other() -> None:
    assert find_cycle(package_graph(import_graph("agents"))) == []


def test_an_upward_import_is_named() -> None:
    graph = {"runs.models": {"runs.views"}, "runs.views": {"runs.models"}}
    layers = (("runs.models",), ("runs.views",))
    assert upward_imports(graph, layers) == ["runs.models -> runs.views"]
