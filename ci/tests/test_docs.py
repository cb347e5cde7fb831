"""docs/ explains the repository without anything beside it, and its glossary stays true to the code.

The glossary (docs/glossary.md) is held to:

- the tests: every fixture id in its tables has a test named after it (the id as a `_`-separated token of a
  test function's name, or of the test file's name) in a file its row lists, every file a row lists exists,
  or the row says "not built: <reason>";
- mutants/: every `brief-NN` patch is in its mutant table, with a test the patch's `killed-by:` header names;
- the refusal tables: every code of every package's `CODES` table (read from the source with `ast`, since
  the lint session installs no Mosaic package; each package's README table is held to the same table by
  that package's own tests) and every receipt reason the controller sets.

Plain text and a few hundred small files: well under a second.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
GLOSSARY = DOCS / "glossary.md"
PACKAGES = REPO / "packages"

# The families the brief, the seed and the controller README name, with the ranges the glossary must cover.
REQUIRED_IDS = {
    "W": range(1, 21), "G": range(1, 4), "N": range(1, 14), "S": range(1, 8), "H": range(1, 24),
    "K": range(1, 19), "E": range(1, 8), "P": range(1, 8), "L": range(1, 8), "F": range(1, 18),
    "O": range(1, 7),
}
ID_RE = re.compile(r"[WGNSHKEPLFO]\d{1,2}")
TEST_PATH_RE = re.compile(r"`([a-z-]+/tests\w*/[\w/]+\.py)`?")
NOT_BUILT_RE = re.compile(r"^not built: \S.{10,}")
# Packages that hold a refusal code table; mediated-terminal has none of its own (it shows the controller's), and
# the controller raises `ControlRefusal`, whose table is mosaic-controller-client's (issue 31).
PACKAGES_WITH_REFUSALS = {"safe-open", "pi-format", "claude-format", "chat-pages", "writer-claim", "cgroup-cohort",
                          "pi-rpc", "controller-client"}


def sections(text: str) -> dict[str, str]:
    """The text under each level-2 heading, by heading."""
    out: dict[str, str] = {}
    for part in re.split(r"^## ", text, flags=re.MULTILINE)[1:]:
        heading, _, body = part.partition("\n")
        out[heading.strip()] = body
    return out


def table_rows(text: str) -> Iterator[list[str]]:
    """The cells of every table row (header and separator rows included; callers filter on the first cell)."""
    for line in text.splitlines():
        if line.startswith("|") and line.rstrip().endswith("|"):
            yield [cell.strip() for cell in line.strip()[1:-1].split("|")]


@functools.cache
def glossary_sections() -> dict[str, str]:
    return sections(GLOSSARY.read_text(encoding="utf-8"))


def _ids_in_test_names() -> dict[str, set[str]]:
    """For each test file under packages/*/tests*/ (relative to packages/), the fixture ids its file name or
    its test functions' names carry as a `_`-separated token."""
    found: dict[str, set[str]] = {}
    for path in sorted(PACKAGES.glob("*/tests*/**/*.py")):
        names = [path.stem]
        source = path.read_text(encoding="utf-8")
        names += re.findall(r"^\s*(?:async\s+)?def\s+(test_\w+)", source, re.MULTILINE)
        ids = {tok for name in names for tok in name.split("_") if ID_RE.fullmatch(tok)}
        found[path.relative_to(PACKAGES).as_posix()] = ids
    return found


def fixture_rows() -> list[list[str]]:
    return [row for row in table_rows(glossary_sections()["Fixture ids"]) if ID_RE.fullmatch(row[0])]


def test_the_glossary_names_every_fixture_id_of_the_brief_and_the_seed_once() -> None:
    ids = [row[0] for row in fixture_rows()]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
    missing = [f"{fam}{n}" for fam, numbers in REQUIRED_IDS.items() for n in numbers
               if f"{fam}{n}" not in ids]
    assert not missing, f"docs/glossary.md has no row for {missing}"


def test_every_fixture_id_in_the_glossary_has_a_test_named_after_it_or_says_not_built() -> None:
    in_names = _ids_in_test_names()
    assert sum(len(v) for v in in_names.values()) > 100, "hardly any fixture id in a test name: no packages/?"
    problems: list[str] = []
    for row in fixture_rows():
        fixture, where = row[0], row[-1]
        if where.startswith("not built"):
            if not NOT_BUILT_RE.match(where):
                problems.append(f"{fixture}: 'not built' needs ': <the reason>' ({where!r})")
            continue
        paths = TEST_PATH_RE.findall(where)
        if not paths:
            problems.append(f"{fixture}: names no test file (<pkg>/tests*/...py) and is not 'not built'")
            continue
        for path in paths:
            if path not in in_names:
                problems.append(f"{fixture}: {path} is not a test file under packages/")
        if not any(fixture in in_names.get(path, set()) for path in paths):
            problems.append(f"{fixture}: no test named after it in {paths}")
    assert not problems, "docs/glossary.md fixture tables:\n" + "\n".join(problems)


def _patch_killers(path: Path) -> list[str]:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# killed-by:"):
            return [k.strip() for k in line.split(":", 1)[1].split(",")]
    return []


