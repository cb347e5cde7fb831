"""The README's tables against the code: every issue-20 and tmux test is in a table, every test a table
names exists, every mediated-terminal mutant is listed with killers that exist, the exit codes, and every
public name loads."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import mosaic.mediated_terminal as pkg
from mosaic.mediated_terminal.cli import EXIT_CRASH, EXIT_OK, EXIT_REFUSED, EXIT_USAGE

TESTS = Path(__file__).resolve().parent
REPO = Path(os.environ.get("MOSAIC_REPO") or TESTS.parents[2])
README = (TESTS.parent / "README.md").read_text(encoding="utf-8")


def _names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}


def test_every_person_and_tmux_test_is_in_a_table_and_every_named_test_exists() -> None:
    everything = set().union(*(_names(f) for f in TESTS.glob("test_*.py")))
    for name in re.findall(r"`(?:\.\.\.::|tests/test_\w+\.py::)?(test_\w+)`", README):
        assert name in everything, f"the README names {name}, which is not a test"
    for f in ("test_person.py", "test_tmux.py"):
        for name in _names(TESTS / f):
            assert f"`{name}`" in README or f"::{name}`" in README, f"{f}::{name} is missing from the README"


def test_every_mutant_of_this_package_is_listed_with_killers_that_exist() -> None:
    table = README[README.index("## Mutants"):]
    mine = []
    for patch in sorted((REPO / "mutants").glob("*.patch")):
        text = patch.read_text(encoding="utf-8")
        if re.search(r"^# package: mediated-terminal$", text, flags=re.M):
            mine.append(patch.stem)
            assert f"`{patch.stem}`" in table, patch.stem
            killers = re.search(r"^# killed-by: (.+)$", text, flags=re.M)
            assert killers is not None
            for ref in killers.group(1).split(","):
                file, _, test = ref.strip().partition("::")
                assert test in _names(TESTS.parent / file), ref
                assert f"`{file}::{test}`" in table, ref
    assert len(mine) >= 8


def test_the_exit_codes_in_the_readme_are_the_codes() -> None:
    table = README[README.index("| exit code |"):README.index("## The screen")]
    codes = [int(c) for c in re.findall(r"^\| (\d+) \|", table, flags=re.M)]
    assert codes == [EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_CRASH] == [0, 1, 2, 70]


def test_every_public_name_loads() -> None:
    for name in pkg.__all__:
        assert getattr(pkg, name) is not None, name
