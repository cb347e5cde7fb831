"""The mutation pass counts a kill only when a named test failed on an assertion (or the mutant's declared
signal): a mutant that crashes the code before the test's assertion runs is "crashed", not killed."""

from __future__ import annotations

import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import mutants  # noqa: E402


def _signals(tmp_path: pathlib.Path, *rows: dict[str, str]) -> pathlib.Path:
    path = tmp_path / "signals.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_an_assertion_in_the_call_phase_is_a_kill(tmp_path: pathlib.Path) -> None:
    f = _signals(tmp_path, {"nodeid": "t::a", "when": "call", "type": "builtins.AssertionError",
                                  "assertion": True})
    assert mutants.classify(f, ()) == (True, "")


def test_pytest_raises_that_saw_nothing_is_a_kill(tmp_path: pathlib.Path) -> None:
    f = _signals(tmp_path, {"nodeid": "t::a", "when": "call", "type": "builtins.Failed",
                                  "assertion": True})
    assert mutants.classify(f, ())[0] is True


def test_another_exception_is_crashed_not_killed(tmp_path: pathlib.Path) -> None:
    f = _signals(tmp_path, {"nodeid": "t::a", "when": "call", "type": "mosaic.pi_rpc._link.LinkPoisoned",
                                  "assertion": False})
    killed, detail = mutants.classify(f, ())
    assert killed is False and "LinkPoisoned" in detail


def test_a_declared_signal_is_a_kill(tmp_path: pathlib.Path) -> None:
    f = _signals(tmp_path, {"nodeid": "t::a", "when": "call", "type": "builtins.TimeoutError",
                                  "assertion": False})
    assert mutants.classify(f, ("builtins.TimeoutError",))[0] is True
    assert mutants.classify(f, ())[0] is False


def test_a_failure_in_setup_is_not_a_kill(tmp_path: pathlib.Path) -> None:
    f = _signals(tmp_path, {"nodeid": "t::a", "when": "setup", "type": "builtins.AssertionError",
                                  "assertion": True})
    assert mutants.classify(f, ())[0] is False


def test_no_recorded_failure_is_not_a_kill(tmp_path: pathlib.Path) -> None:
    assert mutants.classify(tmp_path / "absent.jsonl", ()) == (False, "pytest failed but recorded no failed test")


def test_the_signal_header_is_parsed(tmp_path: pathlib.Path) -> None:
    p = tmp_path / "m.patch"
    p.write_text("# mutant: x\n# brief: -\n# package: pi-rpc\n# killed-by: tests/test_a.py::t\n"
                 "# signal: builtins.TimeoutError\ndiff --git a/x b/x\n")
    assert mutants.parse(p).signals == ("builtins.TimeoutError",)


def test_the_plugin_marks_assert_and_pytest_raises_as_assertions_and_nothing_else(tmp_path: pathlib.Path) -> None:
    """The plugin itself, in a pytest run of three failing tests."""
    import subprocess

    (tmp_path / "test_x.py").write_text(
        "import pytest\n"
        "def test_assert():\n    assert 1 == 2\n"
        "def test_raises():\n    with pytest.raises(KeyError):\n        pass\n"
        "def test_crash():\n    raise TimeoutError('no')\n")
    out = tmp_path / "signals.jsonl"
    env = {**__import__("os").environ, "MOSAIC_MUTANT_SIGNALS": str(out),
           "PYTHONPATH": str(pathlib.Path(__file__).resolve().parents[1])}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "mutant_signal",
                           str(tmp_path / "test_x.py")], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rows = {r["nodeid"].split("::")[-1]: r for r in map(json.loads, out.read_text().splitlines())}
    assert rows["test_assert"]["assertion"] is True and rows["test_raises"]["assertion"] is True
    assert rows["test_crash"]["assertion"] is False and rows["test_crash"]["type"] == "builtins.TimeoutError"


def test_jobs_are_read_from_the_arguments_and_the_rest_are_mutant_names() -> None:
    assert mutants._jobs(["--jobs", "3", "a-mutant"]) == (3, ["a-mutant"])
    assert mutants._jobs(["--jobs=1", "b"]) == (1, ["b"])
    assert mutants._jobs(["--jobs", "0"]) == (1, [])  # at least one copy
    default, rest = mutants._jobs(["c"])
    assert 1 <= default <= 2 and rest == ["c"]


def test_the_cohort_suites_mutants_run_one_at_a_time() -> None:
    assert "tests_cohort" in mutants.SERIAL_SUITES
