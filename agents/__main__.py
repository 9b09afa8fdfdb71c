"""The agent's command line.

`python -m agents run|parse|facts|installs|build|worker|identity|selfcheck`
"""

import argparse
import json
import logging
import sys
from pathlib import Path

from agents import cli_output
from agents.config import AgentConfig
from agents.contract.errors import JobError
from agents.contract.redaction import redact_handlers
from agents.events import EventEmitter, json_lines_sink


def storage_option(value: str) -> tuple[str, Path]:
    name, sep, path = value.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"expected NAME=PATH, got {value!r}")
    return name, Path(path).resolve()


def add_config_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, help="agent config file (JSON)")
    parser.add_argument(
        "--storage",
        type=storage_option,
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="a storage target (repeatable), e.g. --storage nvme=/mnt/nvme/bench",
    )
    parser.add_argument("--state-dir", type=Path, help="cache and scratch directory")
    parser.add_argument("--os-user", help="unprivileged OS user that runs PostgreSQL")
    parser.add_argument(
        "--allow-setting",
        action="append",
        default=[],
        metavar="NAME",
        help="accept a setting that runs commands, loads code or takes a path (repeatable)",
    )
    parser.add_argument(
        "--allow-shell-scripts",
        action="store_true",
        default=None,
        help="accept pgbench scripts with \\shell or \\setshell",
    )
    parser.add_argument(
        "--allow-superuser-sql",
        action="store_true",
        default=None,
        help="run workload SQL (pgbench -i, setup SQL, scripts) as the superuser",
    )
    parser.add_argument(
        "--no-sandbox",
        dest="sandbox",
        action="store_false",
        default=None,
        help="run job programs without their sandbox (they reach what the OS user can)",
    )
    parser.add_argument(
        "--advertise-address",
        help="the address other agents reach this host's clusters at (default 127.0.0.1)",
    )
    parser.add_argument(
        "--allow-source-builds",
        action="store_true",
        default=None,
        help="build PostgreSQL from source (only from the --build-source entries)",
    )
    parser.add_argument(
        "--build-source",
        action="append",
        default=[],
        metavar="PREFIX",
        help="a URL prefix, directory or git repository builds may use (repeatable)",
    )
    parser.add_argument(
        "--allow-user-patches",
        action="store_true",
        default=None,
        help="apply the patches a source build names (they can change any file of the source)",
    )


def load_config(args: argparse.Namespace, **extra: object) -> AgentConfig:
    return AgentConfig.load(
        args.config,
        storage=dict(args.storage),
        state_dir=args.state_dir,
        os_user=args.os_user,
        allow_settings=set(args.allow_setting),
        allow_shell_scripts=args.allow_shell_scripts,
        allow_superuser_sql=args.allow_superuser_sql,
        sandbox=args.sandbox,
        advertise_address=args.advertise_address,
        allow_source_builds=args.allow_source_builds,
        build_sources=args.build_source,
        allow_user_patches=args.allow_user_patches,
        **extra,
    )


def command_run(args: argparse.Namespace) -> int:
    from agents.contract.spec.manifest import manifest_spec
    from agents.job import run_job

    if (args.spec is None) == (args.manifest is None):
        raise ValueError("give either a job spec file or --manifest FILE")
    manifest = json.loads(args.manifest.read_text()) if args.manifest else None
    spec = manifest_spec(manifest) if manifest else json.loads(args.spec.read_text())
    config = load_config(args)
    sinks = [json_lines_sink(sys.stdout)] if args.json_events else [cli_output.human_sink()]
    emitter = EventEmitter(sinks, run_id=spec.get("run_id"), token=spec.get("token"))
    result = run_job(spec, config, emitter)
    if not args.json_events:
        cli_output.print_json(result)
        cli_output.print_summary(result)
    if manifest:
        cli_output.print_replay(manifest, result)
    return 0 if result["status"] == "succeeded" else 1


def command_parse(args: argparse.Namespace) -> int:
    from agents.contract.pgbench_output.parse import PgbenchParseError, parse_output

    try:
        parsed = parse_output(args.file.read_text(errors="replace"))
    except PgbenchParseError as error:
        sys.stderr.write(f"{args.file}: {error}\n")
        return 2
    cli_output.print_json(parsed)
    return 0


def command_facts(args: argparse.Namespace) -> int:
    from agents.observe.facts import collect_facts

    config = load_config(args)
    cli_output.print_json(collect_facts(config.storage_targets()))
    return 0


