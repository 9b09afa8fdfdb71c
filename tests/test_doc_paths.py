"""The docs name only paths that exist, and link only inside the repository.

A newcomer follows README.md, CONTRIBUTING.md and docs/*.md to the code; a path that
moved sends them nowhere. Checked here, from the text of each doc:

- every word that starts with one of the repository's top-level directories
  (`runs/...`, `tests/...`, in prose, in backticks or in a code block) names a file or
  directory of this checkout (a `*` in it is a glob that must match; a `<placeholder>`
  cuts the path at the directory before it);
- every relative link resolves inside the repository to something that exists, and a
  link's `#anchor` to a heading of the Markdown file it points to;
- no doc points at the engineers' shared notes outside the repository.

The one exemption: the words of `docs/benchmarks-archive.md`, a dated notebook whose
paths are facts of the day they were written (a module since split or renamed stays
named as it was then). Its links are still checked, since a reader follows those.
"""

import re
import unicodedata
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = sorted([REPO / "README.md", REPO / "CONTRIBUTING.md", *(REPO / "docs").glob("*.md")])
ARCHIVES = {REPO / "docs" / "benchmarks-archive.md"}
TOP_LEVEL_DIRECTORIES = (
    ".ci",
    "agents",
    "benchlab",
    "docs",
    "examples",
    "frontend",
    "runs",
    "scripts",
    "tests",
)
# A word that starts with a top-level directory, not inside a URL or a longer path.
REPOSITORY_PATH = re.compile(
    r"(?<![\w./~-])(?:" + "|".join(re.escape(name) for name in TOP_LEVEL_DIRECTORIES) + r")/"
    r"[\w./*<>{}=+-]*"
)
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
OUTSIDE_NOTES = ("../shared", "/work/shared")


def doc_id(doc: Path) -> str:
    return str(doc.relative_to(REPO))


def named_paths(text: str) -> Iterator[str]:
    """Each repository path a doc's text names, as written (trailing punctuation off)."""
    for match in REPOSITORY_PATH.finditer(text):
        word = match.group(0).split("::")[0].rstrip(".,:;")
        yield word


def path_exists(word: str) -> bool:
    """Whether `word`, a path from the repository's root, names something that exists."""
    for placeholder in "<{":
        if placeholder in word:
            word = word[: word.index(placeholder)].rsplit("/", 1)[0]
    if "*" in word:
        return any(REPO.glob(word))
    return (REPO / word).exists()


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its text without Markdown marks, lower case,
    everything but letters, digits, spaces, `-` and `_` removed, spaces made `-`."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").lower()
    kept = "".join(
        character
        for character in text
        if character in " -_" or unicodedata.category(character)[0] in "LN"
    )
    return kept.replace(" ", "-")


def anchors(markdown: Path) -> set[str]:
    """Every heading anchor of a Markdown file, repeated headings numbered as GitHub does."""
    seen: Counter[str] = Counter()
    found = set()
    for heading in HEADING.findall(FENCE.sub("", markdown.read_text())):
        slug = github_slug(heading)
        found.add(slug if not seen[slug] else f"{slug}-{seen[slug]}")
        seen[slug] += 1
    return found


def link_problem(doc: Path, target: str) -> str | None:
    """Why a doc's link is broken, or None."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target):
        return None
    location, _, anchor = target.partition("#")
    resolved = (doc.parent / location).resolve() if location else doc
    if not resolved.is_relative_to(REPO):
        return "points outside the repository"
    if not resolved.exists():
        return "names nothing"
    if anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
        return f"has no heading #{anchor}"
    return None


@pytest.mark.parametrize("doc", [doc for doc in DOCS if doc not in ARCHIVES], ids=doc_id)
def test_every_path_a_doc_names_exists(doc: Path) -> None:
    missing = sorted({word for word in named_paths(doc.read_text()) if not path_exists(word)})

    assert missing == [], f"{doc_id(doc)} names paths that do not exist: {missing}"


@pytest.mark.parametrize("doc", DOCS, ids=doc_id)
def test_every_link_of_a_doc_resolves_inside_the_repository(doc: Path) -> None:
    text = FENCE.sub("", doc.read_text())
    broken = [
        f"{target}: {problem}"
        for target in LINK.findall(text)
        if (problem := link_problem(doc, target)) is not None
    ]

    assert broken == [], f"{doc_id(doc)} has broken links: {broken}"


@pytest.mark.parametrize("doc", DOCS, ids=doc_id)
def test_no_doc_points_at_notes_outside_the_repository(doc: Path) -> None:
    text = doc.read_text()

    assert [name for name in OUTSIDE_NOTES if name in text] == []


def test_the_top_level_directories_the_check_knows_exist() -> None:
    assert [name for name in TOP_LEVEL_DIRECTORIES if not (REPO / name).is_dir()] == []


def test_the_docs_index_lists_every_doc() -> None:
    index = REPO / "docs" / "README.md"
    linked = {
        (index.parent / target.partition("#")[0]).resolve()
        for target in LINK.findall(index.read_text())
    }

    assert [doc_id(doc) for doc in DOCS if doc != index and doc.resolve() not in linked] == []


def test_every_decision_has_a_line_in_the_index_at_the_top() -> None:
    decisions = REPO / "docs" / "decisions.md"
    text = decisions.read_text()
    indexed = {target.removeprefix("#") for target in LINK.findall(text) if target.startswith("#")}
    headings = [
        slug
        for slug in (github_slug(heading) for heading in re.findall(r"^## (.+)$", text, re.M))
        if slug != "index"
    ]

    assert [slug for slug in headings if slug not in indexed] == []


def test_github_slugs_follow_githubs_rule() -> None:
    assert github_slug("`login_required` views take an `AuthenticatedHttpRequest`") == (
        "login_required-views-take-an-authenticatedhttprequest"
    )
    assert github_slug("A 5 % regression on 64 commits, placed against the middle") == (
        "a-5--regression-on-64-commits-placed-against-the-middle"
    )
