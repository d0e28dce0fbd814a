"""The repository is self-contained: whoever clones it can follow every reference it makes.

Upstream behaviour is cited by its source (repository and path, e.g. aws/karpenter-provider-aws
`pkg/providers/amifamily/`) or by karpweb's own docs/. Design notes that lived beside the
repository while karpweb was written are not in a clone, so naming them, or a path that leaves the
repository, is a dead end for the reader."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
THIS_FILE = Path(__file__).resolve().relative_to(ROOT).as_posix()

# Notes that were never part of the repository, cited by name or by section (`karpenter-semantics §5`);
# the pattern is built from pieces so that this file does not match itself.
OUTSIDE_NOTES = re.compile("|".join([
    r"karpenter-(?:launch|semantics)(?:\.md|\s*§)",
    "lifecycle-" + "review", "ec2-capacity-" + "apis", "anchors" + r"\.md", "real-test-" + "servers", "DESIGN" + r"\.md",
    r"\.\./" + "shared", "/work" + "/", "simulate-" + "contract",
]))

MARKDOWN_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)\s]*)?\)")
DOCS_PATH = re.compile(r"(?<![\w/.-])docs/[\w.-]+\.(?:md|png)\b")


def tracked_text_files() -> dict[str, str]:
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    texts = {}
    for name in names:
        path = ROOT / name
        if name == THIS_FILE or not path.is_file():
            continue
        try:
            texts[name] = path.read_text()
        except UnicodeDecodeError:
            continue  # images, fixtures in binary form: they cite nothing
    return texts


def test_no_file_names_notes_or_paths_outside_the_repository():
    found = [f"{name}:{number}: {match.group(0)}"
             for name, text in tracked_text_files().items()
             for number, line in enumerate(text.splitlines(), 1)
             for match in OUTSIDE_NOTES.finditer(line)]
    assert found == [], "cite upstream by repository and path, or karpweb's docs/, instead:\n" + "\n".join(found)


def test_relative_markdown_links_stay_inside_and_exist():
    broken = []
    for name, text in tracked_text_files().items():
        if not name.endswith(".md"):
            continue
        for target in MARKDOWN_LINK.findall(text):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # http(s):, mailto: ...
            resolved = (ROOT / name).parent.joinpath(target).resolve()
            if not resolved.is_relative_to(ROOT) or not resolved.exists():
                broken.append(f"{name}: {target}")
    assert broken == [], "links that lead nowhere in a clone:\n" + "\n".join(broken)


def test_every_docs_path_named_anywhere_exists():
    missing = sorted({f"{name}: {path}"
                      for name, text in tracked_text_files().items()
                      for path in DOCS_PATH.findall(text)
                      if not (ROOT / path).exists()})
    assert missing == [], "\n".join(missing)
