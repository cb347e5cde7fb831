#!/usr/bin/env python3
"""The main job: the whole system on the real Pi 0.85.1 and Claude Code 2.1.283, printed as a person would
want to read it.

    python ci/demo.py [--verbose] [--evidence FILE] [--transcript FILE]   # the seven steps (issues 12, 32)
    python ci/demo.py --interactive                           # the same controller, with mosaic-terminal on it

Run it through `bash ci/main` (which checks the machine, sets up, installs the pinned Pi into .cache/pi and
enters the loopback-only network namespace); it needs root (a cgroup under the cgroup2 mount, the engine
account `cohorttest`). Everything it makes is temporary and recorded by name, before it is made, in a
small state file (`.cache/demo-runs/run-<pid>-<token>.json`, or under `--state-dir`): the fixture
directory, the socket directory, the parent cgroup, every cohort's unit name and then its reference. At
the end it removes each by that name (every cohort released by its reference, the parent cgroup and what
is left under it killed and removed, the two directories) and the state file.

Signals: SIGINT (Ctrl-C), SIGHUP (a closed terminal) and SIGTERM are treated alike, at any step: the run
stops, cleans up as above and prints one line, `interrupted: cleaned up` (also into `--transcript`; a
closed terminal cannot show it). A run killed outright (SIGKILL) leaves its state file: the next run
sweeps what it recorded before starting, and says so in one line.

Exit status: 0 the demo ran; 1 refused (not root, outside the namespace, the Pi or Claude Code install
does not match its pin, the engine account, no cohort route, a refusal from a package), one line; 70 a
crash (a bug: one line, and the traceback with MOSAIC_TRACEBACK=1); 128 + n interrupted by signal n (130
SIGINT, 129 SIGHUP, 143 SIGTERM).

The steps: (1) two clients attach, one takes control, a prompt streams its answer (a tool call
included) to both; (2) the observer's prompt is refused (`controller`), a `/` prompt is refused
(`text-policy`); (3) the observer takes control (generation + 1) and interrupts a streaming turn: R3-1
settles it and admission reopens; (4) a force stop with a confirmation, and the cohort proof it produced;
(5) recover, and a new controller launches on the same leaf (new claim id, generation + 1) for one more
turn; (6) the reader's view of the resulting session file, every branch, and of a Claude Code 2.1.283
session beside it (a seat of the same project whose launcher receipt names the pinned binary's transcript);
(7) a Claude Code seat (issue 32): a third controller launches the sealed Claude Code 2.1.283 (its pin
checked before anything is made: MOSAIC_CLAUDE_DIR, else .cache/claude) on the same cohort route, against
claude-rpc's scripted Anthropic model on loopback; D takes control, a `BASH: mkdir` prompt makes Claude ask
permission (shown with the tool and its input, `allow once` and `deny` offered, the widening choices shown
disabled), D allows it once and the folder appears, a slow reply is interrupted, a force stop with the cohort's
proof ends it.
Ids are shortened on screen
(`claim-91d2…`) and the words are plain (issue 29: what a person needs, such as "the engine was proven
stopped: every process it started has ended"); `--verbose` adds the technical lines (incarnations, the
seam, confirmation ids, the proof's membership flag, leaves). `--evidence FILE` writes the facts each step
printed as JSON, in full, and `--transcript FILE` a copy of what it printed, for `ci/demo_check.py` (run by
`nox -s demo`).

A step that is refused stops the run in one line with the step, the refusal, why the controller had closed
new prompts if it had (its fences, in its words), and what to do next. The library's log goes to stderr,
one line per record, never a traceback (MOSAIC_TRACEBACK=1 shows them).

`--interactive`: the controller and mosaic-terminal on it. A recover in the terminal (Ctrl-R, y) issues an
eligibility record; the demo, as the controller's launcher, then closes that controller and launches a new
one from the record on the same socket, and the terminal's note says so: Ctrl-O connects to it, Ctrl-T
takes control again.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import traceback
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from reader_demo import materialise_claude

from mosaic.cgroup_cohort import (
    CohortHandle,
    CohortRef,
    Credentials,
    EngineLimits,
    FixtureVerifier,
    Launcher,
    release_cohort,
)
from mosaic.cgroup_cohort.launchers import LauncherKind, Presence, find_cgroup2
from mosaic.cgroup_cohort.testing import remove_cgroup
from mosaic.cgroup_cohort.testing.account import EngineAccountError, engine_account
from mosaic.chat_pages import conversation_id
from mosaic.chat_pages.sources import claude_conversation_id
from mosaic.claude_rpc import check_pin as check_claude_pin
from mosaic.claude_rpc.testing import ModelServer as ClaudeModelServer
from mosaic.claude_rpc.testing import RecordedRequest
from mosaic.claude_rpc.testing.drive import FAKE_KEY
from mosaic.claude_rpc.testing.model_server import SLOW_DELTAS
from mosaic.controller import LaunchingController, PiSpec, Placement
from mosaic.controller.client import (
    Admitted,
    ControllerClient,
    LiveMessage,
    Notification,
    Refused,
    Subscription,
    ToolRun,
    Transcript,
)
from mosaic.controller.engines.claude import ClaudeSpec, claude_slug
from mosaic.controller.lifecycle import EligibilityRecord
from mosaic.controller.plain import plain_message, shorten
from mosaic.controller.route import RouteUnavailable, choose_route, engine_can_read
from mosaic.controller.testing import FixtureTree, readable_install
from mosaic.pi_rpc import check_pin
from mosaic.pi_rpc.testing import ModelServer
from mosaic.safe_open import Refusal, read_stat

#: The Claude Code seat step 6 adds to the demo's project (issue 30: the catalogue lists a Claude
#: conversation beside the Pi one).
CLAUDE_SEAT = "claude"

REPO = Path(os.environ.get("MOSAIC_REPO") or Path(__file__).resolve().parents[1])
WAIT = 60.0
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
EXIT_REFUSED = 1
EXIT_CRASH = 70
# Where a run may be held for a signal (tests): each step's start, and the boundaries around the set-up.
HOLD_POINTS = ("start", "route", "launched", "step-1", "step-2", "step-3", "step-4", "step-5", "relaunched",
               "step-6", "step-7", "claude-launched", "done")
HOLD: list[str] = []  # --hold-at, once parsed
VERBOSE: list[bool] = []  # --verbose, once parsed
AT: dict[str, Any] = {"step": "the set-up", "controller": None}  # where a refusal happened, and whose fences

TRANSCRIPT: list[Any] = []  # the file --transcript names, once opened
TERMINAL = {"gone": False}  # a closed terminal (EIO) or pipe (EPIPE): keep going, keep the transcript


class DemoRefused(Exception):
    """An expected way for the demo not to run (not root, the pin, the account, the route): one line."""


class Interrupted(BaseException):
    """SIGINT, SIGTERM or SIGHUP outside the event loop (before it starts, after it ends)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def say(text: str = "") -> None:
    """Print a line for a person (ids shortened) and copy it into the transcript. A terminal that is gone
    (closed: EIO; a pipe whose reader left: EPIPE) is not an error: the run goes on to its end or its
    clean-up, and the transcript still gets every line."""
    text = shorten(text)
    if not TERMINAL["gone"]:
        try:
            print(text, flush=True)
        except OSError:
            TERMINAL["gone"] = True
            with contextlib.suppress(OSError):
                sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - the interpreter's exit flush must not fail
    for f in TRANSCRIPT:
        f.write(text + "\n")
        f.flush()


