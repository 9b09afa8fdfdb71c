"""Checking events received from elsewhere: the envelope and the data the lab relies on."""

import pytest

from agents.contract.reports.events import InvalidEvent, validate_event
from agents.events import EventEmitter


def emitted(event_type: str, data: dict) -> dict:
    """An event exactly as the agent's emitter builds it."""
    return EventEmitter([], run_id="7", token="tok", agent="a1").emit(event_type, data)


def refusal(event: object) -> str:
    with pytest.raises(InvalidEvent) as raised:
        validate_event(event)
    return str(raised.value)


def test_events_the_agent_emits_pass_unchanged() -> None:
    progress = emitted("progress", {"point": 0, "clients": 1, "repeat": 1, "t": 1.0, "tps": 5.0})
    beat = EventEmitter([], agent="a1").emit("heartbeat", {"running": None})

    assert validate_event(progress) is progress
    assert validate_event(beat) is beat


def test_a_point_event_without_its_index_is_refused_naming_the_field() -> None:
    assert refusal(emitted("point", {"clients": 1})) == "a point event needs data.index (int)"


def test_a_result_whose_points_have_no_index_is_refused() -> None:
    document = {"status": "succeeded", "points": [{"index": 0}, {"clients": 2}]}

    assert refusal(emitted("result", document)) == ("data.points[1] must be a point with an index")


def test_a_boolean_is_not_a_point_number() -> None:
    assert "data.point" in refusal(emitted("sample", {"point": True, "host": {"t": 1.0}}))


def test_a_run_event_without_a_run_id_and_an_unknown_version_are_refused() -> None:
    orphan = EventEmitter([], agent="a1").emit("status", {"state": "initdb", "message": ""})
    future = {**emitted("log", {"level": "info", "message": "hi"}), "version": 2}

    assert refusal(orphan) == "a status event needs a run_id"
    assert refusal(future) == "unsupported event version 2"
