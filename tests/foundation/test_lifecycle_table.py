"""docs/kubernetes.md's lifecycle table names, for each upstream behaviour, the karpweb test that
holds it: every test it names must exist, so the table cannot outlive a renamed or deleted test."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MODULES = {path.stem for path in (REPO / "tests").rglob("test_*.py")}


def lifecycle_section() -> str:
    text = (REPO / "docs" / "kubernetes.md").read_text()
    return text[text.index("## The node lifecycle, behaviour by behaviour"):]


def defined_tests() -> set[str]:
    names = set()
    for path in (REPO / "tests").rglob("test_*.py"):
        names.update(re.findall(r"^\s*def (test_\w+)", path.read_text(), re.M))
    return names


def test_every_test_the_lifecycle_table_names_exists():
    named = set(re.findall(r"\b(test_[a-z0-9_]+)\b(?![./])", lifecycle_section())) - MODULES
    assert len(named) > 40  # three parts: coming up, termination, refresh
    assert named - defined_tests() == set()


def test_every_row_names_a_test_and_its_upstream_counterpart():
    rows = [line for line in lifecycle_section().splitlines()
            if line.startswith("| ") and not line.startswith("| behaviour")]
    assert rows
    for row in rows:
        cells = row.split(" | ")
        assert "test_" in row, row[:120]
        assert cells[1].strip(), row[:120]  # the upstream It, or "—" for karpweb's own behaviour


def test_every_test_the_parity_table_names_exists():
    """docs/parity.md (issue #49) holds Karpenter's own suites against karpweb's tests: each test it
    names must exist, so the table cannot claim coverage a renamed or deleted test no longer gives."""
    text = (REPO / "docs" / "parity.md").read_text()
    named = set(re.findall(r"\b(test_[a-z0-9_]+)\b(?![./])", text)) - MODULES
    assert len(named) > 80
    assert named - defined_tests() == set()
