"""Storing a run's profiles: one `Profile` row per profiled point, once."""

import logging

from agents.contract.reports.profiles import ProfileResult, parse_folded
from runs.models import Profile, Run

logger = logging.getLogger(__name__)


def profile_store(run: Run, profile: ProfileResult) -> Profile:
    """Store a point of the run's profiled repeat once (its `profile` event stores it, the
    final result repeats it and changes nothing then). Folded text the pages could not
    read is kept out, and the profile's error says why."""
    folded, error = profile.get("folded") or "", profile.get("error") or ""
    try:
        parse_folded(folded)
    except ValueError as unreadable:
        logger.warning("run %s: profile %s not stored: %s", run.pk, profile["index"], unreadable)
        folded, error = "", f"the agent sent folded stacks the lab cannot read: {unreadable}"
    stored, _created = Profile.objects.get_or_create(
        run=run,
        index=profile["index"],
        defaults={
            "clients": profile.get("clients"),
            "tps": profile.get("tps"),
            "seconds": profile.get("seconds") or 0,
            "frequency_hz": profile.get("frequency_hz") or 0,
            "event": profile.get("event") or "",
            "call_graph": profile.get("call_graph") or "",
            "samples": profile.get("samples") or 0,
            "kept_samples": profile.get("kept_samples") or 0,
            "folded": folded,
            "argv": profile.get("argv") or [],
            "error": error,
        },
    )
    return stored
