"""`mosaic.controller.client` against the real controller on pi-rpc's fake engine process (`fake_controller`):
the brief's fixtures through the library (E1, E4, E6, E7, H12, H13, H21, H22), outcome-unknown on a lost
connection, force stop, lagging subscribers and pings.

Every notification a client receives and every record in a reply is validated against
schemas/chat-01-control.schema.json (`core_harness.validate`), and every history read against
schemas/chat-01.schema.json (`readResult`). Waits are on events, bounded by WAIT; a timeout fails the test.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from core_harness import REPO, validate

from mosaic.controller import ControlRefusal
from mosaic.controller.client import (
    AdmissionUnknown,
    Admitted,
    ClientRefusal,
    ControllerClient,
    Duplicate,
    HistoryItem,
    HistoryUnavailable,
    LiveMessage,
    Notification,
    Observed,
    ReconcileMarker,
    Refused,
    RemoteProtocolError,
    RemoteRefusal,
    ToolRun,
    Transcript,
    TranscriptItem,
)
from mosaic.controller.protocol import CLOSE_REASONS, METHOD_NOT_FOUND
from mosaic.controller.server import ServerLimits
from mosaic.controller.testing import FakeRig, fake_controller
from mosaic.pi_rpc.testing.dialogs import dialog_prompt
from mosaic.safe_open import Refusal

WAIT = 30.0

_READ_SCHEMA = json.loads((REPO / "schemas" / "chat-01.schema.json").read_text(encoding="utf-8"))
_READ = jsonschema.Draft202012Validator({"$ref": "#/$defs/readResult", "$defs": _READ_SCHEMA["$defs"]})


# ------------------------------------------------------------------------------------------- helpers


def validate_observed(observed: Observed) -> None:
    validate(observed.binding)
    validate(observed.connection)
    _READ.validate(dict(observed.history))


class Checked:
    """Every notification one client receives, in order, each validated when it is taken."""

    def __init__(self, client: ControllerClient) -> None:
        self.sub = client.subscribe(maxsize=1_000_000)
        self.notes: list[Notification] = []

    def drain(self) -> list[Notification]:
        while (note := self.sub.get_nowait()) is not None:
            if note.origin == "server":
                if note.method == "event":
                    validate(note.params, "event")
                elif note.method == "record":
                    validate(note.params)
                elif note.method == "closing":
                    assert note.params["reason"] in CLOSE_REASONS
                elif note.method == "marker":
                    assert note.params["reason"] == "lagging" and note.params["dropped"] >= 1
                else:
                    raise AssertionError(f"unexpected notification {note.method}")
            elif note.observed is not None:
                validate_observed(note.observed)
            self.notes.append(note)
        return self.notes

    def records(self, kind: str) -> list[Mapping[str, Any]]:
        return [n.params for n in self.drain() if n.method == "record" and n.params.get("type") == kind]

    def events(self) -> list[Mapping[str, Any]]:
        return [n.params for n in self.drain() if n.method == "event"]


class Rig:
    """Clients of one test, each with its Checked subscription; all closed at the end."""

    def __init__(self, stack: contextlib.AsyncExitStack) -> None:
        self.stack = stack
        self.checked: dict[int, Checked] = {}

    async def client(self, path: str, *, ping_interval: float | None = 60.0) -> ControllerClient:
        client = await ControllerClient.connect(path, ping_interval=ping_interval)
        self.stack.push_async_callback(self._close, client)
        self.checked[id(client)] = Checked(client)
        return client

    async def _close(self, client: ControllerClient) -> None:
        await client.aclose()
        self.check(client).drain()  # validate whatever arrived last

    def check(self, client: ControllerClient) -> Checked:
        return self.checked[id(client)]

    async def observer(self, path: str, *, ping_interval: float | None = 60.0) -> ControllerClient:
        client = await self.client(path, ping_interval=ping_interval)
        validate_observed(await client.observe())
        return client

    async def controller(self, path: str) -> ControllerClient:
        client = await self.observer(path)
        took = await client.takeover()
        validate(took["connection"])
        assert client.role == "controller"
        return client

    async def transcript(self, client: ControllerClient, **options: Any) -> Transcript:
        view = Transcript(client, **options)
        self.stack.push_async_callback(view.aclose)
        return view


@contextlib.asynccontextmanager
async def rigged() -> AsyncIterator[Rig]:
    async with contextlib.AsyncExitStack() as stack:
        yield Rig(stack)


async def bounded(awaitable: Any) -> Any:
    return await asyncio.wait_for(awaitable, WAIT)


async def until(view: Transcript, predicate: Callable[[Transcript], bool]) -> None:
    await bounded(view.wait_until(predicate))


async def ctl(rig: FakeRig, op: str, *args: Any) -> Any:
    """A call on the fake engine's control channel, off the loop (it blocks on the fake's reply)."""
    return await asyncio.to_thread(getattr(rig.ctl, op), *args)


def admitted(outcome: Any) -> Admitted:
    assert isinstance(outcome, Admitted), outcome
    validate(outcome.receipt)
    assert outcome.request.request is not None
    validate(outcome.request.request)
    return outcome


def user_texts(rig: FakeRig) -> list[str]:
    """The user messages the engine persisted (what it was sent and ran), in order."""
    if not rig.session.exists():
        return []
    lines = [json.loads(x) for x in rig.session.read_bytes().split(b"\n") if x]
    return [x["message"]["content"][0]["text"] for x in lines
            if x.get("type") == "message" and x["message"]["role"] == "user"]


async def engine_received_nothing(rig: FakeRig) -> None:
    """Zero prompts reached this controller's engine: the core admitted none, nothing is in flight on the
    link, and the fake engine holds no message."""
    assert rig.core.requests == {}
    assert not rig.core.link.in_flight
    state = await ctl(rig, "state")
    assert state["messageCount"] == 0 and state["isStreaming"] is False
    assert user_texts(rig) == []


def project(items: tuple[TranscriptItem, ...]) -> list[tuple[str, Any, str]]:
    """What a terminal would show of each item: its type, its role or kind, its text."""
    out: list[tuple[str, Any, str]] = []
    for item in items:
        if isinstance(item, HistoryItem):
            out.append(("history", item.kind, item.text))
        elif isinstance(item, LiveMessage):
            out.append(("live", item.role, item.text))
        elif isinstance(item, ToolRun):
            out.append(("tool", item.tool_name, json.dumps(item.args, sort_keys=True)))
        elif isinstance(item, ReconcileMarker):
            out.append(("marker", item.reasons, ""))
        elif isinstance(item, HistoryUnavailable):
            out.append(("unavailable", item.refusal.get("code"), ""))
    return out


# ------------------------------------------------------------------------------------ E1, E7, H12, H13


def test_E1_a_prompt_streams_to_two_clients_and_both_transcripts_show_it_once_without_a_refresh(
        tmp_path: Path) -> None:
    async def main() -> None:
        async with fake_controller(tmp_path / "rig") as rig, rigged() as t:
            a = await t.client(rig.socket_path)
            b = await t.client(rig.socket_path)
            view_a, view_b = await t.transcript(a), await t.transcript(b)
            view_a.start()
            view_b.start()
            for client in (a, b):
                validate_observed(await client.observe())
            await a.takeover()
            outcome = admitted(await a.prompt("Say hello"))
            done = await bounded(a.wait_settled(outcome.request.client_request_id))
            assert done.receipt_state == "finished" and done.label == "finished (completed)"

            def shown(view: Transcript) -> bool:
                return any(isinstance(i, LiveMessage) and i.role == "assistant" and i.ended for i in view.items)

            await until(view_a, shown)
            await until(view_b, shown)
            # Both clients subscribed while nothing ran: quiet seams, no marker, no re-read (E1: no refresh).
            expected = [("unavailable", "unavailable", ""), ("live", "user", "Say hello"),
                        ("live", "assistant", "Hello from the fake model.")]
            assert project(view_a.items) == project(view_b.items) == expected
            assert view_a.reads == view_b.reads == 0 and view_a.reconcile is None
            assert view_a.dropped_repeats == view_b.dropped_repeats == 0 and view_a.held == view_b.held == 0
            # The stream each client saw is the same, once each.
            assert t.check(a).events() == t.check(b).events()
            assert user_texts(rig) == ["Say hello"]

    asyncio.run(main())


def test_E7_an_observer_prompt_is_refused_controller_with_zero_engine_bytes_and_submits_after_takeover(
        tmp_path: Path) -> None:
    async def main() -> None:
        async with fake_controller(tmp_path / "rig") as rig, rigged() as t:
            b = await t.observer(rig.socket_path)
            assert b.role == "observer"
            text = "pasted reply\n"
            outcome = await b.prompt(text, client_request_id="e7-1")
            assert isinstance(outcome, Refused)
            assert isinstance(outcome.refusal, RemoteRefusal) and isinstance(outcome.refusal, Refusal)
            assert outcome.refusal.code == "controller" and outcome.refusal.known
            assert outcome.text == text  # the text stays with the caller
            assert b.requests["e7-1"].state == "refused" and b.requests["e7-1"].label == "not admitted: controller"
            await engine_received_nothing(rig)

            await b.takeover()
            assert b.role == "controller"
            again = admitted(await b.prompt(text, client_request_id="e7-1"))  # refused ids are not in the dedup index
            assert again.request is b.requests["e7-1"]
            assert (await bounded(b.wait_settled("e7-1"))).receipt_state == "finished"
            assert user_texts(rig) == [text]

    asyncio.run(main())


def test_H12_an_exact_retry_after_reconnecting_to_the_same_incarnation_returns_the_same_receipt(
        tmp_path: Path) -> None:
    async def main() -> None:
        async with fake_controller(tmp_path / "rig") as rig, rigged() as t:
            a = await t.controller(rig.socket_path)
            await ctl(rig, "hold", "model-chunk")
            first = admitted(await a.prompt("Say hello", client_request_id="h12"))
            await ctl(rig, "wait_held", "model-chunk", WAIT)
            token = a.incarnation

            again = await bounded(a.reconnect())
            validate_observed(again.observed)
            assert not again.incarnation_changed and again.outcome_unknown == () and a.incarnation == token
            assert a.role == "observer" and first.request.state == "pending"  # still pending, still ours

            retried = await a.retry("h12")
            assert isinstance(retried, Duplicate)
            validate(retried.receipt)
            assert retried.request is first.request
            assert retried.receipt["request"] == first.receipt["request"]
            assert retried.receipt["receipt"] == first.receipt["receipt"]
            assert len(rig.core.requests) == 1  # no second dispatch

            await ctl(rig, "release", "model-chunk")
            # The receipt keeps updating over the new connection.
            settled = await bounded(a.wait_settled("h12"))
            assert settled.receipt_state == "finished" and settled.receipt_gap is False
            assert user_texts(rig) == ["Say hello"]

    asyncio.run(main())


def test_H13_a_retry_with_the_same_request_id_and_other_text_is_refused(tmp_path: Path) -> None:
    async def main() -> None:
        async with fake_controller(tmp_path / "rig") as rig, rigged() as t:
            a = await t.controller(rig.socket_path)
            first = admitted(await a.prompt("first", client_request_id="h13"))
            await bounded(a.wait_settled("h13"))
            other = await a.prompt("second", client_request_id="h13")
            assert isinstance(other, Refused) and other.refusal.code == "conflicting-request"
            assert isinstance(other.refusal, Refusal) and other.text == "second"
            # The request this client sent is unchanged, and the engine saw only the first text.
            assert a.requests["h13"] is first.request and first.request.text == "first"
            assert first.request.state == "settled"
            # Text the protocol's strict JSON cannot carry is refused by the library, before any byte.
            lone = await a.prompt("half a pair \ud800")
            assert isinstance(lone, Refused) and lone.refusal.code == "unencodable"
            assert isinstance(lone.refusal, ClientRefusal) and a.connected
            assert len(rig.core.requests) == 1 and user_texts(rig) == ["first"]

    asyncio.run(main())


# ------------------------------------------------------------------------------ H21, H22 and lost replies


def test_H21_H22_a_request_pending_across_a_controller_restart_is_outcome_unknown_and_never_resent(
        tmp_path: Path) -> None:
    async def main() -> None:
        async with rigged() as t:
            async with fake_controller(tmp_path / "one", execution="exec-1") as one:
                a = await t.controller(one.socket_path)
                await ctl(one, "hold", "model-chunk")
                outcome = admitted(await a.prompt("before the restart", client_request_id="h21"))
                await ctl(one, "wait_held", "model-chunk", WAIT)
                old_token = a.incarnation
                entry = outcome.request
                await bounded(a.wait_until(lambda: entry.receipt_state == "working"))
            # The first controller is gone with the request pending (its receipt said working).
            await bounded(a.wait_until(lambda: not a.connected))
            assert entry.state == "pending" and entry.receipt_state == "working"
            closing = [n for n in t.check(a).drain() if n.method in ("closing", "disconnected")]
            assert [n.method for n in closing] == ["closing", "disconnected"]
            assert closing[0].params["reason"] == "shutdown" and closing[1].params["reason"] == "shutdown"

            async with fake_controller(tmp_path / "two", execution="exec-2") as two:
                again = await bounded(a.reconnect(two.socket_path))
                validate_observed(again.observed)
                assert again.incarnation_changed and a.incarnation != old_token
                assert len(again.outcome_unknown) == 1 and again.outcome_unknown[0] is entry
                assert str(entry.state) == "outcome-unknown" and entry.unknown_reason == "incarnation-changed"
                assert entry.label == "outcome unknown" and entry.outcome_unknown
                assert a.pending() == [] and a.unknown() == [entry]
                await engine_received_nothing(two)  # never resubmitted

                # An explicit retry of that id is refused by the library: nothing is written.
                retried = await a.retry("h21")
                assert isinstance(retried, Refused) and isinstance(retried.refusal, ClientRefusal)
                assert retried.refusal.code == "outcome-unknown" and isinstance(retried.refusal, Refusal)
                # H21's wire half: the exact request under the old token is refused stale-incarnation.
                with pytest.raises(RemoteRefusal) as stale:
                    await a.request("prompt", {"incarnation": old_token, "generation": 1, "clientRequestId": "h21",
                                               "text": "before the restart"})
                assert stale.value.code == "stale-incarnation"
                await engine_received_nothing(two)

                # H22: a new request under the new token goes through.
                await a.takeover()
                new = admitted(await a.prompt("after the restart"))
                assert new.request.request is not None and new.request.request["incarnation"] == a.incarnation
                assert (await bounded(a.wait_settled(new.request.client_request_id))).receipt_state == "finished"
                assert user_texts(two) == ["after the restart"]
                assert str(entry.state) == "outcome-unknown"  # and it stays so

    asyncio.run(main())


class Proxy:
    """A Unix-socket proxy in front of a controller, for faults on the wire. Lines are forwarded both ways.

    `cut`: when the client writes a request with this method, the proxy forwards that line and closes the
    client's side in the same step, before any reply can come back (the controller's side stays open
    until `aclose`, so the request is read whole). `rewrite`: on the first client connection only, each
    event notification from the controller is replaced by the lines `rewrite(message)` returns (a repeat,
    a loss, other bytes). `hold_others`: on every later connection, the controller's lines wait until
    this event is set (`others_waiting` is set when one does). Its directory and socket are removed by
    their exact names."""

    def __init__(self, upstream: str, *, cut: str | None = None,
                 rewrite: Callable[[dict[str, Any]], list[dict[str, Any]]] | None = None,
                 hold_others: asyncio.Event | None = None) -> None:
        self.upstream = upstream
        self.cut = cut
        self.rewrite = rewrite
        self.hold_others = hold_others
        self.others_waiting = asyncio.Event()
        self.directory = tempfile.mkdtemp(prefix="mosaic-proxy-", dir="/tmp")
        os.chmod(self.directory, 0o700)
        self.path = os.path.join(self.directory, "proxy.sock")
        self.server: asyncio.Server | None = None
        self.upstreams: list[asyncio.StreamWriter] = []
        self.tasks: set[asyncio.Task[None]] = set()
        self.connections = 0

    async def start(self) -> Proxy:
        self.server = await asyncio.start_unix_server(self._serve, path=self.path, limit=1 << 26)
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_unix_connection(self.upstream, limit=1 << 26)
        self.upstreams.append(up_writer)
        self.connections += 1
        rewrite = self.rewrite if self.connections == 1 else None
        hold = self.hold_others if self.connections > 1 else None
        cut = False

        async def down() -> None:
            while (line := await up_reader.readline()) and not cut:
                if hold is not None and not hold.is_set():
                    self.others_waiting.set()
                    await hold.wait()
                message = json.loads(line)
                if rewrite is not None and message.get("method") == "event":
                    for out in rewrite(message):
                        writer.write(json.dumps(out).encode() + b"\n")
                else:
                    writer.write(line)

        task = asyncio.get_running_loop().create_task(down())
        self.tasks.add(task)
        while line := await reader.readline():
            up_writer.write(line)
            if self.cut is not None and json.loads(line).get("method") == self.cut:
                cut = True
                writer.transport.abort()  # same step as the write: no reply can have come back yet
                return
            await up_writer.drain()

    async def aclose(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
        for task in self.tasks:
            task.cancel()
        for up in self.upstreams:
            up.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        shutil.rmtree(self.directory, ignore_errors=True)


def test_a_connection_lost_after_the_prompt_was_written_makes_it_outcome_unknown_and_H12_settles_it(
        tmp_path: Path) -> None:
    async def main() -> None:
        async with fake_controller(tmp_path / "rig") as rig, rigged() as t:
            proxy = await Proxy(rig.socket_path, cut="prompt").start()
            t.stack.push_async_callback(proxy.aclose)
            witness = await t.observer(rig.socket_path)
            a = await t.controller(proxy.path)

            outcome = await a.prompt("Say hello", client_request_id="lost-1")
            assert isinstance(outcome, AdmissionUnknown)
            entry = outcome.request
            assert entry.state == "outcome-unknown" and entry.unknown_reason == "connection-lost"
            assert entry.label == "outcome unknown" and not a.connected

            # The controller did admit it (another client sees its request record); the client could not know.
            def recorded() -> bool:
                return any(r["clientRequest"] == "lost-1" for r in t.check(witness).records("request"))

            await bounded(witness.wait_until(recorded))
            (request,) = [r for r in t.check(witness).records("request") if r["clientRequest"] == "lost-1"]
            assert len(rig.core.requests) == 1  # the library resent nothing

            # Back to the same incarnation: still unknown (not a restart), and an exact retry is safe (H12).
            again = await bounded(a.reconnect(rig.socket_path))
            assert not again.incarnation_changed and again.outcome_unknown == ()
            assert entry.state == "outcome-unknown" and entry.unknown_reason == "connection-lost"
            retried = await a.retry("lost-1")
            assert isinstance(retried, Duplicate) and retried.request is entry
            assert entry.request_id == request["request"]
            settled = await bounded(a.wait_settled("lost-1"))
            assert settled.receipt_state == "finished" and not settled.outcome_unknown
            assert len(rig.core.requests) == 1 and user_texts(rig) == ["Say hello"]

    asyncio.run(main())


# ---------------------------------------------------------------------------------- E4 and E6 (Transcript)


def test_E4_observing_mid_run_marks_the_seam_and_the_reread_after_run_settled_clears_it(tmp_path: Path) -> None:
    async def main() -> None:
        async with fake_controller(tmp_path / "rig") as rig, rigged() as t:
            a = await t.controller(rig.socket_path)
            await ctl(rig, "hold", "model-chunk")
            outcome = admitted(await a.prompt("Say hello"))
            await ctl(rig, "wait_held", "model-chunk", WAIT)

            b = await t.client(rig.socket_path)
            view = await t.transcript(b)
            seen: list[tuple[TranscriptItem, ...]] = []
            view.add_listener(lambda v: seen.append(v.items))
            view.start()
            observed = await b.observe()
            validate_observed(observed)
            assert observed.seam.quiet is False and observed.seam.replay == "unavailable"
            await until(view, lambda v: v.reconcile is not None)
            marker = view.reconcile
            assert marker is not None and marker.reasons == ("not-quiet",)
            assert marker.from_sequence == observed.seam.from_sequence
            assert isinstance(view.items[-1], ReconcileMarker)  # at the seam: after the history, before live

            await ctl(rig, "release", "model-chunk")
            await bounded(a.wait_settled(outcome.request.client_request_id))
            await until(view, lambda v: v.reconcile is None and v.reads >= 1)
            # After run-settled the page was re-read; the read was quiet, so each message appears once.
            assert project(view.items) == [("history", "user", "Say hello"),
                                           ("history", "assistant", "Hello from the fake model.")]
            # Before the re-read, the live deltas grew one message in place, under the marker.
            live = [s for s in seen if any(isinstance(i, ReconcileMarker) for i in s)
                    and any(isinstance(i, LiveMessage) for i in s)]
            texts = [[i.text for i in s if isinstance(i, LiveMessage)] for s in live]
            assert texts and all(len(x) == 1 for x in texts)
            assert texts[-1] == ["Hello from the fake model."] and len({x[0] for x in texts}) > 1
            assert all("Hello from the fake model.".startswith(x[0]) for x in texts)

    asyncio.run(main())


def test_E6_a_tool_result_delayed_across_a_pause_and_a_reconnect_reconciles_without_a_manual_refresh(
        tmp_path: Path) -> None:
    async def main() -> None:
        async with fake_controller(tmp_path / "rig") as rig, rigged() as t:
            a = await t.controller(rig.socket_path)
            b = await t.client(rig.socket_path)
            view = await t.transcript(b)
            view.start()
            assert (await b.observe()).seam.quiet is True
            await ctl(rig, "hold", "tool")
            outcome = admitted(await a.prompt("TOOLCALL please run it"))
            await ctl(rig, "wait_held", "tool", WAIT)

            def running(v: Transcript) -> bool:
                return any(isinstance(i, ToolRun) and i.running for i in v.items)

            await until(view, running)
            (tool,) = [i for i in view.items if isinstance(i, ToolRun)]
            assert tool.tool_name == "bash" and tool.args == {"command": "printf tool-ran-ok"}
            assert tool.result is None and view.reconcile is None

            again = await bounded(b.reconnect())  # the pause, then a reconnect while the tool is held
            assert not again.incarnation_changed and again.observed.seam.quiet is False
            await until(view, lambda v: v.reconcile is not None and "not-quiet" in v.reconcile.reasons)

            await ctl(rig, "release", "tool")
            await bounded(a.wait_settled(outcome.request.client_request_id))
            await until(view, lambda v: v.reconcile is None and v.reads >= 1)
            assert project(view.items) == [
                ("history", "user", "TOOLCALL please run it"), ("history", "assistant", ""),
                ("history", "toolResult", "tool-ran-ok"),
                ("history", "assistant", "Tool result was: tool-ran-ok.")]
            call = view.items[1]
            assert isinstance(call, HistoryItem) and call.blocks[0]["kind"] == "toolCall"

    asyncio.run(main())


@pytest.mark.parametrize("fault", ["repeat", "gap", "conflict", "epoch"])
def test_E3_a_repeated_event_is_dropped_and_a_gap_or_conflicting_repeat_is_held_and_reconciled(
        tmp_path: Path, fault: str) -> None:
    def rewrite(message: dict[str, Any]) -> list[dict[str, Any]]:
        params = message["params"]
        if params["eventType"] != "text-delta" or params["payload"]["delta"] != "from the ":
            return [message]
        if fault == "repeat":  # duplicate delivery: the same bytes twice
            return [message, message]
        if fault == "gap":  # the line is lost: the next event arrives past a gap
            return []
        other = json.loads(json.dumps(message))
        if fault == "epoch":  # E4's new stream epoch: the stream of another execution from here on
            other["params"]["execution"] = "exec-2"
            other["params"]["event"] = f"exec-2.{other['params']['sequence']}"
            other["params"]["payload"]["delta"] = "FORGED "
            return [other]
        other["params"]["payload"]["delta"] = "FORGED "  # the same event id with other bytes
        return [message, other]

    async def main() -> None:
        async with fake_controller(tmp_path / "rig") as rig, rigged() as t:
            proxy = await Proxy(rig.socket_path, rewrite=rewrite).start()
            t.stack.push_async_callback(proxy.aclose)
            a = await t.controller(rig.socket_path)
            b = await t.client(proxy.path)
            view = await t.transcript(b)
            seen: list[tuple[TranscriptItem, ...]] = []
            view.add_listener(lambda v: seen.append(v.items))
            view.start()
            assert (await b.observe()).seam.quiet is True
            outcome = admitted(await a.prompt("Say hello"))
            await bounded(a.wait_settled(outcome.request.client_request_id))
            final = [("live", "user", "Say hello"), ("live", "assistant", "Hello from the fake model.")]
            if fault == "repeat":
                await until(view, lambda v: ("live", "assistant", "Hello from the fake model.") in project(v.items))
                assert view.dropped_repeats == 1 and view.reads == 0 and view.held == 0
                assert project(view.items) == [("unavailable", "unavailable", ""), *final]
            else:
                await until(view, lambda v: v.reads >= 1 and v.reconcile is None)
                assert project(view.items) == [("history", "user", "Say hello"),
                                               ("history", "assistant", "Hello from the fake model.")]
                assert view.held >= 1 and view.dropped_repeats == 0
                marked = [m for s in seen for m in s if isinstance(m, ReconcileMarker)]
                assert marked and {fault if fault != "conflict" else "conflict"} <= set(marked[0].reasons)
            # Never concatenated past a gap, never shown with forged bytes.
            for items in seen:
                for item in items:
                    if isinstance(item, LiveMessage):
                        assert "FORGED" not in item.text and "Hello fake" not in item.text

    asyncio.run(main())


def test_E4_events_that_arrive_while_a_reread_runs_follow_the_new_history(tmp_path: Path) -> None:
    """A gap re-reads at once while the run is still going; the read's reply is withheld (the proxy) until
    the rest of the run has reached the view. The new history is then followed by the events from the
    cut's fromSequence on, taken from what the view's own subscription carried meanwhile."""

    def lose_first_delta(message: dict[str, Any]) -> list[dict[str, Any]]:
        params = message["params"]
        lost = params["eventType"] == "text-delta" and params["payload"]["delta"] == "Hello "
        return [] if lost else [message]

    async def main() -> None:
        async with fake_controller(tmp_path / "rig") as rig, rigged() as t:
            withheld = asyncio.Event()
            proxy = await Proxy(rig.socket_path, rewrite=lose_first_delta, hold_others=withheld).start()
            t.stack.push_async_callback(proxy.aclose)
            t.stack.callback(withheld.set)
            a = await t.controller(rig.socket_path)
            b = await t.client(proxy.path)
            view = await t.transcript(b)
            seen: list[tuple[int, tuple[TranscriptItem, ...]]] = []
            view.add_listener(lambda v: seen.append((v.reads, v.items)))
            view.start()
            assert (await b.observe()).seam.quiet is True
            await ctl(rig, "hold", "model-chunk", 3)
            outcome = admitted(await a.prompt("Say hello"))
            for _ in range(2):  # "Hello " (lost on the wire), then "from the " (past a gap: held, read at once)
                await ctl(rig, "wait_held", "model-chunk", WAIT)
                await ctl(rig, "release", "model-chunk")
            await ctl(rig, "wait_held", "model-chunk", WAIT)  # the run waits before "fake model."
            await bounded(proxy.others_waiting.wait())  # the cut is taken (its reply is here), mid-run
            assert view.reading and view.reconcile is not None and "gap" in view.reconcile.reasons

            await ctl(rig, "release", "model-chunk")
            await bounded(a.wait_settled(outcome.request.client_request_id))
            await bounded(b.wait_until(lambda: any(n.method == "record" and n.params.get("state") == "finished"
                                                   for n in t.check(b).drain())))
            await until(view, lambda v: v.applied == len(t.check(b).drain()))  # the view took it all in
            assert view.reads == 0
            withheld.set()

            await until(view, lambda v: v.reads >= 1 and v.reconcile is None)
            first = [items for reads, items in seen if reads == 1]
            assert first, "the first re-read was applied"
            marker = first[0][[isinstance(i, ReconcileMarker) for i in first[0]].index(True)]
            assert isinstance(marker, ReconcileMarker) and marker.reasons == ("not-quiet",)
            live = [i for i in first[0] if isinstance(i, LiveMessage)]
            assert [(m.role, m.text, m.ended) for m in live] == [("assistant", "Hello from the fake model.", True)]
            assert project(view.items) == [("history", "user", "Say hello"),
                                           ("history", "assistant", "Hello from the fake model.")]

    asyncio.run(main())


def test_a_transcript_made_after_the_first_observe_reads_an_exact_cut_at_once(tmp_path: Path) -> None:
    async def main() -> None:
        async with fake_controller(tmp_path / "rig") as rig, rigged() as t:
            a = await t.controller(rig.socket_path)
            outcome = admitted(await a.prompt("Say hello"))
            await bounded(a.wait_settled(outcome.request.client_request_id))
            view = await t.transcript(a)  # its seam went by: the view starts from a fresh cut
            assert view.reconcile is not None and view.reconcile.reasons == ("attached",)
            view.start()
            await until(view, lambda v: v.reads == 1 and v.reconcile is None)
            assert project(view.items) == [("history", "user", "Say hello"),
                                           ("history", "assistant", "Hello from the fake model.")]
            status = view.status
            assert (status.role, status.engine_state, status.admission) == ("controller", "idle", "open")
            assert status.unknown_native_events == 0 and status.connected and not status.reconciling
            assert status.incarnation == a.incarnation and status.generation == a.generation == 2

    asyncio.run(main())


def test_E5_an_unknown_native_event_makes_no_client_event_and_the_status_line_counts_it(tmp_path: Path) -> None:
    async def main() -> None:
        async with fake_controller(tmp_path / "rig") as rig, rigged() as t:
            b = await t.client(rig.socket_path)
            view = await t.transcript(b)
            view.start()
            validate_observed(await b.observe())
            before = view.items
            assert view.status.unknown_native_events == 0
            # An extension UI request with a method pinned Pi does not have: no mapping (C-4 interim).
            await asyncio.to_thread(lambda: rig.ctl.request("dialog", method="no-such-dialog", title="t"))
            await until(view, lambda v: v.status.unknown_native_events == 1)
            assert t.check(b).events() == [] and view.items == before
            assert [r["evidence"]["unknownNativeEvents"] for r in t.check(b).records("binding")] == [1]

    asyncio.run(main())


# ---------------------------------------------------------------------------------------- stops


def test_force_stop_confirmed_on_a_controller_without_a_cohort_ends_uncertain_no_cohort(tmp_path: Path) -> None:
    async def main() -> None:
        async with fake_controller(tmp_path / "rig") as rig, rigged() as t:
            b = await t.observer(rig.socket_path)
            with pytest.raises(RemoteRefusal) as observer:
                await b.force_stop_confirmed()
            assert observer.value.code == "controller"

            a = await t.controller(rig.socket_path)
            started = await a.force_stop_confirmed()
            for record in (started.issued, started.answered, started.stop):
                validate(record)
            conf = started.issued["confirmation"]
            assert started.issued["state"] == "issued" and started.answered["state"] == "answered"
            assert started.answered["confirmation"] == conf and started.issued["operation"] == "force-stop"
            assert started.stop["kind"] == "force-stop" and started.stop["state"] == "stopping"
            assert started.stop["confirmation"] == conf

            final = await bounded(a.wait_stop(started.stop["stop"]))
            assert final["state"] == "uncertain" and final["reason"] == "no-cohort"
            check = t.check(a)
            assert [r["stop"] for r in check.records("effectReport")] == [started.stop["stop"]]
            await bounded(a.wait_until(lambda: (a.binding or {}).get("state") == "uncertain"))
            assert a.binding is not None and a.binding["admission"] == "closed"

            with pytest.raises(RemoteRefusal) as reused:  # consumed on use (H17)
                await a.force_stop(conf)
            assert reused.value.code == "confirmation" and isinstance(reused.value, Refusal)
            fenced = await a.prompt("after the stop")
            assert isinstance(fenced, Refused) and fenced.refusal.code == "fenced"
            await engine_received_nothing(rig)

    asyncio.run(main())


def test_interrupt_through_the_library_reconciles_and_the_receipt_follows_the_interrupted_turn(
        tmp_path: Path) -> None:
    async def main() -> None:
        async with fake_controller(tmp_path / "rig") as rig, rigged() as t:
            a = await t.controller(rig.socket_path)
            with pytest.raises(RemoteRefusal) as idle:
                await a.interrupt()
            assert idle.value.code == "no-turn"
            outcome = admitted(await a.prompt("SLOW stream please"))
            await bounded(a.wait_until(lambda: any(e["eventType"] == "text-delta" for e in t.check(a).events())))
            stop = await a.interrupt()
            validate(stop)
            final = await bounded(a.wait_stop(stop["stop"]))
            assert final["kind"] == "interrupt" and final["state"] == "reconciled"
            settled = await bounded(a.wait_settled(outcome.request.client_request_id))
            assert settled.receipt is not None and settled.receipt["turnState"] == "interrupted"
            assert settled.label == "finished (interrupted)"
            assert user_texts(rig) == ["SLOW stream please"]

    asyncio.run(main())


def test_recovery_control_and_an_unknown_refusal_code_from_a_lifecycle_effect(tmp_path: Path) -> None:
    async def effects(effect: Any) -> Mapping[str, Any]:
        if effect.kind == "force-stop":
            return {"state": "stopped"}
        if effect.kind == "recover":
            return {"refusal": {"code": "lifecycle-novel", "reconcile": False, "message": "a code the client does not know"}}
        return {"ok": True}

    async def main() -> None:
        async with fake_controller(tmp_path / "rig", effects=effects) as rig, rigged() as t:
            a = await t.controller(rig.socket_path)
            b = await t.observer(rig.socket_path)
            with pytest.raises(RemoteRefusal) as present:
                await b.acquire_recovery_control()
            assert present.value.code == "controller-present"
            with pytest.raises(RemoteRefusal) as no_proof:
                conf = (await a.issue_confirmation("recover"))["confirmation"]
                await a.answer_confirmation(conf, "confirm")
                await a.recover(conf)
            assert no_proof.value.code == "stop-proof"

            started = await a.force_stop_confirmed()
            assert (await bounded(a.wait_stop(started.stop["stop"])))["state"] == "stopped"
            await a.aclose()  # the controller's connection goes; control stays with it (H11) ...
            await bounded(b.wait_until(lambda: (b.binding or {}).get("controllerConnected") is False))
            took = await b.acquire_recovery_control()  # ... until recovery control is taken explicitly
            validate(took["connection"])
            assert took["how"] == "recovery" and b.role == "controller" and b.generation == took["generation"]
            conf = (await b.issue_confirmation("recover"))["confirmation"]
            await b.answer_confirmation(conf, "confirm")
            with pytest.raises(Refusal) as unknown:  # one except for every Mosaic refusal
                await b.recover(conf)
            refusal = unknown.value
            assert isinstance(refusal, RemoteRefusal) and isinstance(refusal, ControlRefusal)
            assert refusal.code == "lifecycle-novel" and refusal.known is False and refusal.reconcile is False
            assert "lifecycle-novel" not in ControlRefusal.CODES

    asyncio.run(main())


def test_protocol_errors_are_not_refusals(tmp_path: Path) -> None:
    async def main() -> None:
        async with fake_controller(tmp_path / "rig") as rig, rigged() as t:
            a = await t.observer(rig.socket_path)
            with pytest.raises(RemoteProtocolError) as missing:
                await a.request("no-such-method", {})
            assert missing.value.code == METHOD_NOT_FOUND and missing.value.name == "method-not-found"
            assert not isinstance(missing.value, Refusal)
            with pytest.raises(RemoteProtocolError) as bad:
                await a.request("takeover", {"incarnation": a.incarnation, "expectedGeneration": "one"})
            assert bad.value.name == "invalid-params" and bad.value.data == {"param": "expectedGeneration"}
            await a.ping()  # the connection is still fine
            assert a.connected

    asyncio.run(main())


# ------------------------------------------------------------------------------- lagging and pinging


def test_a_lagging_subscriber_gets_a_marker_of_its_own_and_loses_nothing_silently(tmp_path: Path) -> None:
    async def main() -> None:
        async with fake_controller(tmp_path / "rig") as rig, rigged() as t:
            a = await t.controller(rig.socket_path)
            slow = a.subscribe(maxsize=4)
            fast = a.subscribe()
            outcome = admitted(await a.prompt("Say hello"))
            await bounded(a.wait_settled(outcome.request.client_request_id))
            got = []
            while (note := fast.get_nowait()) is not None:
                got.append(note)
            lagged = []
            while (note := slow.get_nowait()) is not None:
                lagged.append(note)
            assert len(got) > 5
            assert lagged[:4] == got[:4]
            marker = lagged[4]
            assert marker.origin == "client" and marker.method == "marker"
            assert marker.params == {"reason": "lagging", "dropped": len(got) - 4}
            assert len(lagged) == 5 and slow.dropped == len(got) - 4 and fast.dropped == 0
            # After the marker the subscriber receives again, at the marker's place in the order.
            b = await t.observer(rig.socket_path)
            await b.takeover()
            await bounded(a.wait_until(lambda: a.role == "observer"))
            after, tail = slow.get_nowait(), fast.get_nowait()
            assert after is not None and after == tail and after.params["type"] == "binding"
            slow.close()
            fast.close()

    asyncio.run(main())


def test_a_transcript_that_lags_marks_the_seam_rereads_at_once_and_shows_each_message_once(
        tmp_path: Path) -> None:
    async def main() -> None:
        async with fake_controller(tmp_path / "rig") as rig, rigged() as t:
            a = await t.controller(rig.socket_path)
            b = await t.client(rig.socket_path)
            view = await t.transcript(b, queue_size=3)  # not started: it falls behind
            validate_observed(await b.observe())
            outcome = admitted(await a.prompt("Say hello"))
            await bounded(b.wait_until(lambda: any(n.method == "record" and n.params.get("state") == "finished"
                                                   for n in t.check(b).drain())))
            assert view.poll() == 5  # observed, three notifications, the lagging marker
            marker = view.reconcile
            assert marker is not None and "lagging" in marker.reasons and marker.reading
            view.start()
            await until(view, lambda v: v.reconcile is None and v.reads == 1)
            assert project(view.items) == [("history", "user", "Say hello"),
                                           ("history", "assistant", "Hello from the fake model.")]
            assert outcome.request.state == "settled"

    asyncio.run(main())


def test_pings_keep_a_listening_client_past_the_idle_bound(tmp_path: Path) -> None:
    async def main() -> None:
        limits = ServerLimits(idle_timeout=1.0)
        async with fake_controller(tmp_path / "rig", limits=limits) as rig, rigged() as t:
            # The pinging client observes first, so without pings its idle deadline would come first.
            pinging = await t.observer(rig.socket_path, ping_interval=0.1)
            silent = await t.client(rig.socket_path, ping_interval=None)
            validate_observed(await silent.observe())
            await bounded(silent.wait_until(lambda: not silent.connected))
            notes = t.check(silent).drain()
            assert [n.params["reason"] for n in notes if n.method == "closing"] == ["idle"]
            # The same sweep would have closed the pinging client, which went quiet earlier; a round trip
            # after it shows the connection open (a `closing` would have come before the reply).
            await pinging.ping()
            assert pinging.connected and pinging.pings_sent >= 1
            assert not [n for n in t.check(pinging).drain() if n.method in ("closing", "disconnected")]

    asyncio.run(main())


def test_E3_an_extensions_run_carries_a_null_request_correlation_and_is_shown_once(tmp_path: Path) -> None:
    """CHAT-01 lines 110-112 via brief §9 E3: events of a run no Mosaic request started (the fake's
    inject_prompt: an extension's sendUserMessage, agent-session.js 1135-1160) carry `request: null`; the
    slot's run carries its request, inferred from order. Both render once."""

    async def main() -> None:
        async with fake_controller(tmp_path / "rig") as rig, rigged() as t:
            a = await t.controller(rig.socket_path)
            view = await t.transcript(a)
            view.start()

            def shown(v: Transcript) -> list[tuple[Any, str]]:  # history or live: what a terminal shows
                return [(kind, text) for source, kind, text in project(v.items) if source in ("history", "live")]

            await asyncio.to_thread(rig.ctl.request, "inject_prompt", text="from an extension")
            await until(view, lambda v: ("assistant", "Hello from the fake model.") in shown(v))
            await bounded(a.wait_until(lambda: any(n.method == "event" and n.params["eventType"] == "run-settled"
                                                   for n in t.check(a).drain())))
            outcome = admitted(await a.prompt("Say hello"))
            await bounded(a.wait_settled(outcome.request.client_request_id))
            events = [n.params for n in t.check(a).drain() if n.method == "event"]
            by_request: dict[Any, list[str]] = {}
            for e in events:
                by_request.setdefault(e["request"], []).append(e["eventType"])
            mine = outcome.request.request["request"]
            assert set(by_request) == {None, mine}
            assert by_request[None][-1] == "run-settled" and by_request[mine][-1] == "run-settled"
            try:
                await until(view, lambda v: v.reconcile is None and shown(v).count(("user", "Say hello")) == 1
                            and shown(v).count(("assistant", "Hello from the fake model.")) == 2)
            except TimeoutError:
                raise AssertionError(f"the view shows {project(view.items)} (reconcile {view.reconcile})") from None
            assert shown(view).count(("user", "from an extension")) == 1

    asyncio.run(main())


# ---------------------------------------------------------------------------------------- dialogs (issue 33)


async def _decision(t: Rig, client: ControllerClient, state: str, count: int = 1) -> list[Mapping[str, Any]]:
    """The nativeDecision records once `count` of them are in `state` (bounded by WAIT)."""
    async def wait() -> list[Mapping[str, Any]]:
        while True:
            found = [r for r in t.check(client).records("nativeDecision") if r["state"] == state]
            if len(found) >= count:
                return found
            await asyncio.sleep(0.01)
    return await bounded(wait())


def test_P1_on_the_fake_engine_the_controller_answers_a_confirm_and_the_tool_runs_with_the_exact_value(
        tmp_path: Path) -> None:
    """Through the socket, the client library and the fake engine with the fixture extension: the decision
    is open with its choices, a generic yes is refused, `approve` writes one answer that reaches the
    extension (its tool result says `confirm answered true`), native evidence settles the decision, and a
    second, conflicting answer is refused (H7)."""
    async def main() -> None:
        async with fake_controller(tmp_path / "rig", dialogs=True) as rig, rigged() as t:
            a = await t.controller(rig.socket_path)
            outcome = admitted(await a.prompt(dialog_prompt("confirm")))
            (shown,) = await _decision(t, a, "open")
            assert shown["choices"] == ["confirm", "decline"] and shown["method"] == "confirm"
            with pytest.raises(RemoteRefusal) as generic:
                await a.approve(shown["nativeDecision"], "yes")
            assert generic.value.code == "decision"
            answered = await a.approve(shown["nativeDecision"], "confirm")
            assert answered["state"] == "answered"
            await bounded(a.wait_settled(outcome.request.client_request_id))
            (settled,) = await _decision(t, a, "settled")
            assert settled["how"] == "answered"
            ends = [e for e in t.check(a).events() if e["eventType"] == "tool-end"]
            assert ends[-1]["payload"]["result"]["content"][0]["text"] == "confirm answered true"
            with pytest.raises(RemoteRefusal) as conflicting:
                await a.approve(shown["nativeDecision"], "decline")
            assert conflicting.value.code == "decision"

    asyncio.run(main())


def test_P3_on_the_fake_engine_a_controller_that_does_not_answer_dialogs_refuses_approve(tmp_path: Path) -> None:
    async def main() -> None:
        async with fake_controller(tmp_path / "rig") as rig, rigged() as t:
            a = await t.controller(rig.socket_path)
            with pytest.raises(RemoteRefusal) as off:
                await a.approve("d1", "confirm")
            assert off.value.code == "unsupported-capability"

    asyncio.run(main())


def test_the_observe_reply_names_the_engine_and_the_library_reads_it_for_a_title(tmp_path: Path) -> None:
    """Issue 32 item 7: a client's title says which engine (the terminal's header). The observe reply carries
    `engine`, `EngineRules.name` in words ("Pi" here; "Claude" on a Claude seat: the terminal's
    `tests/test_claude_seat.py`); the library's `Observed.engine` holds it."""
    async def main() -> None:
        async with fake_controller(tmp_path / "rig") as rig:
            client = await ControllerClient.connect(rig.socket_path, ping_interval=None)
            try:
                observed = await client.observe()
                assert isinstance(observed, Observed) and observed.engine == "Pi" == rig.core.config.engine.name
            finally:
                await client.aclose()

    asyncio.run(main())
