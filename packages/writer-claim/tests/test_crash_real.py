"""W5 and W12 with real processes: an owner SIGKILLed at every publication barrier (of a plain lifecycle
and of a recovery with its take-over), and an owner paused with SIGSTOP. Every process here is a child
of the test, waited for and, if still running, killed by the pid the test recorded."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from claim_helpers import (
    BINDING,
    SEAT,
    SESSION,
    Ack,
    Checked,
    Probe,
    check_restart,
    raw_chain,
    raw_head,
    raw_holders,
    read_line,
    run_lifecycle,
    run_recovery,
    tree_bytes,
    unit_world,
)

from mosaic.safe_open import read_stat
from mosaic.writer_claim import BarrierHook, ClaimRefusal, ClaimStore, Outcome, RestartReport
from mosaic.writer_claim.store import Barrier

Scenario = Callable[[BarrierHook, Path, Callable[[str, str], None]], object]


def _lifecycle(hook: BarrierHook, root: Path, ack: Callable[[str, str], None]) -> object:
    return run_lifecycle(ClaimStore(root, barrier=hook), ack)


def _recovery(hook: BarrierHook, root: Path, ack: Callable[[str, str], None]) -> object:
    """A recovery in one process: the reserving controller's store and the launcher's (each its own
    incarnation), the launcher taking the reservation over and running the lifecycle."""
    return run_recovery(ClaimStore(root, barrier=hook), ClaimStore(root, barrier=hook), ack)


def _barrier_count(tmp: Path, scenario: Scenario = _lifecycle) -> list[Barrier]:
    root = tmp / "count"
    root.mkdir()
    seen: list[Barrier] = []
    scenario(seen.append, root, lambda c, s: None)
    shutil.rmtree(root)
    return seen


def _run_killed_child(root: Path, kill_at: int, scenario: Scenario = _lifecycle) -> list[Ack]:
    """Fork an owner that runs the scenario and SIGKILLs itself right after barrier number `kill_at`.
    Returns what it acknowledged (written to a pipe before the next step began)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 3
        try:
            os.close(r)
            count = 0

            def hook(b: Barrier) -> None:
                nonlocal count
                count += 1
                if count == kill_at:
                    os.kill(os.getpid(), signal.SIGKILL)

            def ack(claim_id: str, step: str) -> None:
                os.write(w, f"{claim_id} {step}\n".encode())

            scenario(hook, root, ack)
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    data = b""
    try:
        while chunk := os.read(r, 65536):
            data += chunk
    finally:
        os.close(r)
        _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, f"child status {status:#x}"
    acks = []
    for line in data.decode().splitlines():
        claim_id, step = line.split()
        acks.append((claim_id, step))
    return acks


def _restarts(tmp_path: Path, killed: Path, n: int, acks: list[Ack],
              pre: set[str]) -> Iterator[tuple[bool, Path, RestartReport, Checked]]:
    """The killed claim root restarted in both unit worlds (the unit still there; its scope collected, W20),
    each on its own copy with the W5 invariants checked (`check_restart`, a rerun included): whether the
    unit was collected, the copy, the restart's report and what the check found. Each copy is removed after."""
    for collected in (False, True):
        root = tmp_path / f"restart-{n}-{collected}"
        shutil.copytree(killed, root)
        probe = Probe(unit_world(acks, collected=collected))
        restarter = ClaimStore(root)
        report = restarter.restart(SEAT, SESSION, probe)
        checked = check_restart(root, acks, report, pre, rerun=lambda r=restarter, p=probe: r.restart(SEAT, SESSION, p))
        yield collected, root, report, checked
        shutil.rmtree(root)


def test_W5_sigkill_at_every_publication_barrier_then_restart(tmp_path: Path) -> None:
    """W5: a real owner process is SIGKILLed after each step of acquire, spawn marker, active, stopping
    and release: after the temp write, after its fsync, after link(), after the directory fsync, and
    between the two keys (and at the key directories' creation). A restart on the same boot, with the
    owner's death proven by /proc (pid and start time), must show never two holders, never a lost claim,
    only complete revisions, and the half-done pair completed or classified under its claim ID. Each kill
    is restarted in two worlds: the engine's unit still exists, or its scope was collected (W20)."""
    barriers = _barrier_count(tmp_path)
    assert {b.point for b in barriers} >= {"temp-written", "temp-fsynced", "linked", "dir-fsynced",
                                           "between-keys"}
    outcomes: dict[bool, set[str]] = {False: set(), True: set()}
    for n in range(1, len(barriers) + 1):
        killed = tmp_path / f"killed-{n}"
        killed.mkdir()
        acks = _run_killed_child(killed, n)
        pre = raw_holders(killed, SEAT, SESSION)
        for collected, root, report, checked in _restarts(tmp_path, killed, n, acks, pre):
            outcomes[collected].update(checked.outcomes)
            if report.free:
                ClaimStore(root).acquire(SEAT, SESSION, BINDING)
            else:
                with pytest.raises(ClaimRefusal):
                    ClaimStore(root).acquire(SEAT, SESSION, BINDING)
        shutil.rmtree(killed)
    common = {"free", "stopped-no-unit", "stop-in-progress", "release-completed"}
    assert common | {"uncertain-unit"} <= outcomes[False], outcomes
    assert common | {"uncertain-spawn-marker"} <= outcomes[True], outcomes


