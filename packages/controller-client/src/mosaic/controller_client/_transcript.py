"""The Transcript: the view a terminal renders, as plain data (seed README "The seam"; brief §3 "Joining
history and the stream"; §9 E1, E3, E4, E6). It renders nothing.

The rules it keeps:

1. The view is the history (every page of one snapshot, in order), then a reconcile marker when the seam
   is not known to be exact, then the live items (messages and tool runs) built from the events of the
   seam's ``fromSequence`` on, in arrival order.
2. Replay is unavailable and stream events carry no entry ids, so overlap at a seam cannot be
   deduplicated. A seam whose page read was not quiet gets a reconcile marker: near it a message may
   repeat or be missing. The transcript re-reads the history after the next ``run-settled`` (or when the
   binding turns idle) and clears the marker once a read is quiet (E4).
3. A sequence gap, a ``lagging`` marker (the server's, or this transcript's own subscription's), a new
   stream epoch, or a repeated event id with different bytes marks the seam too and re-reads at once.
   Events past a gap are held (counted in `Transcript.held`), never concatenated. An identical repeated
   event is dropped (E3; counted in `Transcript.dropped_repeats`). A lost connection marks the seam; the
   next connection's first observe starts the view again from its own seam.
4. A re-read is an exact cut (`ControllerClient.read_history`): the new history, then the events from
   the cut's ``fromSequence`` on, which this transcript's own subscription carried meanwhile (kept while
   the read runs and replayed onto the new history).
5. Text and thinking deltas accumulate into their message's block in place (a message-start snapshot
   that already holds the first deltas is not doubled: `_Blk`); ``message-end`` replaces the
   message's content (updateMode replace). A tool run shows while it runs, with its arguments, progress
   and result; once a finished message carries its result (a toolResult message, live or in the
   history) it is hidden (`ToolRun` items with that id leave `items`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mosaic.safe_open import Refusal
from mosaic.safe_open.ids import safe_id

from ._client import ControllerClient
from ._errors import ClientStateError, RemoteProtocolError
from ._subscription import DEFAULT_QUEUE_SIZE, _Changes
from ._values import HistoryRead, Notification, Observed, Seam

__all__ = [
    "Block",
    "HistoryItem",
    "HistoryUnavailable",
    "LiveMessage",
    "ReconcileMarker",
    "ToolRun",
    "Transcript",
    "TranscriptItem",
    "TranscriptStatus",
    "history_items",
]

logger = logging.getLogger("mosaic.controller_client.transcript")

SEEN_KEPT = 4096
"""Events remembered (by sequence) to tell an identical repeat from a conflicting one (E3)."""

BUFFER_CAP = 100_000
"""Notifications kept while a re-read runs; past it the view is marked lagging and read again."""


# ------------------------------------------------------------------------------------------- items


@dataclass(frozen=True)
class HistoryItem:
    """One item of the history (a CHAT-01 page item: its parts joined, fragments reassembled). `kind` is
    the part kind (user, assistant, toolResult, bashExecution, custom_message, compaction,
    branch_summary, notice); `blocks` are the page's block objects, in order."""

    item: str
    kind: str
    line: int
    timestamp: str | None
    entry: str | None
    attrs: Mapping[str, Any]
    notice: Mapping[str, Any] | None
    blocks: tuple[Mapping[str, Any], ...]

    @property
    def text(self) -> str:
        """The item's text blocks, joined."""
        return "".join(b["text"] for b in self.blocks if b.get("kind") == "text" and isinstance(b.get("text"), str))


@dataclass(frozen=True)
class HistoryUnavailable:
    """The history could not be read (the reader's refusal). Unavailable is not empty."""

    refusal: Mapping[str, Any]


@dataclass(frozen=True)
class Block:
    """A live message's content block: `type` as Pi names it (text, thinking, toolCall, image, ...),
    `text` for text and thinking, `data` the block as the last message-start or message-end carried it."""

    type: str
    text: str
    data: Mapping[str, Any]


