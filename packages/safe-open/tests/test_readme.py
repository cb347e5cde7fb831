"""The README's tables are checked against the code: the refusal table against SafeOpenRefusal.CODES, the
resolution-method table against the tests that exist, the mutant table against mutants/."""

from __future__ import annotations

import ast
import inspect
import os
import re
from pathlib import Path

import mosaic.safe_open as so
from mosaic.safe_open import SafeOpenRefusal

TESTS = Path(__file__).resolve().parent
PACKAGE = TESTS.parent
README = PACKAGE / "README.md"
REPO = Path(os.environ.get("MOSAIC_REPO") or Path(__file__).resolve().parents[3])


def table_after(heading: str) -> list[list[str]]:
    """The rows (cells stripped) of the first markdown table under `heading`, header excluded."""
    lines = README.read_text(encoding="utf-8").splitlines()
    start = lines.index(heading)
    rows: list[list[str]] = []
    in_table = False
    for line in lines[start + 1 :]:
        if line.startswith("#"):
            break
        if line.startswith("|"):
            in_table = True
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif in_table:
            break
    assert len(rows) >= 2 and set(rows[1][0]) <= {"-", ":"}, f"no table under {heading}"
    return rows[2:]


def test_readme_refusal_table_matches_the_code_table() -> None:
    rows = table_after("## Refusal codes")
    table = {}
    for code, meaning, reconcile in rows:
        assert meaning
        assert reconcile in ("yes", "no")
        table[code.strip("`")] = reconcile == "yes"
    assert table == dict(SafeOpenRefusal.CODES)


def collect_tests() -> dict[str, bool]:
    """Every test function in tests/: "file::name" -> whether it takes the `method` fixture."""
    found: dict[str, bool] = {}
    for path in sorted(TESTS.glob("test_*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                found[f"{path.name}::{node.name}"] = "method" in [a.arg for a in node.args.args]
    return found


def test_readme_method_table_lists_every_test() -> None:
    rows = table_after("## Resolution: openat2 or the walk")
    listed = {test.strip("`"): ran for test, ran in rows}
    assert len(listed) == len(rows), "a test is listed twice"
    found = collect_tests()
    assert set(listed) == set(found)
    for name, takes_method in found.items():
        assert (listed[name] == "openat2, walk") == takes_method, name


def test_readme_lists_every_mutant_and_its_killer_exists() -> None:
    rows = table_after("## Mutants")
    listed = {row[0].strip("`"): row[2] for row in rows}
    patches = {p.stem: p for p in (REPO / "mutants").glob("safe-open--*.patch")}
    assert set(listed) == set(patches)
    found = collect_tests()
    for stem, patch in patches.items():
        header = dict(
            line[2:].split(": ", 1)
            for line in patch.read_text(encoding="utf-8").splitlines()
            if line.startswith("# ")
        )
        assert header["package"] == "safe-open"
        killers = [k.strip() for k in header["killed-by"].split(",")]
        for killer in killers:
            file, name = killer.removeprefix("tests/").split("::")
            assert f"{file}::{name}" in found, killer
            assert f"`{name}`" in listed[stem], (stem, name)


def test_public_api_is_the_contract() -> None:
    for name in so.__all__:
        assert hasattr(so, name), name
    for name in ("Refusal", "SafeOpenRefusal", "Root", "open_root", "OpenedFile"):
        assert name in so.__all__
    sig = inspect.signature(so.open_root)
    assert list(sig.parameters) == ["path", "method"]
    assert sig.parameters["method"].kind is inspect.Parameter.KEYWORD_ONLY
    assert sig.parameters["method"].default == "auto"
    assert list(inspect.signature(so.Root.open_session_file).parameters)[:3] == [
        "self",
        "sessions_rel",
        "name",
    ]
    assert [f for f in so.OpenedFile.__dataclass_fields__ if not f.startswith("_")] == [
        "fd",
        "dev",
        "ino",
        "size",
        "mtime_ns",
        "name",
    ]
    assert re.fullmatch(r"\d+", str(so.MAX_SESSION_FILE_BYTES)) and so.MAX_SESSION_FILE_BYTES == 256 * 2**20
