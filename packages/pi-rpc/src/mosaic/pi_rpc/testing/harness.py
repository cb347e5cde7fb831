"""A fake engine in a scratch tree, driven raw from a test, with its control channel.

:class:`FakeRun` starts ``python -m mosaic.pi_rpc.testing.fake_engine`` sealed (exactly ``HOME``, ``PATH``,
``PI_CODING_AGENT_DIR``, plus :func:`child_env`), connects its :class:`FakeControl`, and offers raw
writes and bounded waits on stdout records. It kills the process by its pid in :meth:`FakeRun.close`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mosaic.pi_rpc._framing import encode_record
from mosaic.pi_rpc._seal import build_sealed_argv
from mosaic.pi_rpc.testing._fake_control import FakeControl
from mosaic.pi_rpc.testing.conformance import SCENARIOS_REF, EngineProcess, Script, prepare_tree

__all__ = ["WAIT", "FakeRun", "child_env", "fake_engine_command"]

WAIT = 20.0  # seconds: a bound, never a synchronisation


def fake_engine_command(python: str | None = None) -> list[str]:
    """The engine command and pre-arguments that start the fake: ``[python, "-m", <module>]``. The sealed
    Pi argv follows; the fake's own ``--fake-control PATH`` may go before or after it."""
    import sys

    return [python or sys.executable, "-m", "mosaic.pi_rpc.testing.fake_engine"]


def child_env() -> dict[str, str]:
    """Variables the fake's interpreter needs beyond the sealed environment: ``PYTHONPATH`` (made
    absolute) when this process has one, i.e. a source checkout; nothing when the package is installed."""
    if "PYTHONPATH" not in os.environ:
        return {}
    return {"PYTHONPATH": os.pathsep.join(os.path.abspath(p) for p in os.environ["PYTHONPATH"].split(os.pathsep))}


class FakeRun:
    """One fake engine in ``root`` (a scratch tree), its stdout records, its control channel."""

    def __init__(self, root: Path, *, seed: str | None = None, settings: Mapping[str, Any] | None = None,
                 scenarios: str = SCENARIOS_REF, control: bool = True, session: str = "s.jsonl") -> None:
        script = Script("adhoc", (), session=session, seed=seed, settings=settings or {})
        self.agent, self.proj, self.session = prepare_tree(root, script, "http://127.0.0.1:9/v1")
        self.ctl = FakeControl() if control else None
        argv = [*fake_engine_command(), *build_sealed_argv(str(self.session), provider="fakeprov",
                                                           model="fake-model-1"),
                "--fake-scenarios", scenarios]
        if self.ctl is not None:
            argv += ["--fake-control", self.ctl.path]
        env = {"HOME": str(root / "home"), "PATH": "/usr/bin:/bin", "PI_CODING_AGENT_DIR": str(self.agent),
               **child_env()}
        self.cursor = 0
        try:
            self.proc = EngineProcess(argv, env, str(self.proj))
        except BaseException:
            if self.ctl is not None:
                self.ctl.close()
            raise
        if self.ctl is not None:
            try:
                self.ctl.accept(WAIT)
            except BaseException:
                self.close()
                raise

    def send(self, *records: Mapping[str, Any] | bytes) -> None:
        self.proc.write(b"".join(r if isinstance(r, bytes) else encode_record(r) for r in records))

    @property
    def records(self) -> list[dict[str, Any]]:
        with self.proc.cond:
            return [json.loads(line) for line in self.proc.lines]

    def wait(self, timeout: float = WAIT, **match: Any) -> dict[str, Any]:
        """The next record (after the cursor) whose keys equal ``match``; moves the cursor past it."""
        found: dict[str, Any] = {}

        def pred(n: int) -> bool:
            while self.cursor < n:
                rec = json.loads(self.proc.lines[self.cursor])
                self.cursor += 1
                if all((rec.get("assistantMessageEvent") or {}).get("delta") == v if k == "delta"
                       else rec.get(k) == v for k, v in match.items()):
                    found.update(rec)
                    return True
            return False

        self.proc.wait_lines(pred, timeout)
        return found

    def ask(self, cid: str, ctype: str, **fields: Any) -> dict[str, Any]:
        self.send({"id": cid, "type": ctype, **fields})
        return self.wait(id=cid, type="response")

    def types(self, start: int = 0) -> list[str]:
        return [r.get("id") or r["type"] for r in self.records[start:]]

    def close(self) -> int | None:
        rc = self.proc.stop()
        if self.ctl is not None:
            self.ctl.close()
        return rc


