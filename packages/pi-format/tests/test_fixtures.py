"""Every session fixture under MOSAIC_REPO/fixtures parses without raising and keeps the invariants.

The fixture tree (fixtures/README.md) holds sessions written by the real Pi 0.85.1 and adversarial files
made from real Pi lines, laid out as <top>/<project>/.pi/state/<seat>/sessions/*.jsonl. Pi wrote each
header cwd as /tmp/mosaic-fixtures/<project>, which is the project given here (compared lexically: that
directory does not exist, and realpath would return it as written).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import check_invariants, repo

from mosaic.pi_format import FormatRefusal, Parsed, parse

MIN_FILES = 40  # fixtures/README.md lists 54 when this test was written; fewer means the tree is broken

# Files whose header is the point of the fixture (fixtures/README.md, "Using a fixture in a test").
EXPECTED_REFUSALS = {
    "cwd-dotdot.jsonl": "foreign-project",
    "cwd-missing.jsonl": "foreign-project",
    "cwd-outside.jsonl": "foreign-project",
    "cwd-relative.jsonl": "foreign-project",
    "empty.jsonl": "incomplete-header",
    "truncated-header.jsonl": "incomplete-header",
    "header-bom.jsonl": "not-a-pi-session",
    "header-no-id.jsonl": "not-a-pi-session",
    "header-v1.jsonl": "not-a-pi-session",
    "not-header-first.jsonl": "not-a-pi-session",
    "truncated-header-lf.jsonl": "not-a-pi-session",
}


def fixture_root() -> Path:
    return repo() / "fixtures"


# Claude Code's transcripts and recordings (claude-format's fixtures) are not Pi sessions.
NOT_PI = ("claude-2.1.283",)


def fixture_files() -> list[Path]:
    root = fixture_root()
    return sorted(p for p in root.rglob("*.jsonl") if p.relative_to(root).parts[0] not in NOT_PI)


def project_of(path: Path) -> str:
    parts = path.relative_to(fixture_root()).parts
    # <top>/<project>/.pi/state/<seat>/sessions/<name>.jsonl
    assert parts[2:4] == (".pi", "state") and parts[5] == "sessions", parts
    return f"/tmp/mosaic-fixtures/{parts[1]}"


def test_the_fixture_tree_is_there() -> None:
    files = fixture_files()
    assert len(files) >= MIN_FILES, (
        f"expected at least {MIN_FILES} *.jsonl under {fixture_root()}, found {len(files)}: "
        "the fixture tree (fixtures/README.md) is missing or incomplete; regenerate it with "
        "fixtures/make/regenerate.py"
    )


def test_every_fixture_parses_and_keeps_the_invariants() -> None:
    files = fixture_files()
    assert files, f"no *.jsonl under {fixture_root()}"
    parsed = refused = 0
    for path in files:
        result = parse(path.read_bytes(), project=project_of(path))
        if path.name in EXPECTED_REFUSALS and "adversarial" in path.parts:
            assert isinstance(result, FormatRefusal), path
            assert result.code == EXPECTED_REFUSALS[path.name], (path, result)
            refused += 1
            continue
        assert isinstance(result, Parsed), (path, result)
        check_invariants(result)
        parsed += 1
    assert parsed >= MIN_FILES - len(EXPECTED_REFUSALS) and refused >= 1


def test_fixture_manifest_matches_the_tree_and_its_partial_tails() -> None:
    manifest_path = fixture_root() / "MANIFEST.json"
    assert manifest_path.is_file(), f"{manifest_path} is missing"
    manifest = json.loads(manifest_path.read_text())
    listed = {row["path"]: row for row in manifest["files"] if row["path"].endswith(".jsonl")}
    found = {str(p.relative_to(fixture_root())) for p in fixture_files()}
    assert set(listed) == found
    for rel, row in listed.items():
        data = (fixture_root() / rel).read_bytes()
        result = parse(data)
        if isinstance(result, Parsed):
            assert result.incomplete is bool(row["partial_tail"]), rel
            assert result.line_count == data.count(b"\n"), rel  # complete lines only


@pytest.mark.parametrize(
    ("name", "check"),
    [
        ("forks.jsonl", "branches"),
        ("second-root.jsonl", "branches"),
        ("model-thinking.jsonl", "redacted"),
        ("parent-session.jsonl", "forked"),
        ("missing-parent-after-malformed.jsonl", "gap"),
        ("loop.jsonl", "loop"),
    ],
)
def test_named_fixtures_show_their_rule(name: str, check: str) -> None:
    paths = [p for p in fixture_files() if p.name == name]
    assert len(paths) == 1, f"fixture {name} not found exactly once under {fixture_root()}"
    result = parse(paths[0].read_bytes(), project=project_of(paths[0]))
    assert isinstance(result, Parsed)
    items = [i for b in result.branches.values() for i in b.items]
    if check == "branches":
        assert len(result.branches) > 1 and all(n == "main" or n.startswith("b.") for n in result.branches)
    elif check == "redacted":
        kinds = [blk.kind for i in items for blk in i.blocks]
        assert "unavailable" in kinds and "thinking" in kinds
    elif check == "forked":
        assert result.forked_from_earlier_session and items[0].id == "x.forked"
    elif check == "gap":
        gaps = [i.notice for i in items if i.notice is not None and i.notice.code == "missing-parent"]
        assert gaps and gaps[0].lines == result.unreadable_lines[-len(gaps[0].lines):]
    elif check == "loop":
        assert any(i.notice is not None and i.notice.code == "loop" for i in items)
