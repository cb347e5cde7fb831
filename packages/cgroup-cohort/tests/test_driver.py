"""force_stop's I/O shell against a fake shim on a Unix socket and a fake systemctl (no cgroup needed).

What is checked: every failure to observe becomes an uncertain outcome (never an exception, never a
value), and a cohort whose identity does not match receives no operation beyond hello.
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

from mosaic.cgroup_cohort import MemberRef, StopRequest, UserManager, force_stop

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


def _hello(claim, **over: Any) -> dict[str, Any]:
    h = {"ok": True, "invocationId": claim.invocation_id, "unitCgroupId": claim.unit_cgroup_id,
         "engineCgroupIdNow": claim.engine_cgroup_id, "containment": claim.containment.to_dict(),
         "features": ["cgroup.freeze", "cgroup.kill"]}
    h.update(over)
    return h


def _fake_systemctl(tmp_path, invocation: str) -> UserManager:
    script = tmp_path / "systemctl"
    script.write_text(f"#!/bin/sh\necho InvocationID={invocation}\necho LoadState=loaded\necho ActiveState=active\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return UserManager(systemctl=str(script))


REQ = StopRequest("stop-d", "pi-d", "exec-d", {"confirmation": "c"})


def _host_claim(claim_factory, **over: Any):
    from mosaic.cgroup_cohort import boot_id, machine_id

    return claim_factory("scope", machine_id=machine_id(), boot_id=boot_id(), **over)


def test_K14_driver_sends_nothing_but_hello_to_another_invocation(tmp_path, sockdir, claim_factory):
    path = os.path.join(sockdir, "u.sock")
    claim = _host_claim(claim_factory, socket_path=path)
    other = "9" * 32
    shim = FakeShim(path, {"hello": lambda r: _hello(claim, invocationId=other),
                           "term": lambda r: {"ok": True, "termed": [], "skipped": []}})
    try:
        result = force_stop(claim, REQ, manager=_fake_systemctl(tmp_path, other), grace=0.01)
    finally:
        shim.close()
    assert result.outcome.reason == "identity-mismatch" and not result.outcome.signalled
    assert shim.ops == ["hello"]


def test_full_protocol_against_a_fake_shim_reaches_stopped(tmp_path, sockdir, claim_factory):
    path = os.path.join(sockdir, "u.sock")
    claim = _host_claim(claim_factory, socket_path=path)
    m = MemberRef(77, 700)
    shim = FakeShim(path, {
        "hello": lambda r: _hello(claim),
        "term": lambda r: {"ok": True, "termed": [[77, 700]], "skipped": []},
        "events": lambda r: {"ok": True, "populated": r.get("until") != "x", "frozen": True, "treeFrozen": True},
        "freeze": lambda r: {"ok": True, "frozen": True},
        "members": lambda r: {"ok": True, "members": [[77, 700]], "stable": True},
        "kill": lambda r: {"ok": True, "written": True, "populated0": True, "at": 1_800_000_000.0},
        "deaths": lambda r: {"ok": True, "survivors": [], "deaths": [
            {"pid": 77, "startTime": 700, "time": 1_800_000_000.1, "how": "reaped", "signal": 9, "status": None}]},
    })
    try:
        result = force_stop(claim, REQ, manager=_fake_systemctl(tmp_path, claim.invocation_id), grace=0.01)
    finally:
        shim.close()
    assert result.outcome.state == "stopped", result.outcome
    assert shim.ops == ["hello", "term", "events", "freeze", "members", "events", "kill", "deaths"]
    assert result.proof is not None and result.proof["members"][0]["pid"] == m.pid


@pytest.mark.parametrize("broken", ["term", "freeze", "members", "kill", "deaths"])
def test_a_shim_dying_or_answering_garbage_mid_stop_is_uncertain(broken, tmp_path, sockdir, claim_factory):
    path = os.path.join(sockdir, "u.sock")
    claim = _host_claim(claim_factory, socket_path=path)
    replies: dict[str, Reply] = {
        "hello": lambda r: _hello(claim),
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
        result = force_stop(claim, REQ, manager=_fake_systemctl(tmp_path, claim.invocation_id), grace=0.01)
    finally:
        shim.close()
    assert result.outcome.state == "uncertain" and result.proof is None, (result.outcome, shim.ops)
    assert result.outcome.reason == "shim-gone"


def test_K15_no_shim_socket_is_shim_gone(tmp_path, sockdir, claim_factory):
    claim = _host_claim(claim_factory, socket_path=os.path.join(sockdir, "absent.sock"))
    result = force_stop(claim, REQ, manager=_fake_systemctl(tmp_path, claim.invocation_id))
    assert (result.outcome.state, result.outcome.reason, result.outcome.signalled) == (
        "uncertain", "shim-gone", False)


def test_K15_unit_not_loaded_is_identity_unavailable(tmp_path, sockdir, claim_factory):
    claim = _host_claim(claim_factory, socket_path=os.path.join(sockdir, "absent.sock"))
    script = tmp_path / "systemctl"
    script.write_text("#!/bin/sh\necho InvocationID=\necho LoadState=not-found\necho ActiveState=inactive\n")
    script.chmod(0o755)
    result = force_stop(claim, REQ, manager=UserManager(systemctl=str(script)))
    assert result.outcome.reason == "identity-unavailable" and not result.outcome.signalled
    assert "no loaded unit" in result.outcome.detail


def test_scope_claim_without_manager_access_is_identity_unavailable(claim_factory):
    result = force_stop(claim_factory("scope"), REQ)
    assert result.outcome.reason == "identity-unavailable" and not result.outcome.signalled


def test_K15_direct_claim_whose_cgroup_is_missing_is_unavailable(claim_factory):
    claim = claim_factory("direct", cgroup_path="/mosaic-cohort-does-not-exist/x")
    from mosaic.cgroup_cohort import boot_id, machine_id

    result = force_stop(claim.__class__(**{**claim.__dict__, "machine_id": machine_id(),
                                           "boot_id": boot_id()}), REQ)
    assert result.outcome.state == "uncertain" and not result.outcome.signalled
    assert result.outcome.reason in ("cgroup-unavailable", "identity-unavailable")