def detail(text: str) -> None:
    """A technical line (ids of the protocol, the seam, flags of a proof): only with --verbose."""
    if VERBOSE:
        say(text)


def heading(n: int, title: str) -> None:
    AT["step"] = f"step {n} ({title})"
    say(f"\n== step {n}: {title}")


async def hold(point: str) -> None:
    """At `point`, when the run was asked to hold there (--hold-at): say so and wait for a signal."""
    if HOLD and HOLD[0] == point:
        say(f"(held at {point})")
        await asyncio.Event().wait()


def shown(value: object, width: int = 100) -> str:
    """A value as one inert line: JSON-escaped (control characters and ESC never reach the terminal)."""
    if isinstance(value, str):
        text = json.dumps(value, ensure_ascii=True)[1:-1]
    else:
        text = json.dumps(value, ensure_ascii=True, default=str)  # JSON escapes every control character
    return text if len(text) <= width else text[: width - 1] + "…"


# ------------------------------------------------------------------------------- what a run makes, by name

TOKEN = re.compile(r"[0-9a-f]{8}")
UNIT = re.compile(r"cohort-claim-[0-9a-f]{32}\.scope")


def _owner() -> dict[str, int]:
    stat = read_stat(os.getpid())
    assert stat is not None
    return {"pid": stat.pid, "startTime": stat.start_time}


def _owner_alive(owner: Mapping[str, Any]) -> bool:
    stat = read_stat(int(owner["pid"]))
    return stat is not None and stat.start_time == owner["startTime"] and stat.state not in ("Z", "X")


def clean(names: Mapping[str, Any]) -> list[str]:
    """Remove what a run recorded, by those names only: every cohort released by its reference, on a scope
    route every recorded unit stopped, the parent cgroup (with anything still in it) killed and removed,
    the socket and fixture directories. A name that is not of the shape this script makes is left alone.
    Returns what could not be removed (empty: all of it)."""
    left: list[str] = []
    token = str(names.get("token", ""))
    if not TOKEN.fullmatch(token):
        return [f"a state file with no valid token ({token!r}): nothing removed"]
    for raw in names.get("refs", []):
        with contextlib.suppress(Exception):
            release_cohort(CohortRef.from_dict(raw), force=True)
    if names.get("route") == "scope":
        for unit in names.get("units", []):
            if UNIT.fullmatch(str(unit)):
                subprocess.run(["systemctl", "--user", "stop", str(unit)], capture_output=True, timeout=30,
                               stdin=subprocess.DEVNULL, check=False)
    if names.get("parent"):
        try:
            parent = os.path.join(find_cgroup2().mount_point, f"mosaic-demo-{token}")
            remove_cgroup(parent)  # cgroup.kill on what is still there, then rmdir depth first
        except Exception as e:  # noqa: BLE001 - say what is left, clean the rest
            left.append(f"the parent cgroup mosaic-demo-{token} ({e})")
    for path in (f"/tmp/mosaic-demo-sock-{token}", f"/tmp/mosaic-demo-{token}"):
        if os.path.lexists(path):
            subprocess.run(["rm", "-rf", "--one-file-system", path], capture_output=True, check=False)
            if os.path.lexists(path):
                left.append(path)
    return left


def sweep(state_dir: Path) -> None:
    """Before a run: clean what earlier runs that are gone (killed outright) recorded, one line each.
    A state file whose owner is alive belongs to a run going on now and is left alone."""
    for path in sorted(state_dir.glob("run-*.json")):
        try:
            names = json.loads(path.read_text())
            alive = _owner_alive(names["owner"])
        except (OSError, ValueError, KeyError, TypeError):
            say(f"a state file of an earlier run cannot be read ({path.name}): left alone, remove it by hand")
            continue
        if alive:
            continue
        left = clean(names)
        what = f"{len(names.get('refs', []))} cohort(s), the parent cgroup, its directories"
        if left:
            say(f"an earlier run (pid {names['owner']['pid']}) was killed; could not remove: {'; '.join(left)}")
            continue
        path.unlink()
        say(f"swept what an earlier run left when it was killed (pid {names['owner']['pid']}): {what}")


