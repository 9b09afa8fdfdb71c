"""Trying a patch (`benchlab try`, the API's `tries/`): a source build of the base ref and
one of the base with the patch (or of the head ref) from an allowed git repository, and
one adaptive experiment in rounds per workload of the patch battery
(runs/presets/battery.py), each comparing patched with base at the battery's client
counts, with a CPU profile per side. The experiments answer as one (`benchlab try`
exits "slower" when any does), so they share the lab's 5 % error: each spends its part
(runs/services/adaptive.py `adaptive_share_alpha`), and a patch that changes nothing
is called slower or faster in at most 5 % of tries, not in one per experiment.

The patch is a user's text: it is checked here as the agent checks it
(agents/contract/builds/definition.py: a unified diff naming only files inside the
source tree), held to MAX_PATCH_BYTES, and applied by the agent only in the job's build
tree, only where its local config allows user patches and the repository.
"""

import hashlib
from dataclasses import dataclass

from django.contrib.auth.models import User
from django.db import transaction

from agents.contract.builds.definition import BuildDefinition, check_build_definition
from agents.contract.errors import JobError
from runs.agentlink.execution import ROUNDS
from runs.models import ConfigProfile, Experiment, Host, PgBuild, Workload
from runs.presets.battery import BATTERY, BATTERY_VERSION, battery_clients
from runs.services.adaptive import adaptive_share_alpha
from runs.services.experiments import experiment_schedule

MAX_PATCH_BYTES = 1_000_000
DEFAULTS_PROFILE = "defaults"


@dataclass(frozen=True)
class TryRequest:
    """What to try: `patch` (a unified diff) on `base`, or `head` against `base`."""

    host: Host
    repository: str
    base: str
    version: str
    head: str | None = None
    patch: str | None = None
    patch_name: str = "change.patch"
    duration_s: int = 30
    repeats: int = 3
    max_rounds: int = 10
    margin_pct: float = 1.0
    min_effect_pct: float = 1.0
    duet: bool = False
    workloads: int | None = None


def _invalid(field: str, message: str) -> JobError:
    return JobError("invalid_spec", message, field=field)


def _definitions(asked: TryRequest) -> tuple[BuildDefinition, BuildDefinition]:
    if (asked.head is None) == (asked.patch is None):
        raise _invalid("patch", "give a patch or a head ref to compare with the base, not both")
    if asked.patch is not None and len(asked.patch.encode()) > MAX_PATCH_BYTES:
        raise _invalid("patch", f"the patch is over {MAX_PATCH_BYTES // 1000} kB")
    source: dict[str, object] = {"kind": "git", "location": asked.repository, "ref": asked.base}
    base: dict[str, object] = {"source": source, "configure_flags": [], "patches": []}
    if asked.patch is not None:
        patch = {"name": asked.patch_name, "diff": asked.patch, "strip": 1}
        patched = {**base, "patches": [patch]}
    else:
        patched = {**base, "source": {**source, "ref": asked.head}}
    return check_build_definition(base), check_build_definition(patched)


def _build(label: str, definition: BuildDefinition, version: str, user: User) -> PgBuild:
    """The build of `definition`, named by its digest: the same definition is one build."""
    digest = hashlib.sha256(repr(sorted(definition.items())).encode()).hexdigest()[:10]
    build, _new = PgBuild.objects.get_or_create(
        name=f"try {digest}: {label}"[:100],
        defaults={
            "version": version,
            "source": PgBuild.Source.BUILD,
            "definition": definition,
            "created_by": user,
            "notes": "built for `benchlab try`",
        },
    )
    return build


def _battery_workloads(count: int | None) -> list[Workload]:
    found = []
    for preset in BATTERY[:count]:
        values = {k: v for k, v in preset.items() if k != "name"}
        workload, _new = Workload.objects.get_or_create(name=preset["name"], defaults=values)
        found.append(workload)
    return found


@transaction.atomic
def patch_try(user: User, asked: TryRequest) -> list[Experiment]:
    """Queue the try: one started experiment per battery workload (raises JobError naming
    the field to fix; nothing is queued then)."""
    base_definition, patched_definition = _definitions(asked)
    base = _build(f"{asked.base}", base_definition, asked.version, user)
    label = asked.patch_name if asked.patch is not None else str(asked.head)
    patched = _build(f"{asked.base} + {label}", patched_definition, asked.version, user)
    defaults, _new = ConfigProfile.objects.get_or_create(
        name=DEFAULTS_PROFILE, defaults={"settings": {}, "description": "PostgreSQL's own defaults"}
    )
    threads = (asked.host.facts.get("cpu") or {}).get("threads")
    experiments = []
    workloads = _battery_workloads(asked.workloads)
    for workload in workloads:
        scheduled = experiment_schedule(
            user,
            {
                "name": f"try {label} on {asked.base}: {workload.name}"[:200],
                "description": f"benchlab try, patch battery v{BATTERY_VERSION}",
                "hosts": [asked.host],
                "builds": [base, patched],
                "config_profiles": [defaults],
                "workloads": [workload],
                "clients": battery_clients(threads if isinstance(threads, int) else None),
                "duration_s": asked.duration_s,
                "repeats": asked.repeats,
                "execution": ROUNDS,
                "adaptive": True,
                "max_rounds": asked.max_rounds,
                "margin_pct": asked.margin_pct,
                "min_effect_pct": asked.min_effect_pct,
                "cpu_profile": True,
                "duet": asked.duet,
            },
            start=True,
        )
        adaptive_share_alpha(scheduled.experiment, len(workloads))
        experiments.append(scheduled.experiment)
    return experiments
