"""An engine for K5's second half in the real-kernel suite (vendored beside the fake engine, run by
/usr/bin/python3 as the engine uid): pi-rpc's fake engine behind a relay whose stdout reaches the controller
late, so that a tool call the engine started before the stop reaches the controller only during the stop's
TERM grace, and is still open when the stop ends.

    python3 -m term_grace_relay MARKER COMMAND...

The relay runs COMMAND (the fake engine and the sealed arguments the controller appends) with its stdin and
stdout through pipes: stdin is passed on as it comes; stdout is passed on line by line until the first
`tool_execution_start`; from there every line (the engine's own bytes, in its order) is held, and MARKER is
created so that the test knows. SIGTERM (the stop's TERM phase reaches every member of the cohort: the
fake exits 143 on it) makes the relay write what it held, then stay until the kill phase ends it: the
controller reads the tool's start after the force stop began, and never its end.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading


def _is_tool_start(line: bytes) -> bool:
    try:
        return json.loads(line).get("type") == "tool_execution_start"
    except (ValueError, AttributeError):
        return False


def _write(data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(1, view):]


def main(argv: list[str]) -> int:
    marker, command = argv[0], argv[1:]
    held: list[bytes] = []
    state = {"holding": False, "released": False}

    def on_term(_sig: int, _frame: object) -> None:
        state["released"] = True
        _write(b"".join(held))
        held.clear()

    signal.signal(signal.SIGTERM, on_term)
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None
    into = child.stdin

    def pass_stdin() -> None:
        try:
            while chunk := os.read(0, 65536):
                into.write(chunk)
                into.flush()
        except OSError:  # the engine is gone
            pass
        finally:
            try:
                into.close()
            except OSError:
                pass

    threading.Thread(target=pass_stdin, daemon=True).start()
    for line in child.stdout:
        if not state["holding"] and not state["released"] and _is_tool_start(line):
            state["holding"] = True
            with open(marker, "w"):
                pass
        if state["holding"] and not state["released"]:
            held.append(line)
            if state["released"]:  # TERM came between the check and the append: write it now
                on_term(signal.SIGTERM, None)
        else:
            _write(line)
    code = child.wait()
    if state["released"]:
        while True:  # the kill phase ends it (SIGTERM is handled, never fatal, here)
            signal.pause()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
