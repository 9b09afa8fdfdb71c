"""The report as text and Markdown, and the outcome its cells add up to: pure, from a
document shaped as runs/verdict_report/document.py makes it."""

import re

import pytest

from runs.verdict_report import Outcome, as_markdown, as_text, outcome_of
from runs.verdict_report.text import WIDTH, ascii_only


def cell(clients: int, verdict: str | None, diff: float = -2.04, label: str = "") -> dict:
    return {
        "cell": label or "patched · select-only, scale 100 (does not fit shared_buffers)",
        "run_id": 7,
        "baseline_run_id": 6,
        "clients": clients,
        "baseline_mean": 12345.678,
        "baseline_n": 5,
        "mean": 12093.91,
        "n": 5,
        "diff_pct": diff,
        "diff_ci_low_pct": -3.456,
        "diff_ci_high_pct": -0.61,
        "verdict": verdict,
    }


def report(**changes: object) -> dict:
    document = {
        "version": 1,
        "kind": "experiment",
        "id": 12,
        "title": "try: slower-scan.patch on master → 2 builds × 4 workloads",
        "url": "http://lab.example/experiments/12/",
        "setup": {
            "hosts": [{"name": "bench-1", "cpu_threads": 8}],
            "builds": [
                {"name": "base", "version": "18", "source": "/srv/postgres.git",
                 "ref": "master", "patches": []},
                {"name": "patched", "version": "18", "source": "/srv/postgres.git",
                 "ref": "master", "patches": [{"name": "slower-scan.patch", "bytes": 1234}]},
            ],  # fmt: skip
            "config_profiles": ["defaults"],
            "workloads": ["select-only, scale 10", "tpcb-like, scale 100"],
        },
        "metric": "tps",
        "min_effect_pct": 1.0,
        "margin_pct": 1.0,
        "confidence": 0.95,
        "cells": [cell(1, "slower"), cell(8, "same", 0.3), cell(64, None, 123456.789)],
        "top_movers": [
            {"cell": "patched", "clients": 8, "movers": [
                {"label": "WAL bytes", "diff_pct": 126.04, "diff_ci_low_pct": 80.0,
                 "diff_ci_high_pct": None},
            ]},
        ],  # fmt: skip
        "flame_changes": [
            {"cell": "patched", "clients": 8, "frames": [
                {"frame": "ExecScan" + "_very_long_frame_name" * 5, "points": 3.21, "q": 0.001}
            ]},
        ],  # fmt: skip
        "warnings": ["tps did not settle (run 7)"],
        "outcome": "slower",
        "reproduce": "benchlab run --experiment 12",
    }
    return {**document, **changes}


def test_text_fits_a_mail_reply_and_prints_the_documents_numbers():
    text = as_text(report())
    assert all(len(line) <= WIDTH for line in text.splitlines()), text
    assert text.isascii()
    assert "12345.7" in text and "12093.9" in text
    assert "-2.0% [-3.5, -0.6]" in text
    assert "+123456.8% [-3.5, -0.6] none yet" in text  # a change too wide for its column
    assert "slower" in text and "none yet" in text
    assert "WAL bytes +126.0% [+80.0, -]" in text
    assert "- patched, 8 clients: ExecScan" in text and "+3.2 points" in text.replace("\n  ", " ")
    assert "slower-scan.patch, 1234 bytes" in text
    assert "Reproduce: benchlab run --experiment 12" in text
    assert "master -> 2\n  builds x 4 workloads" in text


def test_text_setup_is_two_sentences_before_the_table():
    lines = as_text(report()).split("\n\n")[1].splitlines()
    assert lines[0].startswith("Setup: host bench-1 (8 CPU threads); builds: base (18")
    assert [line for line in lines if not line.startswith("  ")] == [
        lines[0], next(line for line in lines if line.startswith("Config profiles:"))
    ]  # fmt: skip


def test_markdown_is_one_table_row_per_cell():
    markdown = as_markdown(report())
    rows = [line for line in markdown.splitlines() if line.startswith("|")]
    assert rows[1] == "|---|---:|---:|---:|---|---|"
    assert len(rows) == 2 + 3
    assert all(row.count(" | ") == 5 for row in rows[2:])
    assert "| 1 | 12345.7 | 12093.9 | -2.0% [-3.5, -0.6] | slower |" in rows[2]


def test_markdown_escapes_a_pipe_in_a_name():
    markdown = as_markdown(report(cells=[cell(1, "same", label="a|b")]))
    assert "| a\\|b | 1 |" in markdown


def test_ascii_only_spells_the_labs_symbols():
    assert ascii_only("16 · 17 → ±1 % naïve ✓") == "16 / 17 -> +/-1 % naive ?"


@pytest.mark.parametrize(
    ("verdicts", "expected"),
    [
        (["same", "faster", "better"], Outcome.SAME_OR_FASTER),
        (["same", "undecided"], Outcome.UNDECIDED),
        (["same", "too few repeats"], Outcome.UNDECIDED),
        (["faster", None], Outcome.UNDECIDED),
        (["undecided", "slower"], Outcome.SLOWER),
        (["same", "worse"], Outcome.SLOWER),
        ([], Outcome.NOTHING_COMPARED),
    ],
)
def test_outcome_of_the_cells(verdicts, expected):
    assert outcome_of(verdicts) is expected


def test_every_outcome_has_words_in_the_report():
    for outcome in Outcome:
        text = as_text(report(outcome=outcome.value))
        assert re.search(rf"Outcome: {outcome.value} \(\w", text)
