"""A source build the host has not built compiles before its first run, and the estimates
say so (runs/estimates.py, runs/services/estimating.py): the host's earlier builds teach
how long, else a guess from BUILD_CPU_S and its CPUs; a build in its cache adds nothing,
and the run that compiled teaches the build's setup without the compile."""

from datetime import timedelta
from itertools import pairwise

import pytest
from django.utils import timezone

from runs import services
from runs.estimates import BUILD_CPU_S, learned_timings
from runs.models import Host, PgBuild, Run
from runs.queues import host_queues
from tests.runs.factories import ExperimentFactory, HostFactory, PgBuildFactory, RunFactory
from tests.runs.test_estimates_learned import SPEC, finished_like_an_agent

pytestmark = pytest.mark.django_db

DEFINITION = {
    "source": {"kind": "url", "location": "https://example.org/postgresql-15.18.tar.bz2"},
    "configure_flags": [],
    "patches": [],
    "cflags": None,
}


def source_build(name: str, **changed: object) -> PgBuild:
    """A source build of 15.18, its definition DEFINITION with `changed` parts."""
    definition = {**DEFINITION, **changed}
    return PgBuildFactory(name=name, version="15", source="build", definition=definition)


def compiled(run: Run, key: str, seconds: float, reused: bool = False) -> Run:
    """`run` with the build record an agent sends: the cache key, whether it compiled, and
    how long the build took."""
    run.build_record = {
        "key": key,
        "definition": run.build.definition,
        "reused": reused,
        "seconds": seconds,
        "failed_step": None,
    }
    run.save(update_fields=["build_record"])
    return run


def estimate_on(host: Host, build: PgBuild) -> dict:
    experiment = ExperimentFactory(hosts=[host], builds=[build], clients=[1, 2], duration_s=10)
    return dict(services.experiment_estimate(experiment))


def test_a_source_build_the_host_never_built_adds_a_guessed_compile() -> None:
    host = HostFactory(facts={"cpu": {"threads": 4}})
    binaries = PgBuildFactory()
    finished_like_an_agent(host, binaries, setup_s=6.0, load_s=2.0, overhead_s=1.0)
    before = estimate_on(host, binaries)

    estimate = estimate_on(host, source_build("15.18 from source"))

    assert before["build_times"] is None and before["build_seconds"] is None
    assert estimate["build_times"] == "guessed"
    assert estimate["build_seconds"] == round(BUILD_CPU_S / 4)
    added = BUILD_CPU_S / 4
    assert estimate["setup_seconds"] == pytest.approx(before["setup_seconds"] + added, abs=1)
    assert estimate["estimated_seconds"] == pytest.approx(
        before["estimated_seconds"] + added, abs=1
    )


def test_the_hosts_earlier_builds_teach_the_compile_and_a_cached_build_adds_nothing() -> None:
    host = HostFactory(facts={"cpu": {"threads": 2}})
    built = source_build("15.18, -O2")
    first = finished_like_an_agent(host, built, setup_s=156.0, load_s=2.0, overhead_s=1.0)
    compiled(first, "key-o2", 150.0)
    again = finished_like_an_agent(host, built, setup_s=6.0, load_s=2.0, overhead_s=1.0)
    compiled(again, "key-o2", 150.0, reused=True)

    learned = learned_timings([host.pk])
    new = estimate_on(host, source_build("15.18, 16 kB", configure_flags=["--with-blocksize=16"]))
    same = estimate_on(host, source_build("15.18, -O2, another name for it"))
    cached = estimate_on(host, built)

    # The run that compiled taught the build's setup without its 150 s of compiling.
    assert learned.for_cell(host.pk, built.pk).setup_s == pytest.approx(6.0)
    assert learned.build_s == {host.pk: 150.0}
    assert (new["build_times"], new["build_seconds"]) == ("learned", 150)
    assert cached["build_times"] is None and same["build_times"] is None
    assert new["setup_seconds"] == pytest.approx(cached["setup_seconds"] + 150, abs=1)


