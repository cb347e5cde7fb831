"""A controller core wired to a scripted engine at the byte level, with no process and no sleep.

`Harness` owns a `ControllerCore` and plays both of its outside worlds exactly: clients (connections
that call methods and collect replies, refusals and notifications) and Pi (every byte the core's
`LinkCore` writes is captured and decoded; the test answers with the records pinned Pi 0.85.1 writes, in
the order FACTS.md shows). Races land at an exact step because the test decides what the engine says
and when. Every record a client sees is validated against schemas/chat-01-control.schema.json.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema

from mosaic.controller.access import Peer
from mosaic.controller.core import (
    Action,
    Call,
    CancelTimer,
    Connected,
    ControllerCore,
    CoreConfig,
    Disconnected,
    Effect,
    EffectDone,
    EngineEvents,
    Evidence,
    FlushEngine,
    Notify,
    PageRead,
    ReadPage,
    Refuse,
    Reply,
    SessionStat,
    SetTimer,
    TimerFired,
)
from mosaic.controller.engines.pi import PI_RULES
from mosaic.controller.testing import RawClient
from mosaic.pi_rpc.framing import encode_record as encode_engine_record

REPO = Path(os.environ.get("MOSAIC_REPO") or Path(__file__).resolve().parents[3])
SCHEMA = json.loads((REPO / "schemas" / "chat-01-control.schema.json").read_text(encoding="utf-8"))
INCARNATION = "inc-" + "a" * 32
EXECUTION = "exec-1"
OWNER = Peer(os.geteuid(), os.getegid(), os.getpid())  # the controller's own uid: may do everything


_VALIDATORS: dict[str, jsonschema.Draft202012Validator] = {}


def validate(record: Mapping[str, Any], definition: str | None = None) -> None:
    """Validate one record against its definition in the control schema (by its `type` by default)."""
    name = definition or str(record.get("type"))
    validator = _VALIDATORS.get(name)
    if validator is None:
        schema = {"$ref": f"#/$defs/{name}", "$defs": SCHEMA["$defs"]}
        jsonschema.Draft202012Validator.check_schema(schema)
        validator = _VALIDATORS[name] = jsonschema.Draft202012Validator(schema)
    validator.validate(record)


@dataclass
class Client:
    """What one connection received, in order."""

    conn: str
    replies: dict[Any, Any] = field(default_factory=dict)  # rpc id -> result, or ("refused", refusal)
    notes: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def events(self) -> list[dict[str, Any]]:
        return [p for m, p in self.notes if m == "event"]

    def records(self, kind: str | None = None) -> list[dict[str, Any]]:
        return [p for m, p in self.notes if m == "record" and (kind is None or p.get("type") == kind)]


class Harness:
    def __init__(self, **config: Any) -> None:
        config.setdefault("conversation", "pi-conversation")
        config.setdefault("execution", EXECUTION)
        config.setdefault("binding", "binding-1")
        config.setdefault("incarnation", INCARNATION)
        config.setdefault("engine", PI_RULES)
        self.now = 1000.0
        self.core = ControllerCore(CoreConfig(**config), now=self.now)
        self.clients: dict[str, Client] = {}
        self.engine_bytes = bytearray()  # every byte the engine received, in order
        self.timers: dict[str, float] = {}
        self.effects: list[Effect] = []
        self.evidence: list[Evidence] = []
        self.page: dict[str, Any] = {"ok": True, "page": {"items": []}, "cursor": None}
        self._rpc = 0
        self._crid = 0
        self.auto_flush = True
        self.auto_page = True

    # -- plumbing -------------------------------------------------------------------------------------

    def feed(self, event: Any) -> list[Action]:
        """One input; its actions carried out in order. As in the asyncio shell, the engine writes a
        FlushEngine starts report back later (CommandWritten is a queued event), after this batch."""
        actions = self.core.receive(event, now=self.now)
        flush = False
        for action in actions:
            if isinstance(action, FlushEngine):
                flush = True
                continue
            self._carry_out(action)
        if flush and self.auto_flush:
            self.flush()
        return actions

    def _carry_out(self, action: Action) -> None:
        if isinstance(action, Reply):
            validate_reply(action.result)
            self.clients[action.conn].replies[action.rpc_id] = action.result
        elif isinstance(action, Refuse):
            validate(dict(action.refusal), "refusal")
            self.clients[action.conn].replies[action.rpc_id] = ("refused", dict(action.refusal))
        elif isinstance(action, Notify):
            validate_note(action.method, action.params)
            for conn in action.to:
                self.clients[conn].notes.append((action.method, dict(action.params)))
        elif isinstance(action, ReadPage):
            if self.auto_page:
                self.feed(PageRead(action.conn, action.rpc_id, self.page))
        elif isinstance(action, SetTimer):
            self.timers[action.key] = action.deadline
        elif isinstance(action, CancelTimer):
            self.timers.pop(action.key, None)
        elif isinstance(action, Effect):
            self.effects.append(action)
        elif isinstance(action, Evidence):
            self.evidence.append(action)

    def flush(self) -> None:
        """The pipe takes every queued line whole (the shell's os.write of each command)."""
        link = self.core.link
        while (command := link.next_write()) is not None:
            self.engine_bytes += command.data
            self.feed(EngineEvents(self.core.execution, link.write_done(command, accepted=len(command.data),
                                                                          error=None, now=self.now)))

    def advance(self, seconds: float) -> None:
        """Move the clock; fire the core's timers and the link's bounds that are due, in deadline order."""
        self.now += seconds
        for key, deadline in sorted(self.timers.items(), key=lambda kv: kv[1]):
            if deadline <= self.now:
                self.timers.pop(key, None)
                self.feed(TimerFired(key))
        self.feed(EngineEvents(self.core.execution, self.core.link.tick(now=self.now)))

    # -- the engine side ------------------------------------------------------------------------------

    def written(self) -> list[dict[str, Any]]:
        """Every record the engine received, decoded (LF-split, as Pi's jsonl reader does)."""
        *lines, _partial = bytes(self.engine_bytes).split(b"\n")  # a line cut by a broken write is no record
        return [json.loads(line) for line in lines if line]

    def written_types(self) -> list[str]:
        return [r["type"] for r in self.written()]

    def last(self, ctype: str) -> dict[str, Any]:
        return [r for r in self.written() if r["type"] == ctype][-1]

    def engine(self, *records: Mapping[str, Any], execution: str | None = None) -> None:
        """Pi writes these records, in order, as one chunk."""
        data = b"".join(encode_engine_record(r) for r in records)
        events = self.core.link.feed(data, now=self.now)
        self.feed(EngineEvents(execution or self.core.execution, events))

    def respond(self, ctype: str, success: bool = True, **fields: Any) -> None:
        """Pi's response to the last written command of type `ctype`."""
        cid = self.last(ctype)["id"]
        record: dict[str, Any] = {"id": cid, "type": "response", "command": ctype, "success": success, **fields}
        self.engine(record)

    def turn(self, text: str, reply: str = "Hello from the fake model.") -> None:
        """The slot's prompt runs as pinned Pi runs it: the ack, the run's first events, the answer to the
        get_state the controller wrote after the ack (still streaming), the rest of the run."""
        self.respond("prompt")
        self.engine(*run_start(text))
        self.respond("get_state", data=state(True))
        self.engine(*deltas(*reply.split(" ")), *run_end(reply))

    # -- the client side ------------------------------------------------------------------------------

    def connect(self, conn: str, peer: Peer | None = OWNER) -> Client:
        """`conn` connects as `peer` (the owner unless said otherwise; None: credentials unread)."""
        self.clients[conn] = Client(conn)
        self.feed(Connected(conn, peer))
        return self.clients[conn]

    def disconnect(self, conn: str) -> None:
        self.feed(Disconnected(conn))

    def call(self, conn: str, method: str, *, session: SessionStat | None = None, **params: Any) -> Any:
        """Call `method`; return its result dict, or ("refused", refusal) — or None when no answer yet.
        `session`: the shell's look at the session file that comes with a prompt (`Call.session`)."""
        if method != "observe":
            params.setdefault("incarnation", INCARNATION)
        self._rpc += 1
        rpc_id = self._rpc
        self.feed(Call(conn, rpc_id, method, params, session))
        return self.clients[conn].replies.get(rpc_id)

    def observe(self, conn: str) -> dict[str, Any]:
        if conn not in self.clients:
            self.connect(conn)
        result = self.call(conn, "observe")
        assert isinstance(result, dict), result
        return result

    def controller(self, conn: str = "c1") -> str:
        """`conn` observes and takes control."""
        self.observe(conn)
        result = self.call(conn, "takeover", expectedGeneration=self.core.generation)
        assert isinstance(result, dict), result
        return conn

    def prompt(self, conn: str, text: str, crid: str | None = None, generation: int | None = None,
               session: SessionStat | None = None) -> Any:
        self._crid += 1
        return self.call(conn, "prompt", session=session, text=text, clientRequestId=crid or f"cr-{self._crid}",
                         generation=self.core.generation if generation is None else generation)

    def confirm(self, conn: str, operation: str = "force-stop") -> str:
        issued = self.call(conn, "issue-confirmation", operation=operation)
        assert isinstance(issued, dict), issued
        cid = issued["confirmation"]["confirmation"]
        answered = self.call(conn, "answer-confirmation", confirmation=cid, answer="confirm")
        assert isinstance(answered, dict), answered
        return str(cid)

    def receipt(self, crid: str | None = None) -> dict[str, Any]:
        request = self.core.requests[crid] if crid else list(self.core.requests.values())[-1]
        return request.receipt_record()

    def effect(self, kind: str) -> list[Effect]:
        return [e for e in self.effects if e.kind == kind]

    def finish_effect(self, effect: Effect, **result: Any) -> None:
        self.feed(EffectDone(effect.effect_id, effect.kind, result))


def refused(result: Any, code: str) -> dict[str, Any]:
    assert isinstance(result, tuple) and result[0] == "refused", result
    assert result[1]["code"] == code, result
    return result[1]


def validate_reply(result: Mapping[str, Any]) -> None:
    for key in ("request", "receipt", "stop", "confirmation", "binding", "decision"):
        value = result.get(key)
        if isinstance(value, Mapping):
            validate(value)


def validate_note(method: str, params: Mapping[str, Any]) -> None:
    if method == "event":
        validate(params, "event")
    elif method == "record":
        validate(params)
    elif method == "marker":  # the drift check's reconcile marker (README "Session drift")
        assert set(params) == {"reason", "drift", "detail", "execution"}, params
    else:
        raise AssertionError(f"unexpected notification {method}")


async def validated_client(socket_path: str) -> RawClient:
    """A `RawClient` on the controller's socket whose every event and record is validated against the
    control schema as it arrives (markers and closing notices carry no schema)."""
    client = await RawClient.connect(socket_path)

    def check(note: dict[str, Any]) -> None:
        if note.get("method") in ("event", "record"):
            validate_note(note["method"], note["params"])

    client.on_note = check
    return client


# ----------------------------------------------------------------------------------- Pi's records (FACTS)

def user_message(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1796006777976}


def assistant(text: str = "", stop: str = "stop") -> dict[str, Any]:
    content = [{"type": "text", "text": text}] if text else []
    return {"role": "assistant", "content": content, "api": "openai-completions", "provider": "fakeprov",
            "model": "fake-model-1", "stopReason": stop, "timestamp": 1796006777990}


def run_start(text: str) -> list[dict[str, Any]]:
    """agent_start .. the user message: what Pi writes right after a prompt's ack (FACTS Part 2 B)."""
    return [{"type": "agent_start"}, {"type": "turn_start"},
            {"type": "message_start", "message": user_message(text)},
            {"type": "message_end", "message": user_message(text)},
            {"type": "message_start", "message": assistant(stop="pending")}]


def deltas(*pieces: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"type": "message_update", "assistantMessageEvent": {"type": "text_start",
                                                                                     "contentIndex": 0}}]
    out += [{"type": "message_update", "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0,
                                                                 "delta": p}} for p in pieces]
    return out


def run_end(text: str, stop: str = "stop") -> list[dict[str, Any]]:
    message = assistant(text, stop)
    if stop == "aborted":
        message["errorMessage"] = "Request was aborted"
    return [{"type": "message_end", "message": message}, {"type": "turn_end", "message": message, "toolResults": []},
            {"type": "agent_end", "messages": [], "willRetry": False}, {"type": "agent_settled"}]


def full_run(text: str, reply: str = "Hello from the fake model.") -> list[dict[str, Any]]:
    return [*run_start(text), *deltas(*reply.split(" ")), *run_end(reply)]


def state(streaming: bool) -> dict[str, Any]:
    return {"model": {"id": "fake-model-1", "provider": "fakeprov"}, "thinkingLevel": "off",
            "isStreaming": streaming, "isCompacting": False, "steeringMode": "one-at-a-time",
            "followUpMode": "one-at-a-time", "sessionFile": "/tmp/x.jsonl", "sessionId": "s",
            "autoCompactionEnabled": True, "messageCount": 0, "pendingMessageCount": 0}


def queues(steering: Iterable[str] = (), follow_up: Iterable[str] = ()) -> dict[str, Any]:
    return {"steering": list(steering), "followUp": list(follow_up)}
