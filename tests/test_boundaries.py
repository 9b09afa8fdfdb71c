"""The two halves of BenchLab meet only in agents.contract.

The lab (runs/, benchlab/) imports nothing from `agents` but the contract
package; the agent imports neither Django nor the lab; the contract imports
only the standard library and itself, so both sides can load it anywhere.
Imports are read from the source (every `import` and `from ... import`, also
inside functions), so an import that only runs on some path is caught too.
"""

import ast
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
STANDARD_LIBRARY = sys.stdlib_module_names


def python_files(*packages: str) -> list[Path]:
    return sorted(path for package in packages for path in (REPO / package).rglob("*.py"))


def imported_modules(path: Path) -> Iterator[tuple[int, str]]:
    """(line, module) for every absolute import in a file."""
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module


def is_within(module: str, package: str) -> bool:
    return module == package or module.startswith(f"{package}.")


def offending_imports(
    paths: list[Path], refused: tuple[str, ...], allowed: str = "", root: Path = REPO
) -> list[str]:
    """`file:line module` for each import of a `refused` package outside `allowed`."""
    found = []
    for path in paths:
        for line, module in imported_modules(path):
            if any(is_within(module, package) for package in refused) and not (
                allowed and is_within(module, allowed)
            ):
                found.append(f"{path.relative_to(root)}:{line} {module}")
    return found


def test_the_lab_imports_nothing_from_the_agents_but_the_contract() -> None:
    lab = python_files("runs", "benchlab")

    assert lab, "no lab sources found"
    assert offending_imports(lab, refused=("agents",), allowed="agents.contract") == []


def test_the_agents_import_neither_django_nor_the_lab() -> None:
    agents = python_files("agents")

    assert offending_imports(agents, refused=("django", "rest_framework", "runs", "benchlab")) == []


def test_the_contract_imports_only_the_standard_library_and_itself() -> None:
    outside = []
    for path in python_files("agents/contract"):
        for line, module in imported_modules(path):
            top = module.split(".")[0]
            if top not in STANDARD_LIBRARY and not is_within(module, "agents.contract"):
                outside.append(f"{path.relative_to(REPO)}:{line} {module}")

    assert outside == []


@pytest.mark.parametrize("module", ["agents.worker.celery_worker", "agents.__main__"])
def test_loading_the_agent_loads_neither_django_settings_nor_the_web_code(module: str) -> None:
    probe = (
        f"import sys, {module}; "
        "print([m for m in sys.modules if m.startswith(('django.conf', 'django.db', "
        "'django.apps', 'benchlab', 'runs'))])"
    )
    output = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "benchlab.settings"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout

    assert output.strip() == "[]"


def test_the_boundary_check_finds_an_agent_import_inside_a_function(tmp_path: Path) -> None:
    leaky = tmp_path / "leaky.py"
    leaky.write_text(
        "from agents.contract.spec.document import validate_spec\n"
        "def later():\n"
        "    from agents.postgres.cluster.lifecycle import Cluster\n"
    )

    found = offending_imports([leaky], ("agents",), allowed="agents.contract", root=tmp_path)

    assert found == ["leaky.py:3 agents.postgres.cluster.lifecycle"]
