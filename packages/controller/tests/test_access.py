"""Who may connect, and what they may do (README), without other uids: the method table walked
through the core, the grants file's strict decoder, the decision, the core's `channel` and `capability`
refusals and the actor in every binding, request and stop record (validated against the schema by the
harness), and the socket's file-system gate at the server. The same rules with real uids over the socket
on the fake engine are test_access_uids.py."""

from __future__ import annotations

import errno
import json
import os
import stat
import struct
from pathlib import Path
from typing import Any

import pytest
from core_harness import Client, Harness, refused, run_start, state
from server_harness import StubCore, run, serving, socket_dir

from mosaic.controller import ControlRefusal, Grants
from mosaic.controller.access import (
    METHOD_OPERATIONS,
    OPERATIONS,
    SERVED,
    AccessPolicy,
    Peer,
    required_operations,
)
from mosaic.controller.client import ControllerClient, RemoteRefusal
from mosaic.controller.core import CloseConnection, Connected
from mosaic.controller.protocol import PARAMS
from mosaic.controller.server import SocketPathError, SocketServer

ALICE = Peer(1000, 1000, 4242, (1000,))  # a uid that is not the owner; the tests grant it per case
PARAMS_FOR = {
    "hello": {"grant": "no-such-grant"},
    "observe": {},
    "prompt": {"generation": 1, "clientRequestId": "cr-1", "text": "hello"},
    "takeover": {"expectedGeneration": 1},
    "acquire-recovery-control": {},
    "interrupt": {"generation": 1},
    "issue-confirmation": {"operation": "force-stop"},
    "answer-confirmation": {"confirmation": "k-none", "answer": "confirm"},
    "force-stop": {"confirmation": "k-none"},
    "recover": {"confirmation": "k-none"},
    "approval": {"generation": 1, "decision": "d-none", "choice": "confirm"},  # with the dialogs answered
}


def granted(*operations: str, uid: int = ALICE.uid) -> Harness:
    """A core whose grants give `uid` exactly `operations` (observe included unless it is the one tested)."""
    return Harness(access=AccessPolicy(grants=Grants(users={uid: frozenset({"observe", *operations})})))


# --------------------------------------------------------------------------------- the method table


def test_every_method_needs_one_operation_of_the_six_and_ping_needs_only_a_connection() -> None:
    assert set(METHOD_OPERATIONS) == set(PARAMS)
    assert OPERATIONS == ("observe", "prompt", "takeover", "interrupt", "force-stop", "recover")
    for method, needed in METHOD_OPERATIONS.items():
        assert needed is None or needed == SERVED or needed in OPERATIONS, method
    assert METHOD_OPERATIONS["ping"] is None
    assert required_operations("issue-confirmation", {"operation": "recover"}) == ("recover",)
    assert required_operations("answer-confirmation", {}, "force-stop") == ("force-stop",)
    assert required_operations("answer-confirmation", {}, None) == ("force-stop", "recover")  # fail closed
    assert required_operations("approval", {}) == ("prompt",)  # issue 33: answering a dialog is the controller's turn
    assert required_operations("draft", {}) == ("unlisted:draft",)  # not in the table: no grant holds it


@pytest.mark.parametrize("method", sorted(set(PARAMS) - {"ping"}))
@pytest.mark.parametrize("operation", OPERATIONS)
def test_the_table_walked_through_the_core_a_grant_lacking_the_methods_operation_refuses_capability(
        method: str, operation: str) -> None:
    # Every (method, single granted operation) pair: `capability` exactly when the grant lacks what the
    # table says, and nothing else is looked at first; otherwise whatever the method's own rules answer.
    h = Harness(access=AccessPolicy(grants=Grants(users={ALICE.uid: frozenset({"observe", operation})})),
                answer_dialogs=method == "approval")  # off, approval is refused before its capability
    h.connect("a", ALICE)
    result = h.call("a", method, **PARAMS_FOR[method])
    needed = required_operations(method, PARAMS_FOR[method])
    lacks = bool(needed) and not ({"observe", operation} & set(needed))
    is_capability = isinstance(result, tuple) and result[1]["code"] == "capability"
    assert is_capability == lacks, (method, operation, result)
    assert h.engine_bytes == b""


def test_capability_is_checked_before_the_incarnation_token_as_the_seed_orders_them() -> None:
    h = granted()
    h.connect("a", ALICE)
    refusal = refused(h.call("a", "prompt", incarnation="inc-old", generation=7, clientRequestId="x", text="t"),
                      "capability")
    assert "prompt" in refusal["message"] and str(ALICE.uid) in refusal["message"]


