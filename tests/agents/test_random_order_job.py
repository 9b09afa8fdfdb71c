"""A real job with a random client order: the agent draws the seed, records it, follows it."""

from agents.contract.spec.document import sweep_points
from tests.agents.jobs import run, small_spec


def test_random_order_without_a_seed_draws_one_records_it_and_follows_it(config):
    spec = small_spec(sweep={"clients": [1, 2, 3], "duration_s": 1, "order": "random"})
    spec["sweep"]["first_repeat"] = 2

    result, events = run(spec, config)

    assert result["status"] == "succeeded", result["error"]
    sweep = result["spec"]["sweep"]
    assert isinstance(sweep["seed"], int)
    measured = [(point["clients"], point["repeat"]) for point in result["points"]]
    assert measured == sweep_points(sweep)
    assert {repeat for _clients, repeat in measured} == {2}
    logs = [event["data"]["message"] for event in events.of_type("log")]
    assert f"random client order drawn from seed {sweep['seed']}" in logs
