"""ci/facades.py (`ci/layers.py` rule 9): each public module kept from its private modules' `__all__`, a budget
of promised names, the README's one table of them (issue 31), shown on a made-up package."""

from __future__ import annotations

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import facades  # noqa: E402
import workspace  # noqa: E402

STAR = "from . import _a\nfrom ._a import *  # noqa: F403\n\n__all__: list[str] = []\n__all__ += _a.__all__\n\n" \
       "def __dir__() -> list[str]:\n    return sorted(__all__)\n"
DIR = "\n\ndef __dir__() -> list[str]:\n    return sorted(__all__)\n"
FILES = {
    "__init__.py": '"""Top."""\nfrom ._a import A\n\n__all__ = ["A"]' + DIR,
    "_a.py": '__all__ = ["A", "B"]\nA = 1\nB = 2\nC = 3\n',
    "a.py": '"""All of _a."""\n' + STAR,
    "internals.py": '"""For tests: no compatibility promise."""\nfrom ._a import C\n\n__all__ = ["C"]' + DIR,
}
README = ("# x\n\n## Public names\n\n| module | names | promise |\n|---|---|---|\n"
          "| `mosaic.pi_rpc` | `A` | promised |\n| `mosaic.pi_rpc.a` | `A`, `B` | promised |\n"
          "| `mosaic.pi_rpc.internals` | `C` | unstable |\n\n## Next\n")