class Stage:
    """Everything a run makes, each name recorded in the state file before the thing is made."""

    def __init__(self, state_dir: Path) -> None:
        self.token = secrets.token_hex(4)
        self.path = state_dir / f"run-{os.getpid()}-{self.token}.json"
        self.scratch = Path(f"/tmp/mosaic-demo-{self.token}")
        self.sockets = f"/tmp/mosaic-demo-sock-{self.token}"
        self.names: dict[str, Any] = {"owner": _owner(), "token": self.token, "route": None, "parent": False,
                                      "units": [], "refs": []}
        self.refs: list[CohortRef] = []
        self._lock = threading.Lock()  # the launcher records from an executor thread
        self.save()
        os.mkdir(self.scratch, 0o700)
        os.chmod(self.scratch, 0o755)  # the engine uid traverses it
        os.mkdir(self.sockets, 0o700)

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.names))
        os.replace(tmp, self.path)

    def record(self, **changes: Any) -> None:
        with self._lock:
            for key, value in changes.items():
                if key in ("units", "refs"):
                    self.names[key].append(value)
                else:
                    self.names[key] = value
            self.save()

    def socket_dir(self) -> str:
        path = os.path.join(self.sockets, f"c-{secrets.token_hex(3)}")
        os.mkdir(path, 0o700)
        return path

    def close(self) -> list[str]:
        """Remove everything by its recorded name; the state file goes when nothing is left."""
        left = clean(self.names)
        if not left:
            self.path.unlink(missing_ok=True)
        return left


class RecordingLauncher:
    """The route's launcher, recording each cohort's unit name before its launch and its reference as soon
    as the launch returns (from the launcher's thread), so a run stopped at any moment knows what to remove."""

    def __init__(self, inner: Launcher, stage: Stage) -> None:
        self.inner = inner
        self.stage = stage

    @property
    def kind(self) -> LauncherKind:
        return self.inner.kind

    def launch(self, unit: str, engine_argv: Sequence[str], *, env: Mapping[str, str] | None = None,
               cwd: str | None = None, stderr: int | None = None,
               limits: EngineLimits | None = None, engine: Credentials | None = None) -> CohortHandle:
        self.stage.record(units=unit)
        handle = self.inner.launch(unit, engine_argv, env=env, cwd=cwd, stderr=stderr, limits=limits, engine=engine)
        self.stage.refs.append(handle.ref)
        self.stage.record(refs=handle.ref.to_dict())
        return handle

    def presence(self, unit: str) -> Presence:
        return self.inner.presence(unit)

    def rediscover(self, unit: str) -> CohortRef | None:
        return self.inner.rediscover(unit)

    def prewarm(self, *, idle: float = 30.0) -> bool:
        return self.inner.prewarm(idle=idle)

    def close(self) -> None:
        self.inner.close()


# ------------------------------------------------------------------------------------------ the clients


class Seat:
    """One client of the demo: the library client, its Transcript and a subscription to its records."""

    def __init__(self, name: str, client: ControllerClient) -> None:
        self.name = name
        self.client = client
        self.view = Transcript(client)
        self.view.start()
        self.notes: Subscription = client.subscribe(maxsize=100_000)
        self.seen: list[Notification] = []

    @classmethod
    async def attach(cls, name: str, socket_path: str) -> Seat:
        seat = cls(name, await ControllerClient.connect(socket_path))
        observed = await seat.client.observe()
        say(f"[{name}] attached, watching (generation {observed.generation})")
        detail(f"    controller incarnation {observed.incarnation}, binding {observed.binding.get('state')}, "
               f"seam from event {observed.seam.from_sequence} ({'quiet' if observed.seam.quiet else 'reconcile'})")
        return seat

    def drain(self) -> list[Notification]:
        while (note := self.notes.get_nowait()) is not None:
            self.seen.append(note)
        return self.seen

    def records(self, kind: str) -> list[Mapping[str, Any]]:
        return [n.params for n in self.drain() if n.method == "record" and n.params.get("type") == kind]

    async def until(self, predicate: Callable[[Transcript], bool]) -> None:
        async with asyncio.timeout(WAIT):
            await self.view.wait_until(predicate)

    async def close(self) -> None:
        await self.view.aclose()
        await self.client.aclose()


def live_items(view: Transcript, since: int = 0) -> list[LiveMessage | ToolRun]:
    return [i for i in view.items if isinstance(i, (LiveMessage, ToolRun)) and i.first_sequence >= since]


def render(items: list[LiveMessage | ToolRun]) -> list[str]:
    out = []
    for item in items:
        if isinstance(item, ToolRun):
            result = item.result
            if isinstance(result, Mapping) and isinstance(result.get("content"), list):
                result = "".join(str(b.get("text", "")) for b in result["content"] if isinstance(b, Mapping))
            out.append(f"  tool {item.tool_name}({shown(item.args, 60)}) -> {shown(result, 60)}"
                       f"{' (error)' if item.is_error else ''}")
        elif item.role == "user":
            out.append(f"  you: {shown(item.text)}")
        elif item.role == "assistant":
            calls = [b.data for b in item.blocks if b.type == "toolCall"]
            if item.text or not calls:
                out.append(f"  assistant: {shown(item.text)}{'' if item.ended else ' …'}")
            for call in calls:
                out.append(f"  assistant calls {call.get('name')}({shown(call.get('arguments'), 60)})")
        elif item.role == "toolResult":
            out.append(f"  tool result ({item.tool_name}{', error' if item.is_error else ''}): {shown(item.text, 60)}")
    return out


def receipts_of(seat: Seat, request_id: str | None) -> list[str]:
    states: list[str] = []
    for r in seat.records("receipt"):
        if r.get("request") == request_id and (not states or states[-1] != r["state"]):
            states.append(str(r["state"]))
    return states


# ------------------------------------------------------------------------------------------- the steps