def test_answering_a_confirmation_needs_the_operation_it_confirms() -> None:
    h = granted("takeover", "recover")
    h.connect("a", ALICE)
    h.controller("a")
    refused(h.call("a", "issue-confirmation", operation="force-stop"), "capability")
    issued = h.call("a", "issue-confirmation", operation="recover")
    assert isinstance(issued, dict), issued
    answered = h.call("a", "answer-confirmation", confirmation=issued["confirmation"]["confirmation"], answer="confirm")
    assert isinstance(answered, dict) and answered["confirmation"]["state"] == "answered", answered
    refused(h.call("a", "acquire-recovery-control"), "capability")  # recovery control serves force-stop


# ------------------------------------------------------------------------------------- the decision


def test_the_owner_may_do_everything_others_only_what_a_grant_names() -> None:
    policy = AccessPolicy(owner=0, grants=Grants(users={1000: frozenset({"observe"})},
                                                groups={50: frozenset({"observe", "takeover", "prompt"}),
                                                        60: frozenset({"observe", "interrupt"})}))
    assert policy.operations(Peer(0, 0, 1)) == frozenset(OPERATIONS)
    assert policy.operations(Peer(1000, 1000, 1)) == {"observe"}
    assert policy.operations(Peer(2000, 50, 1)) == {"observe", "takeover", "prompt"}  # the primary gid
    assert policy.operations(Peer(2000, 2000, 1, (60,))) == {"observe", "interrupt"}  # a supplementary group
    assert policy.operations(Peer(1000, 2000, 1, (50, 60))) == {"observe", "takeover", "prompt", "interrupt"}
    assert policy.operations(Peer(2000, 2000, 1, (70,))) is None  # nothing names it: channel
    assert policy.operations(Peer(2000, 2000, 1, None)) is None  # groups unread count as none
    assert policy.operations(None) is None  # credentials unread: channel
    assert policy.reach() == ((1000,), (50, 60))


def test_a_grant_cannot_narrow_the_owner() -> None:
    with pytest.raises(ControlRefusal) as info:
        AccessPolicy(owner=1000, grants=Grants(users={1000: frozenset({"observe"})}))
    assert info.value.code == "configuration" and "owner" in info.value.message


# -------------------------------------------------------------------------------- the grants file


GOOD = {"version": 1, "grants": [{"uid": 65534, "operations": ["observe"]},
                                 {"gid": 995, "operations": ["observe", "takeover", "prompt", "interrupt"]}]}


def test_a_grant_may_have_an_id_a_hello_names_and_a_scope_of_conversations() -> None:
    data = {"version": 1, "grants": [{"uid": 5, "operations": ["observe"], "id": "viewer", "scope": ["pi-a", "pi-b"]},
                                     {"gid": 7, "operations": ["observe", "takeover"], "id": "team"},
                                     {"uid": 8, "operations": ["observe"]}]}
    grants = Grants.from_json(json.dumps(data).encode())
    assert grants.ids == {"viewer": ("uid", 5), "team": ("gid", 7)}
    assert grants.scopes == {("uid", 5): {"pi-a", "pi-b"}}
    viewer = grants.named("viewer")
    assert viewer is not None and viewer.operations == {"observe"} and viewer.scope == {"pi-a", "pi-b"}
    assert viewer.covers("pi-a") and not viewer.covers("pi-c")
    team = grants.named("team")
    assert team is not None and team.scope is None and team.covers("pi-c")
    assert grants.named("nobody") is None
    with pytest.raises(ControlRefusal, match="no grant"):
        Grants(users={5: frozenset({"observe"})}, ids={"x": ("uid", 6)})


