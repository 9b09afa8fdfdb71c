"""The fidelity benchmark runs end to end (its targets are checked by running it, not here)."""

from agents.config import AgentConfig
from agents.selfcheck import run_selfcheck


def test_selfcheck_measures_agent_and_bare_runs_in_one_cluster():
    messages = []

    report = run_selfcheck(AgentConfig(), rounds=2, duration_s=2, log=messages.append)

    assert len(report["agent_runs"]) == len(report["bare_runs"]) == 2
    assert all(run["tps"] > 0 for run in report["agent_runs"] + report["bare_runs"])
    assert report["tps_ratio"] > 0
    assert 0 <= report["agent_cpu_percent_of_window"] < 100
    assert isinstance(report["passed"], bool)
    assert any("round 2" in message for message in messages)
