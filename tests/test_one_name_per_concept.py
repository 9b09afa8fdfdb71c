"""Each concept goes by one name (CONTRIBUTING.md, Glossary): a former name, or a word
another concept owns, fails here wherever it is written in the code, templates, scripts
and tests. Migrations keep the names they were written with; the few places that read a
former name on purpose (an API alias, a stored document's old key) are listed with it,
and a listing that is no longer needed fails too."""

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCANNED = ("runs", "agents", "benchlab", "frontend", "tests")
SUFFIXES = (".py", ".html", ".js", ".css")
NEVER_SCANNED = ("runs/migrations/", "tests/test_one_name_per_concept.py")


@dataclass(frozen=True)
class FormerName:
    """`pattern` (a regular expression) is written `name` now; `allowed` files may keep it."""

    pattern: str
    name: str
    allowed: tuple[str, ...] = ()


FORMER_NAMES = (
    # The perf profile is the CPU profile (drawn as a flame graph); a config profile is settings.
    FormerName(
        r"\bProfile\b|(?<!Cpu)(?<!Config)Profile(Result|Event|Serializer|Pair)\b",
        "CpuProfile… (the perf profile) or ConfigProfile (settings)",
        ("tests/runs/flamegraphs/test_cpu_profile_former_names.py",),
    ),
    FormerName(
        r"\bprofil(ed|ing)\b",
        "a CPU profile, the CPU-profile pass",
        # PostgreSQL's own configure option.
        ("agents/contract/builds/flags.py",),
    ),
    FormerName(
        r"\ballow_profiling\b",
        "allow_cpu_profiling",
        ("agents/config.py", "tests/agents/contract/test_former_names.py"),
    ),
    FormerName(
        r"runs[./]profiles\b|observe[./]profile\b|(reports|models|serializers)[./]profiles\b",
        "runs/flamegraphs/, agents/observe/cpu_profile.py, …/cpu_profiles.py",
    ),
    FormerName(r"\.profiles\b", ".cpu_profiles (a run's) or .config_profiles"),
    FormerName(
        r"""sweep\W{1,3}profile\b|["']profile["']\s*:\s*(True|False|true|false)"""
        r"""|\bprofile\s*=\s*(True|False)\b""",
        "sweep.cpu_profile, the experiment's cpu_profile",
        (
            "tests/agents/contract/test_former_names.py",
            "tests/runs/flamegraphs/test_cpu_profile_former_names.py",
        ),
    ),
    FormerName(
        r"""(emit|of_type|resend)\(["']profile["']|==\s*["']profile["']""",
        "the cpu_profile event",
        ("tests/agents/contract/test_former_names.py",),
    ),
    FormerName(
        r"""\bfig-profile|id="profiles"|#profiles\b|(?<!cpu-)profile-differences""",
        "fig-cpu-profile-…, #cpu-profiles, #cpu-profile-differences",
    ),
    FormerName(r"\brun_profile\b", "run_description (what differs) or run_cpu_profiles"),
    # "Shape" was both the repeats' outliers and a comparison's chart layout; it is neither
    # now (plotly's figure shapes and marker pattern shapes keep their own word).
    FormerName(
        r"runs[./]analysis[./]shap(es|ing)\b|runs[./]charts[./]shaped\b",
        "runs/analysis/outliers.py, runs/analysis/chart_layout.py, runs/charts/laid_out.py",
    ),
    FormerName(
        r"\b(Shape|shape_of|shape_warnings|ratio_shape)\b",
        "RepeatOutliers, find_outliers, outlier_warnings, ratio_outliers",
    ),
    FormerName(
        r"\b(ShapedPoint|shaped_points|shaped_figure|default_shape|shape_from_query)\b"
        r"|\bshape_controls\b|\bshape-(form|errors)\b|\bdata-shape\b",
        "ChartLayout, PlacedPoint, placed_points, laid_out_figure, default_layout, "
        "layout_from_query, layout_controls, #layout-form",
    ),
    # "The contract" is agents/contract only; the lab's side of it is the agent link.
    FormerName(
        r"\bruns[./]contract\b",
        "runs/agentlink/ (the lab's side), runs/services/adaptive_state.py",
    ),
    # "Spec" is the job spec (agents/contract/spec/); the lab's modules say what they hold.
    FormerName(
        r"\bspec_fields\b|\bservices[./]specs\b",
        "runs/agentlink/row_fields.py, runs/services/spec_sections.py",
    ),
    # A series is the scheduled series only; a run's reduced timelines are its traces.
    FormerName(
        r"TimelineSeries|\b(HOST|CLIENT_HOST|BUFFER|COMPARE|PROGRESS)_SERIES\b",
        "TimelineTrace, …_TRACES",
    ),
    FormerName(
        r"""(digest|\]|found)\.series\b|meta\??\.series\b|valuesBySeries"""
        r"""|["']series["']\s*:\s*(key|name|f["'])|\bseries=["']|GET\.get\(["']series""",
        "a run's traces (Digest.traces, the chart meta's and the zoom's `trace`)",
        # The zoom reads a page's former `series=` too.
        ("runs/views/timelines.py", "tests/runs/pages/test_timelines.py"),
    ),
    # A seed is a random seed only; a ready-made experiment is a preset.
    FormerName(
        r"(?i)(?<![a-z])seed[ _-]?\d|\bseed[ -](experiments?|presets?)\b|\bseeds'"
        r"|presets[./]seeds\b",
        "preset N, presets (runs/presets/definitions.py)",
    ),
)


