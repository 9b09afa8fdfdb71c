"""One fire per scheduled slot: the slot a beat fire names (runs.control.fire_slots), and a
series that refuses a second fire of one slot (runs.services.history.series)."""

import logging
from datetime import UTC, datetime, timedelta

import pytest
from celery.schedules import crontab, schedule
from django.db import IntegrityError, transaction

from runs.control.fire_slots import cron_slot, fire_slot, interval_slot
from runs.models import Occurrence, Series
from runs.services.history.series import series_fire, series_fire_slot, series_save
from tests.runs.factories import ExperimentFactory, HostFactory


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def every_minute() -> crontab:
    return crontab()


def test_a_late_fire_is_still_the_slot_it_was_due_for():
    assert cron_slot(every_minute(), at("2026-11-28 12:01:40")) == at("2026-11-28 12:01")


def test_a_restart_in_the_next_minute_names_that_minute_not_the_one_fired_before():
    assert cron_slot(every_minute(), at("2026-11-28 12:02:05")) == at("2026-11-28 12:02")


def test_a_daily_schedule_before_its_hour_names_yesterday():
    nightly = crontab(minute="0", hour="3")
    assert cron_slot(nightly, at("2026-11-28 02:59:59")) == at("2026-11-27 03:00")
    assert cron_slot(nightly, at("2026-11-28 03:00:00")) == at("2026-11-28 03:00")


def test_a_weekly_schedule_names_its_last_weekday():
    mondays = crontab(minute="30", hour="4", day_of_week="1")
    # 2026-11-28 is a Saturday; the Monday before is the 23rd.
    assert cron_slot(mondays, at("2026-11-28 12:00")) == at("2026-11-23 04:30")


@pytest.mark.parametrize("fields", [{}, {"minute": "*/5"}, {"minute": "15", "hour": "*/6"}])
def test_the_slot_is_the_last_time_celery_would_have_fired_by_then(fields):
    """Celery finds the schedule due after the minute before the slot, not after the slot."""
    for minutes in range(0, 3 * 24 * 60, 37):
        moment = at("2026-11-28 00:00:17") + timedelta(minutes=minutes)
        cron = crontab(**fields, nowfun=lambda moment=moment: moment)
        slot = cron_slot(cron, moment)
        assert slot <= moment
        assert not cron.is_due(slot).is_due, (fields, moment, slot)
        assert cron.is_due(slot - timedelta(minutes=1)).is_due, (fields, moment, slot)


def test_fires_of_an_interval_never_share_a_slot_and_a_late_one_keeps_its_own():
    every = timedelta(seconds=3)
    fired = [at("2026-11-28 12:00:00.900") + k * timedelta(seconds=3.05) for k in range(20)]
    slots = [interval_slot(every, moment) for moment in fired]
    assert len(set(slots)) == len(slots)
    assert interval_slot(every, at("2026-11-28 12:00:01.5")) == at("2026-11-28 12:00:00")
    assert fire_slot(schedule(every), fired[0]) == slots[0]


@pytest.fixture
def series(db) -> Series:
    template = ExperimentFactory(hosts=[HostFactory()])
    return series_save(Series(name="nightly", template=template, schedule="* * * * *"))


def test_a_second_fire_of_one_slot_creates_no_occurrence(series, caplog):
    slot = at("2026-11-28 12:01")

    first = series_fire_slot(series, slot)
    with caplog.at_level(logging.WARNING):
        again = series_fire_slot(series, slot)
    later = series_fire_slot(series, slot + timedelta(minutes=1))

    assert first is not None and later is not None and again is None
    assert list(Occurrence.objects.filter(series=series).values_list("slot", flat=True)) == [
        slot,
        slot + timedelta(minutes=1),
    ]
    assert f"slot {slot} fired already; this fire is ignored" in caplog.text
    assert first.experiment.runs.count() == 1, "the first fire started its occurrence"


def test_fires_by_hand_have_no_slot_and_are_never_refused(series):
    series_fire(series)
    series_fire(series)

    assert list(Occurrence.objects.filter(series=series).values_list("slot", flat=True)) == [
        None,
        None,
    ]


def test_the_database_refuses_a_second_occurrence_of_one_slot(series):
    slot = at("2026-11-28 12:01")
    Occurrence.objects.create(series=series, experiment=ExperimentFactory(), slot=slot)

    with pytest.raises(IntegrityError), transaction.atomic():
        Occurrence.objects.create(series=series, experiment=ExperimentFactory(), slot=slot)
