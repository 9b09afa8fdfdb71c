"""Storing a run's CPU profiles: one `CpuProfile` row per point of its CPU-profile pass, once."""

import logging

from agents.contract.reports.cpu_profiles import CpuProfileResult, parse_folded
from runs.models import CpuProfile, Run

logger = logging.getLogger(__name__)


def cpu_profile_store(run: Run, cpu_profile: CpuProfileResult) -> CpuProfile:
    """Store a point of the run's CPU-profile pass once (its `cpu_profile` event stores it, the
    final result repeats it and changes nothing then). Folded text the pages could not
    read is kept out, and the CPU profile's error says why."""
    folded, error = cpu_profile.get("folded") or "", cpu_profile.get("error") or ""
    try:
        parse_folded(folded)
    except ValueError as unreadable:
        logger.warning(
            "run %s: CPU profile %s not stored: %s", run.pk, cpu_profile["index"], unreadable
        )
        folded, error = "", f"the agent sent folded stacks the lab cannot read: {unreadable}"
    stored, _created = CpuProfile.objects.get_or_create(
        run=run,
        index=cpu_profile["index"],
        defaults={
            "clients": cpu_profile.get("clients"),
            "tps": cpu_profile.get("tps"),
            "seconds": cpu_profile.get("seconds") or 0,
            "frequency_hz": cpu_profile.get("frequency_hz") or 0,
            "event": cpu_profile.get("event") or "",
            "call_graph": cpu_profile.get("call_graph") or "",
            "samples": cpu_profile.get("samples") or 0,
            "kept_samples": cpu_profile.get("kept_samples") or 0,
            "folded": folded,
            "argv": cpu_profile.get("argv") or [],
            "error": error,
        },
    )
    return stored
