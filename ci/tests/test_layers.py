"""ci/layers.py holds the layers contract and the public-surface rule (issue 9): shown on made-up files."""

from __future__ import annotations

import pathlib
import shutil
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import layers  # noqa: E402
import workspace  # noqa: E402

CONTROLLER_FILE = workspace.package_dir("controller") / "src" / "mosaic" / "controller" / "x.py"
PI_RPC_TEST = workspace.package_dir("pi-rpc") / "tests" / "test_x.py"
CI_FILE = workspace.ROOT / "ci" / "x.py"


@pytest.mark.parametrize(
    "source",
    [
        "from mosaic.pi_rpc._link import LinkCore\n",
        "import mosaic.pi_rpc._link\n",
        "from mosaic.pi_rpc.testing._fake_control import FakeControl\n",
        "from mosaic.pi_rpc import _link\n",
        "from mosaic.cgroup_cohort._stop import StopMachine\n",
    ],
)
def test_another_package_importing_a_private_part_is_rejected(source: str) -> None:
    problems = layers.check_imports("controller", CONTROLLER_FILE, source)
    assert len(problems) == 1 and "a private part of" in problems[0], problems


@pytest.mark.parametrize("owner,path", [(None, CI_FILE), ("chat-pages", workspace.package_dir("chat-pages") /
                                                              "tests" / "test_x.py")])
def test_ci_and_another_packages_tests_are_outside_too(owner: str | None, path: pathlib.Path) -> None:
    problems = layers.check_imports(owner, path, "from mosaic.safe_open._root import Root\n")
    assert any("a private part of safe-open" in p for p in problems), problems


def test_a_package_may_import_its_own_private_modules_in_its_source_and_benchmarks() -> None:
    source = "from mosaic.pi_rpc._link import LinkCore\n"
    assert layers.check_imports("pi-rpc", workspace.package_dir("pi-rpc") / "src" / "mosaic" / "pi_rpc" / "x.py",
                                source) == []
    assert layers.check_imports("pi-rpc", workspace.package_dir("pi-rpc") / "bench" / "bench_x.py", source) == []


@pytest.mark.parametrize("test_dir", ["tests", "tests_smoke", "tests_cohort"])
@pytest.mark.parametrize("source", ["from mosaic.pi_rpc._link import LinkCore\n", "from mosaic.pi_rpc import _link\n"])
def test_a_packages_own_tests_import_only_its_public_parts(test_dir: str, source: str) -> None:
    path = workspace.package_dir("pi-rpc") / test_dir / "test_x.py"
    problems = layers.check_imports("pi-rpc", path, source)
    assert len(problems) == 1 and "a test imports" in problems[0], problems
    assert layers.check_imports("pi-rpc", path, "from mosaic.pi_rpc.testing import FakeControl\n") == []


def _module(lines: int = 10, methods: int = 3, body_lines: int = 0) -> str:
    defs = "".join(f"    def m{i}(self) -> None:\n        pass\n" for i in range(methods))
    filler = "".join(f"    x{i} = {i}\n" for i in range(body_lines))
    text = f"class C:\n{defs}{filler}"
    return text + "\n" * max(0, lines - text.count("\n"))


def test_a_module_of_800_lines_and_a_class_of_40_methods_and_600_lines_pass() -> None:
    path = CONTROLLER_FILE
    assert layers.check_sizes(path, _module(lines=800)) == []
    assert layers.check_sizes(path, _module(methods=40)) == []
    assert layers.check_sizes(path, _module(methods=1, body_lines=600 - 3)) == []  # class line + one method: 3


@pytest.mark.parametrize("source,says", [
    (_module(lines=801), "801 lines, over 800"),
    (_module(methods=41), "41 methods"),
    (_module(methods=1, body_lines=600 - 2), "over 40 methods or 600 lines"),
])
def test_one_line_or_method_over_a_bound_is_a_violation(source: str, says: str) -> None:
    problems = layers.check_sizes(CONTROLLER_FILE, source)
    assert len(problems) == 1 and says in problems[0], problems


@pytest.mark.parametrize(
    "source",
    [
        "from mosaic.pi_rpc import LinkCore\n",
        "from mosaic.pi_rpc.testing import FakeControl\n",
        "import mosaic.cgroup_cohort\n",
        "from mosaic import writer_claim\n",
    ],
)
def test_public_imports_of_declared_packages_pass(source: str) -> None:
    assert layers.check_imports("controller", CONTROLLER_FILE, source) == []