@dataclass(frozen=True)
class LiveMessage:
    """A message from the live stream, keyed by (`execution`, `message`). `ended` once its message-end
    replaced it; until then its text blocks grow with each delta."""

    message: str
    execution: str
    role: str | None
    blocks: tuple[Block, ...]
    ended: bool
    first_sequence: int
    last_sequence: int
    stop_reason: str | None = None
    error_message: str | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    is_error: bool | None = None

    @property
    def text(self) -> str:
        return "".join(b.text for b in self.blocks if b.type == "text")


@dataclass(frozen=True)
class ToolRun:
    """A tool call from the live stream: its arguments (from tool-start), latest progress, and result
    (from tool-end). Shown while it runs and until a finished message carries its result."""

    tool_call_id: str
    tool_name: str | None
    args: Any
    partial_result: Any
    result: Any
    is_error: bool | None
    running: bool
    first_sequence: int
    last_sequence: int


@dataclass(frozen=True)
class ReconcileMarker:
    """The seam is not known to be exact (rule 2, 3). `reasons`: not-quiet, more-history, lagging, gap,
    epoch, conflict, disconnected, attached, read-failed. `reading`: a re-read is running."""

    reasons: tuple[str, ...]
    from_sequence: int | None
    reading: bool


TranscriptItem = HistoryItem | HistoryUnavailable | ReconcileMarker | LiveMessage | ToolRun


@dataclass(frozen=True)
class TranscriptStatus:
    """What a status line shows: the connection, this client's role, the binding (generation, token,
    state, engine state, admission, fences), the unknown native event count (C-4 interim: counted, shown)
    and the other evidence counters, and whether the view is reconciling."""

    connected: bool
    role: str | None
    generation: int | None
    incarnation: str | None
    binding_state: str | None
    engine_state: str | None
    admission: str | None
    fences: tuple[str, ...]
    unknown_native_events: int
    late_events: int
    dialogs: int
    reconciling: bool
    reading: bool


# -------------------------------------------------------------------------------------- live builders


class _Blk:
    """A block being built: `base` is the text a message-start carried (a snapshot), `chunks` the deltas.

    Pinned Pi serialises a message-start after the provider's first chunk may already have landed in the
    same (shared) partial message, so the snapshot can hold text that the deltas then repeat (FACTS
    "assistant message_start carries ... responseId when the first chunk has already arrived"; seen on the
    real binary: message-start "tick00 " then text-delta "tick00 "). Where one is a prefix of the other they
    are one text and the block shows the longer, never both; otherwise the deltas continue the snapshot."""

    __slots__ = ("base", "chunks", "data", "type")

    def __init__(self, kind: str, text: str = "", data: Mapping[str, Any] | None = None) -> None:
        self.type = kind
        self.base = text
        self.chunks: list[str] = []
        self.data: Mapping[str, Any] = data or {}

    def freeze(self) -> Block:
        deltas = "".join(self.chunks)
        if len(self.chunks) > 1:
            self.chunks = [deltas]  # keep later freezes linear
        if deltas.startswith(self.base):
            text = deltas  # the deltas repeat the snapshot and go on (or there was none)
        elif self.base.startswith(deltas):
            text = self.base  # the snapshot is ahead of the deltas seen so far
        else:
            text = self.base + deltas  # unrelated: a snapshot that the deltas continue
        return Block(self.type, text, self.data)


def _blocks_of(content: object) -> list[_Blk]:
    blocks: list[_Blk] = []
    for raw in content if isinstance(content, list) else []:
        if not isinstance(raw, Mapping):
            continue
        kind = raw.get("type") if isinstance(raw.get("type"), str) else "unknown"
        assert isinstance(kind, str)
        text = raw.get("thinking") if kind == "thinking" else raw.get("text")
        blocks.append(_Blk(kind, text if isinstance(text, str) else "", raw))
    return blocks


