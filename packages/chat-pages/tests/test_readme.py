"""The README's tables against the code: refusal codes with reconcile flags and HTTP statuses, the F1-F17
test table, the mutant table, and the public API."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from helpers import REPO

import mosaic.chat_pages as pkg
from mosaic.chat_pages import ReaderRefusal
from mosaic.chat_pages.server import REFUSAL_STATUS

PKG = REPO / "packages" / "chat-pages"
README = (PKG / "README.md").read_text(encoding="utf-8")


def _section(start: str, end: str) -> str:
    return README[README.index(start) + len(start) : README.index(end)]


def test_readme_refusal_table_matches_the_code_table_and_the_status_table() -> None:
    rows = {}
    for line in _section("<!-- refusals:start -->", "<!-- refusals:end -->").splitlines():
        m = re.match(r"\| `([a-z-]+)` \| .* \| (yes|no) \| (\d{3}) \|$", line)
        if m:
            rows[m.group(1)] = (m.group(2) == "yes", int(m.group(3)))
    assert rows == {code: (flag, REFUSAL_STATUS[code]) for code, flag in ReaderRefusal.CODES.items()}


def _test_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}


def test_readme_f_table_names_tests_that_exist_and_covers_f1_to_f17() -> None:
    table = README[README.index("| F | rule family |") : README.index("**Every reader call runs inside")]
    seen_f = set(re.findall(r"^\| (F\d+) \|", table, flags=re.M))
    assert seen_f == {f"F{i}" for i in range(1, 18)}
    current = None
    named = 0
    for ref in re.findall(r"`((?:test_\w+\.py)?::\w+|test_\w+\.py::\w+)`", table):
        file, _, name = ref.partition("::")
        if file:
            current = file
        assert current is not None
        assert name in _test_names(PKG / "tests" / current), f"{current}::{name} is not a test"
        named += 1
    assert named >= 60
    # Every test in the suite is named in the table (test_readme.py is the table's own row).
    for f in sorted((PKG / "tests").glob("test_*.py")):
        if f.name == "test_readme.py":
            continue
        for name in _test_names(f):
            if name == "test_fixture_dirs_exist":
                continue
            assert f"::{name}`" in table, f"{f.name}::{name} is missing from the F table"


def test_readme_lists_every_mutant_and_its_killer_exists() -> None:
    table = README[README.index("## Mutants") :]
    patches = sorted(p.name for p in (REPO / "mutants").glob("chat-pages--*.patch"))
    assert patches and len(patches) >= 5
    for name in patches:
        text = (REPO / "mutants" / name).read_text(encoding="utf-8")
        killer = re.search(r"^# killed-by: (.+)$", text, flags=re.M)
        assert killer, name
        for ref in killer.group(1).split(","):
            file, _, test = ref.strip().partition("::")
            assert test in _test_names(PKG / file), ref
            assert f"`{file}::{test}`" in table and f"`{name}`" in table


def test_public_api_is_all_and_every_name_exists() -> None:
    for name in pkg.__all__:
        assert hasattr(pkg, name), name
    for name in ("roots_from_specs", "create_reader", "RepositorySpec", "SeatRegistration", "ReaderRefusal",
                 "serve", "conversation_id"):
        assert name in pkg.__all__
    import mosaic.chat_pages.server as server

    assert "REFUSAL_STATUS" in server.__all__


def _api_names(readme: str) -> set[str]:
    """The names the README's API table documents: the leading identifier of each `span` in its first
    column (`Reader.next(...)` names Reader; `.CODES`, commands and `python -m ...` name nothing)."""
    table = readme[readme.index("## API") :]
    table = table[: table.index("\n\n", table.index("| name |"))]
    names: set[str] = set()
    for row in table.splitlines()[2:]:
        first = row.split(" | ")[0]
        for span in re.findall(r"`([^`]+)`", first):
            m = re.match(r"[A-Za-z_][A-Za-z0-9_]*", span)
            if m and not span.startswith(("python ", "mosaic-")):
                names.add(m.group())
    return names


def test_readme_api_table_is_exactly_the_public_surface() -> None:
    """The public surface: __all__ lists only what a caller needs, and the README documents each name; the
    command line's entry point and the shortcut's threshold are in their modules, not at the top."""
    assert _api_names(README) == set(pkg.__all__)
    assert "main" not in pkg.__all__ and "RACY_NS" not in pkg.__all__


def test_schema_uses_the_pi_format_id_pattern() -> None:
    from helpers import SCHEMA

    from mosaic.pi_format.ids import CHAT01_ID_PATTERN

    assert SCHEMA["$defs"]["chat01Id"]["pattern"] == CHAT01_ID_PATTERN
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
