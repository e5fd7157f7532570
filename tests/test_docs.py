"""The front door and the docs: the README stays a page a newcomer reads, and every link in it and in docs/ leads
somewhere that exists (a file of the repository, and the heading an anchor names)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "tests" / "data").rglob("*.md"))]
README_MAX_CHARS = 12_000
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation other than hyphens and underscores dropped, spaces to
    hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    return {slug(line.lstrip("#")) for line in text.splitlines() if re.match(r"#{1,6} ", line)}


def links(page: Path) -> list[str]:
    """The relative links of a page, outside code blocks (a web address is not checked here)."""
    text = FENCE.sub("", page.read_text())
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]


def test_the_readme_is_one_screenful_of_front_door():
    assert len((ROOT / "README.md").read_text()) <= README_MAX_CHARS


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_leads_to_a_file_and_heading_that_exist(page: Path):
    broken = []
    for target in links(page):
        path, _, anchor = target.partition("#")
        found = (page.parent / path).resolve() if path else page
        if not found.exists():
            broken.append(f"{target}: no such file")
        elif anchor and found.suffix == ".md" and anchor not in anchors(found):
            broken.append(f"{target}: no heading #{anchor} in {found.relative_to(ROOT)}")
    assert not broken, broken


def test_every_docs_page_is_reachable_from_the_readme():
    """A page no link leads to is a page no newcomer finds."""
    reached, todo = set(), [ROOT / "README.md"]
    while todo:
        page = todo.pop()
        for target in links(page):
            found = (page.parent / target.partition("#")[0]).resolve()
            if found.suffix == ".md" and found.exists() and found not in reached:
                reached.add(found)
                todo.append(found)
    orphans = [p.relative_to(ROOT) for p in (ROOT / "docs").glob("*.md") if p.resolve() not in reached]
    assert not orphans, orphans


PAGE_MAX_BYTES = 25 * 1024
OPENER_MAX_CHARS = 1000
# The words a command of these pages starts with: the suite's, the reports', pytest's, torchrun's, pip's.
COMMAND = re.compile(r"`(?:python -m |pytest |torchrun |pip install |\.github/workflows/)[^`]*`")
DOCS = sorted((ROOT / "docs").glob("*.md"))


@pytest.mark.parametrize("page", DOCS, ids=lambda p: p.name)
def test_no_docs_page_is_over_25_kib(page: Path):
    """A page past this size mixes tasks: split it by what a user does (docs/reports.md was 56 KB)."""
    assert len(page.read_bytes()) <= PAGE_MAX_BYTES


def opener(page: Path) -> str:
    """The first paragraph after the page's `# ` title: its first run of non-blank lines, a code block excluded."""
    lines = page.read_text().splitlines()
    assert lines and lines[0].startswith("# "), f"{page.name} does not start with a `# ` title"
    paragraph: list[str] = []
    for line in lines[1:]:
        if line.strip():
            paragraph.append(line)
        elif paragraph:
            break
    text = "\n".join(paragraph)
    assert not text.startswith(("```", "|", "#", "    ")), f"{page.name}: a code block, table or heading first"
    return text


@pytest.mark.parametrize("page", DOCS, ids=lambda p: p.name)
def test_every_docs_page_opens_with_what_a_user_does_and_the_command_for_it(page: Path):
    """Each page opens, right under its title, with one short paragraph of prose (at most 1000 characters) that
    names the command of its task in backticks (one that starts `python -m `, `pytest `, `torchrun `,
    `pip install ` or names the nightly workflow), or links to the page that holds it; the how-to, the reference
    and the evidence ("How this was measured") follow. What it cannot check is that the paragraph says what the
    command is for: review does."""
    text = opener(page)
    assert len(text) <= OPENER_MAX_CHARS, f"{page.name}: the opening paragraph is {len(text)} characters"
    linked = [t for t in LINK.findall(text) if t.partition("#")[0].endswith(".md")]
    assert COMMAND.search(text) or linked, f"{page.name}: no command and no link to one in {text[:200]!r}"