@cache
def scanned_files() -> dict[str, str]:
    """Repository path -> text of every scanned file."""
    found = {}
    for top in SCANNED:
        for path in sorted((REPO / top).rglob("*")):
            relative = path.relative_to(REPO).as_posix()
            if path.suffix in SUFFIXES and not relative.startswith(NEVER_SCANNED):
                found[relative] = path.read_text(encoding="utf-8")
    return found


def hits(former: FormerName) -> dict[str, list[str]]:
    """Path -> the `path:line: text` of each line where the former name is written."""
    pattern = re.compile(former.pattern)
    found: dict[str, list[str]] = {}
    for relative, text in scanned_files().items():
        for number, line in enumerate(text.splitlines(), start=1):
            if pattern.search(line):
                found.setdefault(relative, []).append(f"{relative}:{number}: {line.strip()}")
    return found


@pytest.mark.parametrize("former", FORMER_NAMES, ids=lambda former: former.pattern[:40])
def test_a_former_name_is_written_only_where_it_is_read_on_purpose(former: FormerName) -> None:
    found = hits(former)
    written = [
        line for path, lines in found.items() if path not in former.allowed for line in lines
    ]

    assert not written, f"write {former.name}:\n" + "\n".join(written)


@pytest.mark.parametrize("former", FORMER_NAMES, ids=lambda former: former.pattern[:40])
def test_every_place_allowed_a_former_name_still_writes_it(former: FormerName) -> None:
    found = hits(former)

    assert [path for path in former.allowed if path not in found] == []


# Sweep fields are declared once (agents/contract/spec/fields.py) and every layer derives
# them: besides the declaration, the spec's type with its accessor, the Experiment column
# and a preset that sets one, no source file of the lab or the agent names them.
DECLARED_ONCE = ("warmup_s", "between_points")
MOST_SOURCE_FILES = 4
SOURCES = ("runs/", "agents/", "frontend/")


@pytest.mark.parametrize("name", DECLARED_ONCE)
def test_a_sweep_field_declared_once_is_named_in_few_source_files(name: str) -> None:
    naming = sorted(
        path
        for path, text in scanned_files().items()
        if path.startswith(SOURCES) and re.search(rf"\b{name}\b", text)
    )

    assert "agents/contract/spec/fields.py" in naming
    assert len(naming) <= MOST_SOURCE_FILES, f"{name} is named in {naming}"


@pytest.mark.parametrize("name", DECLARED_ONCE)
def test_a_sweep_field_has_one_default_in_the_agent_and_the_lab(name: str) -> None:
    from agents.contract.spec.document import DEFAULTS
    from agents.contract.spec.fields import SWEEP
    from runs.models import Experiment

    declared = next(field.default for field in SWEEP if field.name == name)

    assert DEFAULTS["sweep"][name] == declared
    assert Experiment._meta.get_field(name).default == declared
