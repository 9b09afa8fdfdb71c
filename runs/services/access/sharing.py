"""Comparisons and share links."""

import logging

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from agents.contract.errors import JobError
from runs.models import Comparison, Experiment, Run, ShareLink
from runs.services.access.permissions import AnyUser, check_can_change

logger = logging.getLogger(__name__)


def comparison_create(
    user: User, name: str, runs: list[Run], baseline: Run | None = None, description: str = ""
) -> Comparison:
    """Save a selection of runs; the baseline defaults to the first run and must be one of them."""
    if not runs:
        raise JobError("invalid_comparison", "choose at least one run", field="runs")
    baseline = baseline or runs[0]
    if baseline not in runs:
        message = "the baseline must be one of the runs"
        raise JobError("invalid_comparison", message, field="baseline")
    with transaction.atomic():
        comparison = Comparison.objects.create(
            name=name, description=description, baseline=baseline, created_by=user
        )
        comparison.runs.set(runs)
    logger.info("comparison %s of runs %s created", comparison.pk, [r.pk for r in runs])
    return comparison


def share_link_create(user: User, target: Run | Experiment | Comparison) -> ShareLink:
    """A new read-only link to a run, an experiment or a comparison."""
    kind = {Run: "run", Experiment: "experiment", Comparison: "comparison"}[type(target)]
    link = ShareLink.objects.create(created_by=user, **{kind: target})
    logger.info("share link %s to %s %s created by %s", link.pk, kind, target.pk, user)
    return link


def share_link_revoke(link: ShareLink, user: AnyUser) -> ShareLink:
    """Revoke a link (its owner, the shared object's owner or staff only).

    Revoking twice keeps the first revocation time. Open live streams of the
    link notice within `runs.sse.SHARE_RECHECK_S` and end.
    """
    check_can_change(user, link, "revoke")
    ShareLink.objects.filter(pk=link.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
    link.refresh_from_db()
    logger.info("share link %s revoked by %s", link.pk, user)
    return link


def share_link_resolve(token: str) -> ShareLink | None:
    """The active link with this token, or None (unknown or revoked)."""
    return (
        ShareLink.objects.filter(token=token, revoked_at__isnull=True)
        .select_related("run", "experiment", "comparison")
        .first()
    )
