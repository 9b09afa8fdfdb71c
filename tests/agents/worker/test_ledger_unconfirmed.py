"""The heartbeat's question to the ledger (which finished jobs has the lab not confirmed),
asked every few seconds also while a point measures: each entry file is parsed once per
change, not on every beat, and the answer stays the one a full read gives."""

import time
from pathlib import Path

import pytest

from agents.job import new_result
from agents.worker.ledger import KEEP_S, Ledger


def finished(ledger: Ledger, job_id: str) -> None:
    result = new_result({"run_id": job_id, "token": "t"})
    result["status"] = "succeeded"
    ledger.finish(ledger.start(job_id, job_id, "t"), result)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The entry files parsed, by name, in order."""
    parsed: list[str] = []
    real = Ledger._read

    def counted(self: Ledger, path: Path):  # type: ignore[no-untyped-def]
        parsed.append(path.name)
        return real(self, path)

    monkeypatch.setattr(Ledger, "_read", counted)
    return parsed


def test_a_beat_parses_only_the_entries_written_since_the_last(tmp_path: Path, reads: list[str]):
    ledger = Ledger(tmp_path, "a")
    for job_id in ("job-1", "job-2", "job-3"):
        finished(ledger, job_id)
    assert {entry.job_id for entry in ledger.unconfirmed()} == {"job-1", "job-2", "job-3"}
    assert len(reads) == 3

    reads.clear()
    assert len(ledger.unconfirmed()) == 3
    assert reads == [], "nothing changed: nothing parsed"

    confirmed = ledger.entry("job-2")
    assert confirmed is not None
    ledger.confirm(confirmed)
    reads.clear()
    assert {entry.job_id for entry in ledger.unconfirmed()} == {"job-1", "job-3"}
    assert reads == [ledger.path("job-2").name]

    reads.clear()
    ledger.unconfirmed()
    assert reads == [], "a confirmed entry is not read again"


def test_entries_past_the_keep_time_are_forgotten_confirmed_or_not(tmp_path: Path):
    ledger = Ledger(tmp_path, "a")
    for job_id in ("old-confirmed", "old", "new"):
        finished(ledger, job_id)
    old_confirmed = ledger.entry("old-confirmed")
    assert old_confirmed is not None
    ledger.confirm(old_confirmed)
    assert {entry.job_id for entry in ledger.unconfirmed()} == {"old", "new"}

    for job_id in ("old-confirmed", "old"):
        entry = ledger.entry(job_id)
        assert entry is not None
        entry.finished_at = time.time() - KEEP_S - 60
        ledger._write(entry)

    assert [entry.job_id for entry in ledger.unconfirmed()] == ["new"]
    assert not ledger.path("old").exists() and not ledger.path("old-confirmed").exists()
    assert ledger.path("new").exists()
