"""API representations of statistics, comparisons and share links."""

from typing import Any

from rest_framework import serializers

from agents.contract.errors import JobError
from runs import services
from runs.analysis.validity import CHECKS
from runs.analysis.verdicts import Method, Verdict
from runs.api.errors import job_error_detail
from runs.api.fields import (
    Document,
    StrictModelSerializer,
)
from runs.api.permissions import signed_in_user
from runs.api.serializers.catalogue import owner_name
from runs.counters.kinds import Basis
from runs.counters.movers import Change
from runs.inference import equivalence, stats
from runs.inference.paired import DUET, PAIRED, UNPAIRED
from runs.models import (
    Comparison,
    Experiment,
    Run,
    ShareLink,
)


class StatisticsQuerySerializer(serializers.Serializer[Document]):
    min_effect = serializers.FloatField(
        min_value=0.0,
        max_value=stats.MAX_MIN_EFFECT_PCT,
        default=stats.DEFAULT_MIN_EFFECT_PCT,
        help_text="smallest difference in percent that earns a verdict word",
    )
    margin = serializers.FloatField(
        min_value=equivalence.MIN_MARGIN_PCT,
        max_value=equivalence.MAX_MARGIN_PCT,
        default=equivalence.DEFAULT_MARGIN_PCT,
        help_text='equivalence margin in percent: "same" means within ±margin',
    )
    keep_unsettled = serializers.BooleanField(
        default=False,
        help_text="count points whose tps never settled in the verdicts too (left out by default)",
    )


class ValidityWarningSerializer(serializers.Serializer[Document]):
    code = serializers.ChoiceField(choices=sorted(CHECKS))
    title = serializers.CharField()
    detail = serializers.CharField()
    why = serializers.CharField()


class StatisticsRowSerializer(serializers.Serializer[Document]):
    """One run (or cell in rounds), client count and metric (runs.analysis.compare.cell_record)."""

    run_id = serializers.IntegerField()
    clients = serializers.IntegerField()
    metric = serializers.CharField()
    is_baseline = serializers.BooleanField()
    n = serializers.IntegerField()
    mean = serializers.FloatField(
        allow_null=True,
        help_text="geometric mean where every repeat is positive (mean_method), else arithmetic",
    )
    mean_method = serializers.ChoiceField(
        choices=["geometric", "arithmetic"],
        allow_null=True,
        help_text="how mean and ci_* were taken: geometric = Student's t on the logs, taken back",
    )
    arithmetic_mean = serializers.FloatField(allow_null=True)
    median = serializers.FloatField(allow_null=True)
    sd = serializers.FloatField(allow_null=True)
    ci_low = serializers.FloatField(allow_null=True)
    ci_high = serializers.FloatField(allow_null=True)
    mde_pct = serializers.FloatField(allow_null=True)
    ci_level = serializers.FloatField(
        help_text="the level in percent of ci_*, diff_ci_* and rank_ci_* (95)"
    )
    diff_pct = serializers.FloatField(allow_null=True)
    diff_ci_low_pct = serializers.FloatField(allow_null=True)
    diff_ci_high_pct = serializers.FloatField(allow_null=True)
    p = serializers.FloatField(allow_null=True)
    q = serializers.FloatField(allow_null=True)
    verdict = serializers.ChoiceField(choices=[v.value for v in Verdict], allow_null=True)
    verdict_note = serializers.CharField(allow_blank=True)
    verdict_text = serializers.CharField(allow_blank=True, help_text="the verdict in words")
    verdict_method = serializers.ChoiceField(
        choices=[m.value for m in Method],
        allow_null=True,
        help_text="log-welch, or rank where a side's repeats are not log-normal; where the "
        "cells' rounds pair, log-paired-t, or signed-rank where the rounds' ratios are not "
        "log-normal",
    )
    design = serializers.ChoiceField(
        choices=[DUET, PAIRED, UNPAIRED],
        allow_null=True,
        help_text="paired: each repeat against the baseline's repeat of the same round; "
        "duet: the same, the round's two windows measured at the same time on one host; "
        "unpaired: every repeat against every repeat",
    )
    design_note = serializers.CharField(
        allow_blank=True,
        help_text='the design in words, e.g. "paired over 7 of 8 rounds; round 3 incomplete"',
    )
    same_ci_low_pct = serializers.FloatField(allow_null=True, help_text="90 % interval, low")
    same_ci_high_pct = serializers.FloatField(allow_null=True, help_text="90 % interval, high")
    same_ci_level = serializers.FloatField(
        help_text="the level in percent of same_ci_* (90: two one-sided tests at 5 %)"
    )
    rounds_needed = serializers.IntegerField(
        allow_null=True,
        help_text="undecided: about how many more rounds would decide it, sized for "
        "rounds_outcome, never at the observed estimate (null: more than the cap, or neither)",
    )
    rounds_outcome = serializers.ChoiceField(
        choices=["same", "different", "neither"],
        allow_null=True,
        help_text="undecided: what rounds_needed is sized for: same (as if there were no "
        "difference, the 90 % interval within the margin), different (as if the difference "
        "were the minimum effect, the 95 % interval excluding 0), or neither (the interval "
        "lies between the margin and the minimum effect)",
    )
    rank_diff_pct = serializers.FloatField(
        allow_null=True, help_text="Hodges-Lehmann shift (paired: of the rounds' ratios)"
    )
    rank_ci_low_pct = serializers.FloatField(allow_null=True)
    rank_ci_high_pct = serializers.FloatField(allow_null=True)
    rank_p = serializers.FloatField(
        allow_null=True, help_text="Mann-Whitney p (paired: Wilcoxon signed-rank p)"
    )
    warnings = ValidityWarningSerializer(many=True)


