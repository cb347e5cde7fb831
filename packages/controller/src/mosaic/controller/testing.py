"""A controller on the fake engine, for tests, the demo and the benchmarks (`mosaic.controller.testing`).
The unstable module: no compatibility promise (any release may change or drop a name here).

`fake_controller(root)` starts pi-rpc's fake engine (pinned Pi's RPC mode, with its control channel and
hold points) in a scratch tree under `root`, a `ControllerCore` over its link, a chat-pages reader over
the fake's session directory for history pages, and the socket server in a private directory; it yields a
`FakeRig` and tears everything down by the exact names it recorded: the engine process (killed and
reaped), the control socket, the socket directory.

Both rigs run the idle drift check (brief §2; the core's rule 8): the session identity is the header id the
engine reports at start (`get_state` sessionId, as a lifecycle records the claim's), the file is read
read-only through safe-open (`SessionFileReader`), and the rig is handed over only after the first check
(the takeover check) has finished, so a test's first prompt never meets it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Any

from mosaic.pi_rpc import EngineLink, LinkCore, sealed_engine_argv
from mosaic.pi_rpc.seal import FIXTURE_EXTENSION_ENV
from mosaic.pi_rpc.testing import (
    FakeControl,
    FakeEngineSetup,
    Script,
    models_json,
    prepare_fake_engine,
    prepare_tree,
)

from ._memory import Crash, Liveness, MemoryCohort, MemoryExecutor, World, crash_at
from .core._access import AccessPolicy, Grants
from .core._receive import ControllerCore, new_incarnation
from .core._state import Bounds, CoreConfig
from .engines._verdict import DriftConfig
from .engines.pi._history import history_reader
from .engines.pi._wire import PI_RULES
from .lifecycle._session_reader import SessionFileReader
from .server._runtime import ControllerRuntime, EffectHandler, PageReader, no_cohort_effects
from .server._socket_server import ServerLimits

__all__ = ["SESSION_HEADER", "Crash", "FakeRig", "FixtureTree", "Liveness", "MemoryCohort", "MemoryExecutor", "RawClient",
           "World", "crash_at", "engine_session_id", "event_is", "fake_controller", "history_reader",
           "private_socket_dir", "readable_install", "readable_packages", "real_controller", "receipt_is",
           "session_reader", "stop_is"]

SEAT = "seat"
WAIT = 30.0


class RawClient:
    """A bare JSON-RPC client over the controller's socket, for tests and benchmarks that want the wire
    itself (the client library is `mosaic.controller.client`). Replies are routed by id; notifications are
    kept in arrival order; every wait is bounded by `WAIT` (a timeout raises TimeoutError)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.notes: list[dict[str, Any]] = []
        self.replies: dict[int, dict[str, Any]] = {}
        self.on_note: Any = None  # optional callable(note), called for each notification as it arrives
        self._id = 0
        self._arrived = asyncio.Condition()
        self._task = asyncio.get_running_loop().create_task(self._read())

    @classmethod
    async def connect(cls, path: str) -> RawClient:
        reader, writer = await asyncio.open_unix_connection(path, limit=1 << 24)
        return cls(reader, writer)

    async def _read(self) -> None:
        with contextlib.suppress(ConnectionError):
            while line := await self.reader.readline():
                message = json.loads(line)
                async with self._arrived:
                    if message.get("id") is not None:
                        self.replies[message["id"]] = message
                    else:
                        self.notes.append(message)
                        if self.on_note is not None:
                            self.on_note(message)
                    self._arrived.notify_all()

    async def send(self, method: str, **params: Any) -> int:
        """Write one request; its id (the reply arrives in `replies`)."""
        self._id += 1
        rid = self._id
        self.writer.write(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode()
                          + b"\n")
        await self.writer.drain()
        return rid

    async def reply(self, rid: int) -> dict[str, Any]:
        async with self._arrived:
            await asyncio.wait_for(self._arrived.wait_for(lambda: rid in self.replies), WAIT)
        return self.replies[rid]

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        return await self.reply(await self.send(method, **params))

    async def until(self, predicate: Any, timeout: float = WAIT) -> dict[str, Any]:
        """The first notification so far (or to come) that satisfies `predicate`."""
        async with self._arrived:
            await asyncio.wait_for(self._arrived.wait_for(lambda: any(predicate(n) for n in self.notes)), timeout)
        return next(n for n in self.notes if predicate(n))

    def events(self) -> list[dict[str, Any]]:
        return [n["params"] for n in self.notes if n.get("method") == "event"]

    def records(self, kind: str) -> list[dict[str, Any]]:
        return [n["params"] for n in self.notes if n.get("method") == "record" and n["params"].get("type") == kind]

    async def control(self) -> dict[str, Any]:
        """Observe and take control; the params every later command carries ({incarnation, generation})."""
        observed = (await self.call("observe"))["result"]
        token = observed["incarnation"]
        took = await self.call("takeover", incarnation=token, expectedGeneration=observed["generation"])
        return {"incarnation": token, "generation": took["result"]["generation"]}

    async def confirm(self, operation: str, auth: Mapping[str, Any], *, answer: bool = True) -> str:
        """Issue a confirmation for `operation` (`force-stop`, `recover`) and, with `answer`, confirm it; its id."""
        issued = await self.call("issue-confirmation", incarnation=auth["incarnation"], operation=operation)
        assert "result" in issued, issued
        cid: str = issued["result"]["confirmation"]["confirmation"]
        if answer:
            await self.call("answer-confirmation", incarnation=auth["incarnation"], confirmation=cid, answer="confirm")
        return cid

    async def force_stop(self, auth: Mapping[str, Any]) -> dict[str, Any]:
        """Confirm and request a force stop as the controller `auth` names; the stop record of the reply."""
        cid = await self.confirm("force-stop", auth)
        reply = await self.call("force-stop", incarnation=auth["incarnation"], confirmation=cid)
        assert "result" in reply, reply
        return dict(reply["result"]["stop"])

    async def stop_outcome(self, timeout: float = WAIT) -> dict[str, Any]:
        """The first stop record that ended (stopped or uncertain), so far or to come."""
        final = await self.until(lambda n: stop_is("stopped")(n) or stop_is("uncertain")(n), timeout)
        return dict(final["params"])

    async def close(self) -> None:
        self.writer.close()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionError):
            await self._task


