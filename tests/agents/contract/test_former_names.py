"""Documents written under a name the contract has since changed are read under today's:
a spec's `sweep.profile`, an older agent's `profile` events and result `profiles`, and an
agent config file's `allow_profiling`."""

import json
from pathlib import Path

from agents.config import AgentConfig
from agents.contract.reports.events import validate_event
from agents.contract.spec.document import validate_spec
from agents.events import EventEmitter


def emitted(event_type: str, data: dict) -> dict:
    return EventEmitter([], run_id="7", token="tok").emit(event_type, data)


def test_a_spec_naming_the_former_sweep_field_asks_for_a_cpu_profile() -> None:
    sweep = validate_spec({"version": 1, "sweep": {"profile": True, "duration_s": 5}})["sweep"]

    assert sweep["cpu_profile"] is True and "profile" not in sweep


def test_the_current_sweep_field_wins_over_the_former_one() -> None:
    given = {"profile": True, "cpu_profile": False, "duration_s": 5}

    assert validate_spec({"version": 1, "sweep": given})["sweep"]["cpu_profile"] is False


def test_an_older_agents_profile_event_and_result_key_arrive_under_todays_names() -> None:
    cpu_profile = {"index": 0, "clients": 2, "folded": "main 1\n", "error": None}

    event = validate_event({**emitted("cpu_profile", cpu_profile), "type": "profile"})
    result = validate_event(emitted("result", {"status": "ok", "points": [], "profiles": [{}]}))

    assert event["type"] == "cpu_profile" and event["data"] == cpu_profile
    assert result["data"] == {"status": "ok", "points": [], "cpu_profiles": [{}]}


def test_an_event_kept_under_its_former_type_is_resent_under_todays() -> None:
    emitter = EventEmitter([], run_id="7", token="tok")

    resent = emitter.resend("profile", {"index": 0, "folded": ""}, 3, "2026-01-01T00:00:00Z")

    assert resent["type"] == "cpu_profile" and resent["seq"] == 3


def test_a_config_file_naming_the_former_key_turns_cpu_profiles_off(tmp_path: Path) -> None:
    path = tmp_path / "agent.json"
    path.write_text(json.dumps({"allow_profiling": False}))

    assert AgentConfig.load(path).allow_cpu_profiling is False