def command_installs(args: argparse.Namespace) -> int:
    from agents.postgres.installs.ensure import list_installs
    from agents.postgres.installs.source_build import cached_builds

    config = load_config(args)
    cli_output.print_json(
        {**list_installs(config.cache_dir), "builds": cached_builds(config.cache_dir)}
    )
    return 0


def command_build(args: argparse.Namespace) -> int:
    from agents.contract.builds.definition import check_build_definition
    from agents.postgres.installs.source_build import ensure_build
    from agents.postgres.osuser import ensure_os_user

    definition = check_build_definition(json.loads(args.spec.read_text()))
    config = load_config(args)
    progress = cli_output.build_progress_printer()
    install, record = ensure_build(
        definition, config, ensure_os_user(config.os_user, config.sandbox), progress
    )
    cli_output.print_json(
        {"install": install.as_dict(), **{k: v for k, v in record.items() if k != "log"}}
    )
    return 0


def command_worker(args: argparse.Namespace) -> int:
    from agents.worker.celery_worker import start_worker

    config = load_config(
        args, name=args.name, redis_url=args.redis_url, redis_grace_s=args.redis_grace
    )
    start_worker(config, loglevel=args.loglevel)
    return 0


def command_identity(args: argparse.Namespace) -> int:
    from agents.worker.identity import load_or_create_identity

    config = load_config(args)
    identity = load_or_create_identity(config.state_dir, args.name)
    cli_output.print_json(
        {
            "name": identity.name,
            "fingerprint": identity.fingerprint,
            "secret_file": str(identity.path),
        }
    )
    return 0


def command_selfcheck(args: argparse.Namespace) -> int:
    from agents.selfcheck import run_selfcheck

    config = load_config(args)
    report = run_selfcheck(
        config,
        rounds=args.rounds,
        duration_s=args.duration,
        log=_selfcheck_log,
    )
    cli_output.print_json(report)
    return 0 if report["passed"] else 1


def _selfcheck_log(message: str) -> None:
    sys.stderr.write(f"selfcheck: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m agents", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="run one job spec locally and print its results")
    run.add_argument("spec", type=Path, nargs="?", help="job spec JSON file (docs/contracts.md)")
    run.add_argument(
        "--manifest",
        type=Path,
        help="replay a run manifest (from the lab's run page) instead of a job spec",
    )
    run.add_argument("--json-events", action="store_true", help="print each event as a JSON line")
    add_config_options(run)
    run.set_defaults(handler=command_run)

    parse = commands.add_parser("parse", help="parse a pgbench output file and print JSON")
    parse.add_argument("file", type=Path)
    parse.set_defaults(handler=command_parse)

    facts = commands.add_parser("facts", help="print this host's hardware profile")
    add_config_options(facts)
    facts.set_defaults(handler=command_facts)

    installs = commands.add_parser("installs", help="list PostgreSQL installs and releases")
    add_config_options(installs)
    installs.set_defaults(handler=command_installs)

    build = commands.add_parser(
        "build", help="build PostgreSQL from source into the cache without running anything"
    )
    build.add_argument("spec", type=Path, help="build definition JSON (postgres.build of a spec)")
    add_config_options(build)
    build.set_defaults(handler=command_build)

    worker = commands.add_parser("worker", help="serve jobs from the lab (Celery worker)")
    worker.add_argument("--name", required=True, help="agent name; its queue is agent.NAME")
    worker.add_argument(
        "--redis-url", help="Redis URL (default: $REDIS_URL, else redis://127.0.0.1:6379/0)"
    )
    worker.add_argument(
        "--redis-grace",
        type=float,
        metavar="SECONDS",
        help="how long a run with a client host waits out a Redis outage before it fails "
        "(default 90: the lab's AGENT_LOST_GRACE_S)",
    )
    worker.add_argument("--loglevel", default="info")
    add_config_options(worker)
    worker.set_defaults(handler=command_worker)

    identity = commands.add_parser(
        "identity", help="print the agent's fingerprint (creating its secret on first use)"
    )
    identity.add_argument("--name", required=True, help="agent name, as given to worker")
    add_config_options(identity)
    identity.set_defaults(handler=command_identity)

    selfcheck = commands.add_parser(
        "selfcheck", help="measure the lab's pgbench command against the plain one"
    )
    selfcheck.add_argument("--rounds", type=int, default=6)
    selfcheck.add_argument("--duration", type=int, default=20, help="seconds per measured run")
    add_config_options(selfcheck)
    selfcheck.set_defaults(handler=command_selfcheck)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    redact_handlers(logging.getLogger())
    try:
        return args.handler(args)
    except (JobError, OSError, ValueError) as error:
        sys.stderr.write(f"error: {error}\n")
        return 2


if __name__ == "__main__":
    sys.exit(main())