class _Msg:
    __slots__ = ("blocks", "ended", "error_message", "execution", "first", "is_error", "last", "message", "role",
                 "stop_reason", "tool_call_id", "tool_name")

    def __init__(self, message: str, execution: str, sequence: int) -> None:
        self.message = message
        self.execution = execution
        self.role: str | None = None
        self.blocks: list[_Blk] = []
        self.ended = False
        self.first = self.last = sequence
        self.stop_reason: str | None = None
        self.error_message: str | None = None
        self.tool_call_id: str | None = None
        self.tool_name: str | None = None
        self.is_error: bool | None = None

    def delta(self, index: object, kind: str, text: object) -> None:
        i = index if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < 4096 else len(self.blocks)
        while len(self.blocks) <= i:
            self.blocks.append(_Blk(kind))
        block = self.blocks[i]
        if block.type != kind and not block.chunks and not block.base:
            block.type = kind
        if isinstance(text, str) and text:
            block.chunks.append(text)

    def freeze(self) -> LiveMessage:
        return LiveMessage(self.message, self.execution, self.role, tuple(b.freeze() for b in self.blocks),
                           self.ended, self.first, self.last, self.stop_reason, self.error_message,
                           self.tool_call_id, self.tool_name, self.is_error)


class _Tool:
    __slots__ = ("args", "first", "is_error", "last", "partial", "result", "running", "tool_call_id", "tool_name")

    def __init__(self, tool_call_id: str, sequence: int) -> None:
        self.tool_call_id = tool_call_id
        self.tool_name: str | None = None
        self.args: Any = None
        self.partial: Any = None
        self.result: Any = None
        self.is_error: bool | None = None
        self.running = True
        self.first = self.last = sequence

    def freeze(self) -> ToolRun:
        return ToolRun(self.tool_call_id, self.tool_name, self.args, self.partial, self.result, self.is_error,
                       self.running, self.first, self.last)


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


# ------------------------------------------------------------------------------------------- history


def history_items(pages: Iterable[Mapping[str, Any]]) -> tuple[HistoryItem, ...]:
    """The items of CHAT-01 pages, in order: each item's parts joined, fragment blocks reassembled into
    the field they continue ("Concatenating the values of one (item, block, field) in fragment order
    gives the string back"). Malformed parts are skipped."""
    order: list[str] = []
    heads: dict[str, Mapping[str, Any]] = {}
    blocks: dict[str, list[dict[str, Any]]] = {}
    fragments: dict[str, dict[tuple[int | None, str], list[tuple[int, str]]]] = {}
    for page in pages:
        parts = page.get("parts")
        for part in parts if isinstance(parts, list) else []:
            if not isinstance(part, Mapping) or not isinstance(part.get("item"), str):
                continue
            item = part["item"]
            if item not in heads:
                order.append(item)
                heads[item] = part
                blocks[item] = []
                fragments[item] = {}
            elif part.get("index") == 0:
                heads[item] = part
            raw_blocks = part.get("blocks")
            for block in raw_blocks if isinstance(raw_blocks, list) else []:
                if not isinstance(block, Mapping):
                    continue
                if block.get("kind") == "fragment":
                    target = block.get("block")
                    key = (target if isinstance(target, int) else None, str(block.get("field")))
                    number = block.get("fragment")
                    fragments[item].setdefault(key, []).append(
                        (number if isinstance(number, int) else 0, str(block.get("value", ""))))
                else:
                    blocks[item].append(dict(block))
    out: list[HistoryItem] = []
    for item in order:
        head = heads[item]
        attrs = dict(head.get("attrs") or {}) if isinstance(head.get("attrs"), Mapping) else {}
        timestamp = _str(head.get("timestamp"))
        item_blocks = blocks[item]
        for (target, name), pieces in fragments[item].items():
            value = "".join(v for _, v in sorted(pieces, key=lambda p: p[0]))
            if target is None:
                if name == "timestamp":
                    timestamp = value
                elif name.startswith("attrs."):
                    attrs[name[len("attrs."):]] = value
                continue
            for block in item_blocks:
                if block.get("block") == target:
                    block[name] = value
                    continued = [c for c in block.get("continued", []) if c != name]
                    if continued:
                        block["continued"] = continued
                    else:
                        block.pop("continued", None)
        line = head.get("line")
        notice = head.get("notice")
        out.append(HistoryItem(item, str(head.get("kind", "")), line if isinstance(line, int) else 0, timestamp,
                               _str(head.get("entry")), attrs, notice if isinstance(notice, Mapping) else None,
                               tuple(item_blocks)))
    return tuple(out)


