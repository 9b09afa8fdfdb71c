"""The run manifest: everything needed to run a run again, without the lab.

The lab builds it from a run's snapshot (`GET /runs/<id>/manifest.json`);
`python -m agents run --manifest FILE` replays its job spec and prints the
replayed numbers next to the recorded ones; `reproduce_script` (runs/) turns
it into bash. The build definition is whatever the run recorded about its
PostgreSQL (the spec's `postgres` request and the install the agent used), so
any build kind the spec learns travels along unchanged; `digest` is the
sha256 of that definition's canonical JSON.
"""

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any, Literal, NotRequired, TypedDict

from agents.contract.reports.counters import StatementCounters

MANIFEST_VERSION: Literal[1] = 1
MANIFEST_KIND = "benchlab-run-manifest"
# Values that name the place of a run, not what it ran: directories, ports, log prefixes.
PLACE_OPTIONS = ("-D", "-h", "-p", "--waldir")
PLACE_PREFIXES = ("--log-prefix=",)
# Options the agent derives at run time from the throughput it sees (the latency log's
# sampling rate, left out when every transaction is logged): not part of a command's shape.
MEASURED_PREFIXES = ("--sampling-rate=",)
PER_RUN_SPEC_KEYS = ("run_id", "token", "job_id")


class BuildDefinition(TypedDict):
    requested: dict[str, Any]
    install: dict[str, Any]
    digest: str


class RecordedPoint(TypedDict):
    index: int
    clients: int
    repeat: int
    tps: float | None
    latency_avg_ms: float | None
    # The point's counters per transaction (agents/contract/reports/counters.py).
    counters: NotRequired[dict[str, float | None]]
    # pgbench's statements by pg_stat_statements, when the workload tracked them.
    statements: NotRequired[list[StatementCounters]]


class Manifest(TypedDict):
    """docs/contracts.md, "Run manifest"."""

    version: Literal[1]
    kind: str
    run_id: str | None
    agent_version: str
    spec: dict[str, Any]
    build: BuildDefinition
    commands: list[dict[str, Any]]
    settings: dict[str, Any]
    storage: dict[str, Any]
    facts: dict[str, Any]
    points: list[RecordedPoint]


class ManifestError(ValueError):
    """A file that is not a run manifest this agent can replay."""


def build_definition(requested: Mapping[str, Any], install: Mapping[str, Any]) -> BuildDefinition:
    canonical = json.dumps({"requested": requested, "install": install}, sort_keys=True)
    return {
        "requested": dict(requested),
        "install": dict(install),
        "digest": hashlib.sha256(canonical.encode()).hexdigest(),
    }


def make_manifest(
    run_id: str | None,
    spec: Mapping[str, Any],
    install: Mapping[str, Any],
    record: Mapping[str, Any],
    points: Sequence[RecordedPoint],
) -> Manifest:
    """The manifest of one run. `record` holds the run's `steps` (every command with exit
    code and seconds), `effective` settings, `storage` facts, host `facts` and `agent_version`.
    """
    replayable = {k: v for k, v in spec.items() if k not in PER_RUN_SPEC_KEYS}
    return {
        "version": MANIFEST_VERSION,
        "kind": MANIFEST_KIND,
        "run_id": run_id,
        "agent_version": record.get("agent_version") or "",
        "spec": replayable,
        "build": build_definition(spec.get("postgres") or {}, install),
        "commands": list(record.get("steps") or []),
        "settings": {
            "requested": spec.get("settings") or {},
            "effective": list(record.get("effective") or []),
        },
        "storage": dict(record.get("storage") or {}),
        "facts": dict(record.get("facts") or {}),
        "points": list(points),
    }


def manifest_spec(document: object) -> dict[str, Any]:
    """The job spec to replay from a manifest; ManifestError says what is wrong."""
    if not isinstance(document, dict) or document.get("kind") != MANIFEST_KIND:
        raise ManifestError(f'not a run manifest: expected "kind": "{MANIFEST_KIND}"')
    if document.get("version") != MANIFEST_VERSION:
        raise ManifestError(
            f"manifest version {document.get('version')!r}; this agent reads {MANIFEST_VERSION}"
        )
    spec = document.get("spec")
    if not isinstance(spec, dict):
        raise ManifestError('the manifest has no job spec ("spec")')
    return dict(spec)


def command_shape(argv: Sequence[str]) -> list[str]:
    """`argv` without what names the place (program directory, paths, ports) and without
    the options derived from the throughput seen at run time."""
    shape = [os.path.basename(argv[0])] if argv else []
    skip_next = False
    for arg in argv[1:]:
        if skip_next:
            shape.append("<place>")
            skip_next = False
        elif arg in PLACE_OPTIONS:
            shape.append(arg)
            skip_next = True
        elif arg.startswith(MEASURED_PREFIXES):
            continue
        elif arg.startswith(PLACE_PREFIXES):
            shape.append(arg.split("=", 1)[0] + "=<place>")
        else:
            shape.append(arg)
    return shape
