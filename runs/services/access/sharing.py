"""Comparisons and share links (a link's token is shown once; the lab keeps its digest)."""

import logging

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from agents.contract.errors import JobError
from runs.models import Comparison, Experiment, Run, ShareLink, new_share_token
from runs.models.security import TOKEN_PREFIX_LENGTH
from runs.services.access.permissions import AnyUser, check_can_change
from runs.services.access.tokens import token_digest

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


def share_link_create(user: User, target: Run | Experiment | Comparison) -> tuple[ShareLink, str]:
    """A new read-only link to a run, an experiment or a comparison: its row and its
    token, which nothing keeps (the row holds its digest): show it now or never."""
    kind = {Run: "run", Experiment: "experiment", Comparison: "comparison"}[type(target)]
    token = new_share_token()
    link = ShareLink.objects.create(
        created_by=user,
        digest=token_digest(token),
        prefix=token[:TOKEN_PREFIX_LENGTH],
        **{kind: target},
    )
    logger.info(
        "share link %s (%s…) to %s %s created by %s", link.pk, link.prefix, kind, target.pk, user
    )
    return link, token


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
        ShareLink.objects.filter(digest=token_digest(token), revoked_at__isnull=True)
        .select_related("run", "experiment", "comparison")
        .first()
    )


def share_link_was_revoked(token: str) -> bool:
    """Whether this token opened a link that is revoked now (410 rather than 404)."""
    return ShareLink.objects.filter(digest=token_digest(token), revoked_at__isnull=False).exists()


def share_links_of(user: AnyUser) -> QuerySet[ShareLink]:
    """The links `user` may list and revoke: those they made, those to what they own, and
    every link for staff (the rule of runs.services.access.permissions)."""
    links = ShareLink.objects.all()
    if getattr(user, "is_staff", False):
        return links
    if not user.is_authenticated:
        return links.none()
    return links.filter(
        Q(created_by=user)
        | Q(run__created_by=user)
        | Q(experiment__created_by=user)
        | Q(comparison__created_by=user)
    )
