"""What imports leave in the lab, and where it must not go.

An import creates its own host, build, config profile, workload and
experiment (runs.services.history.imports): they describe outputs measured
elsewhere, so nothing can be scheduled on them. Such an object is one whose
runs were imported (they have a `Provenance`).
"""

from typing import TypeVar

from django.db.models import Model, QuerySet

from agents.contract.errors import JobError
from runs.models import Experiment, Provenance, Run

ModelT = TypeVar("ModelT", bound=Model)

# The matrix axes an import fills with objects of its own, as Experiment names them.
IMPORTED_AXES = ("hosts", "builds", "config_profiles", "workloads")


def not_imported(queryset: QuerySet[ModelT]) -> QuerySet[ModelT]:
    """Builds, config profiles, workloads or experiments that no import made."""
    return queryset.exclude(runs__provenance__isnull=False)


def refuse_imported(experiment: Experiment) -> None:
    """JobError naming the first matrix axis that holds an object an import made."""
    for axis in IMPORTED_AXES:
        names = sorted(
            getattr(experiment, axis)
            .filter(runs__provenance__isnull=False)
            .values_list("name", flat=True)
            .distinct()
        )
        if names:
            what = axis.replace("_", " ").removesuffix("s")
            raise JobError(
                "invalid_spec",
                f"{what} {', '.join(names)} came from an import of pgbench outputs and "
                f"describes runs made elsewhere: pick a {what} the lab defines",
                field=axis,
            )


def refuse_imported_template(experiment: Experiment) -> None:
    """ValueError when a series would repeat an experiment of imported runs."""
    if Provenance.objects.filter(run__experiment=experiment).exists():
        raise ValueError(
            f"experiment {experiment.pk} holds imported runs, which the lab cannot run again: "
            "pick an experiment the lab scheduled"
        )


def same_output_as(run: Run) -> list[Run]:
    """Other imported runs from a file with the same content (sha256), oldest first."""
    provenance = getattr(run, "provenance", None)
    if provenance is None:
        return []
    others = Run.objects.filter(provenance__sha256=provenance.sha256).exclude(pk=run.pk)
    return list(others.order_by("pk"))
