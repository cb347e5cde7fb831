"""Session drift (brief §2 "Session drift, not foreign-writer attribution", "No writes to sessions"): W10,
W11, W18, W19 and mutant 25, both ways.

Three layers: the pure comparison (`_drift.check_drift`) over hand-made bytes and over every session file
the real Pi 0.85.1 wrote in fixtures/pi-0.85.1; the core on the byte-level scripted engine (the test says
what get_entries answers and what the file read returns, so each case lands at its exact step and every
engine byte is checked); and the whole controller on the fake engine process (`fake_controller`), where
another writer appends to the real session file and the controller's own opens are watched.
"""

from __future__ import annotations

import asyncio
import builtins
import hashlib
import io
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from core_harness import (
    REPO,
    Harness,
    full_run,
    queues,
    refused,
    run_end,
    run_start,
    state,
    validated_client,
)

from mosaic.controller import Bounds
from mosaic.controller.core import (
    DRIFT_READ_TIMER,
    DRIFT_START,
    READ_SESSION,
    Call,
    EffectDone,
    Notify,
    SessionStat,
    TimerFired,
)
from mosaic.controller.drift import (
    DRIFT_REASONS,
    DriftConfig,
    EngineList,
    FileIdentity,
    SessionBytes,
    check_appended,
    check_drift,
    engine_list,
)
from mosaic.controller.drift import session_bytes as reader_view
from mosaic.controller.testing import FakeRig, RawClient, fake_controller, receipt_is, stop_is
from mosaic.safe_open.testing import OpenWatch

SID = "0199aaaa-1111-7000-8000-000000000001"
FIXTURE_FILES = sorted((REPO / "fixtures" / "pi-0.85.1").glob("proj-*/.pi/state/*/sessions/*.jsonl"))
WAIT = 30.0


# ---------------------------------------------------------------------------------------- Pi's bytes

def line(record: Any) -> bytes:
    """One entry as Pi writes it: JSON.stringify (compact, non-ASCII raw) and LF (FACTS (b) "Framing")."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def header(sid: str = SID) -> dict[str, Any]:
    return {"type": "session", "version": 3, "id": sid, "timestamp": "2026-11-30T02:46:17.936Z", "cwd": "/tmp/p"}


def entry(eid: str, etype: str = "message", parent: str | None = None, **extra: Any) -> dict[str, Any]:
    record: dict[str, Any] = {"type": etype, "id": eid, "parentId": parent, "timestamp": "2026-11-30T02:46:18.000Z"}
    if etype == "message" and "message" not in extra:
        extra["message"] = {"role": "user", "content": [{"type": "text", "text": f"text of {eid}"}]}
    return {**record, **extra}


def startup() -> list[dict[str, Any]]:
    """Pi's startup append for a new session (FACTS (d)): model_change, then thinking_level_change."""
    return [entry("31125ff3", "model_change", provider="fakeprov", modelId="fake-model-1"),
            entry("cc74895f", "thinking_level_change", "31125ff3", thinkingLevel="off")]


def turn_entries(n: int, parent: str) -> list[dict[str, Any]]:
    user = entry(f"a{n:07d}", parent=parent)
    reply = entry(f"b{n:07d}", parent=user["id"],
                  message={"role": "assistant", "content": [{"type": "text", "text": "Hello"}], "stopReason": "stop"})
    return [user, reply]


def session_bytes(entries: list[dict[str, Any]], *, sid: str = SID, ino: int = 7, dev: int = 1,
                  extra: bytes = b"") -> SessionBytes:
    data = line(header(sid)) + b"".join(line(e) for e in entries) + extra
    return SessionBytes(data, FileIdentity(dev, ino, len(data)))


def engine_of(entries: list[Any]) -> EngineList:
    ids = [e.get("id") for e in entries if isinstance(e, dict)]
    return EngineList(tuple(entries), ids[-1] if ids else None)


def pi_get_entries(data: bytes) -> list[Any]:
    """What Pi's get_entries returns for a file it loaded: every parsed non-header entry in file order
    (FACTS (b) "get_entries", (e); session-manager.js getEntries 995-997)."""
    out = []
    for raw in data.split(b"\n"):
        if raw.strip():
            value = json.loads(raw)
            if not (isinstance(value, dict) and value.get("type") == "session"):
                out.append(value)
    return out


# ------------------------------------------------------------------------- the pure comparison (W18, W19)