@contextlib.asynccontextmanager
async def world(stage: Stage) -> AsyncIterator[tuple[Callable[..., LaunchingController], FixtureTree, Credentials,
                                                     Callable[[str, str], tuple[LaunchingController, str]]]]:
    """The pinned Pi checked, the engine account, the cohort route, the scripted model on loopback and a
    fixture tree; yields a maker of controllers over them (`eligibility` for the recovered launch), the tree,
    the engine account and a maker of the Claude Code seat's controller (step 7) on the same route."""
    pi_dir = os.environ.get("MOSAIC_PI_DIR") or str(REPO / ".cache" / "pi")
    refusal = check_pin(Path(pi_dir))
    if refusal is not None:
        raise DemoRefused(f"the Pi install in {pi_dir} does not match the pin ({plain_message(refusal.message)}): "
                          "bash ci/main installs it again")
    try:
        engine = engine_account()
    except EngineAccountError as e:
        raise DemoRefused(f"the engine account: {e}") from None
    stage.record(parent=True)  # its name (mosaic-demo-<token>) before it exists
    try:
        route = choose_route(stage.sockets, engine, f"mosaic-demo-{stage.token}")
    except RouteUnavailable as e:
        raise DemoRefused(f"no cohort route: {e}") from None
    stage.record(route=route.kind)
    say(f"cohort route: {route.describe()}")
    await hold("route")
    launcher = RecordingLauncher(route.launcher, stage)
    with ModelServer() as model:
        tree = FixtureTree(stage.scratch / "fx")
        tree.make((engine.uid, engine.gid), model_url=model.base_url)
        tree.root.chmod(0o755)
        installed = pi_dir if engine_can_read(pi_dir) else readable_install(pi_dir, str(stage.scratch))
        say(f"fixture root {tree.root} (temporary); session file {tree.session.relative_to(tree.root)}; "
            f"scripted model at {model.base_url} (loopback only)")

        def controller(eligibility: str | None = None, *, socket_dir: str | None = None,
                       on_recovered: Callable[[EligibilityRecord], str | None] | None = None) -> LaunchingController:
            return LaunchingController(
                Placement(**tree.placement(socket_dir or stage.socket_dir())),
                PiSpec(env=tree.engine_env(), pi_dir=str(installed), provider="fakeprov", model="fake-model-1"),
                launcher, verifier=FixtureVerifier(), manager=route.manager, stop_grace=2.0, eligibility=eligibility,
                on_recovered=on_recovered)

        def claude(claude_dir: str, base_url: str) -> tuple[LaunchingController, str]:
            """The Claude Code seat of step 7: its own fixture (a project the engine account owns, a claim root,
            the engine's scratch), the pinned install sealed by `ClaudeSpec` (L7 at construction and at bind),
            a fresh session id, launched on the same cohort route as Pi; (the controller, the project)."""
            fx = stage.scratch / "claude-fx"
            for d in ("proj", "operator-home", "claims", "cs"):
                (fx / d).mkdir(parents=True)
            os.chmod(fx / "claims", 0o700)
            os.chown(fx / "proj", engine.uid, engine.gid)  # Claude's tools write in its project
            project = os.path.realpath(fx / "proj")
            where = claude_dir if engine_can_read(claude_dir) else readable_install(claude_dir, str(stage.scratch))
            transcript = fx / "cs" / "claude" / "projects" / claude_slug(project) / f"{uuid.uuid4()}.jsonl"
            spec = ClaudeSpec(project=project, seat=CLAUDE_SEAT, scratch=str(fx / "cs"), claude_dir=str(where),
                              base_url=base_url, api_key=FAKE_KEY, engine_uid=engine.uid)
            placement = Placement(fixture_root=str(fx), claim_root=str(fx / "claims"), session_file=str(transcript),
                                  socket_dir=stage.socket_dir(), home=str(fx / "operator-home"))
            return (LaunchingController(placement, spec, launcher, verifier=FixtureVerifier(), manager=route.manager,
                                        stop_grace=2.0), project)

        yield controller, tree, engine, claude


def claude_install() -> str:
    """The pinned Claude Code 2.1.283 (MOSAIC_CLAUDE_DIR, else .cache/claude, where bash ci/main installs it),
    checked before anything is made."""
    where = os.environ.get("MOSAIC_CLAUDE_DIR") or str(REPO / ".cache" / "claude")
    refusal = check_claude_pin(Path(where))
    if refusal is not None:
        raise DemoRefused(f"the Claude Code install in {where} does not match the pin "
                          f"({plain_message(refusal.message)}): bash ci/main installs it again")
    return where


async def run_demo(stage: Stage, facts: dict[str, Any]) -> None:
    claude_dir = claude_install()
    async with world(stage) as (controller, tree, engine, claude):
        first = controller()
        try:
            await first.start()
            AT["controller"] = first
            assert first.execution is not None and first.execution.ref is not None
            ref = first.execution.ref
            claim1 = first.execution.claim.claim_id
            say(f"controller 1 launched the sealed Pi 0.85.1 under claim {claim1} in {ref.unit} "
                f"(engine pid {ref.engine.pid}, uid {engine.uid}; containment "
                f"{'held' if ref.containment.held else 'NOT held'})")
            facts["claim1"] = claim1
            await hold("launched")
            await steps_1_to_5(first, controller, stage, tree, facts)
        finally:
            await first.aclose()
        await step_6(tree, facts)
        await step_7(claude, claude_dir, facts)
    await hold("done")