class MoverSerializer(serializers.Serializer[Document]):
    """A counter that moved, or nearly (runs.counters.movers.Mover.as_document)."""

    counter = serializers.CharField(help_text="the counter's key, e.g. wal.fpi")
    # `label` and `source` shadow Field attributes for the type checker only (DRF pops
    # declared fields off the class).
    label = serializers.CharField()  # type: ignore[assignment]
    source = serializers.CharField(  # type: ignore[assignment]
        help_text="the view and column (or OS file) it is read from"
    )
    unit = serializers.CharField()
    basis = serializers.ChoiceField(
        choices=[b.value for b in Basis],
        help_text="what the rates are per: a transaction, or a second of the window for "
        "counters that follow the clock (the background writer, timed checkpoints)",
    )
    change = serializers.ChoiceField(choices=[c.value for c in Change])
    mean_per_transaction = serializers.FloatField(
        help_text="the compared cell's rate: its total over its transactions (or seconds)"
    )
    baseline_mean_per_transaction = serializers.FloatField()
    count = serializers.FloatField(help_text="the compared cell's total over its repeats")
    baseline_count = serializers.FloatField()
    diff_pct = serializers.FloatField(allow_null=True, help_text="null when it appears")
    diff_ci_low_pct = serializers.FloatField()
    diff_ci_high_pct = serializers.FloatField(allow_null=True, help_text="null: unbounded")
    p = serializers.FloatField()
    q = serializers.FloatField(help_text="BH across the cell's tested counters")
    test = serializers.CharField(
        help_text="Welch t on log rates, or exact Poisson on the totals when a side counted "
        "few events or none"
    )
    zero_floor_per_transaction = serializers.FloatField(
        allow_null=True,
        help_text="for appears/vanishes: the highest rate the zero side could hide "
        "(3 over its transactions); null for a ratio",
    )
    copies = serializers.ListField(
        child=serializers.CharField(),
        help_text="counters that read the same quantity and moved too, shown under this one",
    )
    words = serializers.CharField(
        help_text="e.g. WAL bytes per transaction 1,273 → 2,873 (+126 % [+80, +183]), "
        "from 21 MB and 32 MB"
    )


