"""`benchlab`: its subcommands, their options and help, and the exit code."""

import argparse
from collections.abc import Callable, Sequence

from benchlab.cli import commands, exits
from benchlab.cli.client import Api, CliError
from benchlab.cli.config import load_config
from benchlab.cli.output import Output
from benchlab.cli.waiting import Detached

Command = Callable[[Api, Output, argparse.Namespace], int]

DESCRIPTION = """\
The lab from a terminal or a CI job, over its HTTP API. The lab's URL and an API
token come from BENCHLAB_URL and BENCHLAB_TOKEN, else from the config file
~/.config/benchlab/config.toml (or BENCHLAB_CONFIG): url = "..." and token = "...".
While a command waits it shows the runs done, the current step and the time left;
Ctrl-C detaches (the experiment goes on; `benchlab status ID` reattaches).
"""


def _report_options(parser: argparse.ArgumentParser, wait: bool = False) -> None:
    parser.add_argument(
        "--format",
        choices=("text", "markdown", "json"),
        default="text",
        help="the report: text (a mail reply, 72 columns), markdown (a pull-request "
        "comment) or json; default text",
    )
    parser.add_argument(
        "--min-effect", type=float, help="smallest change in percent that earns a verdict"
    )
    parser.add_argument("--margin", type=float, help='"same" means within +/- this percent')
    if wait:
        parser.add_argument(
            "--no-wait", action="store_true", help="start it and return at once (exit 0)"
        )


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="benchlab",
        description=DESCRIPTION,
        epilog=exits.HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser(
        "run",
        help="start an experiment and wait for its report",
        description="Start an experiment from a JSON or YAML file of the experiment API's "
        "fields, a preset (the file, if given, adds to or changes its fields) or a saved "
        "experiment (a draft starts; a started one runs again as a new experiment), wait "
        "for it, print its report and exit by its outcome.",
        epilog=exits.HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("file", nargs="?", help="the experiment as JSON or YAML (- for stdin)")
    run.add_argument("--preset", metavar="KEY", help="a preset's key, e.g. smoke")
    run.add_argument("--experiment", type=int, metavar="ID", help="a saved experiment")
    _report_options(run, wait=True)
    run.set_defaults(handler=commands.run)

    tries = sub.add_parser(
        "try",
        help="build base and patched, run the patch battery, print the reports",
        description="Build the base ref and the base with the patch (or the head ref) from "
        "a git repository the host's agent allows, run the lab's patch battery (select-only "
        "and TPC-B-like, data that fits shared_buffers and data that does not, prepared and "
        "simple, at 1 client, a mid count and the host's CPU threads) in adaptive rounds "
        "with a CPU profile per side, then print each workload's report. The exit code is "
        "the worst report's.",
        epilog=exits.HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    tries.add_argument("--host", required=True, help="the host's name")
    tries.add_argument("--repo", required=True, help="a git repository the agent allows")
    tries.add_argument("--base", required=True, help="the base ref")
    change = tries.add_mutually_exclusive_group(required=True)
    change.add_argument("--patch", help="a unified diff (-p1) to apply to the base; - for stdin")
    change.add_argument("--head", help="a ref to compare with the base instead of a patch")
    tries.add_argument("--version", required=True, help="the PostgreSQL major version, e.g. 18")
    tries.add_argument("--duration", type=int, default=30, help="seconds per point (30)")
    tries.add_argument("--max-rounds", type=int, default=10, help="the budget of rounds (10)")
    tries.add_argument("--workloads", type=int, help="only the battery's first N workloads")
    tries.add_argument("--duet", action="store_true", help="both sides at once, in a duet")
    _report_options(tries, wait=True)
    tries.set_defaults(handler=commands.try_patch)

    status = sub.add_parser(
        "status",
        help="where an experiment stands; waits for it (reattach)",
        description="Show an experiment's progress; unless --no-wait, wait for it to end, "
        "then print its report and exit by its outcome, as `run` does.",
        epilog=exits.HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    status.add_argument("id", type=int, help="the experiment")
    _report_options(status, wait=True)
    status.set_defaults(handler=commands.status)

    cancel = sub.add_parser("cancel", help="cancel an experiment's queued and running runs")
    cancel.add_argument("id", type=int, help="the experiment")
    cancel.set_defaults(handler=commands.cancel)

    compare = sub.add_parser(
        "compare",
        help="save a comparison of runs and print its report",
        epilog=exits.HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    compare.add_argument("runs", type=int, nargs="+", help="run ids, the baseline first")
    compare.add_argument("--baseline", type=int, help="the baseline run (default: the first)")
    compare.add_argument("--name", help="the comparison's name")
    _report_options(compare)
    compare.set_defaults(handler=commands.compare)

    report = sub.add_parser(
        "report",
        help="print an experiment's or a comparison's report",
        description="Print the lab's report (every number from its statistics API) and "
        "exit by its outcome.",
        epilog=exits.HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    report.add_argument("kind", choices=("experiment", "comparison"))
    report.add_argument("id", type=int)
    _report_options(report)
    report.set_defaults(handler=commands.report)

    imports = sub.add_parser("import", help="import pgbench outputs as runs")
    imports.add_argument("files", nargs="+", help="files of pgbench output")
    imports.add_argument("--describe", help="a file describing the outputs (see the guide)")
    imports.add_argument("--host-name", default="", help="the machine they were measured on")
    imports.add_argument("--pg-version", default="", help="the PostgreSQL version, e.g. 16.4")
    imports.add_argument("--command-line", default="", help="the pgbench command line")
    imports.set_defaults(handler=commands.import_outputs)
    return top


def main(argv: Sequence[str] | None = None, output: Output | None = None) -> int:
    """Run one subcommand; its exit code (exits.HELP)."""
    args = parser().parse_args(argv)
    shown = output or Output()
    handler: Command = args.handler
    try:
        config = load_config()
        return handler(Api(config.url, config.token), shown, args)
    except CliError as error:
        shown.message(f"benchlab: {error}")
        return exits.ERROR
    except Detached:
        return exits.DETACHED
