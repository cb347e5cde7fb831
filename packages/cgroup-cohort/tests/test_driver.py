"""The executors and force_stop against a fake shim on a Unix socket and a fake systemctl (no cgroup needed).

What is checked: every failure to observe becomes an uncertain outcome (never an exception, never a
value); a cohort whose identity does not match receives no operation beyond hello; and the stop can be
driven from outside, step by step through the public machine and executor, also from a reference rebuilt
from its stored JSON after the driving process is gone (K10, K11).
"""

from __future__ import annotations

import json
import os
import socket
import stat
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mosaic.cgroup_cohort import CohortRef, FixtureVerifier, StopRequest, UserManager, force_stop
from mosaic.cgroup_cohort.proof import build_cohort_proof
from mosaic.cgroup_cohort.stop import CheckIdentity, Finish, executor_for, machine_for
from mosaic.safe_open import DIGEST_RE, ProcessRef, current_host

Reply = Callable[[dict[str, Any]], dict[str, Any] | None]


class FakeShim:
    """Answers the shim protocol from a table; records every op it was asked."""

    def __init__(self, path: str, replies: dict[str, Reply]) -> None:
        self.ops: list[str] = []
        self.replies = replies
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(4)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                buf = b""
                while True:
                    data = conn.recv(65536)
                    if not data:
                        break
                    buf += data
                    while b"\n" in buf:
                        line, buf = buf.split(b"\n", 1)
                        req = json.loads(line)
                        self.ops.append(req["op"])
                        reply = self.replies.get(req["op"], lambda r: {"ok": False, "unavailable": "shim-gone",
                                                                        "detail": "no"})(req)
                        if reply is None:
                            return  # the shim "dies" mid-request
                        reply["id"] = req["id"]
                        conn.sendall(json.dumps(reply).encode() + b"\n")

    def close(self) -> None:
        # Wake the accept() and wait for the thread BEFORE closing: a thread that re-enters accept() on a
        # closed descriptor number could otherwise accept on the next test's socket reusing that number.
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.thread.join(10)
        assert not self.thread.is_alive()
        self.sock.close()


@pytest.fixture
def sockdir(tmp_path) -> Iterator[str]:
    d = tmp_path / "s"
    d.mkdir(mode=0o700)
    yield str(d)


def _hello(ref, **over: Any) -> dict[str, Any]:
    h = {"ok": True, "invocationId": ref.invocation_id, "unitCgroupId": ref.unit_cgroup_id,
         "engineCgroupIdNow": ref.engine_cgroup_id, "containment": ref.containment.to_dict(),
         "features": ["cgroup.freeze", "cgroup.kill"]}
    h.update(over)
    return h