def receipt_is(state: str) -> Any:
    """A notification predicate: a receipt record in `state`."""
    return lambda n: (n.get("method") == "record" and n["params"].get("type") == "receipt"
                      and n["params"]["state"] == state)


def stop_is(state: str) -> Any:
    """A notification predicate: a stop record in `state`."""
    return lambda n: (n.get("method") == "record" and n["params"].get("type") == "stop"
                      and n["params"]["state"] == state)


def event_is(kind: str) -> Any:
    return lambda n: n.get("method") == "event" and n["params"]["eventType"] == kind


@dataclass
class FakeRig:
    """A running controller on the fake engine: `runtime` (core, link, server), the `socket_path`
    clients connect to, the fake's `setup` (`ctl` is its control channel: hold points), the session
    file, and the conversation id."""

    runtime: ControllerRuntime
    socket_path: str
    setup: FakeEngineSetup
    conversation: str
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ctl(self) -> FakeControl:
        """The fake engine's control channel (hold points); the real Pi has none."""
        assert self.setup.ctl is not None
        return self.setup.ctl

    @property
    def session(self) -> Path:
        return self.setup.session

    @property
    def core(self) -> ControllerCore:
        return self.runtime.core


SESSION_HEADER = '{{"type":"session","version":3,"id":"{id}","timestamp":"2026-12-01T00:00:00.000Z","cwd":"{cwd}"}}\n'