def test_admission_counts_only_the_grants_whose_scope_holds_and_a_hello_narrows_to_its_grant() -> None:
    """`_access` rule 6: the union of the grants that cover this conversation; a peer named only by grants
    that do not is connected with nothing (every request refused `scope`); a hello names a grant of the
    peer's (the owner: any), whose operations the connection then has, and says whether its scope holds."""
    grants = Grants(users={1000: frozenset({"observe", "prompt", "takeover"})},
                    groups={50: frozenset({"observe", "interrupt"})},
                    ids={"alice": ("uid", 1000), "team": ("gid", 50)},
                    scopes={("uid", 1000): frozenset({"pi-a"})})
    policy = AccessPolicy(owner=0, grants=grants)
    alice = Peer(1000, 1000, 1, (50,))
    assert policy.admit(alice, "pi-a") == (frozenset({"observe", "prompt", "takeover", "interrupt"}), True, None, None)
    assert policy.admit(alice, "pi-b") == (frozenset({"observe", "interrupt"}), True, None, None)  # the group's
    assert policy.admit(Peer(1000, 1000, 1, ()), "pi-b") == (frozenset(), False, None, None)  # named, no scope
    assert policy.admit(Peer(2000, 2000, 1, ()), "pi-a") is None  # no grant names it: channel
    assert policy.hello(alice, "team", "pi-b") == (frozenset({"observe", "interrupt"}), True, "team", None)
    assert policy.hello(alice, "alice", "pi-b") == (frozenset({"observe", "prompt", "takeover"}), False, "alice",
                                                    frozenset({"pi-a"}))
    bob = Peer(2000, 2000, 1, (50,))
    refusal = policy.hello(bob, "alice", "pi-a")
    assert isinstance(refusal, ControlRefusal) and refusal.code == "grant"  # alice's grant does not name bob
    owner = policy.hello(Peer(0, 0, 1), "alice", "pi-a")
    assert not isinstance(owner, ControlRefusal) and owner.operations == {"observe", "prompt", "takeover"}
    unknown = policy.hello(Peer(0, 0, 1), "zed", "pi-a")
    assert isinstance(unknown, ControlRefusal) and unknown.code == "grant"


def test_a_force_stop_grant_gives_its_reserve_only_on_the_conversations_its_scope_covers() -> None:
    """Issue 28 item 2 with rule 6: the force-stop reserve of the server's connection bound is the standing of
    a uid a grant covering this controller's conversation lets force stop; one scoped elsewhere stands as
    "other" here (its force-stop would be refused `scope`, so it gets no slot reserved for it)."""
    grants = Grants(users={1000: frozenset({"observe", "force-stop"})}, groups={50: frozenset({"observe", "force-stop"})},
                    scopes={("uid", 1000): frozenset({"pi-a"})})
    policy = AccessPolicy(owner=0, grants=grants)
    alice = Peer(1000, 1000, 1, ())
    assert policy.standing(alice, "pi-a") == "force-stop"
    assert policy.standing(alice, "pi-b") == "other"  # scoped to pi-a only
    assert policy.standing(Peer(1000, 1000, 1, (50,)), "pi-b") == "force-stop"  # the unscoped group grant
    assert policy.standing(Peer(0, 0, 1), "pi-b") == "owner"
    assert policy.standing(None, "pi-a") == "other"
    assert policy.standing(alice) == "force-stop"  # no conversation named: every grant counts


def test_the_grants_file_format_decodes_to_uid_and_gid_grants() -> None:
    grants = Grants.from_json(json.dumps(GOOD).encode())
    assert grants.users == {65534: {"observe"}}
    assert grants.groups == {995: {"observe", "takeover", "prompt", "interrupt"}}
    assert Grants.from_json(b'{"version": 1, "grants": []}').empty


@pytest.mark.parametrize(("data", "says"), [
    (b'{"version": 1, "grants": [{"uid": 5, "operations": ["observe"], "name": "x"}]}', "unknown field"),
    (b'{"version": 1, "grants": [], "default": "all"}', "unknown field"),
    (b'{"version": 2, "grants": []}', "version"),
    (b'{"grants": []}', "version"),
    (b'{"version": 1, "grants": [{"uid": 5, "gid": 5, "operations": ["observe"]}]}', "exactly one of uid or gid"),
    (b'{"version": 1, "grants": [{"operations": ["observe"]}]}', "exactly one of uid or gid"),
    (b'{"version": 1, "grants": [{"uid": true, "operations": ["observe"]}]}', "bool"),
    (b'{"version": 1, "grants": [{"uid": "65534", "operations": ["observe"]}]}', "str"),
    (b'{"version": 1, "grants": [{"uid": 5.0, "operations": ["observe"]}]}', "float"),
    (b'{"version": 1, "grants": [{"uid": -1, "operations": ["observe"]}]}', ">= 0"),
    (b'{"version": 1, "grants": [{"uid": 4294967295, "operations": ["observe"]}]}', "<="),
    (b'{"version": 1, "grants": [{"uid": 5, "uid": 6, "operations": ["observe"]}]}', "twice"),
    (b'{"version": 1, "grants": [{"uid": 5, "operations": ["observe"]}, {"uid": 5, "operations": ["observe"]}]}',
     "another grant"),
    (b'{"version": 1, "grants": [{"uid": 5, "operations": []}]}', "length"),
    (b'{"version": 1, "grants": [{"uid": 5, "operations": ["observe", "root"]}]}', "root"),
    (b'{"version": 1, "grants": [{"uid": 5, "operations": ["observe", "observe"]}]}', "twice"),
    (b'{"version": 1, "grants": [{"uid": 5, "operations": ["prompt", "takeover"]}]}', "lacks observe"),
    (b'{"version": 1, "grants": [{"uid": NaN, "operations": ["observe"]}]}', "NaN"),
    (b'{"version": 1, "grants": []} {}', "extra data"),
    (b'\xff{"version": 1, "grants": []}', "utf-8"),
    (b'[]', "object"),
    (b'{"version": 1, "grants": [{"uid": 5, "operations": ["observe"], "id": "has space"}]}', "match"),
    (b'{"version": 1, "grants": [{"uid": 5, "operations": ["observe"], "id": ""}]}', "match"),
    (b'{"version": 1, "grants": [{"uid": 5, "operations": ["observe"], "id": "a"}, '
     b'{"uid": 6, "operations": ["observe"], "id": "a"}]}', "taken already"),
    (b'{"version": 1, "grants": [{"uid": 5, "operations": ["observe"], "scope": []}]}', "length"),
    (b'{"version": 1, "grants": [{"uid": 5, "operations": ["observe"], "scope": "pi-a"}]}', "array"),
    (b'{"version": 1, "grants": [{"uid": 5, "operations": ["observe"], "scope": ["/p/s.jsonl"]}]}', "match"),
])
def test_the_grants_file_decoder_is_strict(data: bytes, says: str) -> None:
    with pytest.raises(ControlRefusal) as info:
        Grants.from_json(data)
    assert info.value.code == "configuration"
    assert says.lower() in info.value.message.lower(), info.value.message


