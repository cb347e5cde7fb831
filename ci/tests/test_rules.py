"""ci/rules.py: every "rule N" reference names a rule that exists (issue 31), shown on made-up packages."""

from __future__ import annotations

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import rules  # noqa: E402
import workspace  # noqa: E402

DOC = '"""The rules it keeps:\n\n1. one.\n2. two.\n   2a. two a.\n3. three.\nD. dee.\n"""\n'


@pytest.fixture
def pkg(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    """A repository with package pi-rpc whose `_a.py` keeps rules 1, 2, 2a, 3 and D, and a README whose
    numbered lines are 1 and 2. Returns the package's source folder."""
    monkeypatch.setattr(workspace, "ROOT", tmp_path)
    src = tmp_path / "packages" / "pi-rpc" / "src" / "mosaic" / "pi_rpc"
    (src / "core").mkdir(parents=True)
    (src / "_a.py").write_text(DOC)
    (src / "core" / "_chain.py").write_text('"""Chain.\n\n1. first.\n"""\n')
    (tmp_path / "packages" / "pi-rpc" / "README.md").write_text("## Rules\n\n1. **One.**\n2. **Two.**\n")
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / "layers.py").write_text('"""Layers.\n\n1. a.\n7. b.\n"""\n')
    return src


def _problems(src: pathlib.Path, text: str, name: str = "_b.py") -> list[str]:
    path = src / name
    path.write_text(text)
    return rules.check_file(path)


@pytest.mark.parametrize("text", [
    DOC + "x = 1  # rule 2a\n",  # bare: its own docstring
    DOC + "# rules 1, 2 and 3; rules 1-3; Rule D; module rule 1\n",
    '"""Bee."""\n# `_a` rule 2; `_a`\'s rules 2 and 3; _a rule D; rule 3 of `_a.py`; rule 1 of _a.py\n',
    '"""Bee."""\n# `mosaic.pi_rpc._a` rule 2a; `core/_chain` rule 1; `ci/layers.py` rule 7; ci/layers.py rules 1 and 7\n',
    '"""Bee."""\n# README rule 2; the README\'s rules 1-2\n',
    '"""Bee."""\n# the brief\'s rule 9; brief §3 rules 2, 3, 5; seed rule 12; R3-1 rule 4; RFC 9112 rule 8\n',
])
def test_every_accepted_form_resolves(pkg: pathlib.Path, text: str) -> None:
    assert _problems(pkg, text) == []


@pytest.mark.parametrize("text,says", [
    ('"""Bee.\n\n1. one.\n"""\n# rule 2\n', "'rule 2': its own rules are 1, not 2"),
    ('"""Bee."""\n# rules 1-4 of `_a`\n', "packages/pi-rpc/src/mosaic/pi_rpc/_a.py rules are 1, 2, 2a, 3, D, not 4"),
    ('"""Bee."""\n# `_a` rule 2b\n', "not 2b"),
    ('"""Bee."""\n# `_gone` rule 1\n', "no module _gone"),
    ('"""Bee."""\n# _chain rule 1\n', "no module _chain"),  # in a folder: `core/_chain`
    ('"""Bee."""\n# its rule 4\n', "'its rule' names no module"),
    ('"""Bee."""\n# see core rule 8\n', "'core rule' names no module"),
    ('"""Bee."""\n# README rule 3\n', "README.md rules are 1, 2, not 3"),
])
def test_a_reference_to_a_rule_or_module_that_does_not_exist_is_named(pkg: pathlib.Path, text: str, says: str) -> None:
    problems = _problems(pkg, text)
    assert len(problems) == 1 and says in problems[0], problems
    assert problems[0].startswith("packages/pi-rpc/src/mosaic/pi_rpc/_b.py:")


def test_a_renumbered_rule_leaves_its_references_pointing_at_nothing(pkg: pathlib.Path) -> None:
    """The check's reason to exist: `_a` drops its rule 3, and `_b`'s reference to it is named."""
    ok = '"""Bee."""\n# `_a` rule 3\n'
    assert _problems(pkg, ok) == []
    (pkg / "_a.py").write_text(DOC.replace("3. three.\n", ""))
    assert _problems(pkg, ok)[0].endswith("not 3")


def test_ranges_and_lists_expand_to_every_id() -> None:
    assert rules.expand("2, 3, 5 and 6") == ("2", "3", "5", "6")
    assert rules.expand("1-3") == ("1", "2", "3")
    assert rules.expand("10–12") == ("10", "11", "12")
    assert rules.expand("4 to 7") == ("4", "5", "6", "7")
    assert rules.expand("A-C") == ("A", "B", "C")
    assert rules.expand("1, 2, and 7b") == ("1", "2", "7b")


def test_a_markdown_files_rules_are_its_numbered_lines(pkg: pathlib.Path) -> None:
    readme = pkg.parents[2] / "README.md"
    assert rules.labels(readme) == {"1", "2"}
    readme.write_text(readme.read_text() + "\nThe cross-site requests rule 2 refuses; rule 5 is not one.\n")
    problems = rules.check_file(readme)
    assert problems == ["packages/pi-rpc/README.md:6: 'rule 5': its own rules are 1, 2, not 5"], problems


def test_the_repository_holds_its_references() -> None:
    assert rules.check() == []