@dataclass
class FixtureTree:
    """A lifecycle fixture tree under `root`: the engine's `home`, `agent` dir (its models.json naming the
    scripted provider) and project `proj` with the session file `.pi/state/seat/sessions/s.jsonl` (a header
    with `session_id`), all owned by the engine uid; the operator's `operator-home` (the live locations the
    guard refuses) and the 0700 claim root `claims`, root's. `make()` creates it; the caller removes `root`."""

    root: Path
    session_id: str = field(default_factory=lambda: f"0199{secrets.token_hex(4)}-aaaa-7000-8000-{secrets.token_hex(6)}")

    @property
    def claims(self) -> Path:
        return self.root / "claims"

    @property
    def project(self) -> Path:
        return self.root / "proj"

    @property
    def session(self) -> Path:
        return self.project / ".pi" / "state" / SEAT / "sessions" / "s.jsonl"

    def make(self, engine_uid: tuple[int, int], *, model_url: str = "http://127.0.0.1:9/v1",
             seed: str | None = None, group_writable: bool = False) -> None:
        """`seed`: the session file's bytes instead of the header. The fake's model is its in-process script,
        but Pi's provider table must name it (FACTS Part 2): hence the models.json even without a server.
        `group_writable`: the engine's tree is its group's to write (directories 2775, files 0664), as a tree
        that engines of several uids in one engine group share must be (`EngineUids`: a uid per execution)."""
        for d in ("home", "agent", "operator-home", "claims"):
            (self.root / d).mkdir(parents=True)
        self.session.parent.mkdir(parents=True)
        (self.root / "agent" / "models.json").write_text(json.dumps(models_json(model_url)))
        self.session.write_text(seed if seed is not None else SESSION_HEADER.format(id=self.session_id,
                                                                                   cwd=self.project))
        uid, gid = engine_uid
        for top in ("home", "agent", "proj"):
            for dirpath, _dirs, files in os.walk(self.root / top):
                os.chown(dirpath, uid, gid)
                if group_writable:
                    os.chmod(dirpath, 0o2775)
                for f in files:
                    os.chown(os.path.join(dirpath, f), uid, gid)
                    if group_writable:
                        os.chmod(os.path.join(dirpath, f), 0o664)
        os.chmod(self.claims, 0o700)

    def engine_env(self, **extra: str) -> dict[str, str]:
        """The engine's whole environment: its scratch HOME and agent dir, a fixed PATH, and `extra`."""
        return {"HOME": str(self.root / "home"), "PATH": "/usr/bin:/bin",
                "PI_CODING_AGENT_DIR": str(self.root / "agent"), **extra}

    def placement(self, socket_dir: str) -> dict[str, str]:
        """`mosaic.controller.Placement`'s arguments for this tree."""
        return {"fixture_root": str(self.root), "claim_root": str(self.claims), "session_file": str(self.session),
                "socket_dir": socket_dir, "home": str(self.root / "operator-home")}


def _open_up(tree: Path) -> None:
    """Every directory 0755 (a copy another uid must traverse)."""
    for dirpath, _dirs, _files in os.walk(tree):
        os.chmod(dirpath, 0o755)


def readable_install(src: str | os.PathLike[str], parent: str) -> Path:
    """A copy of an install tree (the pinned Pi, a vendored package) that another uid can read: hard links
    where the file system allows (the files keep their own modes, which must already let others read: a
    file that does not is refused, never chmod'ed through the link), else a plain copy; every directory of
    the copy 0755. The engine of a contained cohort runs as another uid than its controller (containment,
    cgroup-cohort README "K13"), and a checkout under /root is not readable to it. The caller removes the
    returned directory."""
    dest = Path(tempfile.mkdtemp(prefix="mosaic-install-", dir=parent))
    os.chmod(dest, 0o755)
    for dirpath, _dirs, files in os.walk(src):
        for name in files:
            full = os.path.join(dirpath, name)
            if not os.path.islink(full) and not os.stat(full).st_mode & 0o004:
                shutil.rmtree(dest, ignore_errors=True)
                raise PermissionError(f"{full} is not readable by other users")
    try:
        shutil.copytree(src, dest, symlinks=True, dirs_exist_ok=True, copy_function=os.link)
    except (OSError, shutil.Error):
        shutil.rmtree(dest, ignore_errors=True)
        os.mkdir(dest, 0o755)
        shutil.copytree(src, dest, symlinks=True, dirs_exist_ok=True)
    _open_up(dest)
    return dest


