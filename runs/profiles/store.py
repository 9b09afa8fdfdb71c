"""Storing a run's profiles: one `Profile` row per profiled point, once."""

from agents.contract.reports.profiles import ProfileResult
from runs.models import Profile, Run


def profile_store(run: Run, profile: ProfileResult) -> Profile:
    """Store a point of the run's profiled repeat once (its `profile` event stores it, the
    final result repeats it and changes nothing then)."""
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
            "folded": profile.get("folded") or "",
            "argv": profile.get("argv") or [],
            "error": profile.get("error") or "",
        },
    )
    return stored
