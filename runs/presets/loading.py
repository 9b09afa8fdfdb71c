"""Creating a preset's catalogue entries, and the schedule form's start from a preset."""

import logging

from django.db import transaction

from runs.agentlink.row_fields import EXPERIMENT_ROW_DEFAULTS
from runs.models import ConfigProfile, Host, PgBuild, Workload
from runs.models.catalogue import agent_hosts
from runs.presets.definitions import PRESETS, Preset

logger = logging.getLogger(__name__)


def find(key: str) -> Preset | None:
    return next((preset for preset in PRESETS if preset.key == key), None)


@transaction.atomic
def load_presets() -> dict[str, int]:
    """Create every preset's builds, profiles and workloads that do not exist yet.

    Returns how many of each were created; running it again creates nothing.
    """
    created = {"builds": 0, "config_profiles": 0, "workloads": 0}
    for preset in PRESETS:
        for name, version in preset.builds:
            _, new = PgBuild.objects.get_or_create(name=name, defaults={"version": version})
            created["builds"] += new
        for build in preset.source_builds:
            _, new = PgBuild.objects.get_or_create(
                name=build.name,
                defaults={
                    "version": build.version,
                    "source": "build",
                    "definition": build.definition,
                },
            )
            created["builds"] += new
        for config_profile in preset.config_profiles:
            parent = (
                ConfigProfile.objects.get(name=config_profile.parent)
                if config_profile.parent
                else None
            )
            _, new = ConfigProfile.objects.get_or_create(
                name=config_profile.name,
                defaults={
                    "settings": config_profile.settings,
                    "parent": parent,
                    "description": config_profile.description,
                },
            )
            created["config_profiles"] += new
        for workload in preset.workloads:
            values = {k: v for k, v in workload.items() if k != "name"}
            _, new = Workload.objects.get_or_create(name=workload["name"], defaults=values)
            created["workloads"] += new
    logger.info("presets loaded: %s", created)
    return created


def _pks(model: type[PgBuild | ConfigProfile | Workload], names: list[str]) -> list[int]:
    return list(model.objects.filter(name__in=names).values_list("pk", flat=True))


def form_initial(preset: Preset) -> dict[str, object]:
    """The schedule form's starting values for a preset (its catalogue entries by name).

    A preset with a client host takes the first two approved hosts as server and client;
    hosts an import made count for nothing (no agent runs there).
    """
    hosts = list(agent_hosts().values_list("pk", flat=True)[:2])
    approved = agent_hosts().filter(enrollment=Host.Enrollment.APPROVED).order_by("name")
    pair = list(approved.values_list("pk", flat=True)[:2])
    client_host = pair[1] if preset.client_host and len(pair) == 2 else None
    return {
        "name": preset.title,
        "description": preset.description,
        "hosts": [pair[0]] if client_host else hosts if len(hosts) == 1 else [],
        "client_host": client_host,
        "execution": preset.execution,
        "builds": _pks(
            PgBuild,
            [name for name, _version in preset.builds] + [b.name for b in preset.source_builds],
        ),
        "config_profiles": _pks(ConfigProfile, [p.name for p in preset.config_profiles]),
        "workloads": _pks(Workload, [w["name"] for w in preset.workloads]),
        "storage": preset.storage,
        # A sweep field the preset leaves out starts at its default, not at the form's
        # suggestion: a preset by transactions has no duration.
        **EXPERIMENT_ROW_DEFAULTS,
        **preset.sweep,
    }
