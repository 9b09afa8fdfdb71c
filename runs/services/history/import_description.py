"""What an import's user states about its files: the host, storage, version and settings
each was measured with, per file or for every file whose name matches a pattern.

One line per statement, `PATTERN: key=value, key=value`. PATTERN is a shell-style
pattern on the file name (`*sas*`, `c8.log`); `host`, `storage` and `version` are the
three named keys, any other key is a PostgreSQL setting (`wal_sync_method=fsync`).
Lines apply in order, so a later line adds to, or overrides, an earlier one for the files
both match. Blank lines and lines starting with `#` are skipped. Preset 2's nine outputs:

    *sas*: storage=SAS 15k
    *ssd*: storage=SSD
    *-fsync.log: wal_sync_method=fsync
    *-fdatasync.log: wal_sync_method=fdatasync
"""

import fnmatch
import re
from dataclasses import dataclass, field

NAMED_KEYS = ("host", "storage", "version")
DESCRIBE_HELP = (
    "One line per statement, PATTERN: key=value, ...: a file-name pattern (*ssd*, c8.log) and "
    "the host, storage, version or PostgreSQL settings its files were measured with, e.g. "
    "'*ssd*: storage=SSD' and '*-fsync.log: wal_sync_method=fsync'; later lines win."
)
SETTING_NAME = re.compile(r"^[a-z_][a-z0-9_.]{0,62}$")
MAX_VALUE_CHARS = 200
MAX_LINES = 200


class DescriptionError(ValueError):
    """A line of the description that cannot be read; the message names it and the fix."""


@dataclass(frozen=True)
class Statement:
    """One line: the files it is about and what it states of them."""

    line: int
    pattern: str
    named: dict[str, str]
    settings: dict[str, str]


@dataclass
class FileDescription:
    """What the statements matching one file say of it; empty when none matched."""

    host: str = ""
    storage: str = ""
    version: str = ""
    settings: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ImportDescription:
    """Every statement of a batch, in the order written."""

    statements: tuple[Statement, ...] = ()

    def of(self, file_name: str) -> FileDescription:
        """What the statements say of `file_name`, later lines winning."""
        found = FileDescription()
        for statement in self.statements:
            if fnmatch.fnmatchcase(file_name, statement.pattern):
                for key, value in statement.named.items():
                    setattr(found, key, value)
                found.settings |= statement.settings
        return found

    def unmatched(self, file_names: list[str]) -> list[str]:
        """One message per line that matched none of the batch's files (a typo, usually)."""
        return [
            f"line {s.line} ({s.pattern}) matched none of the files"
            for s in self.statements
            if not any(fnmatch.fnmatchcase(name, s.pattern) for name in file_names)
        ]


def parse_description(text: str) -> ImportDescription:
    """The statements of `text`; raises DescriptionError naming the first bad line."""
    lines = text.splitlines()
    if len(lines) > MAX_LINES:
        raise DescriptionError(f"at most {MAX_LINES} lines; this description has {len(lines)}")
    statements = []
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if line and not line.startswith("#"):
            statements.append(_statement(number, line))
    return ImportDescription(tuple(statements))


def _statement(number: int, line: str) -> Statement:
    pattern, colon, rest = line.partition(":")
    pattern = pattern.strip()
    if not colon or not pattern:
        raise DescriptionError(
            f"line {number}: write `PATTERN: key=value, ...` (e.g. `*ssd*: storage=SSD`)"
        )
    named: dict[str, str] = {}
    settings: dict[str, str] = {}
    for pair in (p.strip() for p in rest.split(",")):
        if not pair:
            continue
        key, equals, value = (part.strip() for part in pair.partition("="))
        if not equals or not value:
            raise DescriptionError(f"line {number}: `{pair}` needs a value: `key=value`")
        if len(value) > MAX_VALUE_CHARS or any(ord(c) < 32 for c in value):
            raise DescriptionError(
                f"line {number}: the value of {key} is longer than {MAX_VALUE_CHARS} "
                "characters or holds a control character"
            )
        if key in NAMED_KEYS:
            named[key] = value
        elif SETTING_NAME.match(key.lower()):
            settings[key.lower()] = value
        else:
            raise DescriptionError(
                f"line {number}: `{key}` is neither {', '.join(NAMED_KEYS)} nor a setting name "
                "(letters, digits, _ and .)"
            )
    if not named and not settings:
        raise DescriptionError(f"line {number}: states nothing after the colon")
    return Statement(number, pattern, named, settings)
