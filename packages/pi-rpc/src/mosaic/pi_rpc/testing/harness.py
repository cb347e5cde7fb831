"""A fake engine in a scratch tree: the command line for any launcher, or run raw from a test.

:func:`prepare_fake_engine` makes the tree (``home/``, ``agent/`` with ``models.json``, ``proj/`` with the
session directory) and returns a :class:`FakeEngineSetup`: the sealed argv, exactly the environment
(``HOME``, ``PATH``, ``PI_CODING_AGENT_DIR``, plus :func:`child_env`), the cwd, and the test's end of the
control channel. A controller (or :meth:`mosaic.pi_rpc.EngineLink.spawn`) starts the process itself.
:class:`FakeRun` starts it raw, connects the :class:`FakeControl`, and offers raw writes and bounded waits
on stdout records; it kills the process by its pid in :meth:`FakeRun.close`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mosaic.pi_rpc._framing import encode_record
from mosaic.pi_rpc._seal import FIXTURE_EXTENSION_ENV, build_sealed_argv
from mosaic.pi_rpc.testing._fake_control import FakeControl
from mosaic.pi_rpc.testing.conformance import SCENARIOS_REF, EngineProcess, Script, parse_line, prepare_tree

__all__ = ["WAIT", "FakeEngineSetup", "FakeRun", "child_env", "fake_engine_command", "prepare_fake_engine"]

WAIT = 20.0  # seconds: a bound, never a synchronisation


def fake_engine_command(python: str | None = None) -> list[str]:
    """The engine command and pre-arguments that start the fake: ``[python, "-m", <module>]``. The sealed
    Pi argv follows; the fake's own ``--fake-control PATH`` may go before or after it."""
    return [python or sys.executable, "-m", "mosaic.pi_rpc.testing.fake_engine"]


def child_env() -> dict[str, str]:
    """Variables the fake's interpreter needs beyond the sealed environment: ``PYTHONPATH`` (made
    absolute) when this process has one, i.e. a source checkout; nothing when the package is installed."""
    if "PYTHONPATH" not in os.environ:
        return {}
    return {"PYTHONPATH": os.pathsep.join(os.path.abspath(p) for p in os.environ["PYTHONPATH"].split(os.pathsep))}


@dataclass
class FakeEngineSetup:
    """Everything needed to start one fake engine: ``argv`` (command, sealed Pi arguments, the fake's
    options), ``env`` (exactly this), ``cwd`` (the project), the ``session`` file, the ``agent`` dir, and
    ``ctl``, the test's end of the control channel (``None`` without one). Start the process, then
    ``ctl.accept(timeout)``; :meth:`close` closes the control socket (the process is the starter's)."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    session: Path
    agent: Path
    ctl: FakeControl | None

    def close(self) -> None:
        """Close the control socket and remove its file (idempotent)."""
        if self.ctl is not None:
            self.ctl.close()


def prepare_fake_engine(root: Path, *, seed: str | None = None, settings: Mapping[str, Any] | None = None,
                        scenarios: str = SCENARIOS_REF, control: bool = True, session: str = "s.jsonl",
                        fixture_extension: bool = False) -> FakeEngineSetup:
    """Make a scratch tree under ``root`` (which must not hold one yet) and the fake's command line.

    ``seed`` is the session file's content before start (``{cwd}`` replaced by the project path; ``None``:
    no file); ``settings`` the agent ``settings.json``; ``scenarios`` the model's table as ``MODULE:ATTR``
    (default: the conformance table, SLOW ticks 5 s apart). The model is ``fakeprov/fake-model-1``.
    ``fixture_extension``: the seat loads the fixture extension (the seal's fixture option: ``--extension``
    with its path, and ``FIXTURE_EXTENSION_ENV`` in the environment), so a ``DIALOG`` prompt raises a dialog
    (:mod:`mosaic.pi_rpc.testing.dialogs`). Raises ``FileExistsError`` when the tree exists.
    """
    script = Script("adhoc", (), session=session, seed=seed, settings=settings or {})
    agent, proj, session_path = prepare_tree(root, script, "http://127.0.0.1:9/v1")
    ctl = FakeControl() if control else None
    argv = [*fake_engine_command(), *build_sealed_argv(str(session_path), provider="fakeprov",
                                                       model="fake-model-1", fixture_extension=fixture_extension),
            "--fake-scenarios", scenarios]
    if ctl is not None:
        argv += ["--fake-control", ctl.path]
    env = {"HOME": str(root / "home"), "PATH": "/usr/bin:/bin", "PI_CODING_AGENT_DIR": str(agent),
           **(FIXTURE_EXTENSION_ENV if fixture_extension else {}), **child_env()}
    return FakeEngineSetup(argv, env, proj, session_path, agent, ctl)


class FakeRun:
    """One fake engine in ``root`` (a scratch tree), its stdout records, its control channel."""

    def __init__(self, root: Path, *, seed: str | None = None, settings: Mapping[str, Any] | None = None,
                 scenarios: str = SCENARIOS_REF, control: bool = True, session: str = "s.jsonl",
                 fixture_extension: bool = False) -> None:
        setup = prepare_fake_engine(root, seed=seed, settings=settings, scenarios=scenarios, control=control,
                                    session=session, fixture_extension=fixture_extension)
        self.setup = setup
        self.agent, self.proj, self.session = setup.agent, setup.cwd, setup.session
        self.ctl = setup.ctl
        self.cursor = 0
        try:
            self.proc = EngineProcess(setup.argv, setup.env, str(setup.cwd))
        except BaseException:
            setup.close()
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
            return [parse_line(line) for line in self.proc.lines]

    def wait(self, timeout: float = WAIT, **match: Any) -> dict[str, Any]:
        """The next record (after the cursor) whose keys equal ``match``; moves the cursor past it."""
        found: dict[str, Any] = {}

        def pred(n: int) -> bool:
            while self.cursor < n:
                rec = parse_line(self.proc.lines[self.cursor])
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
        self.setup.close()
        return rc


def __dir__() -> list[str]:
    return sorted(__all__)