def test_a_build_whose_definition_changed_compiles_again() -> None:
    host = HostFactory(facts={"cpu": {"threads": 2}})
    build = source_build("15.18, flags as they come")
    run = finished_like_an_agent(host, build, setup_s=6.0, load_s=2.0, overhead_s=1.0)
    compiled(run, "key-o2", 150.0)
    assert estimate_on(host, build)["build_times"] is None

    build.definition = {**DEFINITION, "cflags": "-O3"}
    build.save(update_fields=["definition"])

    assert estimate_on(host, build)["build_seconds"] == 150


def test_a_build_that_failed_teaches_no_compile_and_is_not_in_the_cache() -> None:
    host = HostFactory(facts={"cpu": {"threads": 2}})
    broken = source_build("15.18, a patch that does not apply")
    run = finished_like_an_agent(host, broken, setup_s=6.0, load_s=2.0, overhead_s=1.0)
    run.build_record = {
        "key": "k",
        "definition": DEFINITION,
        "reused": False,
        "seconds": 3.0,
        "failed_step": "patch",
    }
    run.save(update_fields=["build_record"])
    Run.objects.filter(pk=run.pk).update(status=Run.Status.FAILED)

    estimate = estimate_on(host, broken)

    assert learned_timings([host.pk]).build_s == {}
    assert estimate["build_times"] == "guessed"


def test_an_adaptive_experiment_compiles_once_however_many_rounds() -> None:
    host = HostFactory(facts={"cpu": {"threads": 2}})
    binaries, fresh = PgBuildFactory(), source_build("15.18 fresh")
    finished_like_an_agent(host, binaries, setup_s=6.0, load_s=2.0, overhead_s=1.0)
    common = {"hosts": [host], "clients": [1], "duration_s": 10, "repeats": 3}
    adaptive = {"execution": "rounds", "adaptive": True, "max_rounds": 9, "margin_pct": 10}

    plain = services.experiment_estimate(ExperimentFactory(builds=[binaries], **common, **adaptive))
    built = services.experiment_estimate(ExperimentFactory(builds=[fresh], **common, **adaptive))

    compile_s = round(BUILD_CPU_S / 2)
    assert built["build_seconds"] == compile_s
    assert built["max_seconds"] == pytest.approx(plain["max_seconds"] + compile_s, abs=1)
    assert built["expected_seconds"] == pytest.approx(plain["expected_seconds"] + compile_s, abs=1)


def test_review_says_what_compiling_adds_and_that_it_is_a_guess(client, user) -> None:
    host = HostFactory(facts={"cpu": {"threads": 2}})
    experiment = ExperimentFactory(
        hosts=[host], builds=[source_build("15.18 to build")], clients=[1], duration_s=10
    )
    client.force_login(user)

    page = client.get(f"/experiments/{experiment.pk}/").content.decode()

    assert "data-build-estimate>3 min 30 s</strong> of them compiling the source builds" in page
    assert "a guess, the host has built none" in page


def test_the_queue_adds_the_compile_to_the_first_waiting_run_of_an_unbuilt_build() -> None:
    """Three runs wait behind a running one: the first of the unbuilt source build compiles
    it (its learned 150 s), the second of the same definition finds it cached, and the
    cached build's run adds nothing."""
    host = HostFactory(facts={"cpu": {"threads": 2}})
    cached, unbuilt = source_build("15.18, -O2"), source_build("15.18, -O3", cflags="-O3")
    first = finished_like_an_agent(host, cached, setup_s=156.0, load_s=2.0, overhead_s=1.0)
    compiled(first, "key-o2", 150.0)
    started = timezone.now() - timedelta(seconds=5)
    RunFactory(host=host, build=cached, spec=SPEC, status=Run.Status.RUNNING, started_at=started)
    for position, build in enumerate([unbuilt, unbuilt, cached], start=1):
        RunFactory(host=host, build=build, spec=SPEC, position=position)

    waiting = host_queues([host])[host.pk].waiting

    starts = [queued.starts_at for queued in waiting]
    assert all(start is not None for start in starts)
    # A run of SPEC takes 6 + 2 + 2 x 11 = 30 s here; the first unbuilt one 150 s more.
    gaps = [(later - earlier).total_seconds() for earlier, later in pairwise(starts)]
    assert starts[0] == started + timedelta(seconds=30)
    assert gaps == [pytest.approx(180), pytest.approx(30)]