async def steps_1_to_5(first: LaunchingController, controller: Callable[..., LaunchingController], stage: Stage,
                       tree: FixtureTree, facts: dict[str, Any]) -> None:
    heading(1, "two clients attach; A takes control; a prompt streams its answer (with a tool call) to both")
    await hold("step-1")
    a = await Seat.attach("A", first.socket_path)
    b = await Seat.attach("B", first.socket_path)
    took = await a.client.takeover()
    say(f"[A] takeover -> generation {took['generation']} ({took['how']}); A is {a.client.role}, B is {b.client.role}")
    facts["step1"] = {"generation": took["generation"], "roles": [a.client.role, b.client.role]}
    outcome = await a.client.prompt("TOOLCALL please run it", client_request_id="demo-1")
    assert isinstance(outcome, Admitted), outcome
    request = await a.client.wait_settled("demo-1")
    await b.until(lambda v: any(isinstance(i, LiveMessage) and i.role == "assistant" and i.ended and i.text
                                for i in v.items))
    await a.until(lambda v: any(isinstance(i, LiveMessage) and i.role == "assistant" and i.ended and i.text
                                for i in v.items))
    states = receipts_of(a, request.request_id)
    say(f"[A] prompt demo-1: {' -> '.join(states)}; label {request.label!r}")
    seen = {}
    for seat in (a, b):
        lines = render(live_items(seat.view))
        seen[seat.name] = lines
        say(f"[{seat.name}] transcript:")
        for line in lines:
            say(line)
    tools = [i for i in live_items(b.view) if isinstance(i, ToolRun)]
    facts["step1"].update({"receipts": states, "label": request.label, "same_stream": seen["A"] == seen["B"],
                           "tools": [{"name": t.tool_name, "args": t.args, "error": t.is_error} for t in tools],
                           "transcript": seen["B"]})
    say(f"A and B render the same stream: {seen['A'] == seen['B']}")

    heading(2, "the observer's prompt and a '/' prompt are refused before anything reaches the engine")
    await hold("step-2")
    refused_b = await b.client.prompt("hello from the observer", client_request_id="demo-2")
    refused_slash = await a.client.prompt("/help", client_request_id="demo-3")
    step2 = {}
    for who, result in (("B", refused_b), ("A", refused_slash)):
        assert isinstance(result, Refused), result
        say(f"[{who}] prompt {shown(result.text)} refused: {result.refusal.code} — "
            f"{plain_message(result.refusal.message)}")
        step2[who] = result.refusal.code
    facts["step2"] = step2

    heading(3, "B takes control (generation + 1) and interrupts a streaming answer; then new prompts are open again")
    await hold("step-3")
    took = await b.client.takeover()
    await a.client.wait_until(lambda: a.client.role == "observer")  # A learns it from the binding record
    say(f"[B] takeover -> generation {took['generation']}; A is now {a.client.role}")
    mark = max([i.last_sequence for i in live_items(b.view)] or [0]) + 1
    outcome = await b.client.prompt("SLOW stream please", client_request_id="demo-4")
    assert isinstance(outcome, Admitted), outcome
    await b.until(lambda v: any(isinstance(i, LiveMessage) and i.role == "assistant" and i.text
                                for i in live_items(v, mark)))
    streamed = next(i for i in live_items(b.view, mark) if isinstance(i, LiveMessage) and i.role == "assistant")
    say(f"[B] streaming: {shown(streamed.text, 60)} …")
    stop = await b.client.interrupt()
    say("[B] interrupt -> stopping the answer (Pi's queue is cleared, then the turn aborted)")
    detail(f"    stop {stop['stop']} ({stop['state']}): R3-1")
    final = await b.client.wait_stop(str(stop["stop"]))
    slow = await b.client.wait_settled("demo-4")
    await b.client.wait_until(lambda: (b.client.binding or {}).get("admission") == "open")
    binding = b.client.binding or {}
    say(f"[B] the answer stopped ({final['state']}); prompt demo-4: {slow.label}; new prompts "
        f"{binding.get('admission')}, Pi {binding.get('engineState', binding.get('engine'))}")
    facts["step3"] = {"generation": took["generation"], "stop": final["state"], "label": slow.label,
                      "turnState": (slow.receipt or {}).get("turnState"), "admission": binding.get("admission"),
                      "roles": [a.client.role, b.client.role]}

    heading(4, "force stop with a confirmation, and the proof that the engine stopped")
    await hold("step-4")
    facts["step4"] = await force_stop_proven(b)

    heading(5, "recover, then a new controller resumes the conversation where it stopped for one more turn")
    await hold("step-5")
    issued = await b.client.issue_confirmation("recover")
    await b.client.answer_confirmation(str(issued["confirmation"]), "confirm")
    recovered = await b.client.recover(str(issued["confirmation"]))
    record = recovered["eligibility"]
    say(f"[B] recover -> eligibility {record['id']}: a new claim {record['claim_id']} (generation "
        f"{record['generation']}) for the conversation as it stopped; nothing is launched yet")
    detail(f"    leaf {record.get('leaf')}")
    await a.close()
    await b.close()
    await first.aclose()
    second = controller(eligibility=str(record["id"]))
    try:
        await second.start()
        AT["controller"] = second
        assert second.execution is not None and second.execution.ref is not None
        c = await Seat.attach("C", second.socket_path)
        took = await c.client.takeover()
        say(f"controller 2 ({second.mode}) launched claim {second.execution.claim.claim_id} in "
            f"{second.execution.ref.unit}; [C] takeover -> generation {took['generation']}")
        await hold("relaunched")
        outcome = await c.client.prompt("Say hello again", client_request_id="demo-5")
        assert isinstance(outcome, Admitted), outcome
        again = await c.client.wait_settled("demo-5")
        await c.until(lambda v: any(isinstance(i, LiveMessage) and i.role == "assistant" and i.ended
                                    for i in live_items(v)))
        for line in render(live_items(c.view)):
            say(line)
        say(f"[C] prompt demo-5: {again.label}")
        started = await c.client.force_stop_confirmed()
        done = await c.client.wait_stop(str(started.stop["stop"]))
        say(f"[C] force stop (to end the demo): {done['state']}")
        facts["step5"] = {"claim1": facts["claim1"], "record_claim": record["claim_id"],
                          "claim2": second.execution.claim.claim_id, "mode": second.mode,
                          "record_generation": record["generation"], "generation_before": facts["step3"]["generation"],
                          "generation": took["generation"], "label": again.label, "final_stop": done["state"]}
        await c.close()
    finally:
        await second.aclose()


