"""Bisections: from a good and a bad commit to the commit that changed a cell.

The orchestration is in runs/bisection/; these classes hold data and small derived
properties only.
"""

from django.db import models
from django.urls import reverse
from django.utils import timezone

from runs.inference.equivalence import DEFAULT_MARGIN_PCT
from runs.inference.stats import DEFAULT_MIN_EFFECT_PCT
from runs.models.catalogue import ConfigProfile, Host, Workload, owner_field
from runs.models.experiments import Experiment


class Bisection(models.Model):
    """A search for the first commit between `good_ref` and `bad_ref` whose build measures
    like `bad_ref` on one cell (host, config profile, workload, storage, clients).

    `commits` lists the first-parent range after `good_ref` up to `bad_ref`, oldest
    first, as the agent read it ({sha, parent, author_date, subject}); `good_index`
    and `bad_index` bound what is left (-1: the good ref itself). State diagram::

        running ──> succeeded   (culprit found: `culprit_index`)
           ├──────> failed      (`error_message`: no regression, range unreadable...)
           └──────> cancelled
    """

    class Status(models.TextChoices):
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"

    class Direction(models.TextChoices):
        SLOWER = "slower", "slower: the bad ref has lower tps"
        FASTER = "faster", "faster: the bad ref has higher tps"

    name = models.CharField(max_length=200)
    host = models.ForeignKey(Host, on_delete=models.PROTECT, related_name="bisections")
    repository = models.CharField(
        max_length=500,
        help_text="A git repository the agent's config allows (build_sources).",
    )
    good_ref = models.CharField(max_length=100, help_text="A branch, tag or commit measured good.")
    bad_ref = models.CharField(max_length=100, help_text="A branch, tag or commit measured bad.")
    version = models.CharField(max_length=20, help_text="The PostgreSQL major the commits build.")
    configure_flags = models.JSONField(default=list, blank=True)
    cflags = models.CharField(max_length=200, blank=True)
    config_profile = models.ForeignKey(ConfigProfile, on_delete=models.PROTECT, related_name="+")
    workload = models.ForeignKey(Workload, on_delete=models.PROTECT, related_name="+")
    storage_data = models.CharField(max_length=100, default="default")
    clients = models.PositiveIntegerField(default=1)
    duration_s = models.PositiveIntegerField(default=10)
    metric = models.CharField(max_length=10, default="tps", editable=False)
    direction = models.CharField(max_length=10, choices=Direction.choices, default=Direction.SLOWER)
    repeats = models.PositiveIntegerField(default=3)
    max_rounds = models.PositiveIntegerField(default=8)
    margin_pct = models.FloatField(
        default=DEFAULT_MARGIN_PCT, help_text="Step 0: the ±% within which bad is the same."
    )
    min_effect_pct = models.FloatField(default=DEFAULT_MIN_EFFECT_PCT)
    # Each step's two builds as the two sides of a duet (agents/duet.py): good and the
    # commit measured at the same time on the host, each round one window.
    duet = models.BooleanField(
        default=False,
        help_text="Measure each step's two builds at the same time on the host (a duet), "
        "each with its own cluster and half of the CPUs, swapped every round: what the host "
        "does during a window reaches both. Needs a host of at least two CPUs.",
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RUNNING)
    error_message = models.TextField(blank=True)
    # tps of the bad ref against good in %, as step 0 measured it: a commit is bad when its
    # interval lies beyond the middle of this change (runs/bisection/steps.py).
    change_pct = models.FloatField(null=True, blank=True)
    commits = models.JSONField(default=list, blank=True)
    good_index = models.IntegerField(default=-1)
    bad_index = models.IntegerField(null=True, blank=True)
    culprit_index = models.IntegerField(null=True, blank=True)
    created_by = owner_field("bisections")
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("bisection-detail", args=[self.pk])


class BisectionStep(models.Model):
    """One step: an adaptive experiment of the good build against one commit's build.

    Step 0 measures `bad_ref` (and has the agent list the range); every later step one
    commit of the range, `commit_index` into `Bisection.commits`. `outcome` is what the
    step decided: the commit measures like good, like bad, or was skipped (it did not
    build or start, or its verdict stayed undecided); a step open when its bisection was
    cancelled is cancelled, its runs too.
    """

    class Outcome(models.TextChoices):
        MEASURING = "measuring"
        GOOD = "good"
        BAD = "bad"
        SKIPPED = "skipped"
        CANCELLED = "cancelled"

    bisection = models.ForeignKey(Bisection, on_delete=models.CASCADE, related_name="steps")
    number = models.PositiveIntegerField()
    commit_index = models.IntegerField(null=True, blank=True)
    sha = models.CharField(max_length=64, blank=True)
    experiment = models.OneToOneField(
        Experiment, null=True, blank=True, on_delete=models.SET_NULL, related_name="bisection_step"
    )
    outcome = models.CharField(max_length=10, choices=Outcome.choices, default=Outcome.MEASURING)
    verdict = models.CharField(max_length=20, blank=True)
    sentence = models.TextField(blank=True)
    build_seconds = models.FloatField(null=True, blank=True)
    note = models.TextField(blank=True)

    class Meta:
        ordering = ["bisection", "number"]
        constraints = [
            models.UniqueConstraint(fields=["bisection", "number"], name="bisection_step_number")
        ]

    def __str__(self) -> str:
        return f"{self.bisection} step {self.number}"
