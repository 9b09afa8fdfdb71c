"""An adaptive experiment measured by a real agent, its rounds added by a real control
worker (issue 20): three select-only workloads held to a rate by pgbench `-R`, two at
1,000 tps and one at 2,000, compared with the first. The first look, after 3 rounds,
decides the doubled rate; the identical one ends "same" there or gets rounds of its
own (with the first cell), never the decided cell."""

from django.test import Client
from django.urls import reverse

from runs.models import Experiment, Run
from tests.integration.api import create, start
from tests.runs.factories import UserFactory
from tests.waiting import wait_for

RATES = {"a-1000": 1000, "b-1000": 1000, "c-2000": 2000}


def test_an_adaptive_experiment_adds_rounds_only_where_undecided_and_ends(api, lab):
    host = lab.wait_registered()
    build = create(api, "builds", {"name": "pg16", "version": "16", "source": "prebuilt"})
    workloads = [
        create(
            api,
            "workloads",
            {
                "name": name,
                "scale": 1,
                "scripts": [{"builtin": "select-only"}],
                "rate_tps": rate,
            },
        )["id"]
        for name, rate in RATES.items()
    ]
    profile = create(api, "config-profiles", {"name": "defaults", "settings": {}})
    exp = create(
        api,
        "experiments",
        {
            "name": "adaptive",
            "hosts": [host.pk],
            "builds": [build["id"]],
            "config_profiles": [profile["id"]],
            "workloads": workloads,
            "clients": [1],
            "duration_s": 3,
            "repeats": 3,
            "execution": "rounds",
            "adaptive": True,
            "max_rounds": 6,
            "margin_pct": 10.0,
        },
    )
    assert len(start(api, exp["id"])) == 9

    def ended() -> Experiment | None:
        experiment = Experiment.objects.get(pk=exp["id"])
        return experiment if experiment.adaptive_state.get("ended") else None

    experiment = wait_for(
        ended, timeout=600, what="the adaptive experiment to end", context=lab.logs, interval=1
    )

    state = experiment.adaptive_state
    runs = experiment.runs.all()
    assert all(run.status == Run.Status.SUCCEEDED for run in runs), lab.logs()
    verdicts = {p["cell"]: p for p in state["points"]}
    assert verdicts[2]["verdict"] == "faster" and verdicts[2]["rounds"] == 3, state
    assert verdicts[2]["sentence"].startswith("faster by"), state
    assert not runs.filter(cell=2, round__gt=3).exists(), "a decided cell gets no more rounds"
    assert verdicts[1]["verdict"] in ("same", "undecided"), state
    later = set(runs.filter(round__gt=3).values_list("cell", flat=True))
    assert later <= {0, 1}
    assert state["ended"] in ("every cell decided", "budget of rounds spent")
    assert state["looked"][0]["rounds"] == 3

    browser = Client()
    browser.force_login(UserFactory())
    page = browser.get(reverse("experiment-detail", args=[exp["id"]]))
    assert page.status_code == 200
    assert b'id="adaptive-cells"' in page.content and b"faster by" in page.content