def test_an_undeclared_package_is_rejected_even_when_public() -> None:
    problems = layers.check_imports("pi-rpc", PI_RPC_TEST, "from mosaic.writer_claim import ClaimStore\n")
    assert len(problems) == 1 and "does not declare mosaic-writer-claim" in problems[0]


def test_an_unknown_mosaic_module_is_rejected() -> None:
    problems = layers.check_imports(None, CI_FILE, "import mosaic.nonexistent\n")
    assert len(problems) == 1 and "which no package provides" in problems[0]


def test_the_repository_holds_the_contract() -> None:
    assert layers.check() == []


def _src(tmp_path: pathlib.Path, files: dict[str, str]) -> pathlib.Path:
    """A made-up package `mosaic.demo` under tmp_path/src: {path inside the package: source}."""
    src = tmp_path / "src"
    for rel, text in {"__init__.py": "", **files}.items():
        path = src / "mosaic" / "demo" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return src


def test_rule7_files_importing_each_other_at_the_top_are_a_circle(tmp_path: pathlib.Path) -> None:
    src = _src(tmp_path, {"_a.py": "from ._b import B\nA = 1\n", "_b.py": "from mosaic.demo._a import A\nB = 2\n"})
    problems = layers.check_circles(src)
    assert len(problems) == 1 and "import circle between _a, _b" in problems[0], problems
    assert "_a.py:1 -> _b [top]" in problems[0] and "_b.py:1 -> _a [top]" in problems[0]


@pytest.mark.parametrize("back,kind", [
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ._a import A\n", "type-checking"),
    ("def f() -> None:\n    from ._a import A  # noqa\n", "local"),
    ("class C:\n    async def f(self) -> None:\n        from . import _a\n", "local"),
])
def test_rule7_a_type_checking_or_function_local_import_closes_a_circle_too(
        tmp_path: pathlib.Path, back: str, kind: str) -> None:
    """Issue 31: three of the four circles closed only through such an import."""
    src = _src(tmp_path, {"_a.py": "from ._b import f\nA = 1\n", "_b.py": back})
    problems = layers.check_circles(src)
    assert len(problems) == 1 and f"-> _a [{kind}]" in problems[0], problems


def test_rule7_a_chain_a_facade_and_a_package_importing_its_children_are_no_circle(tmp_path: pathlib.Path) -> None:
    src = _src(tmp_path, {
        "__init__.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ._a import A\n",
        "_a.py": "from ._b import B\nfrom . import _c\nA = 1\n",
        "_b.py": "from ._c import C\nB = 1\n",
        "_c.py": "C = 1\n",
        "core/__init__.py": "from ._x import X\nfrom ._y import Y\n",
        "core/_x.py": "from ._y import Y\nfrom .._c import C\nX = 1\n",
        "core/_y.py": "Y = 1\n",
        "server/__init__.py": "from ._s import S\n",
        "server/_s.py": "from ..core._x import X\nS = 1\n",
        "facade.py": "from ._a import A\nfrom .core import X\n",
    })
    assert layers.check_circles(src) == []


def test_rule7_a_folder_reached_from_outside_runs_its_init_which_can_close_a_circle(tmp_path: pathlib.Path) -> None:
    """No two files import each other, but `core/_x` importing `server._s` runs `server/__init__`, which
    imports `server._t`, which imports `core/_x`: Python would find `core/_x` half made (a parent edge)."""
    src = _src(tmp_path, {
        "core/__init__.py": "",
        "core/_x.py": "from ..server._s import S\nX = 1\n",
        "server/__init__.py": "from ._t import T\n",
        "server/_s.py": "S = 1\n",
        "server/_t.py": "from ..core._x import X\nT = 1\n",
    })
    problems = layers.check_circles(src)
    assert len(problems) == 1, problems
    assert "core._x, server, server._t" in problems[0]
    assert "_x.py:1 -> server (its __init__, importing server._s) [top]" in problems[0]


def test_rule7_a_known_circle_passes_and_one_that_is_gone_must_leave_the_list(tmp_path: pathlib.Path) -> None:
    src = _src(tmp_path, {"_a.py": "from ._b import B\nA = 1\n", "_b.py": "def f() -> None:\n    from ._a import A\n"})
    assert layers.check_circles(src, [frozenset({"_a", "_b"})]) == []
    problems = layers.check_circles(src, [frozenset({"_a", "_b"}), frozenset({"_b", "_c"})])
    assert problems == [f"{src}: workspace.KNOWN_CIRCLES lists _b, _c, which is no longer a circle: remove the entry"]
    # A known circle that grew is a new circle.
    (src / "mosaic" / "demo" / "_c.py").write_text("from ._a import A\n")
    (src / "mosaic" / "demo" / "_b.py").write_text("from ._c import A\nB = 1\n")
    problems = layers.check_circles(src, [frozenset({"_a", "_b"})])
    assert any("import circle between _a, _b, _c" in p for p in problems), problems