async def force_stop_proven(seat: Seat) -> dict[str, Any]:
    """A force stop with a confirmation through `seat` (its controller), and the cohort proof it produced,
    printed in plain words (the proof's technical flags with --verbose); the facts, for the evidence."""
    who = seat.name
    issued = await seat.client.issue_confirmation("force-stop")
    summary = issued["summary"]
    say(f"[{who}] asked to confirm: the stop kills {summary.get('kills')}")
    say(f"    execution {summary['execution']}, unit {summary.get('unit')}, processes in it now: "
        f"{summary.get('members')}, open tool calls {summary.get('openTools')}")
    detail(f"    confirmation {issued['confirmation']}; the count: {summary.get('census')}")
    await seat.client.answer_confirmation(str(issued["confirmation"]), "confirm")
    stop = await seat.client.force_stop(str(issued["confirmation"]))
    final = await seat.client.wait_stop(str(stop["stop"]))
    proofs = [r for r in seat.records("cohortProof") if r.get("stop") == stop["stop"]]
    say(f"[{who}] force stop: {final['state']}" + (f" ({final.get('reason')})" if final.get("reason") else ""))
    detail(f"    stop {stop['stop']}")
    facts: dict[str, Any] = {"summary": dict(summary), "state": final["state"]}
    if proofs:
        proof = proofs[0]["proof"]
        members = proof["members"]
        whole = "" if proof["membershipComplete"] else "; NOT every member could be listed"
        say(f"    the engine was proven stopped: every process it started has ended ({len(members)} left to kill "
            f"at the freeze{whole}; proof {proof['verification']['digest']})")
        detail(f"    cohort proof: membershipComplete {proof['membershipComplete']}")
        if not members:
            say("      (the engine ended on SIGTERM within the grace: nothing was left to kill, and the frozen, "
                "empty cgroup shows it)")
        for m in members:
            say(f"      pid {m['pid']} (start time {m['startTime']}): {m['death']} at {m['deathTime']}")
        facts.update({"members": len(members), "membershipComplete": proof["membershipComplete"],
                      "digest": proof["verification"]["digest"]})
    return facts


async def _run(argv: Sequence[str]) -> tuple[int, str, str]:
    """A command's exit status, stdout and stderr; killed and reaped if the run is interrupted meanwhile."""
    proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.DEVNULL,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await proc.communicate()
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        raise
    assert proc.returncode is not None
    return proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")


async def step_6(tree: FixtureTree, facts: dict[str, Any]) -> None:
    heading(6, "the reader's view of the session file, every branch; a Claude Code session beside it")
    await hold("step-6")
    project, seat = tree.project, tree.session.parent.parent.name
    cid = conversation_id(str(project), seat, tree.session.name)
    # A Claude Code seat of the same project (issue 30): the pinned Claude Code's own transcripts (the linear
    # fixture tree, its decoy included) under a Claude config directory in the fixture tree, and the seat's
    # launcher receipt naming its session. The reader lists what the receipt names, never the decoy.
    claude_dir = tree.root / "claude"
    claude_session, decoys = materialise_claude(project, claude_dir, CLAUDE_SEAT)
    claude_cid = claude_conversation_id(str(project), CLAUDE_SEAT, claude_session)
    base = [sys.executable, "-m", "mosaic.chat_pages", "--spec", str(project), seat,
            "--claude-spec", str(project), CLAUDE_SEAT, str(claude_dir), "--text"]
    shown = f"--spec <fixture>/proj {seat} --claude-spec <fixture>/proj {CLAUDE_SEAT} <fixture>/claude --text"
    say(f"$ mosaic-read {shown} catalogue")
    catalogue = await _run([*base, "catalogue"])
    say(catalogue[1].rstrip())
    say(f"$ mosaic-read {shown} open {cid}")
    opened = await _run([*base, "open", cid])
    say(opened[1].rstrip())
    say(f"$ mosaic-read {shown} open {claude_cid}    # the Claude Code 2.1.283 session the seat's receipt names")
    claude = await _run([*base, "open", claude_cid])
    say(claude[1].rstrip())
    if opened[0] or catalogue[0] or claude[0]:
        for line in (opened[2] + catalogue[2] + claude[2]).splitlines():
            say(f"  ! {line}")
    entries = [json.loads(x) for x in tree.session.read_text().splitlines() if x]
    users = [e["message"]["content"][0]["text"] for e in entries
             if e.get("type") == "message" and e["message"].get("role") == "user"]
    facts["step6"] = {"rc": [catalogue[0], opened[0], claude[0]], "text": opened[1], "users": users,
                      "catalogue": catalogue[1], "claude": {"cid": claude_cid, "session": claude_session,
                                                            "decoys": decoys, "text": claude[1]}}


async def open_decision(seat: Seat) -> Mapping[str, Any]:
    """The first decision the controller shows open to `seat` (a nativeDecision record), bounded by WAIT."""
    async with asyncio.timeout(WAIT):
        while True:
            for record in seat.records("nativeDecision"):
                if record.get("state") == "open":
                    return record
            await asyncio.sleep(0.02)


async def slow_reply(model: ClaudeModelServer, predicate: Callable[[RecordedRequest], bool]) -> RecordedRequest:
    """The scripted model's SLOW reply once `predicate` holds for it (polled, bounded by WAIT: a signal ends
    the wait at once)."""
    async with asyncio.timeout(WAIT):
        while True:
            with contextlib.suppress(TimeoutError):
                snap = model.wait_for(lambda rs: any(r.scenario == "slow" and predicate(r) for r in rs), 0)
                return next(r for r in snap if r.scenario == "slow" and predicate(r))
            await asyncio.sleep(0.05)