def test_the_glossary_lists_every_brief_mutant_with_a_test_its_patch_names() -> None:
    rows = [row for row in table_rows(glossary_sections()["The brief's mutants"]) if row[0].isdigit()]
    numbers = sorted(int(row[0]) for row in rows)
    assert numbers == list(range(1, 30)), f"the brief has mutants 1 to 29, once each, not {numbers}"
    on_disk = {p.stem: p for p in (REPO / "mutants").glob("brief-*.patch")}
    named: set[str] = set()
    problems: list[str] = []
    for row in rows:
        patches = re.findall(r"`(brief-\d\d[ab]?--[\w-]+)`", row[2])
        killers = re.findall(r"`(tests\w*/[\w/]+\.py::[\w\[\]-]+)`", row[3])
        if not patches or not killers:
            problems.append(f"mutant {row[0]}: names no patch or no killing test")
        for stem in patches:
            named.add(stem)
            if not stem.startswith(f"brief-{int(row[0]):02d}"):
                problems.append(f"mutant {row[0]}: {stem} is another number's patch")
            if stem not in on_disk:
                problems.append(f"mutant {row[0]}: mutants/{stem}.patch does not exist")
        headers = {k for stem in patches if stem in on_disk for k in _patch_killers(on_disk[stem])}
        problems += [f"mutant {row[0]}: {k} is not in its patch's killed-by header"
                     for k in killers if k not in headers]
    problems += [f"mutants/{stem}.patch is not in the glossary" for stem in sorted(set(on_disk) - named)]
    assert not problems, "docs/glossary.md mutant table:\n" + "\n".join(problems)


def _refusal_tables() -> dict[str, set[str]]:
    """Every non-empty `CODES = {...}` (or `CODES = MappingProxyType({...})`) in the packages' sources, by
    '<package>:<file>:<line>'."""
    tables: dict[str, set[str]] = {}
    for path in sorted(PACKAGES.glob("*/src/**/*.py")):
        source = path.read_text(encoding="utf-8")
        if "CODES" not in source:
            continue
        for node in ast.walk(ast.parse(source, filename=str(path))):
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, value = [node.target], node.value
            else:
                continue
            if not any(isinstance(t, ast.Name) and t.id == "CODES" for t in targets):
                continue
            if isinstance(value, ast.Call) and value.args:
                value = value.args[0]
            if isinstance(value, ast.Dict):
                codes = {k.value for k in value.keys
                         if isinstance(k, ast.Constant) and isinstance(k.value, str)}
                if codes:
                    package = path.relative_to(PACKAGES).parts[0]
                    tables[f"{package}:{path.name}:{node.lineno}"] = codes
    return tables


def _first_cell_codes(section: str) -> set[str]:
    """The backquoted codes in the first cell of the rows of a glossary section's tables."""
    rows = table_rows(glossary_sections()[section])
    return {m.group(1) for row in rows if (m := re.fullmatch(r"`([a-z-]+)`", row[0]))}


def test_every_refusal_code_of_every_package_is_in_the_glossary() -> None:
    tables = _refusal_tables()
    assert {where.split(":")[0] for where in tables} >= PACKAGES_WITH_REFUSALS, sorted(tables)
    listed = _first_cell_codes("Refusal codes")
    missing = sorted(f"{code} ({where})" for where, codes in tables.items() for code in codes - listed)
    assert not missing, f"refusal codes missing from docs/glossary.md 'Refusal codes': {missing}"


def test_every_receipt_reason_the_controller_sets_is_in_the_glossary() -> None:
    reasons: set[str] = set()
    for path in (PACKAGES / "controller" / "src").glob("**/*.py"):
        # A receipt moved by hand (`Request.move`) or settled by the slot's one release path (`Settle`).
        reasons |= set(re.findall(r'(?:\.move\(|Settle\(\s*"[a-z-]+",)\s*"(?:failed|delivery-unknown)"[^)]*?'
                                  r'reason="([a-z-]+)"', path.read_text(encoding="utf-8")))
    assert {"transport-unknown", "handled-without-run", "ack-without-start"} <= reasons, sorted(reasons)
    missing = sorted(reasons - _first_cell_codes("Receipt reasons"))
    assert not missing, f"receipt reasons missing from docs/glossary.md 'Receipt reasons': {missing}"


@pytest.mark.parametrize("doc", ["README.md", "docs/design.md", "docs/pi-0.85.1.md", "docs/claude-2.1.283.md",
                                 "docs/glossary.md", "docs/scope.md"])
def test_the_docs_point_only_inside_the_repository_and_their_links_resolve(doc: str) -> None:
    path = REPO / doc
    text = path.read_text(encoding="utf-8")
    assert "../shared" not in text, f"{doc} points at ../shared, which a clone does not have"
    broken = [target for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
              if not target.startswith(("http://", "https://")) and not (path.parent / target).exists()]
    assert not broken, f"{doc}: links to nothing: {broken}"


def test_every_changelog_section_says_something_and_no_issue_has_two_sections() -> None:
    """Each package's CHANGELOG.md: one section per issue, none empty (a merge once left issue 29's
    controller section a bare heading)."""
    problems: list[str] = []
    for path in sorted(PACKAGES.glob("*/CHANGELOG.md")):
        sections = re.split(r"^(## .*)$", path.read_text(encoding="utf-8"), flags=re.M)
        seen: list[str] = []
        for heading, body in zip(sections[1::2], sections[2::2], strict=True):
            if not body.strip():
                problems.append(f"{path.relative_to(REPO)}: '{heading}' is empty")
            issue = re.match(r"## Issue (\d+)[:\s]", heading + " ")
            if issue and not re.search(r"(measured again|, part|\(part)", heading):
                if issue.group(1) in seen:
                    problems.append(f"{path.relative_to(REPO)}: issue {issue.group(1)} has two sections")
                seen.append(issue.group(1))
    assert problems == []
