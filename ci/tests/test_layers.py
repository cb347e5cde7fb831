"""ci/layers.py holds the layers contract and the public-surface rule (issue 9): shown on made-up files."""

from __future__ import annotations

import pathlib
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