async def step_7(claude: Callable[[str, str], tuple[LaunchingController, str]], claude_dir: str,
                 facts: dict[str, Any]) -> None:
    heading(7, "a Claude Code seat: D takes control, a tool call asks permission (allowed once), an interrupt, "
               "a force stop with a proof")
    await hold("step-7")
    with ClaudeModelServer() as model:
        ctl, project = claude(claude_dir, model.base_url)
        try:
            await ctl.start()
            AT["controller"] = ctl
            assert ctl.execution is not None and ctl.execution.ref is not None
            ref = ctl.execution.ref
            claim = ctl.execution.claim.claim_id
            say(f"controller 3 launched the sealed Claude Code 2.1.283 under claim {claim} in {ref.unit} (engine "
                f"pid {ref.engine.pid}; containment {'held' if ref.containment.held else 'NOT held'}); its scripted "
                f"model at {model.base_url} (loopback only)")
            await hold("claude-launched")
            d = await Seat.attach("D", ctl.socket_path)
            took = await d.client.takeover()
            say(f"[D] takeover -> generation {took['generation']}; D is {d.client.role}")
            made = os.path.join(project, "made-by-claude")
            text = f"BASH: mkdir {made}"
            outcome = await d.client.prompt(text, client_request_id="demo-7")
            assert isinstance(outcome, Admitted), outcome
            say(f"[D] prompt demo-7: {shown(text)} (the scripted model answers it with a Bash tool call)")
            asked = await open_decision(d)
            refused = [str(c.get("choice")) for c in asked.get("refusedChoices", [])]
            say(f"[D] Claude asks permission to use {shown(asked.get('tool'))} (shown to every client, as data): "
                f"{shown(asked.get('input'), 120)}")
            say(f"    the choices: {', '.join(asked.get('choices', []))}; shown disabled, as each would let more run "
                "without asking:")
            for choice in refused:
                say(f"      {shown(choice, 110)}")
            detail(f"    decision {asked['nativeDecision']}, Claude's request {asked.get('native')}")
            await d.client.approve(str(asked["nativeDecision"]), "allow once")
            allowed = await d.client.wait_settled("demo-7")
            await d.until(lambda v: any(isinstance(i, LiveMessage) and i.role == "assistant" and i.ended and i.text
                                        for i in v.items))
            lines = render(live_items(d.view))
            for line in lines:
                say(line)
            ran = os.path.isdir(made)
            say(f"[D] answered allow once: prompt demo-7: {allowed.label}; the folder it asked to make is there: "
                f"{'yes' if ran else 'NO'}")
            step7: dict[str, Any] = {
                "claim": claim, "unit": ref.unit, "generation": took["generation"], "role": d.client.role,
                "decision": {"method": asked.get("method"), "tool": asked.get("tool"), "input": asked.get("input"),
                             "choices": asked.get("choices"), "refused": refused},
                "allowed": allowed.label, "made": ran, "path": made, "transcript": lines}
            outcome = await d.client.prompt("SLOW please", client_request_id="demo-8")
            assert isinstance(outcome, Admitted), outcome
            # Claude shows a message once it is whole: what streams is the model's reply, seen at the model.
            sent = (await slow_reply(model, lambda r: r.outcome == "pending" and r.events >= 6)).events
            say("[D] Claude is answering: the scripted model is streaming its slow reply (Claude shows a message "
                "once it is whole)")
            detail(f"    the model has sent {sent} events of the reply")
            stop = await d.client.interrupt()
            say("[D] interrupt -> stopping the answer (the controller sends Claude its interrupt request; the turn ends)")
            detail(f"    stop {stop['stop']} ({stop['state']}): R3-1")
            final = await d.client.wait_stop(str(stop["stop"]))
            slow = await d.client.wait_settled("demo-8")
            await d.client.wait_until(lambda: (d.client.binding or {}).get("admission") == "open")
            binding = d.client.binding or {}
            cut = await slow_reply(model, lambda r: r.outcome != "pending")
            early = "Claude closed the model's reply early" if cut.outcome == "disconnected" else \
                f"the model's reply ended {cut.outcome}"
            say(f"[D] the answer stopped ({final['state']}); prompt demo-8: {slow.label}; new prompts "
                f"{binding.get('admission')}; {early}")
            detail(f"    the model sent {cut.events} events of the reply ({len(SLOW_DELTAS)} pieces in a whole one)")
            step7.update({"stop": final["state"], "label": slow.label,
                          "turnState": (slow.receipt or {}).get("turnState"), "admission": binding.get("admission"),
                          "model": {"sent_at_interrupt": sent, "sent": cut.events, "outcome": cut.outcome,
                                    "pieces": len(SLOW_DELTAS)}})
            step7["force"] = await force_stop_proven(d)
            facts["step7"] = step7
            await d.close()
        finally:
            await ctl.aclose()


async def interactive(stage: Stage) -> None:
    """The controller and mosaic-terminal on it. The demo is the controller's launcher: after a recover in
    the terminal it closes that controller and launches a new one from the eligibility record, on the same
    socket, as `mosaic-controller serve ... --eligibility ID` would; the terminal's Ctrl-O connects to it."""
    async with world(stage) as (controller, _tree, _engine, _claude):
        sockets = stage.socket_dir()
        issued: asyncio.Queue[str] = asyncio.Queue()

        def on_recovered(record: EligibilityRecord) -> str:
            issued.put_nowait(record.id)
            return ("the demo, as the launcher, closes this controller and launches a new one from the record on "
                    f"this socket now (as mosaic-controller serve ... --eligibility {record.id} would)")

        ctl = controller(socket_dir=sockets, on_recovered=on_recovered)
        try:
            await ctl.start()
            AT["controller"] = ctl
            say(f"controller socket: {ctl.socket_path}\n"
                "the scripted model answers TOOLCALL (a bash tool call), SLOW (a long stream to interrupt), "
                "THINK (thinking, then text) and anything else with a greeting.\nstarting mosaic-terminal…")
            proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "mosaic.mediated_terminal",
                                                        "--socket", ctl.socket_path)
            ended = asyncio.ensure_future(proc.wait())
            try:
                while True:
                    recovered = asyncio.ensure_future(issued.get())
                    await asyncio.wait({ended, recovered}, return_when=asyncio.FIRST_COMPLETED)
                    if ended.done():
                        recovered.cancel()
                        break
                    await ctl.aclose()  # its engine is proven stopped; the terminal sees the connection go
                    ctl = controller(recovered.result(), socket_dir=sockets, on_recovered=on_recovered)
                    await ctl.start()
                    AT["controller"] = ctl
            except BaseException:
                with contextlib.suppress(ProcessLookupError):
                    proc.terminate()
                await proc.wait()
                raise
        finally:
            await ctl.aclose()
    say("the terminal closed: the demo's engine is killed through its recorded cohort reference and "
        "everything it made is removed")