@pytest.fixture
def pkg(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    """Package pi-rpc in a made-up repository: a top level, a star facade of `_a`, an unstable module; budget 2."""
    monkeypatch.setattr(workspace, "ROOT", tmp_path)
    monkeypatch.setattr(workspace, "PUBLIC_BUDGET", {"pi-rpc": 2})
    monkeypatch.setattr(workspace, "UNSTABLE", {"pi-rpc": "internals"})
    src = tmp_path / "packages" / "pi-rpc" / "src" / "mosaic" / "pi_rpc"
    src.mkdir(parents=True)
    for name, text in FILES.items():
        (src / name).write_text(text)
    (tmp_path / "packages" / "pi-rpc" / "README.md").write_text(README)
    return src


def test_rule9_a_package_whose_facades_follow_their_private_modules_passes(pkg: pathlib.Path) -> None:
    assert facades.check_package("pi-rpc") == []
    assert facades.promised_count("pi-rpc") == 2  # A, B: the unstable module's C is not counted


def test_rule9_a_name_the_private_module_adds_reaches_the_star_facade_and_the_table_must_follow(
        pkg: pathlib.Path) -> None:
    (pkg / "_a.py").write_text('__all__ = ["A", "B", "D"]\nA = 1\nB = 2\nC = 3\nD = 4\n')
    problems = facades.check_package("pi-rpc")
    assert any("3 promised public names, over its budget of 2" in p for p in problems), problems
    assert any("README's row for mosaic.pi_rpc.a differs from its __all__; omits D" in p for p in problems), problems


@pytest.mark.parametrize("name,text,says", [
    ("a.py", '"""F."""\nfrom ._a import A, B\n\n__all__ = ["A"]' + DIR, "imports B it does not list"),
    ("a.py", '"""F."""\nfrom ._a import A\n\n__all__ = ["A", "B"]' + DIR, "lists B, which it does not bind"),
    ("a.py", '"""F."""\nfrom ._a import A, C\n\n__all__ = ["A", "C"]' + DIR,
     "re-exports C from _a, whose __all__ does not list it"),
    ("a.py", '"""F."""\nfrom . import _a\nfrom ._a import *  # noqa: F403\n\n__all__ = ["A", "B"]' + DIR,
     "star-imports _a without `__all__ += _a.__all__`"),
    ("a.py", '"""F."""\nfrom ._a import A\n__all__ = ["A"]\n', "no __dir__"),
    ("a.py", '"""F."""\nfrom ._a import A\n__all__ = list(("A",))' + DIR, "no literal __all__"),
    ("internals.py", '"""For tests."""\nfrom ._a import C\n\n__all__ = ["C"]' + DIR, "must say 'no compatibility"),
])
def test_rule9_a_facade_that_is_not_its_imports_or_not_its_private_modules_list_is_named(
        pkg: pathlib.Path, name: str, text: str, says: str) -> None:
    (pkg / name).write_text(text)
    problems = [p for p in facades.check_package("pi-rpc") if "README" not in p]
    assert len(problems) == 1 and says in problems[0], problems


def test_rule9_a_facade_may_name_its_own_package_absolutely(pkg: pathlib.Path) -> None:
    (pkg / "a.py").write_text('"""F."""\nfrom mosaic.pi_rpc._a import A, B\n\n__all__ = ["A", "B"]' + DIR)
    assert facades.check_package("pi-rpc") == []
    (pkg / "a.py").write_text('"""F."""\nfrom mosaic.pi_rpc._a import A, C\n\n__all__ = ["A", "C"]' + DIR)
    problems = [p for p in facades.check_package("pi-rpc") if "README" not in p]
    assert len(problems) == 1 and "re-exports C from _a, whose __all__ does not list it" in problems[0], problems


def test_rule9_a_script_is_no_module_but_a_module_without_a_list_is_named(pkg: pathlib.Path) -> None:
    (pkg / "tree.py").write_text('"""Run me."""\nimport sys\n\nif __name__ == "__main__":\n    sys.exit(0)\n')
    assert facades.check_package("pi-rpc") == []
    (pkg / "tree.py").write_text('"""Import me."""\nX = 1\n')
    problems = facades.check_package("pi-rpc")
    assert any("mosaic.pi_rpc.tree: no literal __all__" in p for p in problems), problems


def test_rule9_a_module_with_code_may_import_for_itself_but_binds_what_it_lists(pkg: pathlib.Path) -> None:
    (pkg / "tool.py").write_text('"""Code."""\nfrom ._a import C\n\n__all__ = ["run"]\n\ndef run() -> int:\n'
                                 '    return C\n' + DIR)
    (pkg.parents[2] / "README.md").write_text(README.replace("\n\n## Next", "\n| `mosaic.pi_rpc.tool` | `run` | "
                                                                           "promised |\n\n## Next"))
    workspace.PUBLIC_BUDGET["pi-rpc"] = 3
    assert facades.check_package("pi-rpc") == []


LAZY_TOP = ('"""Top."""\nfrom typing import TYPE_CHECKING, Any\n\nif TYPE_CHECKING:\n    from ._a import {tc}\n\n'
            '_LAZY = {{"A": "._a"}}\n__all__ = ["A"]\n\ndef __getattr__(name: str) -> Any:\n    raise AttributeError(name)'
            + DIR)


def test_rule9_a_lazy_top_level_loads_what_its_modules_list_and_tells_the_type_checker_the_same(
        pkg: pathlib.Path) -> None:
    (pkg / "__init__.py").write_text(LAZY_TOP.format(tc="A"))
    assert facades.check_package("pi-rpc") == []
    (pkg / "__init__.py").write_text(LAZY_TOP.format(tc="A, B"))
    problems = facades.check_package("pi-rpc")
    assert len(problems) == 1 and "must import exactly _LAZY's names" in problems[0], problems
    (pkg / "__init__.py").write_text(LAZY_TOP.format(tc="A").replace('"A": "._a"', '"A": "._b"'))
    (pkg / "_b.py").write_text("__all__: list[str] = []\nA = 1\n")
    problems = facades.check_package("pi-rpc")
    assert any("_LAZY loads A from _b, whose __all__ does not list it" in p for p in problems), problems


@pytest.mark.parametrize("readme,says", [
    (README.replace("| `mosaic.pi_rpc.internals` | `C` | unstable |\n", ""), "no row for mosaic.pi_rpc.internals"),
    (README.replace("`C` | unstable", "`C` | promised"), "says promised, not unstable"),
    (README.replace("`A`, `B` | promised", "`A`, `B`, `E` | promised"), "names E it does not export"),
    (README.replace("\n## Next", "| `mosaic.pi_rpc.gone` | `Z` | promised |\n\n## Next"), "which is no public module"),
    ("# x\n", "has no '## Public names' section"),
])
def test_rule9_the_readme_table_is_exactly_the_public_modules(pkg: pathlib.Path, readme: str, says: str) -> None:
    problems = facades.check_package("pi-rpc", readme=readme)
    assert len(problems) == 1 and says in problems[0], problems


def test_rule9_the_repository_holds_its_budgets_and_tables() -> None:
    assert set(workspace.PUBLIC_BUDGET) <= set(workspace.PACKAGES)
    assert set(workspace.UNSTABLE) <= set(workspace.PUBLIC_BUDGET)
    assert facades.check() == []


def test_rule9_a_facade_may_re_export_another_mosaic_packages_names_and_must_list_exactly_them(
        pkg: pathlib.Path) -> None:
    """The controller's `client` re-exports mosaic-controller-client (issue 31): another package's names bind,
    count as promised here, and the facade's list must still be exactly what it imports."""
    (pkg / "a.py").write_text('"""F."""\nfrom mosaic.safe_open import Refusal\n\n__all__ = ["Refusal"]' + DIR)
    assert [p for p in facades.check_package("pi-rpc") if "README" not in p] == []
    assert facades.promised_count("pi-rpc") == 2  # A and Refusal
    (pkg / "a.py").write_text('"""F."""\nfrom mosaic.safe_open import Refusal\n\n__all__ = ["Refusal", "X"]' + DIR)
    problems = [p for p in facades.check_package("pi-rpc") if "README" not in p and "budget" not in p]
    assert len(problems) == 1 and "lists X, which it does not bind" in problems[0], problems
    (pkg / "a.py").write_text('"""F."""\nfrom mosaic.safe_open import Refusal, safe_id\n\n__all__ = ["Refusal"]'
                              + DIR)
    problems = [p for p in facades.check_package("pi-rpc") if "README" not in p and "budget" not in p]
    assert len(problems) == 1 and "imports safe_id it does not list" in problems[0], problems
