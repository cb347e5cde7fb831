"""The core's clients room: who connects, what an observer sees, and how control moves.

The rules it keeps (the core's rules 6, 7, 7b and H1; seed README "The seam"):

1. A connection whose peer no grant names (or whose credentials were unread) is closed at connect with
   reason `channel`, unheld (nothing was ever sent to it), and never becomes a connection of the core
   (rule 7b); an admitted one starts as an observer with what its grant allows.
2. Disconnect never releases control or a claim (H11): control stays with a disconnected controller
   until someone takes over explicitly.
3. Replay is unavailable: observe subscribes the connection from the next sequence and replies with a
   page read at a cut, the seam (fromSequence, quiet) at which the client reconciles (E4). Each read has
   its own cut. Quiet only when nothing ran or waited at the call and nothing does now, no event was sent
   between the cut and the page, and the page shows the bytes the last clean drift check verified.
   Unavailable is not empty: a cursor the reader refused is refused `cursor`; a first page the reader
   refused is passed on as the reader's refusal.
4. Observe repeats every receipt not yet settled and the last settled ones (bounded: RECENT_RECEIPTS), and
   what the lifecycle's restart found of earlier executions (W7).
5. Takeover needs the current generation (H1; a second one with the same expected generation is refused
   `generation`), is refused to the controller itself (H4) and while admission is closed (K9: force stop
   needs recovery control); recovery control needs the controller to be disconnected. Either bumps the
   generation and the stop context and asks the claim to record the generation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mosaic.controller_client import ControlRefusal

from . import _binding, _dialogs
from ._io import (
    CLAIM_GENERATION,
    Call,
    CloseConnection,
    Connected,
    Disconnected,
    PageRead,
    Peer,
    ReadPage,
    Refuse,
    Reply,
)
from ._state import CoreState
from ._values import Conn


def connect(s: CoreState, event: Connected) -> None:
    """Rule 7b: admit the peer with what its grants allow here, or close the connection `channel` at once."""
    peer = event.peer
    admitted = s.config.access.admit(peer, s.config.conversation)
    if admitted is None or peer is None:
        # Not held by a drift check (`core/_drift` rule 2): nothing was ever sent to this connection to keep
        # in order, and it must not stay open meanwhile, its requests read.
        s.emit_unheld(CloseConnection(event.conn, "channel"))
        s.evidence("channel-refused", connection=event.conn,
                       peer=None if peer is None else {"uid": peer.uid, "gid": peer.gid, "pid": peer.pid})
        return
    s.connections[event.conn] = Conn(admitted.operations, peer.ids, admitted.in_scope, groups=peer.groups)


def hello(s: CoreState, call: Call) -> None:
    """Rule 6: the seed's hello, a connection's first request (the gate refused a later one `malformed`):
    the grant it names judges the connection from now on (`_access` rule 6): `grant` when no active grant
    of this peer's has that id; `unsupported-capability` for a transport not served."""
    conn = s.connections[call.conn]
    uid, gid, pid = conn.ids
    decided = s.config.access.hello(Peer(uid, gid, pid, conn.groups), call.params["grant"], s.config.conversation)
    if isinstance(decided, ControlRefusal):
        s.refuse(call, decided.code, decided.message)
        return
    if call.params.get("transport", "local") != "local":
        s.refuse(call, "unsupported-capability", f"transport {call.params['transport']!r} is not served: "
                                                 "this controller answers on its local socket only")
        return
    conn.operations, conn.in_scope, conn.grant = decided.operations, decided.in_scope, decided.grant
    s.emit(Reply(call.conn, call.rpc_id, {
        "grant": decided.grant, "operations": sorted(decided.operations),
        "scope": None if decided.scope is None else sorted(decided.scope), "scopeHolds": decided.in_scope,
        "connection": s.connection_record(call.conn)}))


def disconnected(s: CoreState, event: Disconnected) -> None:
    """Rule 2: the connection is gone; control stays where it was."""
    # H11: control stays with the disconnected connection until someone takes over explicitly.
    if s.connections.pop(event.conn, None) is not None:
        s.subscriptions_changed()
        s.broadcast_binding()


def observe(s: CoreState, call: Call) -> None:
    """Subscribe from the next sequence and read a page; its reply carries the seam of this read (rule 3)."""
    incarnation = call.params.get("incarnation")
    if incarnation is not None and incarnation != s.config.incarnation:
        s.refuse(call, "stale-incarnation", "another controller incarnation")
        return
    conn = s.connections[call.conn]
    if conn.subscribed_from is None:
        conn.subscribed_from = s.sequence + 1
        conn.seq_at_subscribe = s.sequence
        conn.quiet_at_subscribe = _quiet(s)
        s.subscriptions_changed()
    cursor = call.params.get("cursor")
    # Each read has its own cut: a re-observe on a subscribed connection (a client reconciling at a
    # seam, E4) reports the seam of this read, not of the first one. A limit is advisory (seed "Observe").
    conn.reads[call.rpc_id] = (cursor, s.sequence, _quiet(s), "limit" in call.params)
    s.emit(ReadPage(call.conn, call.rpc_id, cursor))