async def amain(args: argparse.Namespace, facts: dict[str, Any]) -> int:
    """The run under its signal handlers: a signal cancels the work wherever it is, then the clean-up runs
    (further signals are noted, not obeyed, until it is done)."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    got: list[int] = []
    cleaning: list[bool] = []

    def on_signal(signum: int) -> None:
        if not got:
            got.append(signum)
        if not cleaning:
            task.cancel()

    for sig in SIGNALS:
        loop.add_signal_handler(sig, on_signal, sig)
    stage: Stage | None = None
    status = 0
    try:
        state_dir = Path(args.state_dir)
        state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        sweep(state_dir)
        stage = Stage(state_dir)
        await hold("start")
        await (interactive(stage) if args.interactive else run_demo(stage, facts))
    except asyncio.CancelledError:
        if not got:
            raise
    except DemoRefused as e:
        say(f"demo: {e}")
        status = EXIT_REFUSED
    except Refusal as e:
        for line in refused_lines(AT["step"], e, closed_because(AT["controller"])):
            say(line)
        status = EXIT_REFUSED
    except Exception as e:  # noqa: BLE001 - a crash: one line, the traceback only on request
        say(f"demo: crashed (a bug): {type(e).__name__}: {plain_message(str(e)).splitlines()[0] if str(e) else ''}"
            "; MOSAIC_TRACEBACK=1 shows the traceback")
        if os.environ.get("MOSAIC_TRACEBACK"):
            traceback.print_exc()
        status = EXIT_CRASH
    finally:
        cleaning.append(True)
        # A launch still running in a worker thread when the work was cancelled finishes first, so the
        # clean-up sees (and removes) what it made.
        await loop.shutdown_default_executor()
        left = stage.close() if stage is not None else []
        if left:
            say(f"demo: could not remove {'; '.join(left)} (the next run tries again)")
    if got:
        say("interrupted: cleaned up" if not left else "interrupted: cleaned up all but the above")
        return 128 + got[0]
    return status


def refused_lines(step: str, refusal: Refusal, why: str) -> list[str]:
    """What the demo says when a step is refused: the step and the refusal, why the controller had closed
    new prompts (when it had), and what to do next."""
    lines = [f"demo: refused at {step}: {refusal.code}: {plain_message(refusal.message)}"]
    if why:
        lines.append(f"demo: the controller had closed new prompts: {why}")
    lines.append("demo: what to do: nothing is left behind (everything the run made is removed below); run it "
                 "again (bash ci/main). If the same step is refused again, bash ci/main --verbose shows each "
                 "step's technical state: report the lines above with it")
    return lines


def closed_because(controller: LaunchingController | None) -> str:
    """Why the controller's admission is closed, in its own words (each fence and its detail), or ""."""
    runtime = controller.runtime if controller is not None else None
    if runtime is None:
        return ""
    core = runtime.core
    fences = "; ".join(f"{name}: {plain_message(str(why))}" for name, why in core.fences.items())
    state = "" if core.binding_state == "active" else f"the binding is {core.binding_state}"
    return "; ".join(x for x in (state, fences) if x)


class OneLine(logging.Formatter):
    """A library's log record as one line on stderr, in plain words, without its traceback (a person reads
    it; MOSAIC_TRACEBACK=1 keeps the traceback)."""

    def format(self, record: logging.LogRecord) -> str:
        text = " ".join(record.getMessage().split())
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            text += f": {type(exc).__name__}" + (f": {first}" if first else "")
            if os.environ.get("MOSAIC_TRACEBACK"):
                text += "\n" + self.formatException(record.exc_info)  # type: ignore[arg-type]
        return "demo: " + shorten(plain_message(text))


def _interrupted(signum: int, _frame: FrameType | None) -> None:
    raise Interrupted(signum)


def main(argv: list[str] | None = None) -> int:
    for sig in SIGNALS:  # before anything is made; inside the event loop its own handlers take over
        signal.signal(sig, _interrupted)
    try:
        ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
        ap.add_argument("--interactive", action="store_true", help="open mosaic-terminal on the controller")
        ap.add_argument("--evidence", help="write the facts each step printed, as JSON, to this file")
        ap.add_argument("--transcript", help="also write what is printed to this file")
        ap.add_argument("--state-dir", default=str(REPO / ".cache" / "demo-runs"),
                        help="where each run records the names of what it makes (default: .cache/demo-runs)")
        ap.add_argument("--hold-at", choices=HOLD_POINTS, help=argparse.SUPPRESS)  # tests: wait there for a signal
        ap.add_argument("--verbose", action="store_true",
                        help="also print the technical lines (incarnations, the seam, ids of the protocol)")
        args = ap.parse_args(argv)
        if args.verbose:
            VERBOSE.append(True)
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(OneLine())
        handler.setLevel(logging.WARNING)
        logging.basicConfig(level=logging.WARNING, handlers=[handler], force=True)
        if args.transcript:
            TRANSCRIPT.append(open(args.transcript, "w", encoding="utf-8"))  # noqa: SIM115 - closed at exit
        if args.hold_at:
            HOLD.append(args.hold_at)
        if os.geteuid() != 0:
            say("demo: needs root (a cgroup under the cgroup2 mount, the engine account): run it as root "
                "through bash ci/main")
            return EXIT_REFUSED
        if not os.environ.get("MOSAIC_NETNS") and not os.environ.get("MOSAIC_SMOKE_HOST_NET"):
            say("demo: run it inside the loopback-only namespace: bash ci/main (or python -m "
                "mosaic.pi_rpc.testing.netns -- python ci/demo.py)")
            return EXIT_REFUSED
        facts: dict[str, Any] = {}
        try:
            status = asyncio.run(amain(args, facts))
        finally:
            for sig in SIGNALS:  # the loop's handlers are gone with it: a late signal ends the run quietly
                signal.signal(sig, _interrupted)
            if args.evidence:
                Path(args.evidence).write_text(json.dumps(facts, indent=1, default=str))
        return status
    except Interrupted as e:
        say("interrupted: cleaned up")  # outside the loop nothing was made yet, or it was all removed
        return 128 + e.signum


if __name__ == "__main__":
    sys.exit(main())
