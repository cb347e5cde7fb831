"""Who may connect, and what they may do (README), with real uids: the controller on the fake
engine, its clients in forked children that drop to `nobody` (65534) or the engine account (`cohorttest`)
before they connect, so the kernel's SO_PEERCRED names them. Needs root to change uid: elsewhere each test
skips, saying so (CI runs as root).

The children fork from a worker thread (the test's event loop keeps serving the controller meanwhile) and
hand back a JSON result through a pipe; every wait is bounded, a child past its bound is killed by the pid
this test started and the test fails."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import resource
import select
import signal
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from core_harness import SCHEMA, validate, validated_client

from mosaic.controller import Grants
from mosaic.controller.client import ControllerClient, Refused, RemoteRefusal
from mosaic.controller.server import ServerLimits
from mosaic.controller.testing import FakeRig, fake_controller, receipt_is, stop_is
from mosaic.pi_rpc import Command

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="changing to another uid (nobody, cohorttest) needs root")

NOBODY = 65534
NOGROUP = 65534
BOUND = 30.0


@dataclass(frozen=True)
class As:
    """Who a child becomes: uid, gid, supplementary groups; `fs_root` keeps root's file-system identity
    (fsuid 0, as a root-owned helper or a CAP_DAC_OVERRIDE holder has), so the socket's gate lets it by
    although SO_PEERCRED names `uid`."""

    uid: int
    gid: int
    groups: tuple[int, ...] = ()
    fs_root: bool = False

    def become(self) -> None:
        os.setgroups(list(self.groups))
        os.setresgid(self.gid, self.gid, self.gid)
        if not self.fs_root:
            os.setresuid(self.uid, self.uid, self.uid)
            return
        os.setresuid(self.uid, self.uid, 0)  # the saved uid 0 allows setfsuid(0) without CAP_SETUID
        libc = ctypes.CDLL(None, use_errno=True)
        libc.setfsuid(0)
        if libc.setfsuid(-1) != 0:  # setfsuid returns the previous fsuid; -1 changes nothing
            raise OSError("setfsuid(0) did not take")


def _in_child(who: As, fn: Callable[[], Any]) -> dict[str, Any]:
    """Blocking (call it from a worker thread): `fn()` in a forked child that became `who`: {"ok": its JSON
    result, "pid": the child's pid}, or {"error": what it raised}. Raises TimeoutError (the child killed)
    past BOUND."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(r)
            who.become()
            out = {"ok": fn(), "pid": os.getpid()}
        except BaseException as exc:  # noqa: BLE001 - everything goes back to the test
            out = {"error": f"{type(exc).__name__}: {exc}"}
        try:
            os.write(w, json.dumps(out).encode())
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    deadline = time.monotonic() + BOUND
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([r], [], [], left)[0]:
                os.kill(pid, signal.SIGKILL)
                raise TimeoutError(f"the child as {who} did not finish within {BOUND} s")
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(r)
        os.waitpid(pid, 0)
    result: dict[str, Any] = json.loads(data)
    return result


async def as_peer(who: As, fn: Callable[[], Any]) -> tuple[Any, int]:
    """`fn()` run as `who` (see `_in_child`): its result and the child's pid. A child that raised fails
    the test here, on an assertion naming what it raised."""
    result = await asyncio.to_thread(_in_child, who, fn)
    assert "error" not in result, f"the child as {who} raised {result['error']}"
    return result["ok"], result["pid"]


def library(flow: Callable[[], Any]) -> Callable[[], Any]:
    """A child body that runs the coroutine function `flow` on a fresh event loop."""
    return lambda: asyncio.run(asyncio.wait_for(flow(), BOUND))


@contextlib.contextmanager
def engine_writes(rig: FakeRig) -> Iterator[list[Command]]:
    """Every command written to the engine's stdin while the block runs (its LinkCore's writes)."""
    link = rig.core.link
    written: list[Command] = []
    original = link.next_write

    def spy() -> Command | None:
        command = original()
        if command is not None:
            written.append(command)
        return command

    link.next_write = spy  # type: ignore[method-assign]
    try:
        yield written
    finally:
        del link.next_write


def engine_account() -> tuple[int, int]:
    from mosaic.cgroup_cohort.testing.account import EngineAccountError
    from mosaic.cgroup_cohort.testing.account import engine_account as account

    try:
        creds = account()
    except EngineAccountError as exc:
        pytest.skip(f"the engine account cannot be used here: {exc}")
    return creds.uid, creds.gid


def grants(*, users: dict[int, set[str]] | None = None, groups: dict[int, set[str]] | None = None) -> Grants:
    return Grants(users={k: frozenset(v) for k, v in (users or {}).items()},
                  groups={k: frozenset(v) for k, v in (groups or {}).items()})


def code_of(exc: BaseException) -> str:
    assert isinstance(exc, RemoteRefusal), repr(exc)
    return exc.code


# --------------------------------------------------------------------------------------------- tests


def test_an_observe_only_grant_observes_and_cannot_prompt_refused_capability_with_zero_engine_bytes(
        tmp_path: Path) -> None:
    async def main() -> None:
        async with fake_controller(tmp_path / "rig", grants=grants(users={NOBODY: {"observe"}})) as rig:
            path = rig.socket_path

            async def flow() -> dict[str, Any]:
                client = await ControllerClient.connect(path, ping_interval=None)
                try:
                    observed = await client.observe()
                    outcome = await client.prompt("hello from nobody")
                    refusal = outcome.refusal if isinstance(outcome, Refused) else None
                    try:
                        await client.takeover()
                        took = "taken"
                    except RemoteRefusal as exc:
                        took = exc.code
                    return {"binding": dict(observed.binding), "prompt": type(outcome).__name__,
                            "code": getattr(refusal, "code", None),
                            "known": isinstance(refusal, RemoteRefusal) and refusal.known,
                            "message": getattr(refusal, "message", ""), "takeover": took}
                finally:
                    await client.aclose()

            with engine_writes(rig) as written:
                seen, _pid = await as_peer(As(NOBODY, NOGROUP), library(flow))
            assert seen["prompt"] == "Refused" and seen["code"] == "capability" and seen["known"] is True
            assert seen["takeover"] == "capability"
            assert "65534" in seen["message"] and "prompt" in seen["message"]
            validate(seen["binding"])
            assert written == [] and rig.core.requests == {} and rig.core.slot is None  # zero engine bytes
            assert rig.core.controller is None

    asyncio.run(main())


def test_a_uid_no_grant_names_cannot_even_reach_the_socket(tmp_path: Path) -> None:
    engine_uid, engine_gid = engine_account()

    def connect() -> str:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
        except OSError as exc:
            return os.strerror(exc.errno or 0)
        finally:
            sock.close()
        return "connected"

    async def main() -> None:
        nonlocal path
        # No grants: the directory stays 0700. A grant for nobody: the gate names nobody, not the engine uid
        # (whose tools, an agent's bash included, therefore cannot take control: brief Limit 1).
        for given in (grants(), grants(users={NOBODY: {"observe"}})):
            async with fake_controller(tmp_path / f"rig{len(given.users)}", grants=given) as rig:
                path = rig.socket_path
                calls_before = len(rig.core.connections)
                engine, _pid = await as_peer(As(engine_uid, engine_gid), connect)
                assert engine == os.strerror(13)  # EACCES: the file system said no
                if not given.users:
                    alone, _pid = await as_peer(As(NOBODY, NOGROUP), connect)
                    assert alone == os.strerror(13)
                assert len(rig.core.connections) == calls_before
                assert not [e for e in rig.runtime.evidence if e.kind == "channel-refused"]

    path = ""
    asyncio.run(main())


def test_a_peer_past_the_socket_gate_that_no_grant_names_is_refused_channel_at_connect(tmp_path: Path) -> None:
    # A process with root's file-system identity (fsuid 0) passes the gate; SO_PEERCRED says uid 65534,
    # which only a group grant it is not in could name: the controller refuses it at connect.
    async def main() -> None:
        async with fake_controller(tmp_path / "rig", grants=grants(groups={4242: {"observe"}})) as rig:
            path = rig.socket_path

            def raw() -> list[dict[str, Any]]:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.settimeout(BOUND)
                sock.connect(path)
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    sock.sendall(b'{"jsonrpc":"2.0","id":1,"method":"observe"}\n'
                                 b'{"jsonrpc":"2.0","id":2,"method":"ping"}\n')
                data = b""
                # Until EOF, or the ping's reply: a server that let the peer in answers it (then the
                # assertion below says so at once, not after the bound).
                while not (data.endswith(b"\n") and b'"id":2' in data.replace(b" ", b"")) \
                        and (chunk := sock.recv(1 << 16)):
                    data += chunk
                sock.close()
                return [json.loads(line) for line in data.splitlines()]

            async def flow() -> str:
                client = await ControllerClient.connect(path, ping_interval=None)
                try:
                    await client.observe()
                except Exception as exc:  # noqa: BLE001 - whatever it is, the test says what it expected
                    return f"{type(exc).__name__}: {getattr(exc, 'code', '')}: {exc}"
                finally:
                    await client.aclose()
                return "observed"

            outsider = As(NOBODY, NOGROUP, fs_root=True)
            with engine_writes(rig) as written:
                got, raw_pid = await as_peer(outsider, raw)
                said, lib_pid = await as_peer(outsider, library(flow))
            # Only the reason, then EOF: no reply to either request, so nothing it sent was read.
            assert [(m.get("method"), m.get("params", {}).get("reason")) for m in got] == [("closing", "channel")]
            assert "no grant" in got[0]["params"]["message"]
            assert said.startswith("RemoteRefusal: channel: ") and "no grant" in said, said
            refused = [e.detail for e in rig.runtime.evidence if e.kind == "channel-refused"]
            assert [r["peer"]["uid"] for r in refused] == [NOBODY, NOBODY]
            assert {r["peer"]["pid"] for r in refused} == {raw_pid, lib_pid}
            assert rig.core.connections == {} and written == []

    asyncio.run(main())


def test_a_grant_by_gid_works_for_the_primary_gid_and_for_a_supplementary_group(tmp_path: Path) -> None:
    engine_uid, engine_gid = engine_account()

    async def main() -> None:
        allowed = {"observe", "takeover", "prompt"}
        async with fake_controller(tmp_path / "rig", grants=grants(groups={engine_gid: allowed})) as rig:
            path = rig.socket_path

            async def flow() -> dict[str, Any]:
                client = await ControllerClient.connect(path, ping_interval=None)
                try:
                    await client.observe()
                    took = await client.takeover()
                    try:
                        await client.interrupt()
                        interrupt = "interrupted"
                    except RemoteRefusal as exc:
                        interrupt = exc.code
                    await client.wait_until(lambda: (client.binding or {}).get("generation") == took["generation"])
                    return {"generation": took["generation"], "interrupt": interrupt,
                            "binding": dict(client.binding or {})}
                finally:
                    await client.aclose()

            primary, primary_pid = await as_peer(As(engine_uid, engine_gid), library(flow))
            supplementary, supplementary_pid = await as_peer(As(NOBODY, NOGROUP, (engine_gid,)), library(flow))
            assert primary["interrupt"] == supplementary["interrupt"] == "capability"
            assert supplementary["generation"] == primary["generation"] + 1
            for seen, uid, gid, pid in ((primary, engine_uid, engine_gid, primary_pid),
                                        (supplementary, NOBODY, NOGROUP, supplementary_pid)):
                validate(seen["binding"])
                actor = seen["binding"]["actor"]
                assert (actor["uid"], actor["gid"], actor["pid"]) == (uid, gid, pid)

    asyncio.run(main())


def test_the_owner_is_unaffected_by_grants(tmp_path: Path) -> None:
    async def main() -> None:
        async with fake_controller(tmp_path / "rig", grants=grants(users={NOBODY: {"observe"}})) as rig:
            owner = await validated_client(rig.socket_path)  # this process: the controller's own uid
            auth = await owner.control()
            reply = await owner.call("prompt", **auth, clientRequestId="owner-1", text="Say hello")
            assert reply["result"]["outcome"] == "admitted"
            await owner.until(receipt_is("finished"))
            stop = await owner.force_stop(auth)
            final = await owner.stop_outcome()
            request = owner.records("request")[-1]
            me = (os.geteuid(), os.getegid(), os.getpid())
            for actor in (request["actor"], stop["actor"], final["actor"], owner.records("binding")[-1]["actor"]):
                assert (actor["uid"], actor["gid"], actor["pid"]) == me and actor["name"] == "local-operator"
            assert final["state"] == "uncertain" and final["reason"] == "no-cohort"  # the rig has no cohort
            await owner.close()

    asyncio.run(main())


def test_a_prompt_grant_prompts_and_cannot_force_stop_interrupt_or_take_recovery_control(tmp_path: Path) -> None:
    async def main() -> None:
        allowed = {"observe", "takeover", "prompt"}
        async with fake_controller(tmp_path / "rig", grants=grants(users={NOBODY: allowed})) as rig:
            path = rig.socket_path
            watcher = await validated_client(path)
            await watcher.call("observe")

            async def flow() -> dict[str, Any]:
                client = await ControllerClient.connect(path, ping_interval=None)
                refusals: dict[str, str] = {}
                try:
                    await client.observe()
                    await client.takeover()
                    outcome = await client.prompt("Say hello")
                    if not hasattr(outcome, "request"):
                        return {"outcome": type(outcome).__name__, "receipt": None, "refusals": refusals}
                    settled = await client.wait_settled(outcome.request.client_request_id)
                    for name, call in (("issue-confirmation", lambda: client.issue_confirmation("force-stop")),
                                       ("interrupt", client.interrupt),
                                       ("acquire-recovery-control", client.acquire_recovery_control)):
                        try:
                            await call()
                            refusals[name] = "done"
                        except RemoteRefusal as exc:
                            refusals[name] = exc.code
                    return {"outcome": type(outcome).__name__, "receipt": settled.receipt_state, "refusals": refusals}
                finally:
                    await client.aclose()

            seen, pid = await as_peer(As(NOBODY, NOGROUP), library(flow))
            assert seen["outcome"] == "Admitted" and seen["receipt"] == "finished"
            assert seen["refusals"] == {"issue-confirmation": "capability", "interrupt": "capability",
                                        "acquire-recovery-control": "capability"}
            request = (await watcher.until(lambda n: n.get("method") == "record"
                                           and n["params"].get("type") == "request"))["params"]
            assert (request["actor"]["uid"], request["actor"]["pid"]) == (NOBODY, pid)
            assert not [n for n in watcher.notes if stop_is("stopping")(n)]  # no stop ever began
            await watcher.close()

    asyncio.run(main())


def test_a_hello_by_another_uid_names_only_its_own_grant_and_narrows_it_never_widens(tmp_path: Path) -> None:
    """The seed's hello with real uids (issue 26): `nobody` holds two grants, `watch` (observe) and, through
    its supplementary group, the group's `drive` (observe, takeover, prompt); without a hello it may do their
    union. Saying hello naming `watch` narrows the connection to observe (its takeover refused
    `capability`); naming `drive` (its group's) allows what that grant says; naming the engine account's
    grant, which does not name it, is refused `grant`: a hello never borrows another uid's rights."""
    engine_uid, engine_gid = engine_account()
    table = Grants(users={NOBODY: frozenset({"observe"}), engine_uid: frozenset({"observe", "interrupt"})},
                   groups={engine_gid: frozenset({"observe", "takeover", "prompt"})},
                   ids={"watch": ("uid", NOBODY), "drive": ("gid", engine_gid), "theirs": ("uid", engine_uid)})

    async def main() -> None:
        async with fake_controller(tmp_path / "rig", grants=table) as rig:
            path = rig.socket_path

            def attempt(grant: str | None) -> Callable[[], Any]:
                async def flow() -> dict[str, Any]:
                    try:
                        client = await ControllerClient.connect(path, ping_interval=None, grant=grant)
                    except RemoteRefusal as exc:
                        return {"hello": exc.code}
                    try:
                        await client.observe()
                        try:
                            await client.takeover()
                            took = "taken"
                        except RemoteRefusal as exc:
                            took = exc.code
                        ops = None if client.granted is None else client.granted["operations"]
                        return {"hello": "ok", "operations": ops, "takeover": took}
                    finally:
                        await client.aclose()
                return library(flow)

            nobody = As(NOBODY, NOGROUP, (engine_gid,))
            watched, _ = await as_peer(nobody, attempt("watch"))
            driven, _ = await as_peer(nobody, attempt("drive"))
            borrowed, _ = await as_peer(nobody, attempt("theirs"))
            plain, _ = await as_peer(nobody, attempt(None))
            assert watched == {"hello": "ok", "operations": ["observe"], "takeover": "capability"}
            assert driven == {"hello": "ok", "operations": ["observe", "prompt", "takeover"], "takeover": "taken"}
            assert borrowed == {"hello": "grant"}
            assert plain["hello"] == "ok" and plain["operations"] is None and plain["takeover"] == "taken"

def test_a_connection_passed_to_another_uid_keeps_its_peers_rights_and_the_records_name_that_peer(
        tmp_path: Path) -> None:
    """Issue 28 item 4: a connection's rights travel with its file descriptor, as with every Unix socket
    (ssh-agent's, docker.sock). The owner connects (no grants: the 0700 directory keeps every other uid from
    even reaching the socket), then hands the connected socket to a process of uid 65534 over SCM_RIGHTS;
    that process observes, takes control and prompts through it, with the owner's rights, and every record
    names the peer read at accept (the owner's uid and the connecting pid), never the uid that sent. The
    schema's actor description says so."""
    async def main() -> None:
        async with fake_controller(tmp_path / "rig") as rig:
            watcher = await validated_client(rig.socket_path)
            await watcher.call("observe")
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.connect(rig.socket_path)  # this process, the owner, is the peer the kernel records
            passer, taker = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            socket.send_fds(passer, [b"fd"], [conn.fileno()])
            original = conn.fileno()

            def through_the_passed_fd() -> dict[str, Any]:
                os.close(original)  # the inherited copy: only the one received below is used
                _msg, fds, _flags, _addr = socket.recv_fds(taker, 16, 1)
                sock = socket.socket(fileno=fds[0])
                sock.settimeout(BOUND)
                buf = b""

                def call(rpc_id: int, method: str, **params: Any) -> dict[str, Any]:
                    nonlocal buf
                    sock.sendall(json.dumps({"jsonrpc": "2.0", "id": rpc_id, "method": method,
                                             "params": params}).encode() + b"\n")
                    while True:
                        while b"\n" not in buf:
                            chunk = sock.recv(1 << 16)
                            if not chunk:
                                raise ConnectionError("EOF")
                            buf += chunk
                        line, _, buf = buf.partition(b"\n")
                        message: dict[str, Any] = json.loads(line)
                        if message.get("id") == rpc_id:
                            return message

                observed = call(1, "observe")["result"]
                took = call(2, "takeover", incarnation=observed["incarnation"],
                            expectedGeneration=observed["generation"])
                prompt = call(3, "prompt", incarnation=observed["incarnation"],
                              generation=took["result"]["generation"], clientRequestId="passed-1", text="Say hello")
                return {"uid": os.geteuid(), "takeover": took, "prompt": prompt}

            try:
                seen, _pid = await as_peer(As(NOBODY, NOGROUP), through_the_passed_fd)
            finally:
                for s_ in (conn, passer, taker):
                    s_.close()
            assert seen["uid"] == NOBODY
            assert "result" in seen["takeover"], seen  # neither channel nor capability: the owner's rights
            assert seen["prompt"]["result"]["outcome"] == "admitted", seen
            me = (os.geteuid(), os.getegid(), os.getpid())  # the peer read at accept: who connected
            binding = (await watcher.until(lambda n: n.get("method") == "record" and n["params"].get("type") ==
                                           "binding" and n["params"].get("actor") is not None))["params"]
            request = (await watcher.until(lambda n: n.get("method") == "record"
                                           and n["params"].get("type") == "request"))["params"]
            for actor in (binding["actor"], request["actor"]):
                assert (actor["uid"], actor["gid"], actor["pid"]) == me, actor
            await watcher.until(receipt_is("finished"))
            await watcher.close()

    asyncio.run(main())
    described = SCHEMA["$defs"]["actor"]
    assert "travel with its file descriptor" in described["description"] and "SCM_RIGHTS" in described["description"]
    assert "at accept" in described["properties"]["uid"]["description"]


#: How many connections the neighbour opens: past the whole bound (256), as the red team's probe did.
NEIGHBOUR_CONNECTIONS = 300


def _hold_connections(path: str, n: int, ready_w: int, go_r: int) -> dict[str, Any]:
    """In the neighbour's child: open `n` connections to `path`, ping each and read its first line (a ping
    answer: held; a `closing`: refused with its reason), report the counts on `ready_w`, then keep every
    held connection open until `go_r` is readable (the owner has finished). Every read is bounded. (Runs as
    uid 65534, which cannot read this interpreter's library under /root: everything it uses is imported at
    the top of the module.)"""
    resource.setrlimit(resource.RLIMIT_NOFILE, (n + 64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    socks: list[socket.socket] = []
    seen: dict[str, Any] = {"held": 0, "refused": {}, "messages": set()}
    try:
        for _ in range(n):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(BOUND)
            sock.connect(path)
            socks.append(sock)
        for sock in socks:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                sock.sendall(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
        for sock in socks:
            line = b""
            while not line.endswith(b"\n"):
                chunk = sock.recv(4096)
                if not chunk:
                    break
                line += chunk
            message = json.loads(line.split(b"\n")[0])
            if message.get("method") == "closing":
                reason = message["params"]["reason"]
                seen["refused"][reason] = seen["refused"].get(reason, 0) + 1
                seen["messages"].add(message["params"]["message"])
            else:
                assert message.get("result") == {}, message
                seen["held"] += 1
        seen["messages"] = sorted(seen["messages"])
        os.write(ready_w, json.dumps(seen).encode() + b"\n")
        select.select([go_r], [], [], BOUND * 4)  # the neighbour keeps its connections while the owner works
    finally:
        for sock in socks:
            sock.close()
    return seen


def _read_bounded(fd: int) -> bytes:
    """What `fd` holds once it is readable, within 2 * BOUND; b"" when nothing came (the caller fails)."""
    if not select.select([fd], [], [], 2 * BOUND)[0]:
        return b""
    return os.read(fd, 1 << 16)


def test_a_neighbour_holding_300_connections_leaves_the_owner_its_reserve_it_connects_takes_control_and_force_stops(
        tmp_path: Path) -> None:
    """Issue 28 item 2: a uid with an `observe` grant held all 256 connection slots, and the owner of the
    controller was closed `too-many-connections` (a reconnect, a second terminal, the client that would force
    stop a runaway engine) for as long as the neighbour pinged. Now each uid other than the owner has a share
    of the bound (32 of 256), and the last slots are kept for the owner (16) and for the owner and uids granted
    force-stop (16 more): of 300 connections from uid 65534, 32 are served and 268 closed
    `too-many-connections` with a message naming its share; meanwhile the owner connects, takes control and
    force stops, and the neighbour's 32 are still served."""
    limits = ServerLimits()
    assert (limits.connections_per_uid, limits.owner_reserved, limits.force_stop_reserved) == (32, 16, 16)

    async def main() -> None:
        async with fake_controller(tmp_path / "rig", grants=grants(users={NOBODY: {"observe"}})) as rig:
            path = rig.socket_path
            ready_r, ready_w = os.pipe()
            go_r, go_w = os.pipe()
            neighbour = asyncio.ensure_future(as_peer(As(NOBODY, NOGROUP), lambda: _hold_connections(
                path, NEIGHBOUR_CONNECTIONS, ready_w, go_r)))
            try:
                line = await asyncio.to_thread(_read_bounded, ready_r)
                assert line, "the neighbour reported nothing (it failed: see its result below)"
                seen = json.loads(line)
                assert seen["held"] == limits.connections_per_uid, seen
                assert seen["refused"] == {"too-many-connections": NEIGHBOUR_CONNECTIONS - seen["held"]}, seen
                assert any("uid 65534" in m and "share" in m for m in seen["messages"]), seen
                nobody_held = [c for c in rig.core.connections.values() if c.ids[0] == NOBODY]
                assert len(nobody_held) == limits.connections_per_uid
                owner = await validated_client(path)  # this process: the controller's own uid
                auth = await owner.control()
                stop = await owner.force_stop(auth)
                final = await owner.stop_outcome()
                assert stop["actor"]["uid"] == os.geteuid() and final["state"] == "uncertain"  # no cohort in the rig
                await owner.close()
            finally:
                os.write(go_w, b"go")
                result, _pid = await neighbour
                for fd in (ready_r, ready_w, go_r, go_w):
                    os.close(fd)
            assert result["held"] == limits.connections_per_uid

    asyncio.run(main())