def readable_packages(modules: Sequence[ModuleType], parent: str | None = None) -> Path:
    """A world-readable copy of Mosaic packages (each `mosaic.<name>` module's directory, without its
    `__pycache__`) under a new directory, for an interpreter running as the engine uid (/root is 0700: it
    cannot import from this virtualenv). Put the returned directory on that interpreter's PYTHONPATH; the
    caller removes it."""
    dest = Path(tempfile.mkdtemp(prefix="mosaic-vendor-", dir=parent))
    for module in modules:
        source = Path(str(module.__file__)).parent
        shutil.copytree(source, dest / "mosaic" / source.name, ignore=shutil.ignore_patterns("__pycache__"))
    _open_up(dest)
    for root, _dirs, files in os.walk(dest):
        for f in files:
            os.chmod(os.path.join(root, f), 0o644)
    return dest


@contextlib.contextmanager
def private_socket_dir() -> Any:
    """A fresh 0700 directory under /tmp for a controller socket (a Unix socket path is at most 107
    bytes; pytest's tmp_path can be longer), removed by its exact name afterwards."""
    path = tempfile.mkdtemp(prefix="mosaic-ctl-", dir="/tmp")
    os.chmod(path, 0o700)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


async def engine_session_id(link: EngineLink) -> str:
    """The session header id the engine holds (`get_state` sessionId, FACTS (b); for a new session Pi mints
    it at start and writes it with the file at the first assistant message). The rigs record it as the
    identity the drift check holds the file's header to. Raises RuntimeError when the engine gives none,
    TimeoutError after `WAIT` seconds."""
    command = await asyncio.wait_for(link.request({"type": "get_state"}), WAIT)
    data = (command.response or {}).get("data")
    session_id = data.get("sessionId") if isinstance(data, Mapping) else None
    if not isinstance(session_id, str) or not session_id:
        raise RuntimeError(f"the engine reported no session id: {command.response!r}")
    return session_id


def session_reader(project: Path, session: Path) -> SessionFileReader:
    """A read-only safe-open reader of `session` beneath `project` (the drift check's file read)."""
    return SessionFileReader(project, os.path.relpath(session.parent, project), session.name)


async def _first_drift_check(runtime: ControllerRuntime) -> None:
    """Wait for the takeover drift check to end (bounded): the rig is handed over idle."""
    await runtime.wait_core(lambda core: core.drift_check is None, WAIT)


#: How long a rig whose body raised waits for its clients to hang up before it aborts them (seconds).
_ABANDONED_LINGER = 0.05


@contextlib.asynccontextmanager
async def _serve(setup: FakeEngineSetup, cid: str, page_reader: PageReader, link: EngineLink, link_core: LinkCore, *,
                 execution: str, bounds: Bounds, incarnation: str | None = None, limits: ServerLimits | None = None,
                 effects: EffectHandler = no_cohort_effects, grants: Grants | None = None,
                 evidence_path: str | None = None, dialogs: bool = False) -> AsyncIterator[FakeRig]:
    """A core over `link`'s engine, its runtime on a private socket, handed over once the takeover drift
    check ended; the runtime and the session reader are closed afterwards (the link is the caller's)."""
    drift = DriftConfig(session_id=await engine_session_id(link))
    core = ControllerCore(CoreConfig(conversation=cid, execution=execution, binding=f"binding-{execution}",
                                     incarnation=incarnation or new_incarnation(), engine=PI_RULES, bounds=bounds, drift=drift,
                                     access=AccessPolicy(grants=grants or Grants()), answer_dialogs=dialogs),
                          now=time.time(), link=link_core)
    reader = session_reader(setup.cwd, setup.session)
    try:
        with private_socket_dir() as sockets:
            runtime = ControllerRuntime(core, link, os.path.join(sockets, "controller.sock"), page_reader=page_reader,
                                        session_reader=reader, effects=effects, limits=limits,
                                        evidence_path=evidence_path)
            await runtime.start()
            try:
                await _first_drift_check(runtime)
                yield FakeRig(runtime, runtime.socket_path, setup, cid)
            except BaseException:
                # The body failed with its clients still connected: they will not answer `closing`, so the
                # rig does not linger (ServerLimits.close_linger, 5 s) for them before it aborts them. A
                # failing test (a mutant's kill) ends at once; a passing one closes exactly as before.
                runtime.server.limits = replace(runtime.server.limits, close_linger=_ABANDONED_LINGER)
                raise
            finally:
                await runtime.aclose()
    finally:
        reader.close()


