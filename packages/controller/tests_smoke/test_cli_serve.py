"""`mosaic-controller serve` as a user runs it (README "The command line"), on the real Pi 0.85.1 in the
loopback-only namespace: `mosaic-controller fixture DIR` makes the tree, `serve --scripted-model` on a
terminal of its own says the cohort route it chose and serves; a client's prompt gets the scripted model's
answer; then Ctrl-C, SIGTERM or a closed terminal force stops the engine with a proof (the claim released with
the proof's digest), exit 0, and everything serve made is gone. About 4 s per signal."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mosaic.cgroup_cohort.cgroupfs import find_cgroup2
from mosaic.controller.client import Admitted, ControllerClient
from mosaic.writer_claim import ClaimStore, SeatKey, SessionKey, State

WAIT = 60.0


class Terminal:
    """A command on a pseudo-terminal that is its controlling terminal (`setsid -c`), as a login shell's
    job; every read is bounded."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        master, slave = os.openpty()
        self.master: int | None = master
        self.proc = subprocess.Popen([shutil.which("setsid") or "setsid", "-c", *argv], stdin=slave, stdout=slave,
                                     stderr=slave, env=env, close_fds=True)
        os.close(slave)
        self.output = ""

    def read_until(self, pattern: str, timeout: float = WAIT) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while (found := re.search(pattern, self.output)) is None:
            assert self.master is not None
            left = deadline - time.monotonic()
            assert left > 0, f"no {pattern!r} within {timeout}s: {self.output}"
            if select.select([self.master], [], [], min(left, 0.5))[0]:
                try:
                    chunk = os.read(self.master, 65536)
                except OSError:
                    chunk = b""
                assert chunk, f"the terminal ended before {pattern!r}: {self.output}"
                self.output += chunk.decode(errors="replace").replace("\r\n", "\n")
        return found

    def end(self, how: str) -> int:
        assert self.master is not None
        if how == "SIGINT":
            os.write(self.master, b"\x03")
        elif how == "SIGHUP":
            os.close(self.master)  # the terminal closes: SIGHUP to its session leader
            self.master = None
        else:
            self.proc.send_signal(signal.SIGTERM)
        if self.master is not None:
            with contextlib.suppress(AssertionError):  # the exit status below says the rest
                self.read_until(r"force stop \S+: \w+.*\n|could not be force stopped.*\n", timeout=WAIT)
        return self.proc.wait(WAIT)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.master is not None:
            os.close(self.master)


@pytest.fixture
def world() -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.fail("serve needs root here (a direct cgroup under the cgroup2 root, the engine account)")
    path = Path(tempfile.mkdtemp(prefix="mosaic-serve-", dir="/tmp"))
    os.chmod(path, 0o755)
    yield path
    subprocess.run(["rm", "-rf", "--one-file-system", str(path)], check=False)


@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_serve_a_fixture_session_answer_a_prompt_and_stop_with_a_proof_on_a_signal(
        how: str, world: Path, pi_dir: Path) -> None:
    cli = [sys.executable, "-m", "mosaic.controller"]
    made = subprocess.run([*cli, "fixture", str(world / "fx")], capture_output=True, text=True, timeout=WAIT)
    assert made.returncode == 0, made
    session = world / "fx" / "proj" / ".pi" / "state" / "seat" / "sessions" / "s.jsonl"
    sock = world / "ctl" / "controller.sock"
    term = Terminal([*cli, "serve", "--fixture-root", str(world / "fx"), "--session", str(session),
                     "--socket", str(sock), "--pi-dir", str(pi_dir), "--scripted-model"],
                    env={**os.environ, "LC_ALL": "C.UTF-8"})
    try:
        route = term.read_until(r"cohort route: (.*)\n").group(1)
        assert route.startswith(("no systemd user manager: using a direct cgroup under ",
                                 "a systemd user manager answers: using a transient systemd scope"))
        assert "Failed to connect" not in term.output
        serving = term.read_until(r"serving \S+: claim (claim-[0-9a-f]{4}…) \(new\) in (\S+) ")
        assert serving.group(2).startswith("cohort-" + serving.group(1).removesuffix("…"))
        parent = route.rsplit(" ", 1)[-1] if "direct cgroup" in route else None

        async def prompt() -> str:
            client = await ControllerClient.connect(str(sock))
            try:
                await client.observe()
                await client.takeover()
                outcome = await client.prompt("Say hello", client_request_id="cli-1")
                assert isinstance(outcome, Admitted), outcome
                settled = await client.wait_settled("cli-1")
                return settled.label
            finally:
                await client.aclose()

        assert asyncio.run(prompt()) == "finished (completed)"
        code = term.end(how)
    finally:
        term.close()
    assert code == 0, term.output
    if how != "SIGHUP":
        assert re.search(r"force stop \S+: stopped \(the cohort proof says every process ended\)", term.output)
        assert "Traceback" not in term.output
    # The claim was released with the proof: both keys stopped, the pair free for the next serve.
    header = session.read_text().splitlines()[0]
    session_id = json.loads(header)["id"]
    with ClaimStore(str(world / "fx" / "claims")) as store:
        project = str(world / "fx" / "proj")
        pair = store.observe(SeatKey("seat", project, project), SessionKey("pi", session_id))
        assert pair.seat.revision is not None and pair.seat.revision.state is State.STOPPED
        assert pair.session.revision is not None and pair.session.revision.state is State.STOPPED
    assert not (world / "ctl").exists()
    if parent is not None:
        assert not os.path.exists(parent)
        assert parent.startswith(find_cgroup2().mount_point + "/mosaic-controller-")
