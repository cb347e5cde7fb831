"""Helpers of the controller's real-kernel lifecycle tests (importable: conftest puts this directory on
sys.path). See conftest.py for what runs where."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mosaic.cgroup_cohort import CohortRef, force_stop, release_cohort
from mosaic.cgroup_cohort.testing import alive
from mosaic.controller.testing import FixtureTree, RawClient
from mosaic.safe_open import ProcessRef

HERE = Path(__file__).resolve().parent
CHILD = HERE / "controller_child.py"
WAIT = 60.0


@dataclass
class World(FixtureTree):
    """One fixture tree (`FixtureTree`: the claim root and the engine's home, agent dir and project with its
    session file, owned by the engine uid), a private socket directory per controller, and every controller
    process and cohort started in it."""

    lab: Any = None
    vendored: str = ""
    run_marker: str = ""
    procs: list[ControllerProc] = field(default_factory=list)
    refs: list[CohortRef] = field(default_factory=list)
    socket_dirs: list[str] = field(default_factory=list)

    def make(self, engine_uid: tuple[int, int] | None = None, *, model_url: str = "http://127.0.0.1:9/v1",
             seed: str | None = None, group_writable: bool = False) -> None:
        super().make(engine_uid or (self.lab.engine.uid, self.lab.engine.gid), model_url=model_url, seed=seed,
                     group_writable=group_writable)

    def args(self, **extra: Any) -> dict[str, Any]:
        socket_dir = tempfile.mkdtemp(prefix="mcx-", dir="/tmp")
        os.chmod(socket_dir, 0o700)
        self.socket_dirs.append(socket_dir)
        lab = self.lab
        return {
            "route": lab.path, "direct_parent": lab.direct_parent, "socket_dir": lab.socket_dir,
            "manager_prefix": lab.manager.prefix() if lab.manager is not None else None,
            "engine_uid": lab.engine.uid, "engine_gid": lab.engine.gid,
            "placement": self.placement(socket_dir),
            "engine_env": self.engine_env(PYTHONPATH=self.vendored, MOSAIC_COHORT_RUN=self.run_marker),
            "engine_command": ["/usr/bin/python3", "-m", "mosaic.pi_rpc.testing.fake_engine",
                               "--fake-scenarios", "cohort_scenarios:SCENARIOS"],
            "evidence": str(self.root / f"evidence-{len(self.procs)}.jsonl"),
            **extra,
        }

    def start(self, **extra: Any) -> ControllerProc:
        proc = self.spawn(**extra)
        proc.wait_first()
        self.note(proc)
        return proc

    def spawn(self, **extra: Any) -> ControllerProc:
        """A controller process started, its first line not read yet (two launchers racing: K17)."""
        proc = ControllerProc(self.args(**extra))
        self.procs.append(proc)
        return proc

    def note(self, proc: ControllerProc) -> None:
        if proc.ref is not None:
            self.refs.append(proc.ref)

    def cleanup(self) -> list[str]:
        problems: list[str] = []
        for proc in self.procs:
            proc.kill()
        for ref in self.refs:
            try:
                if alive(ref.engine) or (ref.shim is not None and alive(ref.shim)):
                    force_stop(ref, self.lab.request(ref), manager=self.lab.user_manager(), grace=0.2)
                release_cohort(ref, force=True)
            except Exception as exc:  # noqa: BLE001 - keep cleaning the rest
                problems.append(f"cohort {ref.unit}: {exc!r}")
        for d in self.socket_dirs:
            shutil.rmtree(d, ignore_errors=True)
        subprocess.run(["rm", "-rf", "--one-file-system", str(self.root)], check=False)
        return problems


class ControllerProc:
    """A controller_child.py process: what it printed (`ready`, `refused` or `dying`), its pid."""

    def __init__(self, args: dict[str, Any]) -> None:
        self.args = args
        env = {**os.environ, "MOSAIC_COHORT_RUN": args["engine_env"]["MOSAIC_COHORT_RUN"]}
        self.proc = subprocess.Popen([sys.executable, str(CHILD), json.dumps(args)], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env)
        self.lines: list[dict[str, Any]] = []
        self.first: dict[str, Any] = {}
        self.ref: CohortRef | None = None

    def wait_first(self) -> dict[str, Any]:
        self.first = self.next_line()
        for line in self.lines:
            if line.get("ref"):
                self.ref = CohortRef.from_dict(line["ref"])
        return self.first

    def next_line(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        buf = b""
        deadline = time.monotonic() + WAIT
        while not buf.endswith(b"\n"):
            left = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(0.0, left))
            if not ready:
                self.proc.send_signal(signal.SIGUSR1)  # the child dumps its threads (faulthandler)
                time.sleep(0.5)
                self.proc.kill()
                err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                raise TimeoutError(f"the controller printed nothing within {WAIT}s:\n{err[-6000:]}")
            chunk = os.read(fd, 1)
            if not chunk:
                err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                # Not the test's verdict: the process ended (a crash, say); the test judges what it left.
                raise ChildProcessError(f"the controller exited ({self.proc.wait()}): {buf!r}\n{err[-3000:]}")
            buf += chunk
        line: dict[str, Any] = json.loads(buf)
        self.lines.append(line)
        return line

    @property
    def socket(self) -> str:
        return str(self.first["ready"])

    def died(self) -> int:
        """Wait for a controller that SIGKILLed itself (or exited); its status."""
        return self.proc.wait(timeout=WAIT)

    def terminate(self) -> str:
        """SIGTERM (the controller stops serving, releases nothing) and wait; everything it wrote to stderr."""
        if self.proc.poll() is None:
            self.proc.terminate()
        _out, err = self.proc.communicate(timeout=WAIT)
        return err.decode(errors="replace")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=WAIT)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()




async def client(proc: ControllerProc) -> RawClient:
    return await RawClient.connect(proc.socket)


def dead(refs: list[ProcessRef]) -> bool:
    return not any(alive(r) for r in refs)
