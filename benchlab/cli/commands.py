"""What each subcommand asks the lab; every answer comes from the API (runs/api/)."""

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from benchlab.cli import exits
from benchlab.cli.client import Api, CliError
from benchlab.cli.output import Output
from benchlab.cli.waiting import OPEN_STATUSES, Detached, progress_words, wait_for_experiment

OUTCOME_HEADER = "benchlab-outcome"
# What the API answers of an experiment but does not take when one is made.
NOT_WRITTEN = ("id", "status", "created_by", "created_at", "adaptive_state", "profile")


def read_document(path: str) -> dict[str, Any]:
    """A JSON or YAML file (YAML needs PyYAML) holding one object; `-` reads stdin."""
    text = sys.stdin.read() if path == "-" else _read(Path(path))
    if path.endswith((".yaml", ".yml")):
        try:
            import yaml
        except ImportError as error:
            raise CliError(
                "reading YAML needs PyYAML (pip install pyyaml); or give JSON"
            ) from error
        found = yaml.safe_load(text)
    else:
        try:
            found = json.loads(text)
        except ValueError as error:
            raise CliError(f"{path} is not JSON: {error}") from error
    if not isinstance(found, dict):
        raise CliError(f"{path} must hold one object (the experiment's fields)")
    return found


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as error:
        raise CliError(f"cannot read {path}: {error}") from error
    except UnicodeDecodeError as error:
        raise CliError(
            f"{path} is not UTF-8 text ({error.reason} at byte {error.start}): "
            "save it as UTF-8 (a git binary patch cannot be applied either)"
        ) from error


def report_query(args: argparse.Namespace, fmt: str) -> dict[str, object]:
    return {"format": fmt, "min_effect": args.min_effect, "margin": args.margin}


def show_report(api: Api, output: Output, kind: str, pk: int, args: argparse.Namespace) -> int:
    """Print the lab's report of an experiment or comparison; its outcome's exit code."""
    answer = api.text(f"{kind}s/{pk}/report/", report_query(args, args.format))
    output.result(answer.text)
    return exits.exit_code(answer.headers.get(OUTCOME_HEADER))


def finish(api: Api, output: Output, experiment_id: int, args: argparse.Namespace) -> int:
    """Wait for the experiment (unless --no-wait), then print its report and exit by it."""
    if args.no_wait:
        output.message(f"experiment {experiment_id} started: `benchlab status {experiment_id}`")
        return exits.SAME_OR_FASTER
    progress = wait_for_experiment(api, experiment_id, output)
    code = show_report(api, output, "experiment", experiment_id, args)
    failed = progress["runs"].get("failed", 0)
    if failed:
        output.message(f"{failed} run(s) failed: see the experiment's page")
        return exits.ERROR
    return code


def run(api: Api, output: Output, args: argparse.Namespace) -> int:
    """Start an experiment from a file, a preset or a saved experiment, then `finish`."""
    if args.preset:
        body = {**(read_document(args.file) if args.file else {}), "start": True}
        experiment = api.post(f"presets/{args.preset}/experiment/", body)
    elif args.experiment is not None:
        experiment = _run_again(api, args.experiment)
    elif args.file:
        experiment = api.post("experiments/", {**read_document(args.file), "start": True})
    else:
        raise CliError("give a file (JSON or YAML), --preset KEY or --experiment ID")
    output.message(f"experiment {experiment['id']}: {experiment['name']}")
    for note in experiment.get("schedule_notes", []):
        output.message(f"note: {note}")
    return finish(api, output, experiment["id"], args)


def _run_again(api: Api, pk: int) -> dict[str, Any]:
    """Start a draft as it is; a started experiment again as a new one with its fields."""
    saved: dict[str, Any] = api.get(f"experiments/{pk}/")
    if saved["status"] == "draft":
        api.post(f"experiments/{pk}/start/")
        return saved
    body = {k: v for k, v in saved.items() if k not in NOT_WRITTEN}
    return dict(api.post("experiments/", {**body, "start": True}))


