"""`mosaic-controller serve` as a user runs it (README "The command line"), on the real Pi 0.85.1 in the
loopback-only namespace: `mosaic-controller fixture DIR` makes the tree, `serve --scripted-model` on a
terminal of its own says the cohort route it chose and serves; a client's prompt gets the scripted model's
answer; then Ctrl-C, SIGTERM or a closed terminal force stops the engine with a proof (the claim released with
the proof's digest), exit 0, and everything serve made is gone. About 4 s per signal.

Issue 29: an engine a client already force stopped with a proof is not stopped again (one line, exit 0, no
traceback); a client's recover makes serve print the exact command that launches from the record, a plain
serve on the reserved session refuses in one line naming it, and that command serves the recovered
conversation, whose prompt is answered: force stop, recover, launch, prompt, all from the commands."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import select
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mosaic.cgroup_cohort.cgroupfs import find_cgroup2
from mosaic.controller.client import Admitted, ControllerClient
from mosaic.controller.lifecycle import record_state
from mosaic.controller.plain import shorten
from mosaic.pi_rpc.testing.dialogs import dialog_prompt
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
                self.read_until(r"force stop \S+: \w+.*\n|could not be force stopped.*\n|already proven stopped.*\n",
                                timeout=WAIT)
        code = self.proc.wait(WAIT)
        self.drain()
        return code

    def drain(self, timeout: float = 5.0) -> None:
        """Read what the ended command still left in the terminal, up to its end (EIO), bounded."""
        deadline = time.monotonic() + timeout
        while self.master is not None and time.monotonic() < deadline:
            if not select.select([self.master], [], [], 0.2)[0]:
                continue
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.output += chunk.decode(errors="replace").replace("\r\n", "\n")

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


def test_serve_with_an_engine_uid_range_runs_the_engine_as_its_own_uid_and_stops_it_with_a_proof(
        world: Path, pi_dir: Path) -> None:
    """`serve --engine-uids FIRST:COUNT --engine-uid-state DIR` (issue 28, an engine uid per execution, from
    the command line): the engine runs as a uid from the range, the binding record and the claim name it,
    the serving line says it, a prompt is answered (Pi's state handed to that uid), and Ctrl-C force stops it
    with a proof."""
    cli = [sys.executable, "-m", "mosaic.controller"]
    made = subprocess.run([*cli, "fixture", str(world / "fx")], capture_output=True, text=True, timeout=WAIT)
    assert made.returncode == 0, made
    first, count = 64100, 8
    state = world / "uids"
    term = Terminal([*serve_line(world, pi_dir), "--engine-uids", f"{first}:{count}", "--engine-uid-state",
                     str(state)], env={**os.environ, "LC_ALL": "C.UTF-8"})
    sock = world / "ctl" / "controller.sock"
    try:
        uid = int(term.read_until(r"serving \S+: claim \S+ \(new\) in \S+ \(engine pid \d+, uid (\d+)\)").group(1))
        assert first <= uid < first + count

        async def prompt() -> tuple[dict[str, object], str]:
            client = await ControllerClient.connect(str(sock))
            try:
                observed = await client.observe()
                assert not observed.binding.get("fences"), json.dumps(observed.binding)
                await client.takeover()
                outcome = await client.prompt("Say hello", client_request_id="uid-1")
                assert isinstance(outcome, Admitted), outcome
                return dict(observed.binding), (await client.wait_settled("uid-1")).label
            finally:
                await client.aclose()

        binding, label = asyncio.run(prompt())
        assert binding["engineUid"] == uid and label == "finished (completed)"
        code = term.end("SIGINT")
    finally:
        term.close()
    assert code == 0, term.output
    assert re.search(r"force stop \S+: stopped \(the cohort proof says every process ended\)", term.output)
    assert "Traceback" not in term.output
    assert pair_head(world) == (State.STOPPED, State.STOPPED)
    assert stat.S_IMODE(os.stat(state).st_mode) == 0o700  # the allocator's leases are kept, private


def serve_line(world: Path, pi_dir: Path) -> list[str]:
    session = world / "fx" / "proj" / ".pi" / "state" / "seat" / "sessions" / "s.jsonl"
    return [sys.executable, "-m", "mosaic.controller", "serve", "--fixture-root", str(world / "fx"), "--session",
            str(session), "--socket", str(world / "ctl" / "controller.sock"), "--pi-dir", str(pi_dir),
            "--scripted-model"]


def pair_head(world: Path) -> tuple[State, State]:
    session = world / "fx" / "proj" / ".pi" / "state" / "seat" / "sessions" / "s.jsonl"
    session_id = json.loads(session.read_text().splitlines()[0])["id"]
    project = str(world / "fx" / "proj")
    with ClaimStore(str(world / "fx" / "claims")) as store:
        pair = store.observe(SeatKey("seat", project, project), SessionKey("pi", session_id))
    assert pair.seat.revision is not None and pair.session.revision is not None
    return pair.seat.revision.state, pair.session.revision.state


async def force_stop_as_a_client(sock: Path, *, recover: bool = False) -> dict[str, object]:
    """What the terminal's Ctrl-T, Ctrl-K y (and Ctrl-R y) do: take control, force stop with a confirmation,
    wait for its end (and recover). Returns the stop's end and the recover's reply."""
    client = await ControllerClient.connect(str(sock))
    try:
        await client.observe()
        await client.takeover()
        started = await client.force_stop_confirmed()
        async with asyncio.timeout(WAIT):
            done = await client.wait_stop(str(started.stop["stop"]))
        out: dict[str, object] = {"stop": dict(done)}
        if recover:
            issued = await client.issue_confirmation("recover")
            await client.answer_confirmation(str(issued["confirmation"]), "confirm")
            out["recovered"] = dict(await client.recover(str(issued["confirmation"])))
        return out
    finally:
        await client.aclose()


async def prompt_as_a_client(sock: Path, text: str) -> str:
    client = await ControllerClient.connect(str(sock))
    try:
        await client.observe()
        await client.takeover()
        outcome = await client.prompt(text, client_request_id="cli-again")
        assert isinstance(outcome, Admitted), outcome
        async with asyncio.timeout(WAIT):
            return (await client.wait_settled("cli-again")).label
    finally:
        await client.aclose()


def test_serve_after_a_clients_proven_force_stop_says_so_in_one_line_and_exits_0(world: Path, pi_dir: Path) -> None:
    made = subprocess.run([sys.executable, "-m", "mosaic.controller", "fixture", str(world / "fx")],
                          capture_output=True, text=True, timeout=WAIT)
    assert made.returncode == 0, made
    term = Terminal(serve_line(world, pi_dir), env={**os.environ, "LC_ALL": "C.UTF-8"})
    try:
        term.read_until(r"serving \S+: claim ")
        done = asyncio.run(force_stop_as_a_client(world / "ctl" / "controller.sock"))
        assert done["stop"]["state"] == "stopped", done  # type: ignore[index]
        code = term.end("SIGINT")
    finally:
        term.close()
    assert code == 0, term.output
    said = [x for x in term.output.splitlines() if "already proven stopped" in x]
    assert len(said) == 1 and re.fullmatch(
        r"the engine was already proven stopped \(force stop s\d+; proof sha256:[0-9a-f]{8}…\): every process it "
        r"started has ended, nothing is left to stop", said[0]), term.output
    for wrong in ("Traceback", "lifecycle step", "could not be force stopped", "effect "):
        assert wrong not in term.output, term.output
    assert pair_head(world) == (State.STOPPED, State.STOPPED)  # released with the client's proof
    assert not (world / "ctl").exists()


def test_recover_then_serve_from_its_record_and_prompt_again_all_from_the_commands(world: Path, pi_dir: Path) -> None:
    made = subprocess.run([sys.executable, "-m", "mosaic.controller", "fixture", str(world / "fx")],
                          capture_output=True, text=True, timeout=WAIT)
    assert made.returncode == 0, made
    env = {**os.environ, "LC_ALL": "C.UTF-8"}
    sock = world / "ctl" / "controller.sock"
    first = Terminal(serve_line(world, pi_dir), env=env)
    try:
        first.read_until(r"serving \S+: claim ")
        done = asyncio.run(force_stop_as_a_client(sock, recover=True))
        recovered = done["recovered"]
        assert isinstance(recovered, dict)
        record = recovered["eligibility"]["id"]
        # serve says the command, whole, on a line of its own; the recover's reply carries it to the client
        command = first.read_until(r"\n  (.*--eligibility " + record + r")\n").group(1)
        assert recovered["next"] == f"stop this controller's serve (Ctrl-C there), then run: {command}"
        argv = shlex.split(command)
        assert argv[argv.index("--socket") + 1] == str(sock) and "--scripted-model" in argv
        code = first.end("SIGINT")
    finally:
        first.close()
    assert code == 0, first.output
    assert "already proven stopped" in first.output and "Traceback" not in first.output
    assert first.output.rstrip().endswith(f"the recovery waits for its launch: {command}"), first.output
    # The same serve line without the record: refused in one line that names the command (and the way out).
    again = subprocess.run(serve_line(world, pi_dir), capture_output=True, text=True, timeout=WAIT, env=env)
    assert again.returncode == 1, again
    lines = again.stderr.strip().splitlines()
    assert lines[-1] == (f"mosaic-controller: refused: already-active: the session is reserved for eligibility "
                         f"{shorten(record)} "
                         f"(a client's recover issued it); launch from it with: {command}  (or give it up: "
                         f"mosaic-claims release-reservation --claim-root {world / 'fx' / 'claims'} {record})"), again
    assert "Traceback" not in again.stderr + again.stdout
    assert record_state(str(world / "fx" / "claims"), record) == "unused"  # nothing was taken
    # The command as printed: the recovered conversation is served, and a prompt is answered.
    second = Terminal(argv, env=env)
    try:
        second.read_until(r"serving \S+: claim \S+ \(recovered\) in ")
        assert asyncio.run(prompt_as_a_client(sock, "Say hello again")) == "finished (completed)"
        code = second.end("SIGINT")
    finally:
        second.close()
    assert code == 0, second.output
    assert re.search(r"force stop \S+: stopped \(the cohort proof says every process ended\)", second.output)
    assert "Traceback" not in second.output
    assert record_state(str(world / "fx" / "claims"), record) == "used"
    assert pair_head(world) == (State.STOPPED, State.STOPPED)


async def dialog_answered_as_a_client(sock: Path) -> str:
    """Take control, cue a confirm on the fixture extension (`dialog_prompt`), answer it "confirm" with the
    projection id the controller gave; the tool's result: what the extension got."""
    client = await ControllerClient.connect(str(sock))
    try:
        await client.observe()
        await client.takeover()
        opened: list[dict[str, object]] = []
        sub = client.subscribe()

        async def first_open() -> None:
            async for note in sub:
                if note.method == "record" and note.params.get("type") == "nativeDecision" \
                        and note.params.get("state") == "open":
                    opened.append(dict(note.params))
                    return

        waiting = asyncio.ensure_future(first_open())
        outcome = await client.prompt(dialog_prompt("confirm"), client_request_id="cli-dialog")
        assert isinstance(outcome, Admitted), outcome
        async with asyncio.timeout(WAIT):
            await waiting
            answered = await client.approve(str(opened[0]["nativeDecision"]), "confirm")
            assert answered["state"] in ("answered", "settled"), answered
            while True:
                note = await sub.__anext__()
                if note.method == "event" and note.params.get("eventType") == "tool-end":
                    text: str = note.params["payload"]["result"]["content"][0]["text"]
                    return text
    finally:
        await client.aclose()


def test_recover_keeps_the_dialog_options_and_the_relaunch_answers_a_dialog_with_the_fixture_extension(
        world: Path, pi_dir: Path) -> None:
    """Issue 33: serve with `--answer-dialogs --fixture-extension`, a client's force stop and recover: the
    command serve prints (and the recover's reply carries) keeps both flags, and the controller it launches
    from the eligibility loads the fixture extension (its pin holds) and answers a confirm: the extension got
    `confirm answered true`."""
    made = subprocess.run([sys.executable, "-m", "mosaic.controller", "fixture", str(world / "fx")],
                          capture_output=True, text=True, timeout=WAIT)
    assert made.returncode == 0, made
    env = {**os.environ, "LC_ALL": "C.UTF-8"}
    sock = world / "ctl" / "controller.sock"
    first = Terminal([*serve_line(world, pi_dir), "--answer-dialogs", "--fixture-extension"], env=env)
    try:
        first.read_until(r"serving \S+: claim ")
        done = asyncio.run(force_stop_as_a_client(sock, recover=True))
        recovered = done["recovered"]
        assert isinstance(recovered, dict)
        record = recovered["eligibility"]["id"]
        command = first.read_until(r"\n  (.*--eligibility " + record + r")\n").group(1)
        argv = shlex.split(command)
        assert "--answer-dialogs" in argv and "--fixture-extension" in argv, command
        assert first.end("SIGINT") == 0, first.output
    finally:
        first.close()
    second = Terminal(argv, env=env)
    try:
        second.read_until(r"serving \S+: claim \S+ \(recovered\) in ")
        assert asyncio.run(dialog_answered_as_a_client(sock)) == "confirm answered true"
        assert second.end("SIGINT") == 0, second.output
    finally:
        second.close()
