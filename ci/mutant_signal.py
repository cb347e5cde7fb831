"""A pytest plugin the mutation pass loads (`-p mutant_signal`): it records how each test failed, so a
mutant counts as killed only when its named test failed on what the test asserts.

For every failed report it writes one JSON line to the file named by ``MOSAIC_MUTANT_SIGNALS``:
``{"nodeid", "when", "type", "assertion"}``: ``type`` is the qualified name of the exception that failed
the test (``builtins.AssertionError``, ``builtins.TimeoutError``, ...), and ``assertion`` says whether it is
what a failed assertion raises: an ``AssertionError`` (or a subclass), or pytest's own failure (``pytest.fail``,
a ``pytest.raises`` that saw nothing: ``pytest.fail.Exception``, whose ``__module__`` pytest sets to
"builtins"). ci/mutants.py reads it (`classify`).
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest


def _qualname(exc_type: type[BaseException]) -> str:
    return f"{exc_type.__module__}.{exc_type.__qualname__}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Any:
    outcome = yield
    report = outcome.get_result()
    path = os.environ.get("MOSAIC_MUTANT_SIGNALS")
    if not path or not report.failed:
        return
    excinfo = call.excinfo
    kind = _qualname(excinfo.type) if excinfo is not None else "unknown"
    assertion = excinfo is not None and issubclass(excinfo.type, (AssertionError, pytest.fail.Exception))
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps({"nodeid": item.nodeid, "when": report.when, "type": kind,
                              "assertion": assertion}) + "\n")
