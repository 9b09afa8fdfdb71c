"""A verdict report: an experiment's or a comparison's cells against the baseline, for a
mail reply (plain text, 72 columns, ASCII), a pull-request comment (Markdown) and
machines (JSON), every number from the statistics API's document (runs/stats_tables.py).
`benchlab report` and the pages' Report button read it from the API."""

from runs.verdict_report.document import comparison_report, experiment_report
from runs.verdict_report.outcome import Outcome, outcome_of
from runs.verdict_report.text import as_markdown, as_text

__all__ = (
    "Outcome",
    "as_markdown",
    "as_text",
    "comparison_report",
    "experiment_report",
    "outcome_of",
)
