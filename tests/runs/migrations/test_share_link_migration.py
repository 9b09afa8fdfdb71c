"""Migration 0032 both ways on the test database: links digested going forward keep
opening; going back, each link gets a new unique token and is revoked (a digest cannot
give its token back), however many links there are."""

from runs import services
from tests.runs.factories import RunFactory
from tests.runs.migrations.migrating import migrate

BEFORE = [("runs", "0031_run_dispatched_at")]


def test_going_back_revokes_every_link_under_a_new_unique_token(at_latest, user):
    links = [services.share_link_create(user, RunFactory())[0] for _ in range(3)]

    old = migrate(BEFORE)

    rows = old.get_model("runs", "ShareLink").objects.order_by("pk")
    tokens = [row.token for row in rows]
    assert len(set(tokens)) == len(links) and all(len(token) >= 32 for token in tokens)
    assert all(row.revoked_at is not None for row in rows)