@contextlib.asynccontextmanager
async def fake_controller(
    root: Path,
    *,
    seed: str | None = None,
    scenarios: str | None = None,
    bounds: Bounds | None = None,
    limits: ServerLimits | None = None,
    effects: EffectHandler = no_cohort_effects,
    execution: str = "exec-1",
    incarnation: str | None = None,
    grants: Grants | None = None,
    evidence_path: str | None = None,
    dialogs: bool = False,
) -> AsyncIterator[FakeRig]:
    """Start a controller on the fake engine under `root` (a directory that must not hold a tree yet).
    `grants`: who besides this uid may connect, and what they may do (none by default; `.access`);
    `evidence_path` is the runtime's evidence file (none by default). `dialogs`: the seat loads the fixture
    extension (a `DIALOG` prompt raises a dialog) and the controller answers dialogs (issue 33)."""
    options: dict[str, Any] = {} if scenarios is None else {"scenarios": scenarios}
    setup = prepare_fake_engine(root, seed=seed, fixture_extension=dialogs, **options)
    bounds = bounds or Bounds()
    link: EngineLink | None = None
    try:
        cid, page_reader = history_reader(setup.cwd, setup.session, seat=SEAT)
        link_core = PI_RULES.new_wire(command_bound=bounds.command)
        link = await EngineLink.spawn(setup.argv, env=setup.env, cwd=str(setup.cwd), core=link_core, clock=time.time)
        assert setup.ctl is not None
        await asyncio.get_running_loop().run_in_executor(None, setup.ctl.accept, WAIT)
        async with _serve(setup, cid, page_reader, link, link_core, execution=execution, incarnation=incarnation,
                          bounds=bounds, limits=limits, effects=effects, grants=grants,
                          evidence_path=evidence_path, dialogs=dialogs) as rig:
            yield rig
    finally:
        if link is not None:
            await link.aclose()  # kills and reaps the engine it spawned
        setup.close()


@contextlib.asynccontextmanager
async def real_controller(
    root: Path,
    pi_dir: str | os.PathLike[str],
    model_url: str,
    *,
    seed: str | None = None,
    bounds: Bounds | None = None,
    effects: EffectHandler = no_cohort_effects,
    execution: str = "exec-1",
    dialogs: bool = False,
) -> AsyncIterator[FakeRig]:
    """The same rig on the real pinned Pi 0.85.1, sealed, in a scratch tree under `root` (scratch HOME
    and agent dir: no ~/.pi is reachable), talking to the scripted model server at `model_url`
    (`ModelServer.base_url`). The pin is checked before spawn (`engine-pin-mismatch`). Run it inside the
    loopback-only network namespace (`nox -s smoke`). `dialogs`: the seat loads pi-rpc's fixture extension
    (jiti's cache off) and the controller answers dialogs (issue 33)."""
    agent, proj, session = prepare_tree(root, Script("controller", (), session="s.jsonl", seed=seed), model_url)
    argv = sealed_engine_argv(pi_dir, str(session), provider="fakeprov", model="fake-model-1",
                              fixture_extension=dialogs)
    env = {"HOME": str(root / "home"), "PATH": "/usr/bin:/bin", "PI_CODING_AGENT_DIR": str(agent),
           **(FIXTURE_EXTENSION_ENV if dialogs else {})}
    setup = FakeEngineSetup(argv, env, proj, session, agent, None)
    cid, page_reader = history_reader(proj, session, seat=SEAT)
    bounds = bounds or Bounds()
    link_core = PI_RULES.new_wire(command_bound=bounds.command)
    link = await EngineLink.spawn(argv, env=env, cwd=str(proj), core=link_core, clock=time.time)
    try:
        async with _serve(setup, cid, page_reader, link, link_core, execution=execution, bounds=bounds,
                          effects=effects, dialogs=dialogs) as rig:
            yield rig
    finally:
        await link.aclose()


def __dir__() -> list[str]:
    return list(__all__)
