"""Every relative link in README.md, CONTRIBUTING.md and docs/*.md leads somewhere: the file (or
directory) exists in the repository, and an #anchor names a heading of the target as GitHub makes
its ids (lower case, punctuation but `-` and `_` dropped, spaces to `-`, `-1`, `-2` for repeats)."""

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = sorted([ROOT / "README.md", ROOT / "CONTRIBUTING.md", *(ROOT / "docs").glob("*.md")])
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
CODE = re.compile(r"(`+)(?:(?!\1).)+?\1", re.S)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.M)


def prose(text: str) -> str:
    """The text without code: fenced blocks and inline code spans hold no links."""
    return CODE.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading counts by its words
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text())):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: Path) -> list[str]:
    return [target for target in LINK.findall(prose(path.read_text()))
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target)]  # http:, https:, mailto: are not checked here


def broken(path: Path, root: Path = ROOT) -> list[str]:
    problems = []
    for target in links(path):
        file_part, _, anchor = target.partition("#")
        destination = (path.parent / unquote(file_part)).resolve() if file_part else path
        if not destination.is_relative_to(root) or not destination.exists():
            problems.append(f"{target}: no such file in the repository")
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            problems.append(f"{target}: {destination.relative_to(root)} has no heading #{anchor}")
    return problems


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(path):
    assert broken(path) == []


def test_the_checker_finds_what_it_should(tmp_path):
    """So that an empty answer above means something."""
    (tmp_path / "guide").mkdir()
    (tmp_path / "guide" / "a.md").write_text(
        "# A `b`: c\n\n## Same\n\n## Same\n\n```\n[x](nowhere.md)\n```\n"
        "[ok](a.md#a-b-c) [ok](#same-1) [bad](#same-2) [gone](b.md) `[code](c.md)` [up](../x.md)\n"
        "[web](https://example.com/x.md) ![pic](a.md) [dir](.) [out](../../etc/passwd)\n")
    assert broken(tmp_path / "guide" / "a.md", tmp_path) == [
        "#same-2: guide/a.md has no heading #same-2",
        "b.md: no such file in the repository",
        "../x.md: no such file in the repository",
        "../../etc/passwd: no such file in the repository",
    ]


def test_the_readme_stays_short():
    """The README is the front door: what karpweb is, how to start, where the rest is."""
    assert len((ROOT / "README.md").read_text().splitlines()) < 150
