"""The slot a beat fire is for: the scheduled time it stands for, not when it ran.

A series fires once per slot (runs.services.history.series records the slot
under a unique constraint before it starts anything). The beat names the slot
when it finds a schedule due, so a fire that runs late (a busy control worker
takes the task at 12:01:40 or 12:02:10) is still the 12:01 fire, and a beat
started again after a crash (whose last fire time was never stored, so it
finds the schedule due at once) names the slot it is in:

- cron: the latest time at or before the moment that the schedule names
  (truncated to the minute). A restart at 12:01:35 names 12:01 again, which
  the unique slot refuses; a restart at 12:02:05 names 12:02, which fires,
  and 12:01 is not fired twice;
- an interval of N seconds: the step of an N-second grid counted from the
  Unix epoch the moment falls in. Two fires of a beat are at least N seconds
  apart, so they never share a step.
"""

from datetime import UTC, date, datetime, time, timedelta

from celery.schedules import BaseSchedule, crontab, schedule

# How far back the previous time a cron schedule names is looked for: far enough for
# any schedule that is due (Feb 29 comes every 4 years, 8 when a century skips it).
CRON_LOOKBACK_DAYS = 366 * 8
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def fire_slot(when_due: BaseSchedule, moment: datetime) -> datetime:
    """The slot of a fire of `when_due` (a beat entry's schedule) found due at `moment`.

    Series are scheduled by cron (runs.services.history.series) or, in tests, by an
    interval; TypeError for any other kind, which has no slot to name.
    """
    if isinstance(when_due, crontab):
        return cron_slot(when_due, moment)
    if isinstance(when_due, schedule):
        return interval_slot(when_due.run_every, moment)
    raise TypeError(f"a series fire has no slot on a {type(when_due).__name__} schedule")


def interval_slot(every: timedelta, moment: datetime) -> datetime:
    """The start of the `every`-long step, counted from the Unix epoch, holding `moment`."""
    step = max(every, timedelta(seconds=1))
    return EPOCH + (moment - EPOCH) // step * step


def cron_slot(cron: crontab, moment: datetime) -> datetime:
    """The latest minute at or before `moment` that `cron` names, in the cron's zone.

    Day of month and day of week must both match, as in Celery's crontab (not
    cron's either-or). ValueError when the schedule names no time in
    CRON_LOOKBACK_DAYS.
    """
    local = moment.astimezone(cron.tz)
    day = local.date()
    latest = (local.hour, local.minute)
    for _ in range(CRON_LOOKBACK_DAYS):
        if _names_day(cron, day):
            times = [(h, m) for h in cron.hour for m in cron.minute if (h, m) <= latest]
            if times:
                hour, minute = max(times)
                return datetime.combine(day, time(hour, minute), tzinfo=cron.tz)
        day -= timedelta(days=1)
        latest = (23, 59)
    raise ValueError(f"{cron} names no time in the {CRON_LOOKBACK_DAYS} days before {moment}")


def _names_day(cron: crontab, day: date) -> bool:
    return (
        day.month in cron.month_of_year
        and day.day in cron.day_of_month
        and day.isoweekday() % 7 in cron.day_of_week  # Celery counts Sunday as 0
    )