def worst(codes: list[int]) -> int:
    """The exit code of several reports: an error, else slower, else undecided, else 0."""
    for code in (exits.ERROR, exits.SLOWER, exits.UNDECIDED):
        if code in codes:
            return code
    return exits.SAME_OR_FASTER


def try_patch(api: Api, output: Output, args: argparse.Namespace) -> int:
    """Ask the lab to try a patch (or a head ref) on a base ref: it builds both and starts
    the patch battery's experiments; wait for each and print its report."""
    body: dict[str, object] = {
        "host": args.host, "repository": args.repo, "base": args.base, "version": args.version,
        "duration_s": args.duration, "max_rounds": args.max_rounds, "duet": args.duet,
    }  # fmt: skip
    if args.workloads:
        body["workloads"] = args.workloads
    if args.head:
        body["head"] = args.head
    else:
        body["patch"] = sys.stdin.read() if args.patch == "-" else _read(Path(args.patch))
        body["patch_name"] = "stdin.patch" if args.patch == "-" else Path(args.patch).name
    started = api.post("tries/", body)
    battery = started["battery"]
    output.message(
        f"patch battery v{battery['version']} at clients {battery['clients']}: "
        + "; ".join(battery["workloads"])
    )
    ids = [experiment["id"] for experiment in started["experiments"]]
    output.message(f"experiments {', '.join(map(str, ids))} started")
    if args.no_wait:
        return exits.SAME_OR_FASTER
    codes = []
    for waited, pk in enumerate(ids, 1):
        try:
            codes.append(finish(api, output, pk, args))
        except Detached:
            left = ids[waited:]
            if left:
                others = "; ".join(f"`benchlab status {other}`" for other in left)
                output.message(f"the try's other experiments go on too: {others}")
            raise
    return worst(codes)


def status(api: Api, output: Output, args: argparse.Namespace) -> int:
    """Where the experiment stands; unless --no-wait, wait for it like `run` (reattach)."""
    progress = api.get(f"experiments/{args.id}/progress/")
    if args.no_wait or progress["status"] not in OPEN_STATUSES:
        output.result(progress_words(progress))
        if args.no_wait:
            return exits.SAME_OR_FASTER
    return finish(api, output, args.id, args)


def cancel(api: Api, output: Output, args: argparse.Namespace) -> int:
    cancelled = api.post(f"experiments/{args.id}/cancel/")
    output.result(f"experiment {args.id}: {len(cancelled)} run(s) cancelled")
    return exits.SAME_OR_FASTER


def compare(api: Api, output: Output, args: argparse.Namespace) -> int:
    """Save a comparison of runs against a baseline (the first run unless --baseline)."""
    body = {
        "name": args.name or f"benchlab compare {' '.join(map(str, args.runs))}",
        "runs": args.runs,
        "baseline": args.baseline or args.runs[0],
    }
    saved = api.post("comparisons/", body)
    output.message(f"comparison {saved['id']} saved")
    return show_report(api, output, "comparison", saved["id"], args)


def report(api: Api, output: Output, args: argparse.Namespace) -> int:
    return show_report(api, output, args.kind, args.id, args)


def import_outputs(api: Api, output: Output, args: argparse.Namespace) -> int:
    """Import pgbench outputs (files as pgbench printed them) with what is known of them."""
    body = {
        "files": [{"name": Path(name).name, "content": _read(Path(name))} for name in args.files],
        "describe": _read(Path(args.describe)) if args.describe else "",
        "host_name": args.host_name,
        "pg_version": args.pg_version,
        "command_line": args.command_line,
    }
    found = api.post("imports/", body)
    output.result(
        f"imported {len(found['runs'])} run(s) into experiment {found['experiment']}"
        + "".join(f"\nrefused: {refused}" for refused in found["refused"])
    )
    return exits.SAME_OR_FASTER
