"""The README a newcomer reads first: use on the first screen, then the contents; and every citation in it
resolves inside the repository.

"facts §n" (in the README, the code and the tests) is a section of docs/cgroup-facts.md, which a clone
has; a citation of a section that is not there is a dangling reference. History ("issue 19 item 6") lives
in CHANGELOG.md, not in the README or in the code's comments.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

REPO = Path(os.environ.get("MOSAIC_REPO") or Path(__file__).resolve().parents[3])
PACKAGE = REPO / "packages" / "cgroup-cohort"
README = PACKAGE / "README.md"
FACTS = REPO / "docs" / "cgroup-facts.md"
CITATION = re.compile(r"(?:facts|cgroup-facts\.md)\s+((?:§\d+(?:\.\d+)?[a-c]?(?:,\s*|\s+and\s+)?)+)")


def _sections() -> set[str]:
    """The section numbers docs/cgroup-facts.md has: its headings (## 4., ### 4.4), the numbered items of
    §7 (7.1 to 7.13) and the lettered cases of §4.4 (4.4a to 4.4c)."""
    text = FACTS.read_text(encoding="utf-8")
    found = set(re.findall(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", text, re.MULTILINE))
    seven = text[text.index("\n## 7. "):text.index("\n## 8. ")]
    found |= {f"7.{n}" for n in re.findall(r"^(\d+)\. ", seven, re.MULTILINE)}
    four = text[text.index("\n### 4.4 "):text.index("\n### 4.5 ")]
    found |= {f"4.4{c}" for c in re.findall(r"^\*\*\(([a-c])\)", four, re.MULTILINE)}
    return found


def _citations(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8")
    return {m for group in CITATION.findall(text) for m in re.findall(r"§(\d+(?:\.\d+)?[a-c]?)", group)}


def test_the_readme_opens_with_use_then_the_contents():
    lines = README.read_text(encoding="utf-8").splitlines()
    start, end = lines.index("```python"), lines.index("```")
    assert start < 15 and 0 < len([line for line in lines[start + 1:end] if line.strip()]) <= 5
    assert "from mosaic.cgroup_cohort import" in lines[start + 1]
    assert lines.index("## Contents") < 40 and lines.index("## Contents") > end
    assert [line for line in lines if line.startswith("## ")][0] == "## Contents"


def test_the_readme_points_only_inside_the_repository_and_its_links_resolve():
    text = README.read_text(encoding="utf-8")
    assert "../shared" not in text and "shared/cgroup-facts" not in text
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    assert "../../docs/cgroup-facts.md" in targets and "CHANGELOG.md" in targets
    assert [t for t in targets if not t.startswith("http") and not (README.parent / t).exists()] == []
    anchors = {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-")
               for h in re.findall(r"^## (.+)$", text, re.MULTILINE)}
    assert set(re.findall(r"\]\(#([^)]+)\)", text)) <= anchors


def test_every_facts_citation_names_a_section_docs_cgroup_facts_has():
    sections = _sections()
    files = [README, *sorted((PACKAGE / "src").rglob("*.py")), *sorted(PACKAGE.glob("tests*/*.py"))]
    cited = {(path.relative_to(PACKAGE).as_posix(), s) for path in files for s in _citations(path)}
    assert len(cited) > 20  # the README alone cites about twenty
    assert sorted((f, s) for f, s in cited if s not in sections) == []


def test_history_is_in_the_changelog_not_in_the_readme_or_the_code():
    pattern = re.compile(r"\bissue \d+|\bas before\b|\bused to be\b|before this (change|module)", re.IGNORECASE)
    files = [README, *sorted((PACKAGE / "src").rglob("*.py"))]
    assert [f"{p.name}: {m.group(0)}" for p in files for m in pattern.finditer(p.read_text(encoding="utf-8"))] == []
    changelog = (PACKAGE / "CHANGELOG.md").read_text(encoding="utf-8")
    assert re.findall(r"^## Issue (\d+)", changelog, re.MULTILINE)[:2] == ["31", "28"]  # newest first
