"""A pytest fork server for the mutation pass: one per scratch copy and package venv, started by ci/mutants.py
as `python -m pytest_forkserver` from that venv, in the package's directory, with the environment every run of
it shares (`MOSAIC_REPO`, `PYTHONPATH` naming ci/).

It imports pytest, pytest's built-in plugins and Hypothesis once (about 0.6 s a run, most of a short killer's
time: 270 runs in a pass), then reads requests from stdin, one JSON object a line:

    {"argv": [...pytest's arguments...], "env": {...variables set for this run...}, "timeout": seconds}

and for each forks a child that sets those variables, sends its output to a file, runs `pytest.main(argv)`
and exits with its code as `python -m pytest` would (atexit handlers run, stdio flushed). No module of the tree
under test is imported before the fork: each child imports the package (patched or not) afresh, exactly as a
new interpreter does. The child leads a process group of its own; a run still going after `timeout` is
killed with its group (exit code -9). The answer, one JSON line on stdout: {"returncode": N, "output": "..."}.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import os
import signal
import sys
import tempfile
import time
from typing import IO, Any

TIMED_OUT = -9


def _preload() -> Any:
    import pytest
    from _pytest.config import default_plugins

    for name in default_plugins:
        with contextlib.suppress(ImportError):
            importlib.import_module("_pytest." + name)
    with contextlib.suppress(ImportError):
        import hypothesis  # noqa: F401
    return pytest


def _child(pytest: Any, argv: list[str], env: dict[str, str], out_fd: int) -> None:
    """In the forked child: never returns."""
    code = 1
    try:
        os.setpgid(0, 0)
        os.environ.update(env)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)  # the server's request pipe is no test's (nor its subprocesses') stdin
        os.close(null)
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        os.close(out_fd)
        code = int(pytest.main(argv))
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:  # noqa: BLE001 - reported in the output, as an interpreter would
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(BaseException):
            atexit._run_exitfuncs()
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _wait(pid: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() >= deadline:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return TIMED_OUT
        time.sleep(0.01)


def serve(requests: IO[str], answers: IO[str]) -> None:
    pytest = _preload()
    for line in requests:
        request = json.loads(line)
        with tempfile.TemporaryFile() as out:
            answers.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _child(pytest, list(request["argv"]), dict(request.get("env", {})), out.fileno())
            code = _wait(pid, float(request.get("timeout", 600)))
            out.seek(0)
            output = out.read().decode("utf-8", "replace")
        answers.write(json.dumps({"returncode": code, "output": output}) + "\n")
        answers.flush()


if __name__ == "__main__":
    # Requests come on fd 0 and answers go on fd 1; the children write only to their own output file.
    serve(sys.stdin, sys.stdout)
