"""The README's tables are checked against the code: the mutant table against mutants/ (each named killer
exists). The refusal table is mosaic-controller-client's (its README, its tests/test_readme.py)."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
README = TESTS.parent / "README.md"
REPO = Path(os.environ.get("MOSAIC_REPO") or Path(__file__).resolve().parents[3])


def table_after(heading: str) -> list[list[str]]:
    lines = README.read_text(encoding="utf-8").splitlines()
    start = lines.index(heading)
    rows: list[list[str]] = []
    for line in lines[start + 1:]:
        if line.startswith("#"):
            break
        if line.startswith("|"):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif rows:
            break
    return rows[2:]


def test_readme_mutant_table_lists_every_controller_mutant_and_its_killers_exist() -> None:
    listed = {r[0].strip("`") for r in table_after("## Mutants")}
    patches = {}
    for path in (REPO / "mutants").glob("*.patch"):
        header = dict(line[2:].split(": ", 1) for line in path.read_text().splitlines() if line.startswith("# "))
        if header["package"] == "controller":
            patches[path.stem] = header
    assert listed == set(patches)
    for header in patches.values():
        for killer in header["killed-by"].split(","):
            file, name = killer.strip().split("::")
            name = name.split("[")[0]  # a parametrized case names its function
            tree = ast.parse((TESTS.parent / file).read_text())
            names = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
            names |= {n.targets[0].id for n in tree.body if isinstance(n, ast.Assign)
                      and isinstance(n.targets[0], ast.Name)}
            assert name in names, killer


def test_readme_names_a_test_file_for_every_fixture_family_it_lists() -> None:
    text = README.read_text(encoding="utf-8")
    suites = [TESTS, TESTS.parent / "tests_cohort", TESTS.parent / "tests_smoke"]
    for file in set(re.findall(r"`(?:tests_[a-z]+/)?(test_[a-z_*]+\.py)", text)):
        if "*" in file:
            assert any(list(d.glob(file)) for d in suites), file
        else:
            assert any((d / file).exists() for d in suites), file
    # Every test a fixture table names exists in the file it is listed under (or, unqualified, in a suite).
    for name in set(re.findall(r"`(?:[a-z_]+\.py::)?(test_[KWGH][0-9][A-Za-z0-9_]*)", text)):
        assert any(name in (d / f).read_text() for d in suites if d.exists() for f in os.listdir(d)
                   if f.endswith(".py")), name