def _quiet(s: CoreState) -> bool:
    """No run visible and no prompt holding the slot: Pi persisted every message of the last run
    before its agent_settled (agent-session.js 386-398), so a page read now misses nothing."""
    return not s.run.active and s.slot is None and (s.stop is None or s.stop.state != "stopping")


def page_read(s: CoreState, event: PageRead) -> None:
    conn = s.connections.get(event.conn)
    if conn is None or event.rpc_id not in conn.reads:
        return  # it hung up meanwhile
    cursor, cut, quiet_at_call, limited = conn.reads.pop(event.rpc_id)
    result = dict(event.result)
    if not result.get("ok", False) and cursor is not None:
        refusal = result.get("refusal")
        code = refusal.get("code") if isinstance(refusal, Mapping) else None
        s.emit(Refuse(event.conn, event.rpc_id, ControlRefusal(
            "cursor", f"the reader refused the cursor: {code}").to_dict()))
        return
    # Unavailable is not empty: a first page the reader refused is passed on as the reader's refusal.
    # Quiet: nothing ran or waited when the call came, no event was emitted before the page was read,
    # nothing runs or waits now, and the page shows the file the last drift check verified. The page is
    # read off the loop and Pi appends an entry before its event reaches stdout (FACTS a6): a prompt
    # dispatched meanwhile, or a run the core has not seen start (an extension's), may be on the page
    # before the core read one event of it; then the page holds bytes no check verified.
    quiet = quiet_at_call and s.sequence == cut and _quiet(s) and _page_verified(s, result)
    s.emit(Reply(event.conn, event.rpc_id, {
        "incarnation": s.config.incarnation, "connection": s.connection_record(event.conn),
        "engine": s.config.engine.name,  # issue 32: which engine, in words ("Pi", "Claude"), for a client's title
        "generation": s.generation, "binding": s.binding_record(),
        "seam": {"replay": "unavailable", "streamEpoch": s.execution,
                 "fromSequence": cut + 1, "reconcile": True, "quiet": quiet},
        "receipts": _receipts_for_observe(s),
        "inherited": [dict(r) for r in s.config.inherited],
        "history": result,
        # Seed "Observe": a limit (1-100) is advisory; the reader's page size governs.
        **({"limitAdvisory": True} if limited else {}),
    }))


def _page_verified(s: CoreState, result: Mapping[str, Any]) -> bool:
    """The page is a snapshot of the bytes the last clean drift check verified (its snapshotDigest is their
    SHA-256), or shows no file where none was verified. Without the drift check (a core with no session
    file to compare) there is nothing to compare: True, the seed's weaker rule (README "The seam")."""
    if s.config.drift is None:
        return True
    page = result.get("page") if result.get("ok") else None
    digest = page.get("snapshotDigest") if isinstance(page, Mapping) else None
    checkpoint = s.checkpoint
    if digest is None:
        return checkpoint is None
    return checkpoint is not None and checkpoint.sha256 == digest


def _receipts_for_observe(s: CoreState) -> list[dict[str, Any]]:
    """Every receipt not yet settled, and the last settled ones: what a client that lost records (a
    lagging marker, a reconnect) needs to bring its pending requests up to date, bounded: `requests`
    holds no more than these (`retire`), so this costs the same after 10,000 prompts as after one."""
    return [r.receipt_record() for r in sorted(s.requests.values(), key=lambda r: r.admitted_at)]


def takeover(s: CoreState, call: Call) -> None:
    expected = call.params["expectedGeneration"]
    if s.is_controller(call):
        s.refuse(call, "already-controller", "this connection is already the controller (H4)")
        return
    if expected != s.generation:
        s.refuse(call, "generation", f"expected generation {expected}, current {s.generation} (H1)")
        return
    if not s.admission_open:
        s.refuse(call, "fenced", "an ordinary takeover is refused while admission is closed (K9); "
                                     "force stop needs recovery control")
        return
    _take_control(s, call, "takeover")


def acquire_recovery(s: CoreState, call: Call) -> None:
    if s.is_controller(call):
        s.refuse(call, "already-controller", "this connection is already the controller")
        return
    if s.controller is not None and s.controller in s.connections:
        s.refuse(call, "controller-present", "the controller is connected; ask it, or take over")
        return
    _take_control(s, call, "recovery")


def _take_control(s: CoreState, call: Call, how: str) -> None:
    previous = s.controller
    s.generation += 1
    s.controller = call.conn
    s.controller_ids = s.connections[call.conn].ids
    _binding.bump_context(s)
    s.ask(CLAIM_GENERATION, {"generation": s.generation})
    s.emit(Reply(call.conn, call.rpc_id, {"generation": s.generation, "how": how, "previous": previous,
                                              "connection": s.connection_record(call.conn)}))
    s.broadcast_binding()
    _dialogs.reproject(s)  # `_dialogs` rule 4 (P5): each open decision under a new projection id