@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: f"{p.parts[-6]}/{p.name}")
def test_W18_every_real_pi_session_file_against_what_pi_get_entries_returns_for_it_is_no_drift(path: Path) -> None:
    """Every file the real Pi 0.85.1 wrote (its RPC turns: startup appends, tool calls, aborts, retries,
    thinking; its SessionManager: compactions, model and thinking changes, labels, session names, custom
    entries and messages, branch summaries, forks) against Pi's own list for it. Mutant 25b (own settings
    or compaction entries counted as drift) fails here."""
    data = path.read_bytes()
    sid = json.loads(data.split(b"\n", 1)[0])["id"]
    listed = pi_get_entries(data)
    assert {e["type"] for e in listed} - {"message"}, "each fixture holds the engine's own non-message entries"
    read = SessionBytes(data, FileIdentity(1, 42, len(data)))
    first = check_drift(engine_of(listed), read, session_id=sid, previous=None)
    assert (first.drift, first.reason) == (False, None), first
    assert first.disk_entries == first.engine_entries == len(listed) and first.seen == read.identity
    again = check_drift(engine_of(listed), read, session_id=sid, previous=first.seen)
    assert not again.drift, again
    # The same file as Pi grew it: at a few earlier moments the file held a prefix of these lines and the
    # engine's list the same entries; each later check sees the same inode, grown, and no drift.
    lines = data.split(b"\n")[:-1]
    previous = None
    for cut in sorted({1, 2, 3, len(lines) // 2, len(lines) - 1, len(lines)}):
        part = b"".join(x + b"\n" for x in lines[:cut])
        verdict = check_drift(engine_of(listed[:cut - 1]), SessionBytes(part, FileIdentity(1, 42, len(part))),
                              session_id=sid, previous=previous)
        assert not verdict.drift, (cut, verdict)
        previous = verdict.seen


def test_W18_the_engine_own_entries_of_every_kind_appended_between_checks_are_no_drift() -> None:
    base = startup()
    previous = None
    grown = list(base)
    own = [entry("e1", "model_change", "cc74895f", provider="fakeprov", modelId="fake-model-2"),
           entry("e2", "thinking_level_change", "e1", thinkingLevel="high"),
           entry("e3", "label", "e2", targetId="31125ff3", label="start"),
           entry("e4", "session_info", "e3", name="a name"),
           entry("e5", "compaction", "e4", summary="s", firstKeptEntryId="e1", tokensBefore=10, details={},
                 usage={}, fromHook=False),
           {"type": "custom", "customType": "ext", "data": {"k": 1}, "id": "e6", "parentId": "e5",
            "timestamp": "2026-11-30T02:46:19.000Z"},
           {"type": "custom_message", "customType": "ext", "content": "c", "display": True, "details": None,
            "id": "e7", "parentId": "e6", "timestamp": "2026-11-30T02:46:20.000Z"},
           entry("e8", "branch_summary", "e7", fromId="e2", summary="b", details={}, usage={}, fromHook=False),
           *turn_entries(1, "e8")]
    for record in own:
        grown.append(record)
        verdict = check_drift(engine_of(grown), session_bytes(grown), session_id=SID, previous=previous)
        assert not verdict.drift, (record["type"], verdict)
        previous = verdict.seen


def test_W19_the_engine_list_ahead_of_a_file_that_does_not_exist_yet_is_no_drift() -> None:
    # Before the first assistant message Pi holds the startup append and the user message in memory and
    # creates no file (FACTS (c) _persist 739-768, empirical A/B/K2).
    listed = [*startup(), entry("u1", parent="cc74895f")]
    verdict = check_drift(engine_of(listed), None, session_id=SID, previous=None)
    assert (verdict.drift, verdict.seen, verdict.engine_entries) == (False, None, 3)
    # Then Pi creates it with every entry at once ("wx", 754-763): the next check sees all of them.
    grown = [*listed, entry("r1", parent="u1")]
    assert not check_drift(engine_of(grown), session_bytes(grown), session_id=SID, previous=None).drift


def test_U2028_and_U2029_inside_a_line_are_ordinary_only_LF_splits() -> None:
    text = "line\u2028sep para\u2029sep nel\u0085end"
    listed = [*startup(), entry("u1", parent="cc74895f",
                                message={"role": "user", "content": [{"type": "text", "text": text}]})]
    read = session_bytes(listed)
    assert "\u2028".encode() in read.data and len(read.data.decode().splitlines()) > 4  # splitlines would cut
    assert not check_drift(engine_of(listed), read, session_id=SID, previous=None).drift


# --------------------------------------------------------------------------------- every drift reason

def _cases() -> Iterator[tuple[str, EngineList, SessionBytes | None, FileIdentity | None]]:
    own = [*startup(), *turn_entries(1, "cc74895f")]
    full = session_bytes(own)
    yield "file-removed", engine_of(own), None, full.identity
    yield "file-replaced", engine_of(own), session_bytes(own, ino=8), full.identity
    yield "file-shrank", engine_of(own), session_bytes(own[:-1]), full.identity
    yield "partial-line", engine_of(own), session_bytes(own, extra=b'{"type":"message","id":"x'), None
    yield "no-header", engine_of(own), SessionBytes(b"", FileIdentity(1, 7, 0)), None
    yield "bad-header", engine_of(own), SessionBytes(line(own[0]) + line(own[1]), FileIdentity(1, 7, 9)), None
    yield "header-id", engine_of(own), session_bytes(own, sid="0199ffff-0000-7000-8000-000000000000"), None
    yield "invalid-line", engine_of(own), session_bytes(own, extra=b"\n"), None  # a blank line
    yield "duplicate-id", engine_of([*own, own[2]]), session_bytes([*own, own[2]]), None
    yield "unknown-id", engine_of(own), session_bytes([*own, entry("f0000001", parent=own[-1]["id"])]), None
    yield "not-prefix", engine_of(own), session_bytes([own[1], own[0], *own[2:]]), None
    yield "disk-behind", engine_of(own), session_bytes(own[:-2]), None


@pytest.mark.parametrize(("reason", "engine", "read", "previous"), list(_cases()), ids=[c[0] for c in _cases()])
def test_each_drift_reason_is_the_verdict_for_its_case(reason: str, engine: EngineList, read: SessionBytes | None,
                                                       previous: FileIdentity | None) -> None:
    verdict = check_drift(engine, read, session_id=SID, previous=previous)
    assert (verdict.drift, verdict.reason) == (True, reason), verdict
    assert verdict.reason in DRIFT_REASONS
    json.dumps(verdict.to_evidence())  # evidence is JSON


def _incremental_cases() -> Iterator[tuple[str, EngineList, SessionBytes | None]]:
    """The reasons the incremental check names itself (module rules A-C), against a checkpoint of `own`."""
    own = [*startup(), *turn_entries(1, "cc74895f")]
    more = turn_entries(2, own[-1]["id"])
    grown = session_bytes([*own, *more]).data
    ident = FileIdentity(1, 7, len(grown))
    cp_size = len(session_bytes(own).data)
    yield "file-removed", engine_of(more), None
    yield "file-replaced", engine_of(more), reader_view(grown, FileIdentity(1, 8, len(grown)), cp_size)
    yield "file-shrank", engine_of(more), reader_view(grown[:cp_size - 5], FileIdentity(1, 7, cp_size - 5), cp_size)
    rewritten = grown.replace(b"text of a0000001", b"TEXT OF a0000001")
    yield "prefix-changed", engine_of(more), reader_view(rewritten, ident, cp_size)
    yield "partial-line", engine_of(more), reader_view(grown + b'{"type"', FileIdentity(1, 7, len(grown) + 7), cp_size)
    yield "invalid-line", engine_of(more), reader_view(grown + b"[]\n", FileIdentity(1, 7, len(grown) + 3), cp_size)


def _checkpoint() -> Any:
    own = [*startup(), *turn_entries(1, "cc74895f")]
    verdict = check_drift(engine_of(own), session_bytes(own), session_id=SID, previous=None)
    assert not verdict.drift and verdict.checkpoint is not None and verdict.checkpoint.last_id == "b0000001"
    return verdict.checkpoint


@pytest.mark.parametrize(("reason", "engine", "read"), list(_incremental_cases()), ids=[c[0] for c in _incremental_cases()])
def test_each_reason_the_incremental_check_names_is_its_verdict(reason: str, engine: EngineList,
                                                                 read: SessionBytes | None) -> None:
    verdict = check_appended(engine, read, checkpoint=_checkpoint())
    assert verdict is not None and (verdict.drift, verdict.reason) == (True, reason), verdict
    assert verdict.incremental and verdict.checkpoint is None


def test_every_reason_in_the_table_has_a_case() -> None:
    assert {c[0] for c in _cases()} | {c[0] for c in _incremental_cases()} == set(DRIFT_REASONS)


def test_the_incremental_check_agrees_with_the_full_check_or_hands_over_to_it() -> None:
    """For every full-check case built on a checkpoint (the file as it was, then what follows it), the
    incremental check either gives the same verdict or returns None (the core then runs the full check);
    it never calls clean what the full check calls drift."""
    cp = _checkpoint()
    own = [*startup(), *turn_entries(1, "cc74895f")]
    more = turn_entries(2, own[-1]["id"])
    base = session_bytes(own).data
    variants = {
        "clean": ([*own, *more], [*own, *more]),
        "unknown-id": ([*own, *more], [*own, entry("f0000001", parent=own[-1]["id"]), *more]),
        "duplicate-id": ([*own, *more], [*own, own[2], *more]),
        "disk-behind": ([*own, *more], [*own, more[0]]),
        "out-of-order": ([*own, *more], [*own, more[1], more[0]]),
    }
    for name, (engine_all, disk) in variants.items():
        data = session_bytes(disk).data
        ident = FileIdentity(1, 7, len(data))
        full = check_drift(engine_of(engine_all), SessionBytes(data, ident), session_id=SID, previous=cp.identity)
        quick = check_appended(engine_of(engine_all[len(own):]), reader_view(data, ident, len(base)), checkpoint=cp)
        if quick is None:
            assert name != "clean" and full.drift, name
        else:
            assert (quick.drift, quick.reason) == (full.drift, full.reason), name
            if not quick.drift:
                assert quick.checkpoint is not None and quick.checkpoint.sha256 == hashlib.sha256(data).hexdigest()
                assert (quick.checkpoint.entries, quick.checkpoint.last_id) == (len(disk), disk[-1]["id"])


def test_an_in_place_rewrite_is_caught_by_the_incremental_check_prefix_changed() -> None:
    # What the full check cannot see (the stated limit below), the incremental one does: the verified
    # bytes are hashed at every turn end.
    own = [*startup(), *turn_entries(1, "cc74895f")]
    cp = _checkpoint()
    own[-1] = {**own[-1], "message": {"role": "assistant", "content": [{"type": "text", "text": "Other words"}],
                                    "stopReason": "stop"}}
    data = session_bytes(own).data
    verdict = check_appended(engine_of([]), reader_view(data, FileIdentity(1, 7, len(data)), cp.identity.size),
                             checkpoint=cp)
    assert verdict is not None and (verdict.drift, verdict.reason) == (True, "prefix-changed")


@pytest.mark.parametrize("raw", [b"42", b'"a string"', b"[]", b'{"hello":"world"}', b'{"type":"message","id":7}',
                                 b'{"type":"session","id":"x"}', b"not json", b'{"type":"message","id":"\xff"}',
                                 b'{"type":"message","id":"d1","x":' + b"[" * 5000 + b"]" * 5000 + b"}",
                                 b'{"type":"message","id":"d2","x":' + b"7" * 5000 + b"}"])
def test_a_line_pi_would_load_as_an_entry_without_an_id_or_not_at_all_is_invalid(raw: bytes) -> None:
    # Pi takes any truthy JSON value as an entry and skips malformed lines (loader quirk 4); none of these
    # is one of this engine's appends (each is a JSON object with a string id and a type).
    own = [*startup()]
    read = session_bytes(own, extra=raw + b"\n")
    verdict = check_drift(engine_of(own), read, session_id=SID, previous=None)
    assert (verdict.drift, verdict.reason, verdict.line) == (True, "invalid-line", 4)


def test_engine_list_accepts_pi_answers_and_refuses_malformed_ones() -> None:
    assert engine_list({"entries": [], "leafId": None}) == EngineList((), None)
    assert engine_list({"entries": [{"id": "a"}]}) == EngineList(({"id": "a"},), None)  # leafId undefined
    for bad in (None, [], {"entries": {}}, {"entries": [], "leafId": 3}):
        with pytest.raises(ValueError):
            engine_list(bad)


def test_an_in_place_rewrite_with_the_same_ids_and_inode_is_not_caught_a_stated_limit() -> None:
    # Brief §2 "Stated limits": the content is not compared; only ids, order, inode and size.
    own = [*startup(), *turn_entries(1, "cc74895f")]
    before = session_bytes(own)
    own[-1] = {**own[-1], "message": {"role": "assistant", "content": [{"type": "text", "text": "Other words, longer than before"}],
                                    "stopReason": "stop"}}
    after = session_bytes(own)
    assert after.data != before.data and after.identity.size >= before.identity.size
    assert not check_drift(engine_of(own), after, session_id=SID, previous=before.identity).drift


def test_a_long_session_of_the_engine_own_entries_is_no_drift() -> None:
    # 20,002 entries (ten times fixtures' long.jsonl): the check is one pass over the lines.
    own = [*startup()]
    parent = "cc74895f"
    for n in range(10_000):
        pair = turn_entries(n, parent)
        own += pair
        parent = pair[-1]["id"]
    verdict = check_drift(engine_of(own), session_bytes(own), session_id=SID, previous=None)
    assert not verdict.drift and verdict.disk_entries == 20_002


# --------------------------------------------------------------------- the core, on the scripted engine

class DriftHarness(Harness):
    """The byte-level harness with the drift check on (`CoreConfig.drift`); `marker` notifications are kept
    with each client's notes (shape checked). The test answers the check's get_entries and its file read."""

    def __init__(self, **config: Any) -> None:
        config.setdefault("drift", DriftConfig(SID))
        super().__init__(**config)
        self.looks = True  # a prompt comes with the shell's look at the file: unchanged since the last check

    def feed(self, event: Any) -> Any:
        if isinstance(event, Call) and event.method == "prompt" and event.session is None and self.looks:
            verdict = self.core.drift_verdict
            event = replace(event, session=SessionStat(verdict.seen if verdict is not None else None))
        return super().feed(event)

    def _carry_out(self, action: Any) -> None:
        if isinstance(action, Notify) and action.method == "marker":
            assert set(action.params) == {"reason", "drift", "detail", "execution"}, action.params
            for conn in action.to:
                self.clients[conn].notes.append(("marker", dict(action.params)))
            return
        super()._carry_out(action)

    def markers(self, conn: str) -> list[dict[str, Any]]:
        return [p for m, p in self.clients[conn].notes if m == "marker"]

    def checking(self) -> bool:
        """A check's get_entries is the last thing written, unanswered."""
        return self.core.drift_check is not None and self.written_types()[-1] == "get_entries"

    def check(self, listed: list[Any], file: SessionBytes | None) -> None:
        """Pi holds `listed` and answers the check's get_entries as Pi does (with `since`: the entries after
        the first with that id, or `Entry not found`: rpc-mode.js 505-516); the shell's read of `file`
        then returns what the reader returns from the offset the check asks for. Until the check ends
        (an incremental check that cannot decide asks again, in full)."""
        assert self.checking(), self.written_types()
        while self.core.drift_check is not None and self.written_types()[-1] == "get_entries":
            since = self.last("get_entries").get("since")
            index = next((i for i, e in enumerate(listed) if e.get("id") == since), None)
            if since is not None and index is None:
                self.respond("get_entries", success=False, error=f"Entry not found: {since}")
                continue
            answer = listed if since is None else listed[index + 1:]  # type: ignore[operator]
            self.respond("get_entries", data={"entries": answer, "leafId": listed[-1]["id"] if listed else None})
            if self.core.drift_check is None:
                return
            self.read({"ok": True, "file": file})

    def read(self, result: dict[str, Any]) -> None:
        """The shell's read as the runtime's reader makes it: from the offset the check's effect asks for."""
        effect = self.effect(READ_SESSION)[-1]
        file = result.get("file")
        offset = int(effect.payload.get("from", 0))
        if isinstance(file, SessionBytes) and file.offset == 0:
            result = {**result, "file": reader_view(file.data, file.identity, offset)}
        self.feed(EffectDone(effect.effect_id, READ_SESSION, result))

    def binding(self, conn: str = "c2") -> dict[str, Any]:
        return self.clients[conn].records("binding")[-1]


def started(h: DriftHarness) -> list[dict[str, Any]]:
    """The shell starts serving: the takeover check (no file yet, the engine holds its startup append:
    W19); then c1 takes control and c2 observes. Returns the engine's list."""
    h.feed(TimerFired(DRIFT_START))
    listed = startup()
    h.check(listed, None)
    assert h.core.drift_verdict is not None and not h.core.drift_verdict.drift
    h.controller("c1")
    h.observe("c2")
    return listed


def one_turn(h: DriftHarness, n: int, listed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Prompt n runs to agent_settled; the idle check starts. Returns the engine's list after it."""
    result = h.prompt("c1", f"prompt {n}")
    assert isinstance(result, dict) and result["outcome"] == "admitted", result
    h.turn(f"prompt {n}")
    assert h.checking(), h.written_types()
    return [*listed, *turn_entries(n, listed[-1]["id"])]


def clean_turn(h: DriftHarness, n: int, listed: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], SessionBytes]:
    listed = one_turn(h, n, listed)
    disk = session_bytes(listed)
    h.check(listed, disk)
    assert h.core.drift_verdict is not None and not h.core.drift_verdict.drift, h.core.drift_verdict
    assert h.core.admission_open
    return listed, disk


def _foreign(case: str, listed: list[dict[str, Any]], disk: SessionBytes,
             turn2: list[dict[str, Any]]) -> tuple[SessionBytes, str]:
    """The file at the next idle check: another writer changed it while the engine was idle, then the
    engine appended prompt 2's entries. Returns the bytes and the reason expected."""
    if case == "appended":  # a valid entry with a new id
        foreign = entry("f0000001", parent=listed[-1]["id"])
        return session_bytes([*listed, foreign, *turn2]), "unknown-id"
    if case == "duplicate":  # an id that is already there, appended again
        return session_bytes([*listed, listed[2], *turn2]), "duplicate-id"
    if case == "truncated":  # cut back to the header and the first entry
        return session_bytes([listed[0], *turn2]), "file-shrank"
    assert case == "replaced"  # a copy renamed over it: the same bytes, another inode
    return session_bytes([*listed, *turn2], ino=disk.identity.ino + 1), "file-replaced"


@pytest.mark.parametrize("case", ["appended", "duplicate", "truncated", "replaced"])
def test_W10_a_foreign_change_while_idle_is_session_drift_at_the_next_idle_check(case: str) -> None:
    """Mutant 25a (a disk id missing from get_entries ignored) fails the `appended` case."""
    h = DriftHarness()
    listed = started(h)
    listed, disk = clean_turn(h, 1, listed)
    listed = one_turn(h, 2, listed)
    foreign, reason = _foreign(case, listed[:-2], disk, listed[-2:])
    records_before = len(h.clients["c2"].notes)
    h.check(listed, foreign)
    verdict = h.core.drift_verdict
    assert verdict is not None and (verdict.drift, verdict.reason) == (True, reason), verdict
    # Admission closed, the binding uncertain with reason session-drift, a marker to every subscriber.
    assert not h.core.admission_open and h.core.binding_state == "uncertain"
    for conn in ("c1", "c2"):
        binding = h.binding(conn)
        assert (binding["state"], binding["admission"]) == ("uncertain", "closed")
        assert {"session-drift", "uncertain"} <= set(binding["fences"])
        (marker,) = h.markers(conn)
        assert (marker["reason"], marker["drift"], marker["execution"]) == ("session-drift", reason, "exec-1")
    (claim,) = h.effect("claim-uncertain")
    assert claim.payload["reason"] == "session-drift"
    (evidence,) = [e for e in h.evidence if e.kind == "session-drift"]
    assert evidence.detail["reason"] == reason and evidence.detail["drift"] is True
    # Prompt 2's turn finished; its last records reached the clients with the verdict, before the marker.
    kinds = [m if m != "record" else p["type"] + ":" + str(p.get("state")) for m, p in h.clients["c2"].notes]
    assert "receipt:finished" in kinds[records_before:] and kinds[-1] == "marker"
    # From here on the controller writes nothing: not to the engine (nor a file: no effect but the claim's).
    sent, effects = bytes(h.engine_bytes), list(h.effects)
    refused(h.prompt("c1", "after the drift"), "session-drift")
    refused(h.call("c1", "interrupt", generation=h.core.generation), "fenced")
    refused(h.call("c2", "takeover", expectedGeneration=h.core.generation), "fenced")
    h.engine({"type": "agent_start"}, {"type": "agent_settled"})  # even an external run settling: no new check
    assert bytes(h.engine_bytes) == sent and h.effects == effects


def test_W10_a_prompt_during_the_check_refuses_busy_and_the_turn_records_wait_for_the_check() -> None:
    h = DriftHarness()
    listed = started(h)
    listed = one_turn(h, 1, listed)
    # The turn settled and the check is in flight: nothing of the turn's end has reached a client yet.
    assert [p["state"] for p in h.clients["c1"].records("receipt")][-1] == "working"
    rpc = h._rpc + 1
    assert h.prompt("c1", "too early") is None  # answered once the check ends
    assert h.written_types().count("prompt") == 1  # not written: an engine append now would be a false drift
    h.check(listed, session_bytes(listed))
    states = [p["state"] for p in h.clients["c1"].records("receipt")]
    assert states[-1] == "finished"
    refused(h.clients["c1"].replies[rpc], "busy")
    assert "drift check" in h.clients["c1"].replies[rpc][1]["message"]
    assert isinstance(h.prompt("c1", "now"), dict) and h.written_types()[-1] == "prompt"


def test_W18_the_engine_own_settings_entries_across_turns_are_no_drift_on_the_core() -> None:
    h = DriftHarness()
    listed = started(h)
    listed, _ = clean_turn(h, 1, listed)
    # Between turns the engine appends its own entries (a model change, a thinking change, a compaction, a
    # label): they are in its list, so they are its own.
    own = [entry("s0000001", "model_change", listed[-1]["id"], provider="fakeprov", modelId="fake-model-2"),
           entry("s0000002", "thinking_level_change", "s0000001", thinkingLevel="high"),
           entry("s0000003", "compaction", "s0000002", summary="s", firstKeptEntryId="s0000001",
                 tokensBefore=9, details={}, usage={}, fromHook=False),
           entry("s0000004", "label", "s0000003", targetId="s0000001", label="here")]
    listed = one_turn(h, 2, [*listed, *own])
    h.check(listed, session_bytes(listed))
    listed, _ = clean_turn(h, 3, listed)
    assert h.core.drift_verdict is not None and h.core.drift_verdict.disk_entries == len(listed)
    assert not h.markers("c2") and not [e for e in h.evidence if "drift" in e.kind]


def test_W19_no_file_before_the_first_assistant_message_then_the_file_is_no_drift() -> None:
    h = DriftHarness()
    listed = started(h)  # the takeover check: the engine holds two entries, there is no file
    # A prompt Pi refuses at preflight (no API key): nothing was appended, still no file; the slot's
    # release makes the check due.
    assert isinstance(h.prompt("c1", "no key"), dict)
    h.respond("prompt", success=False, error="No API key found for fakeprov.")
    h.check(listed, None)
    assert h.core.drift_verdict is not None and h.core.drift_verdict.seen is None and h.core.admission_open
    # The first reply: Pi creates the file with every entry it held (FACTS (c) _persist "wx").
    listed, disk = clean_turn(h, 1, listed)
    assert h.core.drift_verdict is not None and h.core.drift_verdict.seen == disk.identity


@pytest.mark.parametrize("how", ["get-entries-times-out", "get-entries-fails", "get-entries-malformed",
                                 "read-fails", "read-times-out"])
def test_W19_a_check_that_cannot_finish_is_uncertain_with_admission_closed(how: str) -> None:
    h = DriftHarness()
    listed = started(h)
    listed = one_turn(h, 1, listed)
    bound = Bounds().drift
    if how == "get-entries-times-out":
        h.advance(bound + 0.001)  # the link's bound on the command: the outcome is unknown (and the pipe poisoned)
    elif how == "get-entries-fails":
        h.respond("get_entries", success=False, error="boom")
    elif how == "get-entries-malformed":
        h.respond("get_entries", data={"entries": "not a list"})
    else:
        h.respond("get_entries", data={"entries": listed, "leafId": listed[-1]["id"]})
        assert DRIFT_READ_TIMER in h.timers
        if how == "read-fails":
            h.read({"ok": False, "error": "SafeOpenRefusal('unsafe-path')"})
        else:
            h.advance(bound + 0.001)
            h.read({"ok": True, "file": session_bytes(listed)})  # too late: ignored
    assert h.core.drift_check is None and h.core.drift_verdict is None  # never "no drift"
    assert h.core.binding_state == "uncertain" and not h.core.admission_open
    binding = h.binding()
    assert (binding["state"], binding["admission"]) == ("uncertain", "closed") and "drift-check" in binding["fences"]
    assert [e.kind for e in h.evidence if "drift" in e.kind] == ["drift-check-failed"]
    assert h.clients["c1"].records("receipt")[-1]["state"] == "finished"  # the held records went out
    assert not h.markers("c2")  # unknown is not drift
    sent = bytes(h.engine_bytes)
    refused(h.prompt("c1", "after"), "fenced")
    assert bytes(h.engine_bytes) == sent


def test_the_check_waits_for_the_slot_probe_and_for_an_interrupt_to_reconcile() -> None:
    h = DriftHarness()
    listed = started(h)
    # The run settles before the answer to the get_state written after the ack: the slot is released by
    # agent_settled, but the probe is in flight, so no check yet (nothing of the core's may be in flight).
    assert isinstance(h.prompt("c1", "prompt 1"), dict)
    h.respond("prompt")
    h.engine(*full_run("prompt 1"))
    assert h.core.slot is None and h.written_types().count("get_entries") == 1  # the takeover check's only
    h.respond("get_state", data=state(False))
    listed = [*listed, *turn_entries(1, listed[-1]["id"])]
    h.check(listed, session_bytes(listed))
    # An interrupt: the run's agent_settled comes mid-chain; the check runs only after reconciled.
    assert isinstance(h.prompt("c1", "SLOW"), dict)
    h.respond("prompt")
    h.engine(*run_start("SLOW"))
    h.respond("get_state", data=state(True))
    assert isinstance(h.call("c1", "interrupt", generation=h.core.generation), dict)
    h.respond("clear_queue", data=queues())
    h.engine(*run_end("tick00 ", "aborted"))
    h.respond("abort")
    assert h.written_types()[-1] == "clear_queue"  # the post-settle clear; no check during the chain
    h.respond("clear_queue", data=queues())
    assert h.checking()
    listed = [*listed, *turn_entries(2, listed[-1]["id"])]
    h.check(listed, session_bytes(listed))
    stops = h.clients["c2"].records("stop")
    assert stops[-1]["state"] == "reconciled" and h.core.admission_open and not h.markers("c2")


def test_an_engine_event_during_the_check_abandons_it_and_it_runs_again_when_idle() -> None:
    h = DriftHarness()
    listed = started(h)
    listed, _ = clean_turn(h, 1, listed)
    listed = one_turn(h, 2, listed)
    h.engine(*run_start("an extension's message"))  # a run nobody here started (an extension's)
    h.respond("get_entries", data={"entries": listed, "leafId": listed[-1]["id"]})
    assert not h.effect(READ_SESSION)[2:] and h.core.drift_check is None  # abandoned before its read
    assert [e.kind for e in h.evidence if "drift" in e.kind] == ["drift-check-abandoned"]
    h.engine(*run_end("Hello from the fake model."))
    extra = entry("x0000001", "custom_message", listed[-1]["id"], customType="ext", content="c", display=True)
    listed = [*listed, extra]
    h.check(listed, session_bytes(listed))
    assert h.core.drift_verdict is not None and not h.core.drift_verdict.drift and h.core.admission_open


def test_a_core_without_the_drift_config_never_checks() -> None:
    h = Harness()
    h.controller()
    h.feed(TimerFired(DRIFT_START))
    assert h.prompt("c1", "hello")["outcome"] == "admitted"
    h.turn("hello")
    assert h.written_types() == ["prompt", "get_state"] and h.core.admission_open


# ------------------------------------------------- before the next prompt runs (`_core_drift` rule 6, issue 27)

def _after_one_turn() -> tuple[DriftHarness, list[dict[str, Any]], SessionBytes]:
    h = DriftHarness()
    listed = started(h)
    listed, disk = clean_turn(h, 1, listed)
    h.looks = False  # every prompt from here on comes with the look the test gives it
    return h, listed, disk


def test_W10_the_prompt_path_unchanged_file_dispatches_in_the_same_call_with_no_check() -> None:
    h, listed, disk = _after_one_turn()
    written = len(h.written_types())
    result = h.prompt("c1", "prompt 2", session=SessionStat(disk.identity))
    assert isinstance(result, dict) and result["outcome"] == "admitted"
    assert h.written_types()[written:] == ["prompt"] and h.core.drift_check is None


@pytest.mark.parametrize(("look", "reason"), [("removed", "file-removed"), ("replaced", "file-replaced"),
                                              ("shrank", "file-shrank")])
def test_W10_the_file_removed_replaced_or_shrunk_before_the_prompt_refuses_it_session_drift_with_zero_bytes(
        look: str, reason: str) -> None:
    h, listed, disk = _after_one_turn()
    seen = {"removed": None, "replaced": FileIdentity(1, disk.identity.ino + 1, disk.identity.size),
            "shrank": FileIdentity(1, disk.identity.ino, disk.identity.size - 10)}[look]
    sent = bytes(h.engine_bytes)
    refused(h.prompt("c1", "prompt 2", session=SessionStat(seen)), "session-drift")
    assert bytes(h.engine_bytes) == sent and h.core.slot is None and not h.core.requests.get("cr-2")
    verdict = h.core.drift_verdict
    assert verdict is not None and (verdict.drift, verdict.reason) == (True, reason)
    assert not h.core.admission_open and h.core.binding_state == "uncertain"
    for conn in ("c1", "c2"):
        binding = h.binding(conn)
        assert (binding["state"], binding["admission"]) == ("uncertain", "closed")
        assert "session-drift" in binding["fences"]
        (marker,) = h.markers(conn)
        assert (marker["reason"], marker["drift"]) == ("session-drift", reason)
    assert [e.kind for e in h.evidence if "drift" in e.kind] == ["session-drift"]
    refused(h.prompt("c1", "prompt 3", session=SessionStat(disk.identity)), "session-drift")  # closed since


def test_W10_a_second_writer_append_before_the_prompt_holds_it_for_the_check_which_refuses_it_session_drift() -> None:
    h, listed, disk = _after_one_turn()
    foreign = session_bytes([*listed, entry("f0000001", parent=listed[-1]["id"])])
    sent = bytes(h.engine_bytes)
    assert h.prompt("c1", "prompt 2", session=SessionStat(foreign.identity)) is None  # held for the check
    assert h.checking() and h.last("get_entries")["since"] == listed[-1]["id"]  # the incremental check
    assert h.prompt("c2", "another", session=SessionStat(foreign.identity)) is None  # held too (busy after)
    h.check(listed, foreign)
    verdict = h.core.drift_verdict
    assert verdict is not None and (verdict.drift, verdict.reason) == (True, "unknown-id")
    (first,) = [r for r in h.clients["c1"].replies.values() if isinstance(r, tuple)]
    refused(first, "session-drift")
    assert b'"type":"prompt"' not in bytes(h.engine_bytes)[len(sent):]  # the prompt never left the core
    assert [e.kind for e in h.evidence if "drift" in e.kind] == [
        "drift-check-before-prompt", "drift-check-full", "session-drift"]


def test_a_file_grown_by_the_engines_own_entries_is_checked_and_then_the_prompt_runs() -> None:
    # The engine appended its own entries since the last check (here: a thinking change an extension's
    # command made, FACTS a7): the look says grown, the incremental check proves them the engine's, and the
    # prompt is admitted, through admission again, in the call that ended the check.
    h, listed, disk = _after_one_turn()
    listed = [*listed, entry("s0000001", "thinking_level_change", listed[-1]["id"], thinkingLevel="high")]
    grown = session_bytes(listed)
    assert h.prompt("c1", "prompt 2", session=SessionStat(grown.identity)) is None
    h.check(listed, grown)
    (result,) = [r for rpc, r in h.clients["c1"].replies.items() if isinstance(r, dict) and "outcome" in r][-1:]
    assert result["outcome"] == "admitted" and h.written_types()[-1] == "prompt"
    assert h.core.drift_verdict is not None and not h.core.drift_verdict.drift and h.core.admission_open


@pytest.mark.parametrize("look", [None, SessionStat(None, "PermissionError(13, 'Permission denied')")],
                         ids=["no-look", "look-failed"])
def test_a_prompt_with_no_look_waits_for_the_check_of_the_file(look: SessionStat | None) -> None:
    h, listed, disk = _after_one_turn()
    assert h.prompt("c1", "prompt 2", session=look) is None
    h.check(listed, disk)
    assert h.written_types()[-1] == "prompt" and h.core.admission_open


def test_a_check_a_run_abandons_before_the_prompt_ran_refuses_it_busy() -> None:
    h, listed, disk = _after_one_turn()
    grown = session_bytes([*listed, entry("f0000001", parent=listed[-1]["id"])])
    assert h.prompt("c1", "prompt 2", session=SessionStat(grown.identity)) is None
    h.engine(*run_start("an extension's message"))  # a run nobody here started: the check is void
    h.respond("get_entries", data={"entries": [], "leafId": listed[-1]["id"]})  # abandoned at its answer
    (reply,) = [r for r in h.clients["c1"].replies.values() if isinstance(r, tuple)]
    refused(reply, "busy")
    assert h.written_types().count("prompt") == 1 and h.core.drift_check is None


# ------------------------------------------------------------------ the whole controller, on the fake engine

def finished(crid: str) -> Callable[[dict[str, Any]], bool]:
    return lambda n: receipt_is("finished")(n) and n["params"]["clientRequest"] == crid


def is_marker(n: dict[str, Any]) -> bool:
    return n.get("method") == "marker" and n["params"].get("reason") == "session-drift"


async def run_turn(client: RawClient, auth: dict[str, Any], crid: str, text: str) -> None:
    """One prompt to its finished receipt. The turn's last records are held until the idle check after it
    ended (core rule 8), so when this returns that check is over."""
    reply = await client.call("prompt", **auth, clientRequestId=crid, text=text)
    assert reply["result"]["outcome"] == "admitted", reply
    await client.until(finished(crid))


def spy_engine_writes(rig: FakeRig) -> list[str]:
    """Every command the link hands to the engine pipe from now on (its type), in order."""
    link = rig.core.link
    written: list[str] = []
    take = link.next_write

    def next_write() -> Any:
        command = take()
        if command is not None:
            written.append(command.type)
        return command

    link.next_write = next_write  # type: ignore[method-assign]
    return written


def test_W10_a_foreign_entry_appended_while_the_fake_engine_is_idle_is_session_drift_end_to_end(
        tmp_path: Path) -> None:
    """A second writer appends between two prompts: the second prompt is refused `session-drift` before any
    byte of it reaches the engine (issue 27: seen before the next prompt runs, beyond the brief's "at the
    next idle check"). Its look found the file grown; the check it waited for ran incrementally, found ids
    that are not the engine's and handed over to the full check, which names the reason."""
    async def main() -> None:
        async with fake_controller(tmp_path / "rig") as rig:
            observer = await validated_client(rig.socket_path)
            await observer.call("observe")
            client = await validated_client(rig.socket_path)
            auth = await client.control()
            await run_turn(client, auth, "t1", "Say hello")
            first = rig.core.drift_verdict
            assert first is not None and not first.drift and first.disk_entries == 4
            # Another writer appends a valid entry with a new id while the engine is idle.
            leaf = json.loads(rig.session.read_bytes().split(b"\n")[-2])["id"]
            with open(rig.session, "ab") as f:
                f.write(line(entry("f0000001", parent=leaf)))
            writes = spy_engine_writes(rig)
            reply = await client.call("prompt", **auth, clientRequestId="t2", text="Say hello again")
            assert reply["error"]["data"]["refusal"]["code"] == "session-drift", reply
            for c in (client, observer):
                marker = (await c.until(is_marker))["params"]
                assert marker["drift"] == "unknown-id" and "f0000001" in marker["detail"]
                binding = c.records("binding")[-1]
                assert (binding["state"], binding["admission"]) == ("uncertain", "closed")
                assert "session-drift" in binding["fences"]
            # The check before the prompt: incremental first (since the last verified entry); the ids that
            # follow are not the engine's, so it hands over to the full check, which names the reason. No
            # prompt was written.
            assert writes == ["get_entries", "get_entries"]
            assert [r["clientRequest"] for r in client.records("request")] == ["t1"]
            # After the drift: the controller writes nothing to the engine or the file.
            on_disk = rig.session.read_bytes()
            reply = await client.call("prompt", **auth, clientRequestId="t3", text="after the drift")
            assert reply["error"]["data"]["refusal"]["code"] == "session-drift"
            reply = await client.call("interrupt", **auth)
            assert reply["error"]["data"]["refusal"]["code"] == "fenced"
            state_now = await asyncio.to_thread(lambda: rig.ctl.request("state")["state"])
            assert state_now["messageCount"] == 2 and not state_now["isStreaming"]
            assert writes == ["get_entries", "get_entries"] and not rig.core.link.in_flight
            assert rig.session.read_bytes() == on_disk
            assert [e.kind for e in rig.runtime.evidence if "drift" in e.kind] == [
                "drift-check-before-prompt", "drift-check-full", "session-drift"]
            await client.close()
            await observer.close()

    asyncio.run(main())


@pytest.mark.parametrize("how", ["replaced", "truncated"])
def test_W10_the_session_file_replaced_or_truncated_between_two_prompts_is_refused_at_the_second_prompt(
        tmp_path: Path, how: str) -> None:
    """The second writer renames a copy over the file, or cuts it short, between two prompts: the second
    prompt's look (one stat, the runtime's) decides it alone: refused `session-drift`, no engine byte."""
    async def main() -> None:
        async with fake_controller(tmp_path / "rig") as rig:
            client = await validated_client(rig.socket_path)
            auth = await client.control()
            await run_turn(client, auth, "t1", "Say hello")
            data = rig.session.read_bytes()
            if how == "replaced":
                copy = rig.session.with_name("copy.tmp")
                copy.write_bytes(data)
                os.replace(copy, rig.session)
            else:
                rig.session.write_bytes(data[:data.index(b"\n") + 1])
            writes = spy_engine_writes(rig)
            reply = await client.call("prompt", **auth, clientRequestId="t2", text="Say hello again")
            assert reply["error"]["data"]["refusal"]["code"] == "session-drift", reply
            marker = (await client.until(is_marker))["params"]
            assert marker["drift"] == {"replaced": "file-replaced", "truncated": "file-shrank"}[how]
            assert writes == [] and not rig.core.link.in_flight
            binding = (await client.call("observe"))["result"]["binding"]
            assert binding["admission"] == "closed" and "session-drift" in binding["fences"]
            await client.close()

    asyncio.run(main())


def test_inputs_that_come_while_a_prompt_is_looked_at_wait_behind_it_in_order(tmp_path: Path) -> None:
    """The runtime looks at the session file before it feeds a prompt (off the loop); what arrives
    meanwhile waits behind the prompt, so the core sees the inputs in the order they came: a prompt and an
    interrupt written in one chunk interrupt the prompt's turn, never refuse `no-turn` ahead of it."""
    async def main() -> None:
        async with fake_controller(tmp_path / "rig", scenarios="mosaic.pi_rpc.testing:DEFAULT_SCENARIOS") as rig:
            client = await validated_client(rig.socket_path)
            auth = await client.control()
            await run_turn(client, auth, "t1", "Say hello")
            both = b"".join(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode()
                            + b"\n" for rid, method, params in (
                (901, "prompt", {**auth, "clientRequestId": "t2", "text": "SLOW stream please"}),
                (902, "interrupt", auth)))
            client.writer.write(both)  # one write: the server reads both lines in one chunk
            await client.writer.drain()
            prompt, interrupt = await client.reply(901), await client.reply(902)
            assert prompt.get("result", {}).get("outcome") == "admitted", prompt
            assert interrupt.get("result", {}).get("stop", {}).get("kind") == "interrupt", interrupt
            await client.until(stop_is("reconciled"))
            await client.close()

    asyncio.run(main())


HEADER_ONLY = json.dumps({"type": "session", "version": 3, "id": "0199bbbb-2222-7000-8000-000000000002",
                          "timestamp": "2026-11-30T02:46:17.936Z", "cwd": "{cwd}"}, separators=(",", ":")) + "\n"


def test_W18_the_fake_startup_append_and_several_turns_with_a_tool_call_and_an_interrupt_are_no_drift(
        tmp_path: Path) -> None:
    async def main() -> None:
        # An existing session with no messages: the fake appends model_change + thinking_level_change to the
        # file at start (FACTS (d) K1); the takeover check sees them as the engine's own.
        async with fake_controller(tmp_path / "rig", seed=HEADER_ONLY) as rig:
            verdicts = [rig.core.drift_verdict]
            assert verdicts[0] is not None and verdicts[0].disk_entries == 2 and not verdicts[0].drift
            client = await validated_client(rig.socket_path)
            auth = await client.control()
            await run_turn(client, auth, "t1", "Say hello")
            verdicts.append(rig.core.drift_verdict)
            await run_turn(client, auth, "t2", "TOOLCALL please run it")
            verdicts.append(rig.core.drift_verdict)
            await client.call("prompt", **auth, clientRequestId="t3", text="SLOW stream please")
            await client.until(lambda n: n.get("method") == "event" and n["params"]["eventType"] == "text-delta")
            await client.call("interrupt", **auth)
            await client.until(stop_is("reconciled"))
            await rig.runtime.wait_core(lambda core: core.drift_check is None, WAIT)
            verdicts.append(rig.core.drift_verdict)
            await run_turn(client, auth, "t4", "Say hello")
            verdicts.append(rig.core.drift_verdict)
            assert all(v is not None and not v.drift for v in verdicts), verdicts
            counts = [v.disk_entries for v in verdicts if v is not None]
            assert counts == [2, 4, 8, 10, 12]  # the tool round: call, result, final text
            assert [e.kind for e in rig.runtime.evidence if "drift" in e.kind] == []
            binding = client.records("binding")[-1]
            assert (binding["state"], binding["admission"]) == ("active", "open")
            await client.close()

    asyncio.run(main())


_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


class OpenRecorder:
    """Every open (and every call that changes a name) the controller process makes, with its resolved path
    and whether it can write: `os.open` (with `dir_fd` resolved through /proc/self/fd, as safe-open opens a
    session file), `open`/`io.open`, and `os.truncate`, `os.rename`, `os.replace`, `os.unlink`, `os.remove`,
    `os.link`. Installed with pytest's monkeypatch, so it is gone after the test."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, str, bool]] = []  # (what, real path, writes)
        real_open, real_io_open, readlink = os.open, io.open, os.readlink

        def where(path: Any, dir_fd: int | None = None) -> str:
            if isinstance(path, int):
                return readlink(f"/proc/self/fd/{path}")
            name = os.fsdecode(os.fspath(path))
            if dir_fd is not None and not os.path.isabs(name):
                name = os.path.join(readlink(f"/proc/self/fd/{dir_fd}"), name)
            return os.path.realpath(name)

        def os_open(path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
            self.calls.append(("os.open", where(path, dir_fd), bool(flags & _WRITE_FLAGS)))
            return real_open(path, flags, mode, dir_fd=dir_fd)

        def py_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
            self.calls.append(("open", where(file), any(c in mode for c in "wax+")))
            return real_io_open(file, mode, *args, **kwargs)

        monkeypatch.setattr(os, "open", os_open)
        monkeypatch.setattr(builtins, "open", py_open)
        monkeypatch.setattr(io, "open", py_open)
        for name in ("truncate", "rename", "replace", "unlink", "remove", "link"):
            real = getattr(os, name)

            def changing(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
                self.calls.append((f"os.{_name}", where(args[0], kwargs.get("src_dir_fd")), True))
                return _real(*args, **kwargs)

            monkeypatch.setattr(os, name, changing)

    def under(self, directory: Path) -> list[tuple[str, str, bool]]:
        top = os.path.realpath(directory)
        return [c for c in self.calls if c[1] == top or c[1].startswith(top + os.sep)]


def fingerprint(top: Path) -> dict[str, Any]:
    """size, sha256, mtime, (dev, ino) and mode of every file under `top`, and the listing (chat-pages F17)."""
    out: dict[str, Any] = {"listing": sorted(os.listdir(top))}
    for name in out["listing"]:
        st = os.lstat(top / name)
        out[name] = (st.st_size, hashlib.sha256((top / name).read_bytes()).hexdigest(), st.st_mtime_ns, st.st_dev,
                     st.st_ino, st.st_mode)
    return out


def test_W11_the_controller_never_opens_a_session_file_for_writing_while_the_engine_appends(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Brief §2 "No writes to sessions" and W11. In the controller process every open of a file under the
    session directory is read-only, over a whole session (prompts with a tool call, an interrupt, drift
    checks, history pages), while the engine (another process) appends; the engine's appends are its own:
    the last check finds every entry on disk in the engine's list.

    Then the F17-style check over an idle window: inotify (`OpenWatch`) sees the session file opened, the
    fingerprint sees nothing change, and the recorder says those opens were read-only. inotify cannot say
    who opened a file or with which access mode (IN_OPEN carries neither a pid nor the flags), so the window
    is one where the engine is idle (it answers get_entries from memory and opens nothing); the flags come
    from the in-process recorder, and inotify is the kernel's own evidence that the reads happened."""

    async def main() -> None:
        async with fake_controller(tmp_path / "rig") as rig:
            sessions = rig.session.parent
            recorder = OpenRecorder(monkeypatch)
            observer = await validated_client(rig.socket_path)
            await observer.call("observe")
            client = await validated_client(rig.socket_path)
            auth = await client.control()
            await run_turn(client, auth, "t1", "Say hello")
            await observer.call("observe")  # a history page read of the file
            await run_turn(client, auth, "t2", "TOOLCALL please run it")
            await client.call("prompt", **auth, clientRequestId="t3", text="SLOW stream please")
            await client.until(lambda n: n.get("method") == "event" and n["params"]["eventType"] == "text-delta")
            await client.call("interrupt", **auth)
            await client.until(stop_is("reconciled"))
            await rig.runtime.wait_core(lambda core: core.drift_check is None, WAIT)
            await run_turn(client, auth, "t4", "Say hello")
            final = rig.core.drift_verdict
            assert final is not None and not final.drift and final.disk_entries == final.engine_entries == 12
            touched = recorder.under(sessions)
            assert [c for c in touched if c[1] == os.path.realpath(rig.session)], "the checks did read the file"
            assert [c for c in touched if c[2]] == [], touched

            # The idle window: the controller alone reads the file (a drift check, a history page).
            before = fingerprint(sessions)
            mark = len(recorder.calls)
            with OpenWatch([sessions]) as watch:
                rig.runtime.feed(TimerFired(DRIFT_START))
                await rig.runtime.wait_core(lambda core: core.drift_check is None, WAIT)
                await observer.call("observe")
                opened = watch.opened()
            assert fingerprint(sessions) == before
            assert str(rig.session) in opened and opened <= {str(rig.session), str(sessions)}
            window = [c for c in recorder.calls[mark:] if c[1] == os.path.realpath(rig.session)]
            assert window and not [c for c in window if c[2]], window
            assert rig.core.drift_verdict is not None and not rig.core.drift_verdict.drift
            await client.close()
            await observer.close()

    asyncio.run(main())


def test_E4_a_page_holding_bytes_no_check_verified_is_not_a_quiet_cut() -> None:
    """The seam (seed README "The seam"; E4): the page is read off the loop, and Pi appends an entry before its
    event reaches stdout (FACTS a6), so a run the core has not seen start (an extension's) can already be on
    the page. Quiet only when the page is the file the last clean check verified."""
    h = DriftHarness()
    listed = started(h)
    listed, disk = clean_turn(h, 1, listed)
    verified = hashlib.sha256(disk.data).hexdigest()
    h.page = {"ok": True, "page": {"snapshotDigest": verified, "parts": []}, "cursor": None}
    assert h.observe("c3")["seam"]["quiet"] is True
    h.page = {"ok": True, "page": {"snapshotDigest": hashlib.sha256(disk.data + b"{}\n").hexdigest(), "parts": []},
              "cursor": None}
    assert h.observe("c4")["seam"]["quiet"] is False  # bytes the core has seen no event of


def _largest_session(room: int) -> str:
    """A session file of MAX_SESSION_FILE_BYTES - `room` bytes, as Pi writes them: a header, a thinking
    entry (so nothing is appended at startup, FACTS (d)) and a chain of user and assistant messages of
    about 1 MiB of text each; `{cwd}` is the project (prepare_fake_engine fills it in)."""
    from mosaic.safe_open import MAX_SESSION_FILE_BYTES

    head = (json.dumps({"type": "session", "version": 3, "id": SID, "timestamp": "2026-12-01T00:00:00.000Z",
                        "cwd": "{cwd}"}) + "\n"
            + line(entry("t0000000", "thinking_level_change", None, thinkingLevel="off")).decode())
    target = MAX_SESSION_FILE_BYTES - room - len("/".join(["x"] * 64))  # the cwd's length, at most this
    out = [head]
    size = len(head.encode())
    parent, n = "t0000000", 0
    while True:
        role = "user" if n % 2 == 0 else "assistant"
        eid = f"m{n:07d}"
        message: dict[str, Any] = {"role": role, "content": [{"type": "text", "text": ""}]}
        if role == "assistant":
            message["stopReason"] = "stop"
        left = target - size - len(line(entry(eid, parent=parent, message=message)))
        if left <= 0:
            break
        message["content"][0]["text"] = "w" * min(1 << 20, left)
        raw = line(entry(eid, parent=parent, message=message))
        out.append(raw.decode())
        size += len(raw)
        parent, n = eid, n + 1
    return "".join(out)


def test_a_session_of_the_largest_size_the_reader_accepts_runs_a_turn(tmp_path: Path) -> None:
    """256 MiB (less the turn's own bytes, so the file stays one the reader accepts): the takeover check
    reads every entry the engine holds (a get_entries answer of ~256 MiB: the engine link's record cap is
    derived from the reader's, ENGINE_RECORD_CAP), a turn runs, and the check at its end is incremental."""
    from mosaic.controller.core import ENGINE_RECORD_CAP
    from mosaic.safe_open import MAX_SESSION_FILE_BYTES

    seed = _largest_session(room=64 << 10)

    async def main() -> None:
        async with fake_controller(tmp_path / "rig", seed=seed,
                                   bounds=Bounds(command=120.0, drift=120.0, probe=60.0)) as rig:
            size = rig.session.stat().st_size
            assert MAX_SESSION_FILE_BYTES - (64 << 10) - 4096 <= size <= MAX_SESSION_FILE_BYTES
            first = rig.core.drift_verdict
            assert first is not None and not first.drift and not first.incremental  # the full takeover check
            assert ENGINE_RECORD_CAP > size > 64 << 20  # the takeover check read a record over the old 64 MiB cap
            client = await validated_client(rig.socket_path)
            auth = await client.control()
            await run_turn(client, auth, "t1", "Say hello")
            after = rig.core.drift_verdict
            assert after is not None and not after.drift and after.incremental
            assert after.disk_entries == first.disk_entries + 2 and rig.core.admission_open
            assert rig.session.stat().st_size <= MAX_SESSION_FILE_BYTES
            await client.close()

    asyncio.run(main())