def _fake_systemctl(tmp_path, invocation: str) -> UserManager:
    script = tmp_path / "systemctl"
    script.write_text(f"#!/bin/sh\necho InvocationID={invocation}\necho LoadState=loaded\necho ActiveState=active\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return UserManager(systemctl=str(script))


REQ = StopRequest("stop-d", "pi-d", "exec-d", {"confirmation": "c"})


def _host_ref(ref_factory, **over: Any):
    return ref_factory("scope", host=current_host(), **over)


def test_K14_driver_sends_nothing_but_hello_to_another_invocation(tmp_path, sockdir, ref_factory):
    path = os.path.join(sockdir, "u.sock")
    ref = _host_ref(ref_factory, socket_path=path)
    other = "9" * 32
    shim = FakeShim(path, {"hello": lambda r: _hello(ref, invocationId=other),
                           "term": lambda r: {"ok": True, "termed": [], "skipped": []}})
    try:
        result = force_stop(ref, REQ, manager=_fake_systemctl(tmp_path, other), grace=0.01)
    finally:
        shim.close()
    assert result.outcome.reason == "identity-mismatch" and not result.outcome.signalled
    assert shim.ops == ["hello"]


def _clean_stop(ref: CohortRef) -> dict[str, Reply]:
    """A shim whose cohort of one member (77, 700) ignores TERM and dies by the kill."""
    return {
        "hello": lambda r: _hello(ref),
        "term": lambda r: {"ok": True, "termed": [[77, 700]], "skipped": []},
        "events": lambda r: {"ok": True, "populated": True, "frozen": True, "treeFrozen": True},
        "freeze": lambda r: {"ok": True, "frozen": True},
        "members": lambda r: {"ok": True, "members": [[77, 700]], "stable": True},
        "kill": lambda r: {"ok": True, "written": True, "populated0": True, "at": 1_800_000_000.0},
        "deaths": lambda r: {"ok": True, "survivors": [], "deaths": [
            {"pid": 77, "startTime": 700, "time": 1_800_000_000.1, "how": "reaped", "signal": 9, "status": None}]},
    }


def test_full_protocol_against_a_fake_shim_reaches_stopped(tmp_path, sockdir, ref_factory):
    path = os.path.join(sockdir, "u.sock")
    ref = _host_ref(ref_factory, socket_path=path)
    m = ProcessRef(77, 700)
    shim = FakeShim(path, _clean_stop(ref))
    try:
        result = force_stop(ref, REQ, manager=_fake_systemctl(tmp_path, ref.invocation_id), grace=0.01)
    finally:
        shim.close()
    assert result.outcome.state == "stopped", result.outcome
    assert shim.ops == ["hello", "term", "events", "freeze", "members", "events", "kill", "deaths"]
    assert result.proof is not None and result.proof["members"][0]["pid"] == m.pid


def _perform_in_thread(executor, action):  # type: ignore[no-untyped-def]
    """executor.perform(action) on another thread, as a controller's event loop would run it; bounded."""
    box: dict[str, Any] = {}
    t = threading.Thread(target=lambda: box.setdefault("event", executor.perform(action)))
    t.start()
    t.join(30)
    assert not t.is_alive() and "event" in box, f"{action!r} did not finish within 30s"
    return box["event"]


def test_K10_controller_drives_the_public_machine_step_by_step_and_restarts_from_the_stored_reference(
        tmp_path, sockdir, ref_factory):
    """The controller's loop, from outside the package: read machine.action, publish machine.phase, perform
    the action in a thread, feed the event. It dies after TERM; a fresh machine and executor built from the
    stored JSON alone and the same request re-check the identity and re-run from TERM (K10, K11), then the
    proof's verification.digest is what the claim stores."""
    path = os.path.join(sockdir, "u.sock")
    ref = _host_ref(ref_factory, socket_path=path)
    stored = json.dumps(ref.to_dict())  # what the writer claim holds
    manager = _fake_systemctl(tmp_path, ref.invocation_id)
    shim = FakeShim(path, _clean_stop(ref))
    try:
        machine, executor = machine_for(ref, REQ, grace=0.01), executor_for(ref, manager=manager)
        published: list[str] = []
        while machine.phase != "grace":
            published.append(machine.phase)
            machine.feed(_perform_in_thread(executor, machine.action))
        executor.close()  # the controller dies here: between TERM and the kill phase
        del machine, executor
        assert published == ["identity", "term"] and shim.ops == ["hello", "term"]

        restored = CohortRef.from_dict(json.loads(stored))
        assert restored == ref
        machine, executor = machine_for(restored, REQ, grace=0.01), executor_for(restored, manager=manager)
        assert machine.action == CheckIdentity()
        published = []
        try:
            while not isinstance(action := machine.action, Finish):
                published.append(machine.phase)
                machine.feed(_perform_in_thread(executor, action))
        finally:
            executor.close()
    finally:
        shim.close()
    assert published == ["identity", "term", "grace", "freeze", "enumerate", "recheck", "kill", "collect"]
    assert shim.ops[2:] == ["hello", "term", "events", "freeze", "members", "events", "kill", "deaths"]
    outcome = action.outcome
    assert outcome.state == "stopped" and outcome.evidence.termed == (ProcessRef(77, 700),)
    proof = build_cohort_proof(restored, REQ, outcome)
    verifier = FixtureVerifier()
    assert verifier.register(proof) == proof["verification"]["digest"]
    assert DIGEST_RE.fullmatch(verifier.verify(proof, stop=REQ.stop_id))


def test_executor_refuses_an_action_its_machine_never_asks_for(ref_factory):
    from mosaic.cgroup_cohort.stop import KillGroup, SendTerm

    with pytest.raises(TypeError):
        executor_for(ref_factory("direct")).perform(KillGroup())
    with pytest.raises(TypeError):
        executor_for(ref_factory("pgroup")).perform(Finish(None))  # type: ignore[arg-type]
    assert executor_for(ref_factory("direct")).perform(SendTerm()).reason == "shim-gone"  # no channel yet


@pytest.mark.parametrize("broken", ["term", "freeze", "members", "kill", "deaths"])
def test_a_shim_dying_or_answering_garbage_mid_stop_is_uncertain(broken, tmp_path, sockdir, ref_factory):
    path = os.path.join(sockdir, "u.sock")
    ref = _host_ref(ref_factory, socket_path=path)
    replies: dict[str, Reply] = {
        "hello": lambda r: _hello(ref),
        "term": lambda r: {"ok": True, "termed": [], "skipped": []},
        "events": lambda r: {"ok": True, "populated": True, "frozen": True, "treeFrozen": True},
        "freeze": lambda r: {"ok": True, "frozen": True},
        "members": lambda r: {"ok": True, "members": [], "stable": True},
        "kill": lambda r: {"ok": True, "written": True, "populated0": True, "at": 1.0},
        "deaths": lambda r: {"ok": True, "survivors": [], "deaths": []},
    }
    replies[broken] = (lambda r: None) if broken in ("term", "kill") else (lambda r: {"ok": True})
    shim = FakeShim(path, replies)
    try:
        result = force_stop(ref, REQ, manager=_fake_systemctl(tmp_path, ref.invocation_id), grace=0.01)
    finally:
        shim.close()
    assert result.outcome.state == "uncertain" and result.proof is None, (result.outcome, shim.ops)
    assert result.outcome.reason == "shim-gone"


def test_K15_no_shim_socket_is_shim_gone(tmp_path, sockdir, ref_factory):
    ref = _host_ref(ref_factory, socket_path=os.path.join(sockdir, "absent.sock"))
    result = force_stop(ref, REQ, manager=_fake_systemctl(tmp_path, ref.invocation_id))
    assert (result.outcome.state, result.outcome.reason, result.outcome.signalled) == (
        "uncertain", "shim-gone", False)


def test_K15_unit_not_loaded_is_identity_unavailable(tmp_path, sockdir, ref_factory):
    ref = _host_ref(ref_factory, socket_path=os.path.join(sockdir, "absent.sock"))
    script = tmp_path / "systemctl"
    script.write_text("#!/bin/sh\necho InvocationID=\necho LoadState=not-found\necho ActiveState=inactive\n")
    script.chmod(0o755)
    result = force_stop(ref, REQ, manager=UserManager(systemctl=str(script)))
    assert result.outcome.reason == "identity-unavailable" and not result.outcome.signalled
    assert "no loaded unit" in result.outcome.detail


def test_scope_ref_without_manager_access_is_identity_unavailable(ref_factory):
    result = force_stop(ref_factory("scope"), REQ)
    assert result.outcome.reason == "identity-unavailable" and not result.outcome.signalled


def test_K15_direct_ref_whose_cgroup_is_missing_is_unavailable(ref_factory):
    ref = ref_factory("direct", host=current_host(), cgroup_path="/mosaic-cohort-does-not-exist/x")
    result = force_stop(ref, REQ)
    assert result.outcome.state == "uncertain" and not result.outcome.signalled
    assert result.outcome.reason in ("cgroup-unavailable", "identity-unavailable")
