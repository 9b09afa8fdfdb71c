"""One fire per scheduled slot, for real: a series on `* * * * *`, its control worker (with
`--beat`, as scripts/lab starts it) SIGKILLed about 20 s and about 50 s after a fire and
started again each time. The beat stores its last fire time only every few minutes, so a
restarted beat finds the schedule due at once: within the minute it used to fire that
minute a second time; now the slot it names (runs.control.fire_slots) has fired already
and the fire is ignored, and a restart in the next minute fires that minute, once.

BENCHLAB_SLOT_KILL_REPEATS=5 repeats the two kills five times (about ten minutes), the
run by hand the suite's single pass stands for.
"""

import logging
import os
import signal
import time
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from runs.models import Host, Occurrence, Series
from runs.services.history.series import series_save
from tests.integration.conftest import Lab
from tests.integration.faults import recovered
from tests.integration.test_one_beat import beats_started, start_control_with_beat
from tests.runs.factories import (
    ConfigProfileFactory,
    ExperimentFactory,
    PgBuildFactory,
    WorkloadFactory,
)
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.faults]

logger = logging.getLogger(__name__)

KILL_AFTER_FIRE_S = (20, 50)
REPEATS = int(os.environ.get("BENCHLAB_SLOT_KILL_REPEATS", "1"))
LOCK_TTL_S = 6
MINUTE = timedelta(minutes=1)


def every_minute(host: Host) -> Series:
    template = ExperimentFactory(
        name="minutely",
        hosts=[host],
        builds=[PgBuildFactory()],
        config_profiles=[ConfigProfileFactory(settings={})],
        workloads=[WorkloadFactory(scale=1)],
        clients=[1],
        duration_s=1,
    )
    return series_save(Series(name="minutely", template=template, schedule="* * * * *"))


def slots(series: Series) -> list[datetime]:
    return list(
        Occurrence.objects.filter(series=series).order_by("slot").values_list("slot", flat=True)
    )


def into_a_fired_minute(series: Series, after_fire_s: int) -> bool:
    """Whether it is `after_fire_s` (to 8 s more) into a minute whose slot has fired."""
    now = timezone.now()
    minute = now.replace(second=0, microsecond=0)
    into = (now - minute).total_seconds()
    return after_fire_s <= into < after_fire_s + 8 and minute in slots(series)


def kill_and_restart(lab: Lab, after_fire_s: int, series: Series) -> datetime:
    """SIGKILL the control worker (its beat child dies with it) `after_fire_s` into a minute
    whose slot has fired, start it again and wait for its beat; the kill's time."""
    wait_for(
        lambda: into_a_fired_minute(series, after_fire_s),
        150,
        f"{after_fire_s} s into a minute that fired",
        lab.logs,
        interval=0.5,
    )
    lab.control.send_signal(signal.SIGKILL)  # the worker only, as the operator did
    lab.control.wait(timeout=10)
    killed, killed_at = time.monotonic(), timezone.now()
    started = beats_started(lab)
    start_control_with_beat(lab)
    wait_for(lambda: beats_started(lab) > started, LOCK_TTL_S + 90, "the new beat", lab.logs)
    recovered(f"control worker kill -9 {after_fire_s} s after a fire: new beat", killed)
    return killed_at


def test_a_control_worker_killed_after_a_fire_fires_each_minute_once(
    transactional_db, tmp_path, own_redis
):
    lab = Lab(tmp_path, own_redis.url)
    lab.env["BENCHLAB_BEAT_LOCK_TTL_S"] = str(LOCK_TTL_S)
    try:
        series = every_minute(lab.approve())
        start_control_with_beat(lab)
        wait_for(lambda: slots(series), 150, "the first fire", lab.logs)
        for _ in range(REPEATS):
            for after_fire_s in KILL_AFTER_FIRE_S:
                killed_at = kill_and_restart(lab, after_fire_s, series)
        next_slot = killed_at.replace(second=0, microsecond=0) + MINUTE
        wait_for(lambda: slots(series)[-1] >= next_slot, 150, "a fire after the last restart")
        fired = slots(series)
        ignored = (lab.log_dir / "control.log").read_text(errors="replace").count("fired already")
    finally:
        lab.close()
    assert None not in fired, "every scheduled fire names its slot"
    assert fired == [fired[0] + k * MINUTE for k in range(len(fired))], fired
    assert Occurrence.objects.filter(series=series).count() == len(fired)
    logger.warning("%d slots fired once each; %d second fires ignored", len(fired), ignored)