def test_a_grants_file_anyone_else_can_write_or_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    good = tmp_path / "grants.json"
    good.write_text(json.dumps(GOOD))
    os.chmod(good, 0o644)
    assert Grants.load(good).users == {65534: {"observe"}}
    os.chmod(good, 0o664)
    with pytest.raises(ControlRefusal, match="writable by others"):
        Grants.load(good)
    os.chmod(good, 0o600)
    link = tmp_path / "link.json"
    link.symlink_to(good)
    with pytest.raises(ControlRefusal) as info:
        Grants.load(link)
    assert info.value.code == "configuration"
    with pytest.raises(ControlRefusal, match="not a regular file"):
        Grants.load(tmp_path)
    big = tmp_path / "big.json"
    big.write_bytes(b" " * ((1 << 20) + 1))
    with pytest.raises(ControlRefusal, match="over"):
        Grants.load(big)
    if os.geteuid() == 0:
        os.chown(good, 65534, -1)
        with pytest.raises(ControlRefusal, match="owned by uid 65534"):
            Grants.load(good)


# ------------------------------------------------------------------------------------------ the core


def test_a_peer_no_grant_names_is_closed_channel_at_connect_and_never_becomes_a_connection() -> None:
    h = granted()
    h.observe("watcher")
    before = len(h.clients["watcher"].notes)
    for conn, peer in (("b", Peer(2000, 2000, 7, ())), ("c", None)):
        h.clients[conn] = Client(conn)
        actions = h.core.receive(Connected(conn, peer), now=h.now)
        assert [a for a in actions if isinstance(a, CloseConnection)] == [CloseConnection(conn, "channel")]
        assert conn not in h.core.connections
        refused(h.call(conn, "observe"), "channel")  # a shell that fed a call anyway: refused, nothing read
        h.disconnect(conn)
    assert len(h.clients["watcher"].notes) == before  # no binding broadcast for connections that never were


def test_the_records_name_their_actor_uid_gid_pid_and_connection() -> None:
    h = granted("takeover", "prompt", "interrupt")
    h.connect("a", ALICE)
    h.controller("a")
    h.prompt("a", "hello")
    request = h.clients["a"].records("request")[-1]
    assert request["actor"] == {"name": "local-operator", "uid": 1000, "gid": 1000, "pid": 4242, "connection": "a"}
    binding = h.clients["a"].records("binding")[-1]
    assert binding["actor"] == {"name": "local-operator", "uid": 1000, "gid": 1000, "pid": 4242, "connection": "a"}
    h.respond("prompt")
    h.engine(*run_start("hello"))
    h.respond("get_state", data=state(True))
    stop = h.call("a", "interrupt", generation=h.core.generation)["stop"]
    assert stop["actor"] == {"name": "local-operator", "uid": 1000, "gid": 1000, "pid": 4242, "connection": "a"}
    assert h.clients["a"].records("stop")[-1]["actor"] == stop["actor"]


def test_before_anyone_takes_control_the_binding_names_no_actor() -> None:
    h = Harness()
    assert h.observe("a")["binding"]["actor"] is None


# ------------------------------------------------------------------------------- the client library


