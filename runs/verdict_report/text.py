"""A report document (runs/verdict_report/document.py) as plain text for a mail reply (no
line over 72 columns, ASCII only) and as Markdown for a pull-request comment.

Pure: numbers are the document's, printed with one decimal (tps, percent, percentage
points); nothing is computed here.
"""

import textwrap
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from typing import Any

WIDTH = 72
# Characters the lab's words use, as ASCII says them; anything else is decomposed, else "?".
ASCII_SPELLING = {"·": "/", "→": "->", "±": "+/-", "×": "x", "–": "-", "—": "-", "µ": "u"}
OUTCOME_WORDS = {
    "same_or_faster": "every cell the same within the margin or faster",
    "undecided": "at least one cell undecided at the budget, none slower",
    "slower": "at least one cell slower beyond the minimum effect",
    "nothing_compared": "no cell compared with the baseline",
}
TABLE_HEAD = ("clients", "base tps", "patched tps", "change [interval]", "verdict")
# Column widths of the text table (the change's with two spaces before it and one after):
# WIDTH in all.
COLUMNS = (9, 12, 12, 24, 15)


def ascii_only(text: str) -> str:
    """`text` in ASCII: known symbols spelled out, accents dropped, anything else `?`."""
    spelled = "".join(ASCII_SPELLING.get(char, char) for char in text)
    decomposed = unicodedata.normalize("NFKD", spelled)
    kept = "".join(char for char in decomposed if not unicodedata.combining(char))
    return kept.encode("ascii", "replace").decode("ascii")


def number(value: object, places: int = 1, signed: bool = False) -> str:
    """A document's number as the report prints it; `-` where it has none."""
    if not isinstance(value, int | float):
        return "-"
    return f"{value:+.{places}f}" if signed else f"{value:.{places}f}"


def change_words(cell: Mapping[str, Any]) -> str:
    """`-2.1% [-3.0, -1.2]`: the change of the mean and its interval, in percent."""
    low = number(cell["diff_ci_low_pct"], signed=True)
    high = number(cell["diff_ci_high_pct"], signed=True)
    return f"{number(cell['diff_pct'], signed=True)}% [{low}, {high}]"


def setup_lines(report: Mapping[str, Any]) -> list[str]:
    """The setup in two lines: hosts and builds; config profiles, workloads and thresholds."""
    setup = report["setup"]
    hosts = ", ".join(
        f"{host['name']} ({host['cpu_threads']} CPU threads)"
        if host["cpu_threads"]
        else host["name"]
        for host in setup["hosts"]
    )
    builds = "; ".join(_build_words(build) for build in setup["builds"])
    first = f"Setup: host {hosts or '-'}; builds: {builds or '-'}."
    second = (
        f"Config profiles: {', '.join(setup['config_profiles']) or '-'}; workloads: "
        f"{', '.join(setup['workloads']) or '-'}; minimum effect "
        f"{number(report['min_effect_pct'])}%, margin {number(report['margin_pct'])}%, "
        f"{number(100 * report['confidence'], 0)}% intervals{_look_levels(report)}."
    )
    return [first, second]


def _look_levels(report: Mapping[str, Any]) -> str:
    """Where an adaptive experiment's looks answered: their verdicts, and their intervals'
    levels (wider than 95 % at an early look, or for one of a patch try's experiments)."""
    cells = report["cells"]
    levels = sorted({number(row["interval_level_pct"]) for row in cells if row.get("answered_by")})
    if not levels:
        return ""
    shown = ", ".join(f"{level}%" for level in levels)
    return f"; verdicts and intervals ({shown}) from the adaptive looks"


def _build_words(build: Mapping[str, Any]) -> str:
    said = f"{build['name']} ({build['version']}"
    if build["ref"]:
        said += f", {build['source']} @ {build['ref']}"
    patches = [f"{patch['name']}, {patch['bytes']} bytes" for patch in build["patches"]]
    if patches:
        said += "; patch " + "; patch ".join(patches)
    return said + ")"


def _mover_words(mover: Mapping[str, Any]) -> str:
    interval = (
        f"[{number(mover['diff_ci_low_pct'], signed=True)}, "
        f"{number(mover['diff_ci_high_pct'], signed=True)}]"
    )
    return f"{mover['label']} {number(mover['diff_pct'], signed=True)}% {interval}"


def _frame_words(frame: Mapping[str, Any]) -> str:
    return f"{frame['frame']} {number(frame['points'], signed=True)} points"