# ------------------------------------------------------------------------------------------ transcript


class Transcript:
    """The view of one client's conversation (module rules). Make it on the client's event loop, before
    or after the client's first `observe` (after: the history is read at once). Drive it with `start`
    (a task applies notifications as they arrive) or by calling `poll`; read `items`, `version`,
    `status`; be told of changes with `add_listener` or `wait_until`.
    """

    def __init__(self, client: ControllerClient, *, queue_size: int = DEFAULT_QUEUE_SIZE) -> None:
        asyncio.get_running_loop()  # RuntimeError outside the loop: the read tasks need it
        self._client = client
        self._sub = client.subscribe(maxsize=queue_size)
        self._history: tuple[HistoryItem, ...] = ()
        self._history_refusal: Mapping[str, Any] | None = None
        self._history_tools: frozenset[str] = frozenset()
        self._live: list[_Msg | _Tool] = []
        self._msgs: dict[tuple[str, str], _Msg] = {}
        self._tools: dict[str, _Tool] = {}
        self._finished_tools: set[str] = set()
        self._reasons: set[str] = set()
        self._seam: Seam | None = None
        self._incarnation: str | None = None
        self._conn: int | None = None
        self._from: int | None = None
        self._next: int | None = None
        self._seen: OrderedDict[int, str] = OrderedDict()
        self._holding = False
        self._buffer: list[Notification] | None = None
        self._read_task: asyncio.Task[None] | None = None
        self._read_again = False
        self._engine_state: str | None = None
        self._pump: asyncio.Task[None] | None = None
        self._version = 0
        self._cache: tuple[TranscriptItem, ...] | None = None
        self._listeners: list[Callable[[Transcript], None]] = []
        self._changes = _Changes()
        self._closed = False
        self.applied = 0  # notifications applied (from this transcript's subscription)
        self.reads = 0  # re-reads applied
        self.dropped_repeats = 0  # identical repeated events dropped (E3)
        self.held = 0  # events held past a gap, never concatenated
        if client.incarnation is not None and client.connected:
            # Attached after the first observe: its seam went by; an exact cut starts the view.
            self._conn = client.connection_number
            self._incarnation = client.incarnation
            self._reasons.add("attached")
            self._holding = True
            self._request_read()

    # -- reading the view -----------------------------------------------------------------------------

    @property
    def version(self) -> int:
        """Grows by one with every change of `items` or `status`."""
        return self._version

    @property
    def items(self) -> tuple[TranscriptItem, ...]:
        """History, then the reconcile marker (if any), then the visible live items (rule 1)."""
        if self._cache is None:
            items: list[TranscriptItem] = list(self._history)
            if self._history_refusal is not None:
                items.append(HistoryUnavailable(self._history_refusal))
            marker = self.reconcile
            if marker is not None:
                items.append(marker)
            for obj in self._live:
                if isinstance(obj, _Tool):
                    if self._tool_hidden(obj.tool_call_id):
                        continue
                    items.append(obj.freeze())
                else:
                    items.append(obj.freeze())
            self._cache = tuple(items)
        return self._cache

    @property
    def reconcile(self) -> ReconcileMarker | None:
        """The reconcile marker at the seam, or None when the seam is exact."""
        if not self._reasons:
            return None
        return ReconcileMarker(tuple(sorted(self._reasons)), self._from, self.reading)

    @property
    def reading(self) -> bool:
        return self._read_task is not None and not self._read_task.done()

    @property
    def history_refusal(self) -> Mapping[str, Any] | None:
        return self._history_refusal

    @property
    def status(self) -> TranscriptStatus:
        client = self._client
        binding = client.binding or {}
        evidence = binding.get("evidence") if isinstance(binding.get("evidence"), Mapping) else {}
        assert isinstance(evidence, Mapping)

        def count(key: str) -> int:
            value = evidence.get(key)
            return value if isinstance(value, int) else 0

        fences = binding.get("fences")
        return TranscriptStatus(
            connected=client.connected, role=client.role, generation=client.generation,
            incarnation=client.incarnation, binding_state=_str(binding.get("state")),
            engine_state=_str(binding.get("engineState")), admission=_str(binding.get("admission")),
            fences=tuple(f for f in fences if isinstance(f, str)) if isinstance(fences, list) else (),
            unknown_native_events=count("unknownNativeEvents"), late_events=count("lateEvents"),
            dialogs=count("dialogs"), reconciling=bool(self._reasons), reading=self.reading)

    # -- driving it -----------------------------------------------------------------------------------

    def poll(self) -> int:
        """Apply every notification waiting now; return how many. Never blocks."""
        applied = 0
        while (note := self._sub.get_nowait()) is not None:
            self._apply(note)
            applied += 1
        return applied

    def start(self) -> None:
        """Apply notifications as they arrive, in a task, until `aclose`. Idempotent."""
        if self._pump is None and not self._closed:
            self._pump = asyncio.get_running_loop().create_task(self._run(), name="mosaic-transcript")

    async def aclose(self) -> None:
        """Stop: the pump and any re-read are cancelled and awaited, the subscription closed. The view
        keeps its last state. Idempotent."""
        self._closed = True
        for task in (self._pump, self._read_task):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._sub.close()
        self._wake()

    def read_now(self) -> None:
        """Re-read the history now (a manual refresh, e.g. the terminal's reconnect key); the marker
        clears if the read is quiet."""
        self._request_read()

    def add_listener(self, listener: Callable[[Transcript], None]) -> Callable[[], None]:
        """Call `listener(self)` after every change; returns a function that removes it. A listener that
        raises is logged and kept."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    async def wait_until(self, predicate: Callable[[Transcript], bool]) -> None:
        """Return once `predicate(self)` is true, checking after every change. Bound it with
        ``asyncio.timeout``. Raises ClientStateError once closed with the predicate false."""
        await self._changes.wait_until(lambda: predicate(self), lambda: self._closed, "the transcript is closed")

    async def _run(self) -> None:
        async for note in self._sub:
            self._apply(note)

    # -- notifications --------------------------------------------------------------------------------

    def _apply(self, note: Notification) -> None:
        self.applied += 1
        try:
            if note.origin == "client" and note.method == "observed":
                if note.observed is not None:
                    self._on_seam(note.connection, note.observed)
            elif note.origin == "client" and note.method == "disconnected":
                self._on_disconnected(note.connection)
            elif note.connection == self._conn:
                if self._buffer is not None and note.method in ("event", "marker"):
                    if len(self._buffer) >= BUFFER_CAP:
                        self._buffer = [Notification("marker", {"reason": "lagging", "dropped": 0}, "client",
                                                     note.connection)]
                    else:
                        self._buffer.append(note)
                self._live_note(note)
            else:
                return
        except Exception:  # noqa: BLE001 - a bug here must not stop the view; it is logged
            logger.exception("transcript failed to apply a %s notification", note.method)
        self._changed()

    def _live_note(self, note: Notification) -> None:
        params = note.params
        if note.method == "event":
            self._event(params)
        elif note.method == "marker" and params.get("reason") == "lagging":
            self._reasons.add("lagging")
            self._holding = True
            self._request_read()
        elif note.method == "marker" and params.get("reason") == "session-drift":
            # The file moved under the engine (brief §2 "Session drift"): the view reconciles by re-reading
            # the page; the marker stays up until a read is quiet (the controller is uncertain meanwhile).
            self._reasons.add("session-drift")
            self._request_read()
        elif note.method == "record" and params.get("type") == "binding":
            engine = _str(params.get("engineState"))
            if engine == "idle" and self._engine_state != "idle" and self._reasons:
                self._request_read()
            self._engine_state = engine

    def _on_seam(self, connection: int, observed: Observed) -> None:
        if not observed.first:
            return
        self._cancel_read()
        self._conn = connection
        self._incarnation = observed.incarnation
        self._set_history((observed.history,))
        self._reset_live(observed.seam)
        self._engine_state = _str(observed.binding.get("engineState"))
        if observed.next_cursor is not None:  # a longer history than one page: read all of it at once
            self._reasons.add("more-history")
            self._holding = True
            self._request_read()

    def _on_disconnected(self, connection: int) -> None:
        if connection != self._conn:
            return
        self._cancel_read()
        self._conn = None
        self._reasons.add("disconnected")

    def _event(self, event: Mapping[str, Any]) -> None:
        seq, execution = event.get("sequence"), event.get("execution")
        if self._seam is None or self._next is None or self._from is None:
            return
        if not isinstance(seq, int) or isinstance(seq, bool) or not isinstance(execution, str):
            return
        if execution != self._seam.stream_epoch:
            self._reasons.add("epoch")
            self._hold(event)
            return
        if seq < self._next:
            if seq < self._from:
                return  # covered by the history the last read returned
            canon = _canonical(event)
            if self._seen.get(seq) == canon:
                self.dropped_repeats += 1  # E3: an identical repeat is dropped
                return
            self._reasons.add("conflict")  # a repeated id with other bytes (or one too old to compare)
            self._hold(event)
            return
        if self._holding or seq > self._next:
            if seq > self._next:
                self._reasons.add("gap")
            self._hold(event)
            return
        self._apply_event(event, seq, execution)
        self._next = seq + 1
        self._seen[seq] = _canonical(event)
        while len(self._seen) > SEEN_KEPT:
            self._seen.popitem(last=False)
        if event.get("eventType") == "run-settled" and self._reasons:
            self._request_read()  # E4: the run settled, so the page now holds what the seam was unsure of

    def _hold(self, event: Mapping[str, Any]) -> None:
        """Hold `event` (never applied past a gap). The first held event asks for a read at once; so does
        a held run-settled (a read that failed is tried again when the run ends), not every event."""
        first = not self._holding
        self._holding = True
        self.held += 1
        if first or event.get("eventType") == "run-settled":
            self._request_read()

    def _apply_event(self, event: Mapping[str, Any], seq: int, execution: str) -> None:
        kind = event.get("eventType")
        payload = event.get("payload") if isinstance(event.get("payload"), Mapping) else {}
        assert isinstance(payload, Mapping)
        if kind in ("message-start", "text-delta", "thinking-delta", "message-end"):
            message = self._message(_str(payload.get("message")) or "?", execution, seq)
            if kind == "message-start":
                message.role = _str(payload.get("role")) or message.role
                content = _blocks_of(payload.get("content"))
                if content or not message.blocks:
                    message.blocks = content
            elif kind == "text-delta":
                message.delta(payload.get("contentIndex"), "text", payload.get("delta"))
            elif kind == "thinking-delta":
                message.delta(payload.get("contentIndex"), "thinking", payload.get("delta"))
            else:  # message-end: updateMode replace
                message.role = _str(payload.get("role")) or message.role
                message.blocks = _blocks_of(payload.get("content"))
                message.ended = True
                message.stop_reason = _str(payload.get("stopReason"))
                message.error_message = _str(payload.get("errorMessage"))
                message.tool_call_id = _str(payload.get("toolCallId"))
                message.tool_name = _str(payload.get("toolName"))
                is_error = payload.get("isError")
                message.is_error = is_error if isinstance(is_error, bool) else None
                if message.role == "toolResult" and message.tool_call_id is not None:
                    self._finished_tools.add(message.tool_call_id)
        elif kind in ("tool-start", "tool-update", "tool-end"):
            call_id = _str(payload.get("toolCallId")) or "?"
            tool = self._tools.get(call_id)
            if tool is None:
                tool = self._tools[call_id] = _Tool(call_id, seq)
                self._live.append(tool)
            tool.last = seq
            tool.tool_name = _str(payload.get("toolName")) or tool.tool_name
            if kind == "tool-start":
                tool.args = payload.get("args")
            elif kind == "tool-update":
                tool.partial = payload.get("partialResult")
            else:
                tool.result = payload.get("result")
                is_error = payload.get("isError")
                tool.is_error = is_error if isinstance(is_error, bool) else None
                tool.running = False

    def _message(self, message_id: str, execution: str, seq: int) -> _Msg:
        key = (execution, message_id)
        message = self._msgs.get(key)
        if message is None:  # also a message whose start went by before the seam: shown from here
            message = self._msgs[key] = _Msg(message_id, execution, seq)
            self._live.append(message)
        message.last = seq
        return message

    def _tool_hidden(self, call_id: str) -> bool:
        return (call_id in self._finished_tools or call_id in self._history_tools
                or safe_id(call_id) in self._history_tools)

    # -- the seam and re-reads ------------------------------------------------------------------------

    def _set_history(self, results: Iterable[Mapping[str, Any]]) -> None:
        results = tuple(results)
        first = results[0] if results else {}
        if first.get("ok") is not True:
            refusal = first.get("refusal")
            self._history = ()
            self._history_refusal = refusal if isinstance(refusal, Mapping) else {
                "code": "unavailable", "reconcile": True, "message": "no history page"}
        else:
            pages = [r["page"] for r in results if r.get("ok") is True and isinstance(r.get("page"), Mapping)]
            self._history = history_items(pages)
            self._history_refusal = None
        self._history_tools = frozenset(
            str(i.attrs["toolCallId"]) for i in self._history
            if i.kind == "toolResult" and isinstance(i.attrs.get("toolCallId"), str))

    def _reset_live(self, seam: Seam) -> None:
        self._seam = seam
        self._from = self._next = seam.from_sequence
        self._seen.clear()
        self._holding = False
        self._live.clear()
        self._msgs.clear()
        self._tools.clear()
        self._finished_tools.clear()
        self._reasons = set() if seam.quiet else {"not-quiet"}

    def _request_read(self) -> None:
        if self._closed or self._conn is None:
            return
        if self.reading:
            self._read_again = True
            return
        self._buffer = []
        self._read_again = False
        self._read_task = asyncio.get_running_loop().create_task(self._read(self._conn), name="mosaic-transcript-read")

    def _cancel_read(self) -> None:
        task = self._read_task
        if task is not None and not task.done() and task is not asyncio.current_task():
            task.cancel()
        self._read_task = None
        self._buffer = None
        self._read_again = False

    async def _read(self, connection: int) -> None:
        try:
            read = await self._client.read_history()
        except (Refusal, RemoteProtocolError, ClientStateError, OSError) as exc:
            if self._conn == connection:
                self._read_task = None
                self._buffer = None
                self._reasons.add("read-failed")
                logger.info("history re-read failed: %s", exc)
                self._changed()
            return
        if self._read_task is asyncio.current_task():
            self._read_task = None
        self._rebuild(connection, read)
        self._changed()

    def _rebuild(self, connection: int, read: HistoryRead) -> None:
        buffer, self._buffer = self._buffer or [], None
        again, self._read_again = self._read_again, False
        if connection != self._conn or read.incarnation != self._incarnation:
            return  # the stream moved on meanwhile (another connection's seam replaced this one)
        self.reads += 1
        self._set_history(read.results)
        self._reset_live(read.seam)
        for note in buffer:  # events from the cut's fromSequence on follow the new history
            self._live_note(note)
        if again and self._reasons and not self.reading:
            self._request_read()

    # -- changes --------------------------------------------------------------------------------------

    def _changed(self) -> None:
        self._version += 1
        self._cache = None
        for listener in list(self._listeners):
            try:
                listener(self)
            except Exception:  # noqa: BLE001 - a listener's bug must not stop the view
                logger.exception("transcript listener failed")
        self._wake()

    def _wake(self) -> None:
        self._changes.wake()


def _canonical(event: Mapping[str, Any]) -> str:
    return json.dumps(event, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
