"""The mutation pass's pytest fork server (ci/pytest_forkserver.py): each run is a fork of a server that imported
pytest and Hypothesis once, and sees the tree as it is at that run (a module changed between two runs is imported
afresh, as in a new interpreter), with its own variables, its own output, no stdin of the server's, and a time
bound that kills the run with its process group."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

CI = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture
def server(tmp_path: pathlib.Path):  # type: ignore[no-untyped-def]
    env = {**os.environ, "PYTHONPATH": str(CI)}
    env.pop("MOSAIC_MUTANT_SIGNALS", None)
    proc = subprocess.Popen([sys.executable, "-m", "pytest_forkserver"], cwd=tmp_path, env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=1)
    yield proc
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.close()
    assert proc.wait(10) == 0  # it ends at the end of its requests
    proc.stdout.close()


def ask(server: subprocess.Popen[str], argv: list[str], env: dict[str, str] | None = None,
        timeout: float = 60) -> dict[str, object]:
    assert server.stdin is not None and server.stdout is not None
    server.stdin.write(json.dumps({"argv": argv, "env": env or {}, "timeout": timeout}) + "\n")
    server.stdin.flush()
    answer: dict[str, object] = json.loads(server.stdout.readline())
    return answer


def test_each_run_imports_the_tree_as_it_is_then(tmp_path: pathlib.Path, server: subprocess.Popen[str]) -> None:
    (tmp_path / "prod.py").write_text("VALUE = 1\n")
    (tmp_path / "test_p.py").write_text("import prod\ndef test_value():\n    assert prod.VALUE == 1\n")
    argv = ["-q", "-p", "no:cacheprovider", "--import-mode=importlib", str(tmp_path / "test_p.py")]
    first = ask(server, argv)
    assert first["returncode"] == 0 and "1 passed" in str(first["output"]), first
    (tmp_path / "prod.py").write_text("VALUE = 2  # the mutant\n")  # same second: checked by content
    second = ask(server, argv)
    assert second["returncode"] == 1 and "assert 2 == 1" in str(second["output"]), second
    (tmp_path / "prod.py").write_text("VALUE = 1\n")
    assert ask(server, argv)["returncode"] == 0


def test_a_run_has_its_own_variables_no_stdin_and_a_time_bound(tmp_path: pathlib.Path,
                                                               server: subprocess.Popen[str]) -> None:
    (tmp_path / "test_e.py").write_text(
        "import os, sys, time\n"
        "def test_env():\n    assert os.environ['MOSAIC_X'] == 'yes'\n"
        "def test_stdin():\n    assert sys.stdin.read() == '' and os.read(0, 10) == b''\n"
        "def test_forever():\n    time.sleep(3600)\n")
    base = ["-q", "-p", "no:cacheprovider", "--import-mode=importlib"]
    assert ask(server, [*base, f"{tmp_path / 'test_e.py'}::test_env"], {"MOSAIC_X": "yes"})["returncode"] == 0
    assert ask(server, [*base, f"{tmp_path / 'test_e.py'}::test_env"])["returncode"] == 1  # not kept from a run before
    assert ask(server, [*base, "-s", f"{tmp_path / 'test_e.py'}::test_stdin"])["returncode"] == 0
    timed = ask(server, [*base, f"{tmp_path / 'test_e.py'}::test_forever"], timeout=1.0)
    assert timed["returncode"] == -9
    assert ask(server, [*base, f"{tmp_path / 'test_e.py'}::test_env"], {"MOSAIC_X": "yes"})["returncode"] == 0