def _per_cell(
    entries: Iterable[Mapping[str, Any]], key: str, words: Callable[[Mapping[str, Any]], str]
) -> list[str]:
    return [
        f"{entry['cell']}, {entry['clients']} clients: "
        + "; ".join(words(item) for item in entry[key])
        for entry in entries
    ]


def _grouped_cells(report: Mapping[str, Any]) -> dict[str, list[Mapping[str, Any]]]:
    grouped: dict[str, list[Mapping[str, Any]]] = {}
    for cell in report["cells"]:
        grouped.setdefault(cell["cell"], []).append(cell)
    return grouped


def _table_row(values: Iterable[str]) -> str:
    cells = list(values)
    aligned = [cells[0].rjust(COLUMNS[0]), cells[1].rjust(COLUMNS[1]), cells[2].rjust(COLUMNS[2])]
    change = cells[3].ljust(COLUMNS[3] - 3)
    return ("".join(aligned) + f"  {change} {cells[4]}").rstrip()


def _sections(report: Mapping[str, Any]) -> list[tuple[str, list[str]]]:
    """The lists after the table: top movers, flame-graph changes, warnings."""
    return [
        ("Top movers", _per_cell(report["top_movers"], "movers", _mover_words)),
        (
            "Largest flame-graph changes beyond noise",
            _per_cell(report["flame_changes"], "frames", _frame_words),
        ),
        ("Warnings", list(report["warnings"])),
    ]


def _wrapped(text: str, indent: str = "") -> list[str]:
    """`text` in lines of WIDTH at most, the lines after the first indented two columns
    (past a bullet `indent`, under its text)."""
    return textwrap.wrap(
        ascii_only(text),
        WIDTH,
        initial_indent=indent,
        subsequent_indent=" " * len(indent) if indent else "  ",
        break_on_hyphens=False,
    ) or [""]


def as_text(report: Mapping[str, Any]) -> str:
    """The report as a mail reply: 72 columns at most, ASCII only."""
    lines = _wrapped(f"BenchLab report: {report['kind']} {report['id']}, {report['title']}")
    lines.append("")
    for line in setup_lines(report):
        lines += _wrapped(line)
    lines.append("")
    lines += _wrapped(f"{report['metric']} of each cell against the baseline at its client count:")
    for cell, rows in _grouped_cells(report).items():
        lines += ["", *_wrapped(cell), _table_row(TABLE_HEAD)]
        for row in rows:
            values = (
                str(row["clients"]),
                number(row["baseline_mean"]),
                number(row["mean"]),
                change_words(row),
                str(row["verdict"] or "none yet"),
            )
            line = _table_row(values)
            lines += [line] if len(line) <= WIDTH else _wrapped(line)
    for heading, items in _sections(report):
        if items:
            lines += ["", f"{heading}:"]
            for item in items:
                lines += _wrapped(item, "- ")
    lines.append("")
    lines += _wrapped(f"Outcome: {report['outcome']} ({OUTCOME_WORDS[report['outcome']]}).")
    lines += _wrapped(f"Link: {report['url']}")
    lines += _wrapped(f"Reproduce: {report['reproduce']}")
    return "\n".join(lines) + "\n"


def _md(text: object) -> str:
    return str(text).replace("|", "\\|")


def as_markdown(report: Mapping[str, Any]) -> str:
    """The report as a pull-request comment: the cells as one Markdown table."""
    lines = [f"### BenchLab report: {report['kind']} {report['id']}, {_md(report['title'])}", ""]
    lines += [f"{line}  " for line in setup_lines(report)]
    lines += [
        "",
        "| cell | clients | base tps | patched tps | change [interval] | verdict |",
        "|---|---:|---:|---:|---|---|",
    ]
    for row in report["cells"]:
        lines.append(
            f"| {_md(row['cell'])} | {row['clients']} | {number(row['baseline_mean'])} | "
            f"{number(row['mean'])} | {change_words(row)} | {row['verdict'] or 'none yet'} |"
        )
    for heading, items in _sections(report):
        if items:
            lines += ["", f"**{heading}**", "", *[f"- {_md(item)}" for item in items]]
    lines += [
        "",
        f"**Outcome:** {report['outcome']} ({OUTCOME_WORDS[report['outcome']]}).",
        "",
        f"[{report['kind']} {report['id']} in the lab]({report['url']}) · reproduce: "
        f"`{report['reproduce']}`",
    ]
    return "\n".join(lines) + "\n"
