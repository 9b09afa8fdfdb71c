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

The code's comments and docstrings are maps too, checked the same way:

- a repository path one names exists (`runs/charts/timelines.py`, `frontend/live.js`,
  `docs/pgbench.md`; a template by its name under a `templates/` directory; a file and
  a name it defines, as `<file>.py's name` or `<module path>.name`), and a doc's
  `#anchor` is a heading there;
- none points outside the repository (the engineers' shared notes, absolute `/work`
  paths): what a comment relies on is said in it, or in a note under `docs/`;
- no code or test names an issue by its number, or as the issue of the day: the next
  reader cannot look it up, so the reason is written instead.
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


# The code's comments and docstrings -------------------------------------------------------

CODE_DIRECTORIES = (".ci", "agents", "benchlab", "examples", "frontend", "runs", "scripts", "tests")
CODE_SUFFIXES = {".css", ".html", ".js", ".md", ".py", ".sh", ".sql", ".toml"}
# Written by makemigrations and not read as prose.
GENERATED_DIRECTORIES = {"migrations", "__pycache__"}
HISTORY = re.compile(r"\bissues?\s+#?\d+|\bthe issue's\b|\(#\d+\)", re.IGNORECASE)
OUTSIDE_REPOSITORY = re.compile(r"\.\./shared\b|/work/shared\b|(?<![\w.}/-])/work/")
DOC_ANCHOR = re.compile(r"(?<![\w./-])(docs/[\w./-]+\.md)#([\w-]+)")
MODULE_AND_NAME = re.compile(r"^(.+\.py)'s (\w+)|^(.+)\.(\w+)$")
PYTHON_COMMENT = re.compile(r"#[^\n]*")
TRIPLE_QUOTED = re.compile(r'("""|\'\'\')(.*?)\1', re.DOTALL)
SHELL_COMMENT = re.compile(r"(?:^|\s)(#.*)$", re.MULTILINE)
C_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
TEMPLATE_COMMENT = re.compile(
    r"\{#.*?#\}|<!--.*?-->|\{%\s*comment\s*%\}.*?\{%\s*endcomment\s*%\}", re.DOTALL
)


def code_files() -> list[Path]:
    """Every text file of the code directories a person reads: source, templates, notes."""
    found = []
    for directory in CODE_DIRECTORIES:
        for path in sorted((REPO / directory).rglob("*")):
            if not path.is_file() or GENERATED_DIRECTORIES & set(path.parts):
                continue
            if path.suffix in CODE_SUFFIXES or (not path.suffix and is_script(path)):
                found.append(path)
    return found


def is_script(path: Path) -> bool:
    with path.open("rb") as file:
        return file.read(2) == b"#!"


def is_python(path: Path) -> bool:
    if path.suffix == ".py":
        return True
    return not path.suffix and "python" in path.read_text().partition("\n")[0]


def python_prose(source: str) -> str:
    """A Python file's comments and triple-quoted strings (its docstrings, and a few
    texts); read by pattern, since parsing every file would make this test slow."""
    texts = [match.group(2) for match in TRIPLE_QUOTED.finditer(source)]
    return "\n".join(PYTHON_COMMENT.findall(source) + texts)


def prose(path: Path) -> str:
    """What a file says to its reader rather than to a program: its comments and
    docstrings (all of a Markdown note)."""
    text = path.read_text()
    if path.suffix == ".md":
        return text
    if is_python(path):
        return python_prose(text)
    if path.suffix in (".js", ".css"):
        return "\n".join(C_COMMENT.findall(text))
    if path.suffix == ".html":
        return "\n".join(TEMPLATE_COMMENT.findall(text))
    return "\n".join(SHELL_COMMENT.findall(text))


def code_id(path: Path) -> str:
    return str(path.relative_to(REPO))


def names_something(word: str) -> bool:
    """Whether a path a comment names exists: as a path from the repository's root, as a
    template's name, or as a file and a name it defines (`a/b.py's name`, `a/b.name`)."""
    if path_exists(word) or any(REPO.glob(f"*/templates/{word}")):
        return True
    match = MODULE_AND_NAME.match(word)
    if match is None:
        return False
    module = match.group(1) or f"{match.group(3)}.py"
    name = match.group(2) or match.group(4)
    source = REPO / module
    return source.is_file() and re.search(rf"\b{name}\b", source.read_text()) is not None


def named_in_code(text: str) -> Iterator[str]:
    """Each repository path a comment names, with the name that follows a file's `'s`."""
    for match in REPOSITORY_PATH.finditer(text):
        word = match.group(0).split("::")[0].rstrip(".,:;")
        following = re.match(r"'s (\w+)", text[match.end() :])
        yield f"{word}'s {following.group(1)}" if following and word.endswith(".py") else word


def missing_paths(text: str) -> list[str]:
    """The paths and doc anchors a comment names that do not exist, sorted."""
    words = set(named_in_code(text))
    broken_anchors = [
        f"{doc}#{anchor}"
        for doc, anchor in DOC_ANCHOR.findall(text)
        if (REPO / doc).is_file() and anchor not in anchors(REPO / doc)
    ]
    return sorted({word for word in words if not names_something(word)} | set(broken_anchors))


CODE_FILES = code_files()
# Its examples of what the history check finds are the one place such words belong.
THIS_TEST = Path(__file__).resolve()


def test_every_path_a_comment_names_exists() -> None:
    missing = {code_id(path): found for path in CODE_FILES if (found := missing_paths(prose(path)))}

    assert missing == {}, "comments name paths that do not exist"


def test_no_comment_points_outside_the_repository() -> None:
    outside = {
        code_id(path): found
        for path in CODE_FILES
        if (found := OUTSIDE_REPOSITORY.findall(prose(path)))
    }

    assert outside == {}, "what a comment relies on is said in it or in a note under docs/"


def test_no_code_names_an_issue_by_number() -> None:
    history = {
        code_id(path): found
        for path in CODE_FILES
        if path != THIS_TEST and (found := HISTORY.findall(path.read_text()))
    }

    assert history == {}, "write the reason the issue stood for instead of its number"


def test_prose_is_what_a_file_says_to_its_reader(tmp_path: Path) -> None:
    script = tmp_path / "page.js"
    script.write_text('fetch("runs/gone.json"); // drawn as runs/charts/timelines.py draws\n')
    template = tmp_path / "page.html"
    template.write_text('{% include "runs/gone.html" %}{# see runs/_field.html #}\n')

    assert prose(script) == "// drawn as runs/charts/timelines.py draws"
    assert prose(template) == "{# see runs/_field.html #}"


def test_a_comment_names_a_file_a_template_or_a_name_a_file_defines() -> None:
    assert missing_paths("runs/charts/timelines.py, runs/_field.html") == []
    assert missing_paths("runs/analysis/verdicts.judge, runs/analysis/verdicts.py's judge") == []
    assert missing_paths("docs/pgbench.md#transaction-logs") == []
    assert missing_paths("runs/analysis/verdicts.py's nothing; docs/pgbench.md#nothing") == [
        "docs/pgbench.md#nothing",
        "runs/analysis/verdicts.py's nothing",
    ]


def test_history_is_an_issue_number_not_a_run_number() -> None:
    assert HISTORY.findall("Bisections (issue 22), Issue 13: and issues 19") != []
    assert HISTORY.findall("The issue's case") == ["The issue's"]
    assert HISTORY.findall("run #12 · pg16, `#31 c8.log`, nightly #2, no issues here") == []
