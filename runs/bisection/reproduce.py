"""A bisection's reproduce script: the culprit's parent and the culprit, each built and
measured on the bisection's cell by the script of one of its runs (runs/reproduce/), one
after the other in their own directories, then both results printed.

The two run scripts are embedded as base64 (runs/reproduce/build.py `decoded`), which no
text in them can end early.
"""

from runs.bisection.steps import BASELINE_CELL, CANDIDATE_CELL
from runs.models import Bisection, BisectionStep, Run
from runs.reproduce.build import decoded, shown
from runs.reproduce.script import reproduce_script, run_manifest


class NothingToReproduce(Exception):
    """The bisection found no culprit, or its runs are gone."""


def culprit_runs(bisection: Bisection) -> tuple[Run, Run]:
    """(parent's run, culprit's run): a succeeded run of each build on the cell."""
    if bisection.culprit_index is None:
        raise NothingToReproduce(f"bisection {bisection.pk} has found no commit")
    steps = {s.commit_index: s for s in bisection.steps.all()}
    culprit = steps.get(bisection.culprit_index) or steps.get(None)
    parent = steps.get(bisection.good_index) if bisection.good_index >= 0 else None
    culprit_run = _run_of(culprit, CANDIDATE_CELL)
    parent_run = _run_of(parent, CANDIDATE_CELL) if parent else _run_of(culprit, BASELINE_CELL)
    return parent_run, culprit_run


def _run_of(step: BisectionStep | None, cell: int) -> Run:
    run = (
        Run.objects.filter(experiment__bisection_step=step, cell=cell, status=Run.Status.SUCCEEDED)
        .order_by("pk")
        .first()
        if step is not None
        else None
    )
    if run is None:
        raise NothingToReproduce("no succeeded run of the culprit's or its parent's build is left")
    return run


def bisection_script(bisection: Bisection) -> str:
    """The bash script that builds the parent and the culprit and runs the cell on each."""
    parent, culprit = culprit_runs(bisection)
    commit = bisection.commits[bisection.culprit_index or 0]
    lines = [
        "#!/usr/bin/env bash",
        f"# Reproduce BenchLab bisection {bisection.pk}: the first bad commit",
        f"# {commit['sha']} {shown(commit['subject'])[:200]}",
        "# against its parent, each built from source and measured on the same cell.",
        "# Usage: bash THIS_SCRIPT [WORKDIR]   (each run's own options apply: see its part)",
        "set -euo pipefail",
        'workdir=$(realpath -m -- "${1:-./benchlab-bisection-' + str(bisection.pk) + '}")',
        'mkdir -p "$workdir"',
    ]
    for name, run in (("parent", parent), ("culprit", culprit)):
        script = reproduce_script(run_manifest(run))
        lines.append(f'{decoded(script)} > "$workdir/{name}.sh"')
    lines += [
        'bash "$workdir/parent.sh" "$workdir/parent"',
        'bash "$workdir/culprit.sh" "$workdir/culprit"',
        'echo "parent: $workdir/parent; culprit: $workdir/culprit"',
    ]
    return "\n".join(lines) + "\n"
