"""factory_boy factories for the lab's models."""

import copy
import uuid

import factory
from django.contrib.auth import get_user_model
from django.utils import timezone

from agents.contract.signing import new_secret
from runs import models


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.django.Password("pw")


class HostFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Host

    name = factory.LazyFunction(lambda: f"host-{uuid.uuid4().hex[:10]}")
    facts = factory.LazyFunction(lambda: {"cpu": {"count": 2}})
    last_seen = factory.LazyFunction(timezone.now)
    # An enrolled agent, as most tests need; enrollment tests ask for pending ones.
    enrollment = models.Host.Enrollment.APPROVED
    secret = factory.LazyFunction(new_secret)


class PgBuildFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.PgBuild

    name = factory.Sequence(lambda n: f"pg16-{n}")
    version = "16"
    source = models.PgBuild.Source.AUTO


class ConfigProfileFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.ConfigProfile

    name = factory.Sequence(lambda n: f"profile{n}")
    settings = factory.LazyFunction(dict)


class WorkloadFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Workload

    name = factory.Sequence(lambda n: f"workload{n}")
    scale = 1
    scripts = factory.LazyFunction(lambda: [{"builtin": "tpcb-like", "weight": 1}])


class ExperimentFactory(factory.django.DjangoModelFactory):
    """An experiment with one host, build, profile and workload unless given lists."""

    class Meta:
        model = models.Experiment
        skip_postgeneration_save = True

    name = factory.Sequence(lambda n: f"experiment{n}")
    storage_layouts = factory.LazyFunction(lambda: [{"data": "default", "wal": None}])
    clients = factory.LazyFunction(lambda: [1, 2])
    duration_s = 2
    repeats = 1

    @factory.post_generation
    def hosts(self, create, extracted, **kwargs):
        self.hosts.set(extracted if extracted is not None else [HostFactory()])

    @factory.post_generation
    def builds(self, create, extracted, **kwargs):
        self.builds.set(extracted if extracted is not None else [PgBuildFactory()])

    @factory.post_generation
    def config_profiles(self, create, extracted, **kwargs):
        self.config_profiles.set(extracted if extracted is not None else [ConfigProfileFactory()])

    @factory.post_generation
    def workloads(self, create, extracted, **kwargs):
        self.workloads.set(extracted if extracted is not None else [WorkloadFactory()])


class RunFactory(factory.django.DjangoModelFactory):
    """A queued run of a one-cell experiment, with a token as if dispatched."""

    class Meta:
        model = models.Run

    experiment = factory.SubFactory(ExperimentFactory)
    host = factory.SubFactory(HostFactory)
    build = factory.SubFactory(PgBuildFactory)
    config_profile = factory.SubFactory(ConfigProfileFactory)
    workload = factory.SubFactory(WorkloadFactory)
    storage_data = "default"
    token = factory.Sequence(lambda n: f"token-{n}")


class ResultFactory(factory.django.DjangoModelFactory):
    """A measured point of a run: 10 s at 4 clients, 1000 tps, no failures."""

    class Meta:
        model = models.Result

    run = factory.SubFactory(RunFactory, status=models.Run.Status.SUCCEEDED)
    index = factory.Sequence(lambda n: n)
    clients = 4
    threads = 4
    repeat = 1
    tps = 1000.0
    latency_avg_ms = 4.0
    duration_s = 10.0
    exit_code = 0


class SampleFactory(factory.django.DjangoModelFactory):
    """A sample one second into point 0."""

    class Meta:
        abstract = True

    point = 0
    t = 1.0


def sample_data(**values: object) -> factory.LazyAttribute:
    """A sample's `data` as an agent reports it: the given values (a fresh copy for each
    sample) and the sample's own `t`."""
    return factory.LazyAttribute(lambda sample: {"t": sample.t, **copy.deepcopy(values)})


class ProgressSampleFactory(SampleFactory):
    class Meta:
        model = models.ProgressSample

    tps = 1000.0
    latency_ms = 4.0


class HostSampleFactory(SampleFactory):
    """A host sample; `data` as agents/observe/host.py reports it."""

    class Meta:
        model = models.HostSample

    data = sample_data(cpu_user=40.0, cpu_system=10.0, cpu_iowait=1.0, cpu_idle=49.0)


class ServerSampleFactory(SampleFactory):
    """A server sample; `data` as agents/observe/server.py reports it (no checkpoint running)."""

    class Meta:
        model = models.ServerSample

    data = sample_data(
        checkpoints_timed=1,
        checkpoints_req=2,
        buffers_checkpoint_per_s=0.0,
        buffers_clean_per_s=0.0,
        buffers_backend_per_s=0.0,
        wait_events={"CPU": 2},
    )
