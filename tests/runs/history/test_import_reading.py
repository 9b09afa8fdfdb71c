"""Reading uploaded pgbench outputs: derived latency, the version a file states, and refusals
that say what the output holds (no database: the fast tier)."""

import re

import pytest

from runs.services.history.import_reading import (
    FileRefused,
    UploadedOutput,
    derived_latency_ms,
    parse_points,
    stated_version,
)
from tests.agents.pgbench.captures import FIXTURES

PG92 = sorted((FIXTURES / "pg92").glob("*.log"))


def stated(text: str, pattern: str) -> float:
    """A number as the file states it, read independently of the lab's parser."""
    match = re.search(pattern, text, re.MULTILINE)
    assert match, pattern
    return float(match.group(1))


def both_streams(version: str, scenario: str) -> bytes:
    base = FIXTURES / version / scenario
    return base.with_suffix(".stdout").read_bytes() + base.with_suffix(".stderr").read_bytes()


def test_nine_92_outputs_get_their_latency_derived_from_clients_and_tps():
    assert len(PG92) == 9
    for path in PG92:
        text = path.read_text()
        (point,) = parse_points(UploadedOutput(path.name, path.read_bytes()))

        assert point["latency_avg_ms"] is None  # 9.2 prints none
        clients = stated(text, r"^number of clients: (\d+)$")
        tps = stated(text, r"^tps = ([\d.]+) \(excluding")
        assert derived_latency_ms(point) == pytest.approx(1000 * clients / tps)


def test_a_latency_pgbench_printed_is_not_derived():
    (point,) = parse_points(UploadedOutput("16.log", both_streams("pg16", "run_plain_T2_P1_r")))

    assert point["latency_avg_ms"] is not None
    assert derived_latency_ms(point) is None


@pytest.mark.parametrize(
    ("version", "expected"),
    [("pg16", "16.15"), ("pg18", "18.6"), ("pg15_debian_client", "15.19")],
)
def test_the_version_is_read_from_pgbench_s_header(version, expected):
    content = both_streams(version, "run_plain_T2_P1_r")
    (point,) = parse_points(UploadedOutput("out.log", content))

    assert stated_version(point, content.decode()) == expected


def test_a_92_output_states_no_version_unless_the_file_holds_one():
    plain = PG92[0].read_text()
    with_version = "$ pgbench --version\npgbench (PostgreSQL) 9.2.24\n" + plain
    with_select = (
        "                            version\n"
        "-------------------------------------------------------------\n"
        " PostgreSQL 9.2.24 on x86_64-unknown-linux-gnu, compiled by gcc (GCC) 4.8.5, 64-bit\n"
        "(1 row)\n\n" + plain
    )

    read = {}
    for name, text in (("plain", plain), ("version", with_version), ("select", with_select)):
        (point,) = parse_points(UploadedOutput(name, text.encode()))
        read[name] = stated_version(point, text)

    assert read == {"plain": None, "version": "9.2.24", "select": "9.2.24"}


def test_an_output_whose_summary_shows_nothing_processed_is_refused_for_that():
    """A 16 run whose two clients aborted: a summary ("number of clients: 2"), no tps line."""
    content = both_streams("pg16", "run_err_div0")
    assert b"number of clients: 2" in content

    with pytest.raises(FileRefused) as refused:
        parse_points(UploadedOutput("div0.log", content))

    message = str(refused.value)
    assert message.startswith("div0.log: lines 1-")
    assert "summary shows 0 of 20 transactions processed and no 'tps =' line" in message
    assert "Run was aborted" in message
    assert "no pgbench summary" not in message


def test_a_file_without_a_summary_is_refused_as_having_none():
    with pytest.raises(FileRefused) as refused:
        parse_points(UploadedOutput("notes.txt", b"a few lines\nnumber of threads: 2\n"))

    assert str(refused.value) == (
        "notes.txt: lines 1-3: no pgbench summary: no 'number of clients' line, no 'tps =' "
        "line either; upload what pgbench printed, stdout and stderr"
    )
