"""Which pgbench options the spec asks for that an older pgbench does not have.

Checked against the version the spec names (`postgres.version`), so a spec for
PostgreSQL 9.4 that asks for `--latency-limit` is refused before anything is
provisioned, with the option and the first version that has it. Pure Python:
the lab and the agent both call it.
"""

from agents.contract.errors import JobError
from agents.contract.spec.document import JobSpec
from agents.contract.spec.fields import SECTIONS

FIRST_WITH_WEIGHTED_SCRIPTS = 90600

# (spec field, pgbench option, first version that has it as server_version_num), newest
# first: each declared field with an option that came in a version specs may name.
OPTION_RULES: tuple[tuple[str, str, int], ...] = tuple(
    sorted(
        (
            (f"{section}.{field.name}", field.option, field.since)
            for section, fields in SECTIONS.items()
            for field in fields
            if field.since
        ),
        key=lambda rule: -rule[2],
    )
)


def _asked(spec: JobSpec, field: str) -> bool:
    """True when the spec sets `field` ("workload.rate_tps") to something pgbench is given."""
    section, name = field.split(".")
    value = spec[section][name]  # type: ignore[literal-required]
    if field == "workload.scripts":  # one script at weight 1 runs without -b or @weight
        return len(value) > 1 or value[0]["weight"] != 1
    return value is not None and value is not False and value != 0


def version_num(version: str) -> int:
    """`server_version_num` of a version as specs write it: "9.6" 90600, "13.16" 130016."""
    parts = [int(part) for part in version.split(".")] + [0, 0]
    if parts[0] >= 10:
        return parts[0] * 10000 + parts[1]
    return parts[0] * 10000 + parts[1] * 100 + parts[2]


def version_text(number: int) -> str:
    """90600 -> "9.6", 110000 -> "11"."""
    if number >= 100000:
        return str(number // 10000)
    return f"{number // 10000}.{number // 100 % 100}"


def refuse_missing_options(spec: JobSpec) -> None:
    """JobError(invalid_spec) naming the first option the spec's pgbench version lacks."""
    number = version_num(spec["postgres"]["version"])
    for field, option, first in OPTION_RULES:
        if number < first and _asked(spec, field):
            raise JobError(
                "invalid_spec",
                f"pgbench {spec['postgres']['version']} has no {option}: it came in "
                f"{version_text(first)}; remove it or choose PostgreSQL {version_text(first)} "
                "or newer",
                field=field,
            )