def test_the_library_raises_a_channel_close_at_connect_as_a_controller_refusal_never_an_unknown_outcome() -> None:
    class Refusing(StubCore):
        def __call__(self, event: Any) -> None:
            super().__call__(event)
            if isinstance(event, Connected) and self.server is not None:
                self.server.deliver(CloseConnection(event.conn, "channel"))

    async def main() -> None:
        with socket_dir() as d:
            async with serving(d.sock, core=Refusing()) as (_server, core):
                client = await ControllerClient.connect(d.sock, ping_interval=None)
                with pytest.raises(RemoteRefusal) as info:
                    await client.observe()
                assert info.value.code == "channel" and info.value.known and info.value.reconcile is False
                assert "no grant" in info.value.message
                with pytest.raises(RemoteRefusal) as again:  # the connection is gone: the same answer
                    await client.ping()
                assert again.value.code == "channel"
                await client.aclose()
                assert core.calls() == []  # nothing it sent reached the core

    run(main())


# ----------------------------------------------------------------------------- the file-system gate


# The access ACL as the kernel stores it (linux/posix_acl_xattr.h), decoded here rather than by the code
# under test: a u32 version (2), then entries of u16 tag, u16 permissions, u32 id.
ACL_XATTR = "system.posix_acl_access"
USER_OBJ, USER, GROUP, MASK, OTHER = 0x01, 0x02, 0x08, 0x10, 0x20
X, W = 1, 2


def _acl(path: str | int) -> list[tuple[int, int, int]]:
    data = os.getxattr(path, ACL_XATTR, follow_symlinks=False)
    assert len(data) >= 4 and (len(data) - 4) % 8 == 0 and struct.unpack_from("<I", data)[0] == 2, data
    return sorted(struct.unpack_from("<HHI", data, off) for off in range(4, len(data), 8))


def test_grants_open_the_socket_and_its_directory_to_exactly_their_ids_and_close_makes_it_0700_again() -> None:
    async def main() -> None:
        with socket_dir() as d:
            server = SocketServer(d.sock, lambda e: None, reach=((65534,), (995,)))
            await server.start()
            try:
                assert stat.S_IMODE(os.stat(d.path).st_mode) == 0o710
                entries = _acl(d.path)
                assert (USER, X, 65534) in entries and (GROUP, X, 995) in entries
                assert {(t, p) for t, p, _ in entries if t in (MASK, OTHER)} == {(MASK, X), (OTHER, 0)}
                assert [e for e in entries if e[0] == USER_OBJ][0][1] == 7
                assert stat.S_IMODE(os.lstat(d.sock).st_mode) == 0o620
                sock_entries = _acl(d.sock)
                assert (USER, W, 65534) in sock_entries and (GROUP, W, 995) in sock_entries
                assert {(t, p) for t, p, _ in sock_entries if t in (MASK, OTHER)} == {(MASK, W), (OTHER, 0)}
            finally:
                await server.aclose()
            assert stat.S_IMODE(os.stat(d.path).st_mode) == 0o700
            with pytest.raises(OSError) as info:
                os.getxattr(d.path, ACL_XATTR)
            assert info.value.errno == errno.ENODATA

    run(main())


def test_without_grants_the_directory_stays_0700_and_a_gate_left_by_a_killed_server_is_reset() -> None:
    async def main() -> None:
        with socket_dir() as d:
            left = SocketServer(d.sock, lambda e: None, reach=((65534,), ()))
            await left.start()
            # As if killed: the gate stays (and the socket file with it; a dead one is removed by hand).
            assert left._listener is not None
            left._listener._gate_open = False
            await left.aclose()
            assert stat.S_IMODE(os.stat(d.path).st_mode) == 0o710
            async with serving(d.sock):
                assert stat.S_IMODE(os.stat(d.path).st_mode) == 0o700
                with pytest.raises(OSError):
                    os.getxattr(d.path, ACL_XATTR)

    run(main())


def test_grants_on_a_file_system_without_acls_refuse_to_serve_and_leave_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    # No file system here lacks POSIX ACLs (ext4 and tmpfs have them), so setxattr answers as one would.
    def no_acls(*_args: Any, **_kw: Any) -> None:
        raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))

    async def main() -> None:
        with socket_dir() as d:
            monkeypatch.setattr("mosaic.controller.server._gate.os.setxattr", no_acls)
            with pytest.raises(SocketPathError) as info:
                await SocketServer(d.sock, lambda e: None, reach=((65534,), ())).start()
            assert info.value.reason == "no-acl"
            assert not os.path.lexists(d.sock) and stat.S_IMODE(os.stat(d.path).st_mode) == 0o700

    run(main())
