"""Whether the hosts an experiment names can run what it asks, checked before anything queues.

An agent refuses a source build its local config does not allow, patches
without `allow_user_patches`, and lab code on a host whose jobs get no cgroup;
it says so only when the run's turn comes. Its registration reports that config
(`Host.capabilities`), so review and the start refuse such an experiment at
once, naming the field and how the operator enables it. A host whose agent has
not reported it (an older agent) is left to the agent's own check.
"""

from typing import Any

from agents.contract.errors import JobError
from agents.contract.host_allows import how_to_allow_source, how_to_enable, source_allowed
from runs.models import Experiment, Host, PgBuild


def require_capable_hosts(experiment: Experiment) -> None:
    """JobError naming the field when a host cannot run a build of the experiment."""
    builds = [b for b in experiment.builds.order_by("name") if b.source == PgBuild.Source.BUILD]
    for host in experiment.hosts.order_by("name"):
        allows = host.capabilities.get("allows")
        if allows is None:
            continue
        for build in builds:
            _require_build_allowed(host, allows, build)


def _require_build_allowed(host: Host, allows: dict[str, Any], build: PgBuild) -> None:
    source = build.definition.get("source") or {}
    location = str(source.get("location", ""))
    kind = str(source.get("kind", ""))
    entries = allows.get("build_sources") or []
    if not allows.get("allow_source_builds") or not any(
        source_allowed(kind, location, entry) for entry in entries
    ):
        listed = ", ".join(entries) if allows.get("allow_source_builds") and entries else "none"
        raise JobError(
            "build_refused",
            f"host {host.name} does not build PostgreSQL from {location} (build {build.name}; "
            f"the sources it allows: {listed}): {how_to_allow_source(location)}",
            field="builds",
        )
    if build.definition.get("patches"):
        if not allows.get("allow_user_patches"):
            raise JobError(
                "build_refused",
                f"host {host.name} does not apply patches from the lab (build {build.name} has "
                f"some): remove them, or {how_to_enable('allow_user_patches')}",
                field="builds",
            )
        _require_cgroups(host, build)


def _require_cgroups(host: Host, build: PgBuild) -> None:
    """Patches are the lab's code: a host that cannot give a job a cgroup refuses them."""
    isolation = host.capabilities.get("isolation") or {}
    if not host.capabilities.get("allows", {}).get("sandbox", True) or isolation.get("cgroups"):
        return
    if "isolation" not in host.capabilities:
        return
    raise JobError(
        "sandbox_unavailable",
        f"host {host.name} cannot give its jobs a cgroup ({isolation.get('problem')}), so its "
        f"agent refuses the patches of build {build.name} whatever its config allows: pick a "
        "host whose jobs get cgroups (the hosts page says which)",
        field="builds",
    )


def require_client_host_reported(experiment: Experiment) -> None:
    """A client host is a machine whose agent registered, not one an import made."""
    client = experiment.client_host
    if client is None:
        return
    if client.is_imported or client.last_seen is None:
        why = (
            "came from an import of pgbench outputs"
            if client.is_imported
            else "has never registered (no agent has run under that name)"
        )
        raise JobError(
            "host_not_approved",
            f"client host {client.name} {why}: start the agent there (`python -m agents worker "
            f"--name {client.name}`) or pick another client host",
            field="client_host",
        )