def test_rule7_every_known_circle_is_one_of_a_package_of_the_repository() -> None:
    assert set(workspace.KNOWN_CIRCLES) <= set(workspace.PACKAGES)


ROWS = {
    "engines": set(),  # the seam: nothing of the package
    "engines/pi": {"engines"},  # an adapter: the seam only
    "core": {"engines"},
    "server": {"core", "engines"},
    "": {"*"},  # top-level files: facades, the command
}


def _folders(tmp_path: pathlib.Path, extra: dict[str, str]) -> pathlib.Path:
    return _src(tmp_path, {
        "core/__init__.py": "from ._x import X\n",
        "core/_x.py": "from ..engines._seam import Seam\nX = 1\n",
        "engines/__init__.py": "from ._seam import Seam\n",
        "engines/_seam.py": "Seam = 1\n",
        "engines/pi/__init__.py": "from ._wire import Wire\n",
        "engines/pi/_wire.py": "from .._seam import Seam\nfrom mosaic.pi_rpc import LinkCore\nWire = 1\n",
        "server/__init__.py": "",
        "server/_s.py": "from ..core._x import X\nfrom ..engines import Seam\n",
        "lifecycle/_l.py": "L = 1\n",
        "_cli.py": "from .server._s import X\nfrom .lifecycle._l import L\n",
        **extra,
    })


def test_rule8_imports_along_the_rows_pass(tmp_path: pathlib.Path) -> None:
    src = _folders(tmp_path, {})
    rows = {**ROWS, "lifecycle": {"*"}}
    assert layers.check_folders(src, rows, {"engines/pi": {"pi-rpc"}, "core": set()}) == []


@pytest.mark.parametrize("extra,says", [
    ({"core/_y.py": "from ..lifecycle._l import L\n"}, "core imports lifecycle._l (lifecycle), which its row"),
    ({"core/_y.py": "from ..engines.pi._wire import Wire\n"}, "core imports engines.pi._wire (engines/pi)"),
    ({"engines/_seam.py": "from .pi import _wire\n"}, "engines imports engines.pi._wire (engines/pi)"),
    ({"core/_y.py": "def f() -> None:\n    from ..server import _s\n"}, "core imports server._s (server)"),
    ({"core/_y.py": "from mosaic.demo.lifecycle._l import L\n"}, "core imports lifecycle._l"),
    ({"core/_y.py": "from mosaic.chat_pages import Reader\n"}, "core imports mosaic.chat_pages, which "
                                                               "workspace.FOLDER_PACKAGES does not list for it"),
    ({"tools/_t.py": "T = 1\n"}, "folder tools has no row in workspace.FOLDERS"),
])
def test_rule8_an_import_across_the_rows_is_a_violation(tmp_path: pathlib.Path, extra: dict[str, str],
                                                        says: str) -> None:
    """Issue 31: the core is sans-io and sees only the engine seam, never an adapter, a shell or the lifecycle;
    the seam imports no adapter."""
    src = _folders(tmp_path, extra)
    problems = layers.check_folders(src, {**ROWS, "lifecycle": {"*"}}, {"core": {"pi-rpc"}})
    assert len(problems) == 1 and says in problems[0], problems


def test_rule8_a_known_exception_passes_until_it_no_longer_crosses(tmp_path: pathlib.Path) -> None:
    src = _folders(tmp_path, {"core/_y.py": "from .._refusal import R\n", "_refusal.py": "R = 1\n"})
    rows = {**ROWS, "lifecycle": {"*"}}
    why = "the refusal moves to controller-client (S14)"
    assert len(layers.check_folders(src, rows)) == 1
    assert layers.check_folders(src, rows, exceptions={("core._y", "_refusal"): why}) == []
    (src / "mosaic" / "demo" / "core" / "_y.py").write_text("Y = 1\n")
    problems = layers.check_folders(src, rows, exceptions={("core._y", "_refusal"): why})
    assert problems == [f"{src}: workspace.KNOWN_FOLDER_EXCEPTIONS lists core._y -> _refusal ({why}), which no "
                        f"longer crosses a row: remove the entry"], problems


def test_rule8_a_folder_below_a_row_is_that_rows_and_the_top_level_is_row_empty() -> None:
    rows = {"core": set(), "engines": set(), "": {"*"}}
    assert layers.folder_of("core.rooms._a", rows) == "core"
    assert layers.folder_of("_cli", rows) == ""
    assert layers.folder_of("tools._t", rows) is None
    assert layers.folder_of("_cli", {"core": set()}) is None


