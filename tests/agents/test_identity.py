"""The agent's own identity: its secret, and whether the lab confirmed it."""

from pathlib import Path

from agents.worker.identity import identity_path, load_or_create_identity


def test_identity_is_created_once_and_kept(tmp_path: Path) -> None:
    first = load_or_create_identity(tmp_path, "bench1")
    again = load_or_create_identity(tmp_path, "bench1")
    assert first.fingerprint == again.fingerprint
    assert identity_path(tmp_path, "bench1").stat().st_mode & 0o777 == 0o600


def test_a_new_secret_is_not_confirmed_by_the_confirmation_of_the_old_one(tmp_path: Path) -> None:
    old = load_or_create_identity(tmp_path, "bench1")
    old.confirm()
    old.path.unlink()
    new = load_or_create_identity(tmp_path, "bench1")
    assert new.fingerprint != old.fingerprint
    assert not new.confirmed, "the new secret must be sent with the next registration"
