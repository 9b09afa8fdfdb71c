"""Where the lab is and the API token to use: BENCHLAB_URL and BENCHLAB_TOKEN, else the
config file (BENCHLAB_CONFIG, else $XDG_CONFIG_HOME/benchlab/config.toml, else
~/.config/benchlab/config.toml) with `url = "..."` and `token = "..."`."""

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from benchlab.cli.client import CliError

DEFAULT_URL = "http://localhost:8000"


@dataclass(frozen=True)
class Config:
    """The lab's base URL (no trailing slash) and the API token."""

    url: str
    token: str


def config_path() -> Path:
    if os.environ.get("BENCHLAB_CONFIG"):
        return Path(os.environ["BENCHLAB_CONFIG"])
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "benchlab" / "config.toml"


def load_config() -> Config:
    """The environment's values over the file's; CliError naming what is missing."""
    path = config_path()
    found: dict[str, object] = {}
    if path.is_file():
        try:
            found = tomllib.loads(path.read_text())
        except (OSError, tomllib.TOMLDecodeError) as error:
            raise CliError(f"cannot read {path}: {error}") from error
    url = os.environ.get("BENCHLAB_URL") or found.get("url") or DEFAULT_URL
    token = os.environ.get("BENCHLAB_TOKEN") or found.get("token")
    if not isinstance(token, str) or not token:
        raise CliError(
            f"no API token: set BENCHLAB_TOKEN or `token` in {path} "
            "(a lab admin makes one with `manage.py create_api_token USER`)"
        )
    if not isinstance(url, str):
        raise CliError(f"`url` in {path} must be a string")
    return Config(url.rstrip("/"), token)