def test_rule8_the_tables_name_packages_and_rows_of_the_repository() -> None:
    """Every package in the folder tables is a package; each FOLDER_PACKAGES row and each exception's module
    is in a row of FOLDERS; the packages a row lists are packages its package may import."""
    assert set(workspace.FOLDERS) <= set(workspace.PACKAGES)
    for pkg, rows in workspace.FOLDER_PACKAGES.items():
        assert set(rows) <= set(workspace.FOLDERS[pkg]), pkg
        for row, allowed in rows.items():
            assert allowed <= workspace.MAY_IMPORT[pkg], (pkg, row)
    for pkg, crossings in workspace.KNOWN_FOLDER_EXCEPTIONS.items():
        for importer, _ in crossings:
            assert layers.folder_of(importer, workspace.FOLDERS[pkg]) is not None, (pkg, importer)


# Issue 31: the terminal's source reaches only the client package; its tests drive a real controller, which
# its `test` extra declares (workspace.MAY_IMPORT_IN_TESTS), and which its source may never import.
TERMINAL = workspace.package_dir("mediated-terminal")


def test_rule2_a_packages_tests_may_import_what_its_test_extra_declares_its_source_never() -> None:
    source = "from mosaic.controller.testing import fake_controller\n"
    assert "controller" in workspace.declared_test_deps("mediated-terminal")
    assert layers.check_imports("mediated-terminal", TERMINAL / "tests" / "test_x.py", source) == []
    assert layers.check_imports("mediated-terminal", TERMINAL / "bench" / "bench_x.py", source) == []
    problems = layers.check_imports("mediated-terminal", TERMINAL / "src" / "mosaic" / "mediated_terminal" / "_x.py",
                                    source)
    assert len(problems) == 1 and "does not declare mosaic-controller" in problems[0], problems
    client = "from mosaic.controller_client import ControllerClient\n"
    assert layers.check_imports("mediated-terminal", TERMINAL / "src" / "mosaic" / "mediated_terminal" / "_x.py",
                                client) == []


def test_the_closure_with_tests_holds_what_the_tests_declare() -> None:
    assert "controller" not in workspace.closure("mediated-terminal")
    assert workspace.closure("mediated-terminal")[-1] == "mediated-terminal"
    with_tests = workspace.closure("mediated-terminal", tests=True)
    assert {"controller", "controller-client", "safe-open"} <= set(with_tests)
    assert with_tests.index("controller-client") < with_tests.index("controller")  # bottom first
    assert workspace.closure("controller-client") == ["safe-open", "controller-client"]

@pytest.mark.parametrize("module,line,says", [
    ("core/_answers.py", "from ..engines.pi._wire import PI_RULES\n", "core imports engines.pi._wire (engines/pi)"),
    ("core/_events.py", "from ..lifecycle import _launching\n", "core imports lifecycle._launching (lifecycle)"),
    ("lifecycle/_launching.py", "from ..engines.pi._session import read_session\n",
     "lifecycle imports engines.pi._session (engines/pi)"),
    ("engines/_seam.py", "from ..core import _state\n", "engines imports core._state (core)"),
    ("engines/pi/_wire.py", "from ...core._state import Bounds\n", "engines/pi imports core._state (core)"),
    ("core/_drift.py", "from mosaic.pi_format import parse\n", "core imports mosaic.pi_format, which"),
])
def test_rule8_the_controllers_rows_keep_the_core_on_the_seam_and_the_lifecycle_off_the_adapter(
        tmp_path: pathlib.Path, module: str, line: str, says: str) -> None:
    """Issue 31 S11: the controller as it is passes its rows; one import of an adapter from the core, of the
    lifecycle from the core, of an adapter from the lifecycle, of the core from the seam or an adapter, or of
    Pi's file format from the core is one violation, named."""
    real = workspace.package_dir("controller") / "src"
    rows = workspace.FOLDERS["controller"]
    packages = workspace.FOLDER_PACKAGES["controller"]
    exceptions = workspace.KNOWN_FOLDER_EXCEPTIONS.get("controller", {})
    assert layers.check_folders(real, rows, packages, exceptions) == []
    copy = tmp_path / "src"
    shutil.copytree(real, copy, ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / "mosaic" / "controller" / module
    target.write_text(line + target.read_text(encoding="utf-8"), encoding="utf-8")
    problems = layers.check_folders(copy, rows, packages, exceptions)
    assert len(problems) == 1 and says in problems[0], problems
