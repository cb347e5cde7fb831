#!/usr/bin/env python3
"""The main job: the whole system on the real Pi 0.85.1, printed as a person would want to read it.

    python ci/demo.py [--evidence FILE]        # the six steps (issue 12), non-interactive
    python ci/demo.py --interactive            # the same controller, with mosaic-terminal on it

Run it through `bash ci/main` (which sets up, installs the pinned Pi into .cache/pi and enters the
loopback-only network namespace); it needs root (a cgroup under the cgroup2 mount, the engine uid
`cohorttest`). Everything it makes lives in a temporary fixture root and is removed at the end by the
exact names it recorded: the fixture tree, the socket directory, the Pi copy, every cohort it launched
(released by its recorded reference) and the parent cgroup.

The steps: (1) two clients attach, one takes control, a prompt streams its answer (a tool call
included) to both; (2) the observer's prompt is refused (`controller`), a `/` prompt is refused
(`text-policy`); (3) the observer takes control (generation + 1) and interrupts a streaming turn: R3-1
settles it and admission reopens; (4) a force stop with a confirmation, and the cohort proof it produced;
(5) recover, and a new controller launches on the same leaf (new claim id, generation + 1) for one more
turn; (6) the reader's view of the resulting session file, every branch. `--evidence FILE` writes the
facts each step printed as JSON and `--transcript FILE` a copy of what it printed, for `ci/demo_check.py`
(run by `nox -s demo`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from mosaic.cgroup_cohort import (
    CohortRef,
    Credentials,
    DirectCgroupLauncher,
    FixtureVerifier,
    Launcher,
    ScopeLauncher,
    UserManager,
    find_cgroup2,
    release_cohort,
)
from mosaic.cgroup_cohort.testing.account import engine_account
from mosaic.chat_pages import conversation_id
from mosaic.controller import Controller, EngineSpec, Placement
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
from mosaic.controller.testing import FixtureTree, readable_install
from mosaic.pi_rpc import check_pin
from mosaic.pi_rpc.testing import ModelServer

REPO = Path(os.environ.get("MOSAIC_REPO") or Path(__file__).resolve().parents[1])
WAIT = 60.0
ENGINE_USER = "cohorttest"


TRANSCRIPT: list[Any] = []  # the file --transcript names, once opened


def say(text: str = "") -> None:
    print(text, flush=True)
    for f in TRANSCRIPT:
        f.write(text + "\n")
        f.flush()


def heading(n: int, title: str) -> None:
    say(f"\n== step {n}: {title}")


def shown(value: object, width: int = 100) -> str:
    """A value as one inert line: JSON-escaped (control characters and ESC never reach the terminal)."""
    if isinstance(value, str):
        text = json.dumps(value, ensure_ascii=True)[1:-1]
    else:
        text = json.dumps(value, ensure_ascii=True, default=str)  # JSON escapes every control character
    return text if len(text) <= width else text[: width - 1] + "…"


# ------------------------------------------------------------------------------------------- the set-up


def engine_credentials() -> Credentials:
    return engine_account()


def user_manager_reachable() -> tuple[bool, str]:
    """Whether a systemd user manager answers this process (then the cohort is a transient scope)."""
    try:
        r = subprocess.run(["systemctl", "--user", "show-environment"], capture_output=True, text=True, timeout=10,
                           stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"systemctl --user: {e}"
    if r.returncode == 0:
        return True, "a systemd user manager answers"
    return False, (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]


class Stage:
    """Everything the demo makes, each recorded by its exact name and removed by it."""

    def __init__(self) -> None:
        self.scratch = Path(tempfile.mkdtemp(prefix="mosaic-demo-", dir="/tmp"))
        os.chmod(self.scratch, 0o755)  # the engine uid traverses it
        self.sockets = tempfile.mkdtemp(prefix="mosaic-demo-sock-", dir="/tmp")
        os.chmod(self.sockets, 0o700)
        self.parent: str | None = None
        self.refs: list[CohortRef] = []

    def socket_dir(self) -> str:
        path = tempfile.mkdtemp(prefix="c-", dir=self.sockets)
        os.chmod(path, 0o700)
        return path

    def launcher(self, engine: Credentials) -> tuple[Launcher, UserManager | None, str]:
        reachable, why = user_manager_reachable()
        if reachable:
            manager = UserManager()
            return ScopeLauncher(manager, self.sockets, engine=engine), manager, f"systemd scope ({why})"
        self.parent = os.path.join(find_cgroup2().mount_point, f"mosaic-demo-{secrets.token_hex(4)}")
        os.mkdir(self.parent)
        return (DirectCgroupLauncher(self.parent, self.sockets, engine=engine), None,
                f"direct cgroup under {self.parent} (no user manager: {why})")

    def close(self) -> None:
        for ref in self.refs:
            with contextlib.suppress(Exception):
                release_cohort(ref, force=True)
        if self.parent is not None:
            with contextlib.suppress(OSError):
                os.rmdir(self.parent)  # every cohort under it was released by its recorded reference
        shutil.rmtree(self.sockets, ignore_errors=True)
        subprocess.run(["rm", "-rf", "--one-file-system", str(self.scratch)], check=False)


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
        say(f"[{name}] attached as {seat.client.role}: generation {observed.generation}, "
            f"controller incarnation {observed.incarnation[:12]}…, binding {observed.binding.get('state')}, "
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


@contextlib.contextmanager
def world(stage: Stage) -> Iterator[tuple[Callable[..., Controller], FixtureTree, Credentials]]:
    """The pinned Pi checked, the engine uid, the cohort route, the scripted model on loopback and a fixture
    tree; yields a maker of controllers over them (`eligibility` for the recovered launch)."""
    pi_dir = os.environ.get("MOSAIC_PI_DIR") or str(REPO / ".cache" / "pi")
    refusal = check_pin(Path(pi_dir))
    if refusal is not None:
        raise SystemExit(f"demo: the Pi install in {pi_dir} does not match the pin: {refusal}")
    engine = engine_credentials()
    launcher, manager, how = stage.launcher(engine)
    say(f"cohort route: {how}")
    with ModelServer() as model:
        tree = FixtureTree(stage.scratch / "fx")
        tree.make((engine.uid, engine.gid), model_url=model.base_url)
        tree.root.chmod(0o755)
        installed = readable_install(pi_dir, str(stage.scratch))
        say(f"fixture root {tree.root} (temporary); session file {tree.session.relative_to(tree.root)}; "
            f"scripted model at {model.base_url} (loopback only)")

        def controller(eligibility: str | None = None) -> Controller:
            return Controller(
                Placement(**tree.placement(stage.socket_dir())),
                EngineSpec(env=tree.engine_env(), pi_dir=str(installed), provider="fakeprov", model="fake-model-1"),
                launcher, verifier=FixtureVerifier(), manager=manager, stop_grace=2.0, eligibility=eligibility)

        yield controller, tree, engine


async def run_demo(stage: Stage, facts: dict[str, Any]) -> None:
    with world(stage) as (controller, tree, engine):
        first = controller()
        await first.start()
        assert first.execution is not None and first.execution.ref is not None
        stage.refs.append(first.execution.ref)
        ref = first.execution.ref
        claim1 = first.execution.claim.claim_id
        say(f"controller 1 launched the sealed Pi 0.85.1 under claim {claim1} in {ref.unit} "
            f"(engine pid {ref.engine.pid}, uid {engine.uid}; containment {'held' if ref.containment.held else 'NOT held'})")
        facts["claim1"] = claim1
        try:
            await steps_1_to_5(first, controller, stage, tree, facts)
        finally:
            await first.aclose()
    step_6(tree, facts)


async def steps_1_to_5(first: Controller, controller: Callable[..., Controller], stage: Stage,
                       tree: FixtureTree, facts: dict[str, Any]) -> None:
    heading(1, "two clients attach; A takes control; a prompt streams its answer (with a tool call) to both")
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
    refused_b = await b.client.prompt("hello from the observer", client_request_id="demo-2")
    refused_slash = await a.client.prompt("/help", client_request_id="demo-3")
    step2 = {}
    for who, result in (("B", refused_b), ("A", refused_slash)):
        assert isinstance(result, Refused), result
        say(f"[{who}] prompt {shown(result.text)} refused: {result.refusal.code} — {result.refusal.message}")
        step2[who] = result.refusal.code
    facts["step2"] = step2

    heading(3, "B takes control (generation + 1) and interrupts a streaming turn: R3-1, then admission reopens")
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
    say(f"[B] interrupt -> stop {stop['stop']} ({stop['state']})")
    final = await b.client.wait_stop(str(stop["stop"]))
    slow = await b.client.wait_settled("demo-4")
    await b.client.wait_until(lambda: (b.client.binding or {}).get("admission") == "open")
    binding = b.client.binding or {}
    say(f"[B] stop {final['state']}; prompt demo-4: {slow.label}; admission {binding.get('admission')}, "
        f"engine {binding.get('engineState', binding.get('engine'))}")
    facts["step3"] = {"generation": took["generation"], "stop": final["state"], "label": slow.label,
                      "turnState": (slow.receipt or {}).get("turnState"), "admission": binding.get("admission"),
                      "roles": [a.client.role, b.client.role]}

    heading(4, "force stop with a confirmation, and the cohort proof")
    issued = await b.client.issue_confirmation("force-stop")
    summary = issued["summary"]
    say(f"[B] confirmation {issued['confirmation']}: kills {summary.get('kills')}")
    say(f"    execution {summary['execution']}, unit {summary.get('unit')}, processes in it now: "
        f"{summary.get('members')} ({summary.get('census')}), open tool calls {summary.get('openTools')}")
    await b.client.answer_confirmation(str(issued["confirmation"]), "confirm")
    stop = await b.client.force_stop(str(issued["confirmation"]))
    final = await b.client.wait_stop(str(stop["stop"]))
    proofs = [r for r in b.records("cohortProof") if r.get("stop") == stop["stop"]]
    say(f"[B] force stop {stop['stop']}: {final['state']}" + (f" ({final.get('reason')})" if final.get("reason") else ""))
    step4: dict[str, Any] = {"summary": dict(summary), "state": final["state"]}
    if proofs:
        proof = proofs[0]["proof"]
        members = proof["members"]
        say(f"    cohort proof: {len(members)} members left at the freeze, membershipComplete "
            f"{proof['membershipComplete']}, digest {proof['verification']['digest']}")
        if not members:
            say("      (the engine ended on SIGTERM within the grace: nothing was left to kill, and the frozen, "
                "empty cgroup proves it)")
        for m in members:
            say(f"      pid {m['pid']} (start time {m['startTime']}): {m['death']} at {m['deathTime']}")
        step4.update({"members": len(members), "membershipComplete": proof["membershipComplete"],
                      "digest": proof["verification"]["digest"]})
    facts["step4"] = step4

    heading(5, "recover, then a new controller launches on the same leaf for one more turn")
    issued = await b.client.issue_confirmation("recover")
    await b.client.answer_confirmation(str(issued["confirmation"]), "confirm")
    recovered = await b.client.recover(str(issued["confirmation"]))
    record = recovered["eligibility"]
    say(f"[B] recover -> eligibility {record['id']}: new claim {record['claim_id']}, generation "
        f"{record['generation']}, leaf {record.get('leaf')}")
    await a.close()
    await b.close()
    await first.aclose()
    second = controller(eligibility=str(record["id"]))
    await second.start()
    assert second.execution is not None and second.execution.ref is not None
    stage.refs.append(second.execution.ref)
    try:
        c = await Seat.attach("C", second.socket_path)
        took = await c.client.takeover()
        say(f"controller 2 ({second.mode}) launched claim {second.execution.claim.claim_id} in "
            f"{second.execution.ref.unit}; [C] takeover -> generation {took['generation']}")
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


def step_6(tree: FixtureTree, facts: dict[str, Any]) -> None:
    heading(6, "the reader's view of the session file, every branch")
    project, seat = tree.project, tree.session.parent.parent.name
    cid = conversation_id(str(project), seat, tree.session.name)
    base = [sys.executable, "-m", "mosaic.chat_pages", "--spec", str(project), seat, "--text"]
    say(f"$ mosaic-read --spec <fixture>/proj {seat} --text catalogue")
    catalogue = subprocess.run([*base, "catalogue"], capture_output=True, text=True, check=False)
    say(catalogue.stdout.rstrip())
    say(f"$ mosaic-read --spec <fixture>/proj {seat} --text open {cid}")
    opened = subprocess.run([*base, "open", cid], capture_output=True, text=True, check=False)
    say(opened.stdout.rstrip())
    if opened.returncode or catalogue.returncode:
        say(textwrap.indent(opened.stderr + catalogue.stderr, "  ! "))
    entries = [json.loads(x) for x in tree.session.read_text().splitlines() if x]
    users = [e["message"]["content"][0]["text"] for e in entries
             if e.get("type") == "message" and e["message"].get("role") == "user"]
    facts["step6"] = {"rc": [catalogue.returncode, opened.returncode], "text": opened.stdout, "users": users}


async def interactive(stage: Stage) -> None:
    with world(stage) as (controller, _tree, _engine):
        ctl = controller()
        await ctl.start()
        assert ctl.execution is not None and ctl.execution.ref is not None
        stage.refs.append(ctl.execution.ref)
        say(f"controller socket: {ctl.socket_path}\n"
            "the scripted model answers TOOLCALL (a bash tool call), SLOW (a long stream to interrupt), "
            "THINK (thinking, then text) and anything else with a greeting.\nstarting mosaic-terminal…")
        try:
            proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "mosaic.mediated_terminal",
                                                        "--socket", ctl.socket_path)
            await proc.wait()
        finally:
            await ctl.aclose()
            say("the terminal closed: the demo's engine is killed through its recorded cohort reference and "
                "everything it made is removed")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--interactive", action="store_true", help="open mosaic-terminal on the controller")
    ap.add_argument("--evidence", help="write the facts each step printed, as JSON, to this file")
    ap.add_argument("--transcript", help="also write what is printed to this file")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("demo: needs root (a cgroup under the cgroup2 mount, the engine uid)", file=sys.stderr)
        return 2
    if not os.environ.get("MOSAIC_NETNS") and not os.environ.get("MOSAIC_SMOKE_HOST_NET"):
        print("demo: run it inside the loopback-only namespace: bash ci/main (or python -m "
              "mosaic.pi_rpc.testing.netns -- python ci/demo.py)", file=sys.stderr)
        return 2
    if args.transcript:
        TRANSCRIPT.append(open(args.transcript, "w", encoding="utf-8"))  # noqa: SIM115 - closed at exit
    stage = Stage()
    facts: dict[str, Any] = {}
    try:
        asyncio.run(interactive(stage) if args.interactive else run_demo(stage, facts))
    finally:
        stage.close()
        if args.evidence:
            Path(args.evidence).write_text(json.dumps(facts, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
