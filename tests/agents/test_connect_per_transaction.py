"""workload.connect_per_transaction end to end: pgbench -C, and the cost of connecting."""

from tests.agents.jobs import run, small_spec


def test_a_new_connection_per_transaction_runs_pgbench_c_at_lower_tps(config, storage_root):
    def select_only(connect: bool) -> dict:
        workload = {
            "scripts": [{"builtin": "select-only", "weight": 1}],
            "connect_per_transaction": connect,
        }
        result, _ = run(small_spec(workload=workload, sweep={"clients": [1]}), config)
        assert result["status"] == "succeeded", result["error"]
        (point,) = result["points"]
        return point

    kept, connecting = select_only(False), select_only(True)

    assert "-C" in connecting["argv"] and "-C" not in kept["argv"]
    assert connecting["tps"] < kept["tps"] / 2
