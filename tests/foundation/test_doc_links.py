"""Every relative link in README.md, CONTRIBUTING.md and docs/*.md leads somewhere: the file (or
directory) exists in the repository, and an #anchor names a heading of the target as GitHub makes
its ids (lower case, punctuation but `-` and `_` dropped, spaces to `-`, `-1`, `-2` for repeats).
So does every reference in deploy/'s files and comments, in the docs' prose and in the code's comments:
a path (`docs/operations.md`, `scripts/reaction_bench.py`, `docs/operations.md#anchor`) exists, and a
section named after a document (`docs/operations.md, "Running a fleet"`, `README "..."`) is one of its
headings, word for word."""

import re
import subprocess
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


# A path in the repository, with an optional #anchor, and the "Section" that may follow a document's name.
REFERENCE = re.compile(r'(?<![\w/.-])((?:README|CONTRIBUTING)(?:\.md)?|(?:docs|deploy|scripts|examples)/[\w./-]*[\w/])'
                       r'(?:#([\w-]+))?(?:,?\s+"([^"]+)")?')
COMMENT_START = re.compile(r"\n[ \t]*(?:#|//|\*)?[ \t]*")  # a comment's next line continues the sentence


def section_names(path: Path) -> set[str]:
    """A document's headings as they read: code marks dropped, and a step's number ("2. The IAM role")."""
    return {re.sub(r"^\d+\.\s+", "", heading.replace("`", "")) for heading in HEADING.findall(FENCE.sub("", path.read_text()))}


def broken_references(path: Path, root: Path = ROOT) -> list[str]:
    problems, text = [], path.read_text()
    text = prose(text) if path.suffix == ".md" else text  # a document's code is commands (`deploy/karpweb-web`)
    for name, anchor, section in REFERENCE.findall(COMMENT_START.sub(" ", text)):
        target = root / (name if name.startswith(("docs", "deploy", "scripts", "examples")) or name.endswith(".md")
                         else f"{name}.md")
        if not target.exists():
            problems.append(f"{name}: no such file in the repository")
        elif anchor and target.suffix == ".md" and anchor not in anchors(target):
            problems.append(f"{name}#{anchor}: no such heading")
        elif section and target.suffix == ".md" and section not in section_names(target):
            problems.append(f'{name}, "{section}": no such section')
    return problems


def referring_files() -> list[Path]:
    """deploy/'s files, the docs, and the code (whose comments name sections of the docs)."""
    tracked = subprocess.run(["git", "ls-files", "deploy", "docs", "README.md", "CONTRIBUTING.md", "*.py", "*.sh"],
                             cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    return sorted(ROOT / name for name in tracked
                  if not name.startswith("tests/") and (ROOT / name).is_file() and not name.endswith((".png", ".svg")))


@pytest.mark.parametrize("path", referring_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_reference_in_deploy_docs_and_comments_resolves(path):
    assert broken_references(path) == []


def test_the_reference_checker_finds_what_it_should(tmp_path):
    (tmp_path / "deploy").mkdir()  # deploy/, not docs/: test_self_contained.py checks every docs/ path named
    (tmp_path / "deploy" / "ops.md").write_text("# Ops\n\n## 2. The role\n\n## Behind a proxy: `HOPS`\n")
    (tmp_path / "README.md").write_text("# karpweb\n\n## Running\n")
    (tmp_path / "config.yaml").write_text(
        '# see deploy/ops.md, "The role" and deploy/ops.md, "Behind a proxy: HOPS", README "Running",\n'
        '# deploy/ops.md#ops, deploy/gone.md, README "Running on\n# PostgreSQL", deploy/ops.md, "Hardening"\n'
        "url: deploy/ops.md#nowhere\n")
    assert broken_references(tmp_path / "config.yaml", tmp_path) == [
        "deploy/gone.md: no such file in the repository",
        'README, "Running on PostgreSQL": no such section',
        'deploy/ops.md, "Hardening": no such section',
        "deploy/ops.md#nowhere: no such heading",
    ]
