"""pg_settings catalogues the agents report: kept by exact PostgreSQL version.

An agent sends the catalogues it has cached when it registers, and the one a
job read from its server when it had none cached (the first job of each
version, in that job's result): the lab learns a version's catalogue from its
first run, not only at the agent's next start.
"""

import logging
from typing import Any

from django.utils import timezone

from runs.models import PgCatalogue

logger = logging.getLogger(__name__)


def catalogue_keep(version: str, catalogue: dict[str, Any], reported_by: str) -> None:
    """Keep (or replace) the catalogue of `version` as an agent reported it."""
    _row, created = PgCatalogue.objects.update_or_create(
        version=version,
        defaults={
            "catalogue": catalogue,
            "reported_by": reported_by,
            "received_at": timezone.now(),
        },
    )
    if created:
        logger.info("pg_settings catalogue of PostgreSQL %s learned from %s", version, reported_by)