class CellMoversSerializer(serializers.Serializer[Document]):
    """How a compared cell's counters moved against the baseline cell at the same clients."""

    run_id = serializers.IntegerField()
    clients = serializers.IntegerField()
    collected = serializers.BooleanField(
        help_text="false when either cell has no counters (nothing could move)"
    )
    movers = MoverSerializer(many=True, help_text="empty: no counter moved beyond noise")
    near = MoverSerializer(
        many=True, help_text="p below 0.05 but not significant after BH or below min effect"
    )
    not_collected = serializers.ListField(
        child=serializers.CharField(),
        help_text="what either cell's server version or configuration could not collect, "
        "e.g. 'pg_stat_io (from 16)', 'block read time (track_io_timing off)'",
    )


class ComparisonStatisticsSerializer(serializers.Serializer[Document]):
    """A comparison's statistics table (`runs.api.views.ComparisonViewSet.statistics`)."""

    baseline_run_id = serializers.IntegerField(
        allow_null=True, help_text="null for an experiment with no runs yet"
    )
    min_effect_pct = serializers.FloatField()
    margin_pct = serializers.FloatField()
    confidence = serializers.FloatField()
    comparisons = serializers.IntegerField(help_text="how many p-values BH adjusts together")
    false_discovery_control = serializers.CharField()
    rows = StatisticsRowSerializer(many=True)
    top_movers = CellMoversSerializer(many=True)


class ComparisonSerializer(StrictModelSerializer[Comparison]):
    runs = serializers.PrimaryKeyRelatedField(
        queryset=Run.objects.all(), many=True, allow_empty=False
    )
    baseline = serializers.PrimaryKeyRelatedField(
        queryset=Run.objects.all(), required=False, allow_null=True
    )
    created_by = owner_name()

    class Meta:
        model = Comparison
        fields = ["id", "name", "description", "runs", "baseline", "created_by", "created_at"]
        read_only_fields = ["created_by", "created_at"]

    def create(self, validated_data: dict[str, Any]) -> Comparison:
        try:
            return services.comparison_create(
                signed_in_user(self.context["request"]), **validated_data
            )
        except JobError as exc:
            raise serializers.ValidationError(job_error_detail(exc), code="invalid") from exc


class ShareLinkSerializer(StrictModelSerializer[ShareLink]):
    # A link shares one of these; the other two are null.
    run = serializers.PrimaryKeyRelatedField(
        queryset=Run.objects.all(), required=False, allow_null=True
    )
    experiment = serializers.PrimaryKeyRelatedField(
        queryset=Experiment.objects.all(), required=False, allow_null=True
    )
    comparison = serializers.PrimaryKeyRelatedField(
        queryset=Comparison.objects.all(), required=False, allow_null=True
    )
    target_kind = serializers.CharField(read_only=True)
    is_active = serializers.BooleanField(read_only=True)
    created_by = owner_name()

    class Meta:
        model = ShareLink
        fields = [
            "id",
            "prefix",
            "run",
            "experiment",
            "comparison",
            "target_kind",
            "is_active",
            "created_by",
            "created_at",
            "revoked_at",
        ]
        read_only_fields = ["prefix", "created_by", "created_at", "revoked_at"]

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        targets = [attrs[k] for k in ("run", "experiment", "comparison") if attrs.get(k)]
        if len(targets) != 1:
            raise serializers.ValidationError(
                {"non_field_errors": ["give exactly one of run, experiment, comparison"]}
            )
        return {"target": targets[0]}


class NewShareLinkSerializer(ShareLinkSerializer):
    """The answer that creates a link: with its token and URL, which no later answer shows."""

    token = serializers.CharField(read_only=True, help_text="Shown this once.")
    url = serializers.CharField(read_only=True, help_text="The link to give; shown this once.")

    class Meta(ShareLinkSerializer.Meta):
        fields = [*ShareLinkSerializer.Meta.fields, "token", "url"]
