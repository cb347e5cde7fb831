"""A pytest plugin the mutation pass loads (`-p mutant_signal`): it records how each test failed, so a
mutant counts as killed only when its named test failed on what the test itself asserts.

For every failed report it writes one JSON line to the file named by ``MOSAIC_MUTANT_SIGNALS``:

- ``nodeid``, ``when`` (setup, call, teardown);
- ``type``: the qualified name of the exception that failed the test (``builtins.AssertionError``,
  ``builtins.TimeoutError``, ...);
- ``assertion``: whether it is what a failed assertion raises: an ``AssertionError`` (or a subclass), or
  pytest's own failure (``pytest.fail``, a ``pytest.raises`` that saw nothing: ``pytest.fail.Exception``,
  whose ``__module__`` pytest sets to "builtins");
- ``raised_at``: ``file:line function`` of the frame that raised it: the innermost frame of the traceback
  that is not pytest's own (``pytest.fail`` and ``pytest.raises`` raise from inside pytest on behalf of
  their caller);
- ``in_suite``: whether that frame's file is in the suite's directory (the run's rootdir: ci/mutants.py
  passes ``--rootdir packages/<package>/<suite>``): a test, or a helper module of the suite. An ``assert``
  in the product, or in a package's ``testing`` module, is not;
- ``timeout``: whether the failure is a wait that ran out: a ``TimeoutError`` (asyncio's is the same
  class), a ``subprocess.TimeoutExpired``, or an exception raised while one was being handled (a harness
  wait that catches its timeout and raises ``AssertionError`` instead: ``raise AssertionError(...) from
  None`` still records the timeout as its ``__context__``).

ci/mutants.py reads it (`classify`). Beside it, in the same file's name plus ``.running``, it keeps the nodeid
of the test under way (written as each test starts), so a run killed at its bound names the test it hung in;
and with ``MOSAIC_MUTANT_BOUND`` (the run's bound in seconds) every thread's stack is written to the name plus
``.stacks`` five seconds before it (`faulthandler`), so such a run also shows where it waited.

In a mutated run (``MOSAIC_MUTANT_SIGNALS`` set) Hypothesis does not shrink or explain a failing example
(`pytest_configure` loads a profile without those phases before any test module is imported): a mutant is
killed by the first example that fails, and shrinking it to the smallest took up to 15 s a mutant, which
tells the pass nothing. A property test's own ``@settings`` that names its ``phases`` keeps them.
"""

from __future__ import annotations

import faulthandler
import json
import os
import pathlib
import subprocess
from typing import Any

import _pytest
import pluggy
import pytest

_OWN = tuple(str(pathlib.Path(m.__file__).resolve().parent) + os.sep
             for m in (_pytest, pluggy) if m.__file__ is not None)
_TIMEOUTS = (TimeoutError, subprocess.TimeoutExpired)


def _qualname(exc_type: type[BaseException]) -> str:
    return f"{exc_type.__module__}.{exc_type.__qualname__}"


def raising_frame(excinfo: pytest.ExceptionInfo[BaseException]) -> tuple[pathlib.Path, int, str] | None:
    """(file, line, function) of the innermost frame of the traceback that is not pytest's or pluggy's."""
    for entry in reversed(excinfo.traceback):
        path = pathlib.Path(entry.path).resolve() if str(entry.path) else None
        if path is None or str(path).startswith(_OWN):
            continue
        return path, entry.lineno + 1, entry.name
    return None


def was_a_timeout(exc: BaseException) -> bool:
    """Whether `exc`, or an exception it was raised while handling (its context or cause, transitively),
    is a wait that ran out."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, _TIMEOUTS):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


MUTANTS_PROFILE = "mosaic-mutants"


_STACKS: list[Any] = []  # the open .stacks file while its dump is armed


def pytest_configure(config: pytest.Config) -> None:
    path = os.environ.get("MOSAIC_MUTANT_SIGNALS")
    if not path:
        return
    bound = os.environ.get("MOSAIC_MUTANT_BOUND")
    if bound:
        out = open(path + ".stacks", "w", encoding="utf-8")  # noqa: SIM115 - closed at unconfigure
        _STACKS.append(out)
        faulthandler.dump_traceback_later(max(1.0, float(bound) - 5.0), exit=False, file=out)
    try:
        from hypothesis import Phase, settings
    except ImportError:  # a suite without Hypothesis
        return
    settings.register_profile(MUTANTS_PROFILE, phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.target))
    settings.load_profile(MUTANTS_PROFILE)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _STACKS:
        faulthandler.cancel_dump_traceback_later()
        _STACKS.pop().close()


def pytest_runtest_logstart(nodeid: str, location: tuple[str, int | None, str]) -> None:
    path = os.environ.get("MOSAIC_MUTANT_SIGNALS")
    if path:
        pathlib.Path(path + ".running").write_text(nodeid, encoding="utf-8")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Any:
    outcome = yield
    report = outcome.get_result()
    path = os.environ.get("MOSAIC_MUTANT_SIGNALS")
    if not path or not report.failed:
        return
    excinfo = call.excinfo
    row: dict[str, Any] = {"nodeid": item.nodeid, "when": report.when, "type": "unknown", "assertion": False,
                           "raised_at": "", "in_suite": False, "timeout": False}
    if excinfo is not None:
        row["type"] = _qualname(excinfo.type)
        row["assertion"] = issubclass(excinfo.type, (AssertionError, pytest.fail.Exception))
        row["timeout"] = was_a_timeout(excinfo.value)
        frame = raising_frame(excinfo)
        if frame is not None:
            file, line, name = frame
            row["raised_at"] = f"{file}:{line} {name}"
            row["in_suite"] = file.is_relative_to(item.config.rootpath.resolve())
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(row) + "\n")