def test_W5_K17_sigkill_at_every_barrier_of_a_recovery_then_restart(tmp_path: Path) -> None:
    """W5 over a recovery (§6 "Recover"): a real process holding the reserving controller's store and the
    launcher's is SIGKILLed after each file-system step of the reservation with an eligibility, the
    take-over (between its keys too), and the launcher's spawn marker, activation, stop and release. The
    W5 checks hold after a restart on this boot in both unit worlds: a reservation killed before any
    take-over stays held (eligibility-pending), a take-over killed before the spawn marker is stopped with
    the no-unit observation. Once a take-over reached either key, another take-over with the same record
    refuses eligibility and writes nothing."""
    barriers = _barrier_count(tmp_path, _recovery)
    assert {(b.point, b.step) for b in barriers} >= {("between-keys", "take-over"), ("linked", "take-over")}
    outcomes: dict[bool, set[str]] = {False: set(), True: set()}
    for n in range(1, len(barriers) + 1):
        killed = tmp_path / f"killed-{n}"
        killed.mkdir()
        acks = _run_killed_child(killed, n, _recovery)
        pre = raw_holders(killed, SEAT, SESSION)
        heads = [raw_head(killed, k.dirname) for k in (SEAT, SESSION)]
        if any(h is not None and h[1] is not None and h[1].get("eligibility", {}).get("taken") for h in heads):
            before = tree_bytes(killed)
            with pytest.raises(ClaimRefusal) as e:
                ClaimStore(killed).take_over(SEAT, SESSION, heads[0][1]["claimId"], eligibility="elig-1")  # type: ignore[index]
            assert e.value.code == "eligibility" and tree_bytes(killed) == before
        for collected, _root, report, _checked in _restarts(tmp_path, killed, n, acks, pre):
            outcomes[collected].update(o.value for o in report.outcomes)
        shutil.rmtree(killed)
    common = {"free", "eligibility-pending", "stopped-no-unit", "stop-in-progress", "release-completed"}
    assert common | {"uncertain-unit"} <= outcomes[False], outcomes
    assert common | {"uncertain-spawn-marker"} <= outcomes[True], outcomes


_PAUSED_OWNER = textwrap.dedent(
    """
    import sys
    from mosaic.safe_open import ProcessRef
    from mosaic.writer_claim import *
    store = ClaimStore(sys.argv[1])
    c = store.acquire(SeatKey("seat-a", "/fixtures/project", "main"),
                      SessionKey("pi", "01a22a58-944f-7072-a9ab-f808835fc6a2"),
                      Binding("binding-1", "pi", "pi-conversation-1", "main", "leaf-1",
                              Pins("0.85.1", "ab" * 32, "sha256:" + "cd" * 32)))
    c.mark_spawn()
    c.activate(invocation_id="inv-w12", engine=ProcessRef(4242, 99))
    print(c.claim_id, flush=True)
    sys.stdin.readline()                      # resumed: finish the owner's own stop and release
    c.begin_stop("stop-w12", phase="kill")
    c.release(ProofRef(ProofKind.COHORT, "sha256:" + "ee" * 32, {"stop": "stop-w12"}))
    print("released", flush=True)
    sys.stdin.readline()
    """
)


def test_W12_sigstopped_owner_is_never_touched(claim_root: Path) -> None:
    """W12 / mutant 13: a live owner paused with SIGSTOP; a second controller starts. It refuses
    already-active (acquire and adopt), its restart classification reports owner-alive and writes
    nothing, and after SIGCONT the paused owner's revisions are unchanged and it carries on with its own
    release at the next revision numbers."""
    child = subprocess.Popen([sys.executable, "-c", _PAUSED_OWNER, str(claim_root)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    try:
        assert child.stdout is not None and child.stdin is not None
        claim_id = read_line(child.stdout).strip()
        owned = {k.dirname: raw_chain(claim_root, k.dirname) for k in (SEAT, SESSION)}
        os.kill(child.pid, signal.SIGSTOP)
        _, status = os.waitpid(child.pid, os.WUNTRACED)
        assert os.WIFSTOPPED(status)
        stat = read_stat(child.pid)
        assert stat is not None and stat.state in ("T", "t")
        before = tree_bytes(claim_root)

        second = ClaimStore(claim_root)  # real /proc liveness, this host and boot
        with pytest.raises(ClaimRefusal) as e:
            second.acquire(SEAT, SESSION, BINDING)
        assert e.value.code == "already-active"
        probe = Probe(default="present")
        report = second.restart(SEAT, SESSION, probe)
        assert report.outcomes == (Outcome.OWNER_ALIVE,) and report.published == ()
        assert probe.unit_questions == [] and probe.boot_questions == []
        with pytest.raises(ClaimRefusal) as e:
            second.adopt(SEAT, SESSION, claim_id)
        assert e.value.code == "already-active"
        assert tree_bytes(claim_root) == before

        os.kill(child.pid, signal.SIGCONT)
        _, status = os.waitpid(child.pid, os.WCONTINUED)
        assert os.WIFCONTINUED(status)
        child.stdin.write(b"go\n")
        assert read_line(child.stdout).strip() == "released"
        for key in (SEAT, SESSION):
            chain = raw_chain(claim_root, key.dirname)
            assert chain[: len(owned[key.dirname])] == owned[key.dirname]  # unchanged
            assert [n for n, _ in chain] == list(range(1, len(owned[key.dirname]) + 3))  # then its own 2
        assert raw_holders(claim_root, SEAT, SESSION) == set()
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGCONT)
            child.kill()
        child.wait(timeout=60)
