"""The models' choices come from the contract's vocabularies, and the migrations agree."""

import pytest
from django.core.management import call_command

from agents.contract import vocabulary
from runs.agentlink.choices import text_choices
from runs.models import Experiment, PgBuild, Run, Workload


def test_each_vocabulary_is_the_values_of_its_model_choices() -> None:
    assert PgBuild.Source.values == list(vocabulary.SOURCES)
    assert Workload.QueryMode.values == list(vocabulary.QUERY_MODES)
    assert Workload.PartitionMethod.values == list(vocabulary.PARTITION_METHODS)
    assert Experiment.Order.values == list(vocabulary.SWEEP_ORDERS)
    assert Experiment.BetweenPoints.values == list(vocabulary.BETWEEN_POINTS)
    assert Run.Status.values == [*vocabulary.PENDING_STATES, *vocabulary.JOB_OUTCOMES]


def test_members_are_named_after_their_values_and_labelled_where_the_contract_says() -> None:
    choices = text_choices("Example", ("tpcb-like", "vacuum_checkpoint"), {"tpcb-like": "TPC-B"})

    assert choices.TPCB_LIKE == "tpcb-like"
    assert choices.TPCB_LIKE.label == "TPC-B"
    assert choices.VACUUM_CHECKPOINT.label == "Vacuum Checkpoint"
    assert PgBuild.Source.AUTO.label == vocabulary.SOURCE_LABELS["auto"]


@pytest.mark.django_db
def test_the_migrations_match_the_models() -> None:
    call_command("makemigrations", "runs", "--check", "--dry-run", verbosity=0)
