"""The ledger keeps a finished job's log (bounded) and answers a job delivered again with
that log, each event under its own seq and time, then the result."""

from pathlib import Path
from typing import Any

from agents.events import EventEmitter
from agents.job import new_result
from agents.worker.exactly_once import answer_from_ledger, ledger_sink
from agents.worker.ledger import LOG_HEAD, LOG_KEPT, Ledger


def job_events(sink: Any, steps: int) -> list[dict[str, Any]]:
    """A job's events through `sink` as a worker emits them: status, steps, progress, result."""
    emitter = EventEmitter([sink], run_id="7", token="first", agent="a")
    sent = [emitter.emit("status", {"state": "provisioning", "message": "finding PostgreSQL"})]
    sent += [
        emitter.emit("step", {"name": "install", "percent": k, "message": ""}) for k in range(steps)
    ]
    sent.append(emitter.emit("progress", {"point": 0, "t": 1.0, "tps": 10.0}))
    result = new_result({"run_id": "7", "token": "first"})
    result["status"] = "succeeded"
    sent.append(emitter.emit("result", result))
    return sent


def test_a_finished_entry_keeps_the_jobs_log_events_with_their_seq_and_time(tmp_path: Path):
    ledger = Ledger(tmp_path, "a")
    entry = ledger.start("job-1", "7", "first")
    sent = job_events(ledger_sink(ledger, entry), steps=3)

    kept = ledger.entry("job-1")

    assert kept is not None and kept.state == "finished"
    logged = [event for event in sent if event["type"] in ("status", "step")]
    assert kept.log == [{k: e[k] for k in ("seq", "ts", "type", "data")} for e in logged]
    assert kept.log_dropped == 0


def test_a_long_log_keeps_its_start_and_its_end(tmp_path: Path):
    ledger = Ledger(tmp_path, "a")
    entry = ledger.start("job-1", "7", "first")
    sent = job_events(ledger_sink(ledger, entry), steps=LOG_KEPT + 50)

    kept = ledger.entry("job-1")

    assert kept is not None and len(kept.log) == LOG_KEPT and kept.log_dropped == 51
    seqs = [event["seq"] for event in kept.log]
    logged = [event["seq"] for event in sent if event["type"] in ("status", "step")]
    assert seqs == logged[:LOG_HEAD] + logged[-(LOG_KEPT - LOG_HEAD) :]


def test_an_answer_sends_the_log_under_its_own_seqs_then_the_result(tmp_path: Path):
    ledger = Ledger(tmp_path, "a")
    entry = ledger.start("job-1", "7", "first")
    sent = job_events(ledger_sink(ledger, entry), steps=2)
    finished = ledger.entry("job-1")
    assert finished is not None
    answered: list[dict[str, Any]] = []

    answer_from_ledger([answered.append], finished, "second", "a")

    logged = [event for event in sent if event["type"] in ("status", "step")]
    replayed = answered[: len(logged)]
    assert [(e["seq"], e["ts"], e["data"]) for e in replayed] == [
        (e["seq"], e["ts"], e["data"]) for e in logged
    ]
    assert {event["token"] for event in answered} == {"second"}
    assert [event["type"] for event in answered[len(logged) :]] == ["log", "result"]
    assert min(event["seq"] for event in answered[len(logged) :]) > sent[-1]["seq"]
    assert answered[-1]["data"]["started_at"] == sent[-1]["data"]["started_at"]
