"""Admission and dispatch (brief §1), the text policy (§4), control and its fence (§5): on the sans-io
core, every engine byte checked. Fixture ids are in the names."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from core_harness import INCARNATION, Harness, refused, run_end, run_start

from mosaic.controller import Grants
from mosaic.controller.access import AccessPolicy, Peer
from mosaic.controller.core import (
    CALL_GATE,
    DRIFT_START,
    PROMPT_ADMISSION,
    READ_SESSION,
    SessionStat,
    TimerFired,
)
from mosaic.controller.drift import DriftConfig, FileIdentity, SessionBytes
from mosaic.controller.tables import TEXT_PREFIXES, check_text

SID = "0199aaaa-1111-7000-8000-000000000001"


def admitted(result: object) -> dict:
    assert isinstance(result, dict) and result["outcome"] == "admitted", result
    return result


# ------------------------------------------------------------------------------------------ text (§4)

@pytest.mark.parametrize("text", ["/goal x", "   /goal x", "\t/goal x", " \t\n /goal x"])
def test_S1_slash_text_is_refused_at_admission_with_zero_engine_bytes(text: str) -> None:
    h = Harness()
    h.controller()
    refused(h.prompt("c1", text), "text-policy")
    assert h.engine_bytes == b"" and h.core.slot is None


def test_S2_every_refused_prefix_of_the_table_is_refused_and_every_other_row_admitted() -> None:
    # The test reads the same table the code uses (brief §4 S2).
    for row in TEXT_PREFIXES:
        h = Harness()
        h.controller()
        result = h.prompt("c1", row.example)
        if row.refused:
            refused(result, "text-policy")
            assert h.engine_bytes == b""
        else:
            admitted(result)
            assert h.last("prompt")["message"] == row.example
    assert {r.example for r in TEXT_PREFIXES if r.refused} >= {"/skill:ms-unslop", "/goal x", " \t/goal x"}


def test_S3_slash_on_a_later_line_is_admitted_as_pinned_from_the_source() -> None:
    # FACTS (f), G5: every check of the pinned Pi is at index 0; "first line\n/llama" ran a normal turn.
    h = Harness()
    h.controller()
    admitted(h.prompt("c1", "first line\n/goal x"))
    assert h.last("prompt")["message"] == "first line\n/goal x"


def test_S7_control_characters_are_sent_as_one_json_string_exactly() -> None:
    text = "esc \x1b[31m red \x1b[201~ paste end \u2028 line \u2029 para \r\n crlf \x00 nul"
    h = Harness()
    h.controller()
    admitted(h.prompt("c1", text))
    assert h.engine_bytes.count(b"\n") == 1  # one record: nothing in the text split the line
    (record,) = h.written()
    assert record == {"id": record["id"], "type": "prompt", "message": text}
    assert "streamingBehavior" not in record  # never sent (§1)


def test_draft_limits_refuse_empty_and_over_262144_characters() -> None:
    h = Harness()
    h.controller()
    refused(h.prompt("c1", ""), "draft")
    refused(h.prompt("c1", "   "), "draft")
    refused(h.prompt("c1", "x" * 262_145), "draft")
    refused(h.prompt("c1", "\U0001F600" * 131_073), "draft")  # 262,146 UTF-16 units, as the seed counts
    assert h.engine_bytes == b""


@pytest.mark.parametrize("text", ["x" * 262_144, "\u8a9e" * 262_144, "\U0001F600" * 131_072,
                                  "a" + "\U0001F600" * 131_071 + "b"])
def test_draft_the_limit_itself_is_admitted_and_written_as_one_line(text: str) -> None:
    # 262,144 UTF-16 units: ASCII, the most UTF-8 bytes per unit (3, 786,432 bytes) and astral pairs.
    h = Harness()
    h.controller()
    admitted(h.prompt("c1", text))
    assert h.last("prompt")["message"] == text and h.engine_bytes.count(b"\n") == 1
    assert check_text(text) is None


# ---------------------------------------------------------------------- the admission tables (rule 1)
# One case per (row, code): a harness where every earlier row passes and this one answers, and the prompt
# it answers. The prompt's text is refused by the text policy too, so each row is also seen to answer
# before the last one.

Arranged = tuple[Harness, Callable[[str], Any]]
SLASH = "/goal x"


def _controlled(**config: Any) -> Arranged:
    h = Harness(**config)
    h.controller("c1")
    return h, lambda text: h.prompt("c1", text)


def _recovery_control(**config: Any) -> Arranged:
    # Admission is closed from the start: an ordinary takeover is refused (K9), recovery control is not.
    h = Harness(**config)
    h.observe("c1")
    assert isinstance(h.call("c1", "acquire-recovery-control"), dict)
    return h, lambda text: h.prompt("c1", text)


def _unadmitted() -> Arranged:
    h = Harness()
    h.connect("x", peer=None)  # credentials unread: closed channel at connect, never a connection
    return h, lambda text: h.prompt("x", text)


def _observe_only() -> Arranged:
    alice = Peer(1000, 1000, 4242, (1000,))
    h = Harness(access=AccessPolicy(grants=Grants(users={alice.uid: frozenset({"observe"})})))
    h.connect("a", alice)
    return h, lambda text: h.prompt("a", text)


def _hello_after_a_request() -> Arranged:
    h, _ = _controlled()  # observe and takeover came first: a hello now is not the first message
    return h, lambda text: h.call("c1", "hello", grant="g-any")


def _unverified_command() -> Arranged:
    h, _ = _controlled()
    return h, lambda text: h.call("c1", "approval", text=text)


def _grant_elsewhere() -> Arranged:
    alice = Peer(1000, 1000, 4242, (1000,))
    every = frozenset({"observe", "prompt", "takeover", "interrupt", "force-stop", "recover"})
    h = Harness(access=AccessPolicy(grants=Grants(users={alice.uid: every},
                                                  scopes={("uid", alice.uid): frozenset({"pi-elsewhere"})})))
    h.connect("a", alice)
    return h, lambda text: h.prompt("a", text)


def _old_incarnation() -> Arranged:
    h, _ = _controlled()
    return h, lambda text: h.call("c1", "prompt", text=text, clientRequestId="cr-x",
                                  generation=h.core.generation, incarnation="inc-" + "b" * 32)


def _bad_request_id() -> Arranged:
    h, _ = _controlled()
    return h, lambda text: h.prompt("c1", text, crid="not an id")


def _used_request_id() -> Arranged:
    h, _ = _controlled()
    admitted(h.prompt("c1", "hello", crid="cr-used"))
    return h, lambda text: h.prompt("c1", text, crid="cr-used")


def _stale_generation() -> Arranged:
    h, _ = _controlled()
    return h, lambda text: h.prompt("c1", text, generation=h.core.generation - 1)


def _observer() -> Arranged:
    h = Harness()
    h.observe("c1")
    return h, lambda text: h.prompt("c1", text)


def _slot_held() -> Arranged:
    h, send = _controlled()
    admitted(send("first"))
    return h, send


def _file_moved() -> Arranged:
    # The takeover check verified the file (its header and Pi's startup append); then another writer
    # renamed a copy over it: the prompt's look shows another inode (`_core_drift` rule 6, issue 27).
    h, _ = _controlled(drift=DriftConfig(SID))
    h.feed(TimerFired(DRIFT_START))
    listed = [{"type": "model_change", "id": "31125ff3", "parentId": None, "timestamp": "2026-11-30T02:46:18.000Z",
               "provider": "fakeprov", "modelId": "fake-model-1"}]
    h.respond("get_entries", data={"entries": listed, "leafId": "31125ff3"})
    data = b"".join(json.dumps(x, separators=(",", ":")).encode() + b"\n" for x in (
        {"type": "session", "version": 3, "id": SID, "timestamp": "2026-11-30T02:46:17.936Z", "cwd": "/p"}, *listed))
    h.finish_effect(h.effect(READ_SESSION)[-1], ok=True, file=SessionBytes(data, FileIdentity(1, 7, len(data))))
    assert h.core.drift_verdict is not None and not h.core.drift_verdict.drift
    look = SessionStat(FileIdentity(1, 8, len(data)))
    return h, lambda text: h.prompt("c1", text, session=look)


ADMISSION_CASES: dict[str, dict[str, Callable[[], Arranged]]] = {
    "admitted-connection": {"channel": _unadmitted},
    "hello-first": {"malformed": _hello_after_a_request},
    "verified": {"unsupported-capability": _unverified_command},
    "scope": {"scope": _grant_elsewhere},
    "grant": {"capability": _observe_only},
    "incarnation": {"stale-incarnation": _old_incarnation},
    "client-request-id": {"malformed": _bad_request_id},
    "dedup": {"conflicting-request": _used_request_id},
    "control": {"generation": _stale_generation, "controller": _observer},
    "open-admission": {"preflight": lambda: _recovery_control(fences={"preflight": "no session file"}),
                       "session-drift": lambda: _recovery_control(fences={"session-drift": "not-prefix: x"}),
                       "fenced": lambda: _recovery_control(fences={"transport": "EPIPE"})},
    "slot": {"busy": _slot_held},
    "text": {"draft": _controlled, "text-policy": _controlled},
    "session-file": {"session-drift": _file_moved},
}


def test_rule1_the_admission_tables_in_order_each_check_refuses_with_its_code_and_zero_engine_bytes() -> None:
    # The test walks the tables the core walks (`_core_admission`): the gate every call passes, then a
    # prompt's admission, in the order of rule 1 (seed README "Refusals").
    rows = [*CALL_GATE, *PROMPT_ADMISSION]
    assert [r.name for r in rows] == ["admitted-connection", "hello-first", "verified", "scope", "grant",
                                      "incarnation", "client-request-id", "dedup", "control", "open-admission",
                                      "slot", "text", "session-file"]
    assert list(ADMISSION_CASES) == [r.name for r in rows]
    assert [c for r in rows for c in r.codes] == [
        "channel", "malformed", "unsupported-capability", "scope", "capability", "stale-incarnation",
        "malformed", "conflicting-request", "generation",
        "controller", "preflight", "session-drift", "fenced", "busy", "draft", "text-policy", "session-drift"]
    for row in rows:
        assert list(ADMISSION_CASES[row.name]) == list(row.codes), row.name
        for code, arrange in ADMISSION_CASES[row.name].items():
            h, send = arrange()
            before = bytes(h.engine_bytes)
            # every row before the text policy sees "/goal x"; the row after it, text the policy passes
            text = "" if code == "draft" else "hello" if row.name == "session-file" else SLASH
            refused(send(text), code)
            assert bytes(h.engine_bytes) == before, (row.name, code)  # refused: zero engine bytes


# ------------------------------------------------------------------------------------- control (§5)

def test_S5_an_observers_prompt_is_refused_controller_with_zero_engine_bytes() -> None:
    h = Harness()
    h.observe("c1")
    refused(h.prompt("c1", "pasted text\n"), "controller")
    assert h.engine_bytes == b""


def test_H1_two_takeovers_with_the_same_expected_generation_one_wins() -> None:
    h = Harness()
    h.observe("a")
    h.observe("b")
    gen = h.core.generation
    first = h.call("a", "takeover", expectedGeneration=gen)
    second = h.call("b", "takeover", expectedGeneration=gen)
    assert isinstance(first, dict) and first["generation"] == gen + 1
    refused(second, "generation")
    assert h.core.controller == "a" and h.core.generation == gen + 1


def test_H2_the_old_controllers_prompt_after_a_takeover_is_refused_with_zero_bytes() -> None:
    h = Harness()
    h.controller("a")
    old_gen = h.core.generation
    h.observe("b")
    assert isinstance(h.call("b", "takeover", expectedGeneration=old_gen), dict)
    refused(h.prompt("a", "late", generation=old_gen), "generation")
    assert h.engine_bytes == b""


def test_H4_self_takeover_is_refused() -> None:
    h = Harness()
    h.controller("a")
    refused(h.call("a", "takeover", expectedGeneration=h.core.generation), "already-controller")


def test_mutant1_a_stale_generation_from_the_controlling_connection_is_refused() -> None:
    # The connection IS the controller, but it sends the generation it had before its own second takeover:
    # only the generation recheck refuses it (brief mutant 1).
    h = Harness()
    h.controller("a")
    stale = h.core.generation
    h.observe("b")
    h.call("b", "takeover", expectedGeneration=stale)
    h.call("a", "takeover", expectedGeneration=h.core.generation)
    assert h.core.controller == "a"
    refused(h.prompt("a", "hello", generation=stale), "generation")
    assert h.engine_bytes == b""


def test_H15_a_revoked_connection_is_refused_every_command() -> None:
    h = Harness()
    h.controller("a")
    gen = h.core.generation
    h.observe("b")
    h.call("b", "takeover", expectedGeneration=gen)
    refused(h.call("a", "interrupt", generation=gen), "generation")
    refused(h.call("a", "interrupt", generation=h.core.generation), "controller")
    refused(h.call("a", "issue-confirmation", operation="force-stop"), "controller")
    assert h.engine_bytes == b""


def test_H11_disconnect_never_releases_control() -> None:
    h = Harness()
    h.controller("a")
    admitted(h.prompt("a", "work"))
    h.disconnect("a")
    assert h.core.controller == "a"  # control stays with the disconnected connection
    binding = h.core.binding_record()
    assert binding["controllerConnection"] == "a" and binding["controllerConnected"] is False
    h.turn("work")  # work continues
    assert h.receipt()["state"] == "finished"
    h.observe("b")
    refused(h.prompt("b", "mine now?"), "controller")  # nothing happened automatically
    assert isinstance(h.call("b", "takeover", expectedGeneration=h.core.generation), dict)  # only explicitly
    assert not h.effect("claim-uncertain")


def test_H18_two_prompts_before_any_output_the_second_refuses_busy_one_engine_write() -> None:
    h = Harness()
    h.controller()
    admitted(h.prompt("c1", "one"))
    refused(h.prompt("c1", "two"), "busy")
    assert h.written_types() == ["prompt"]


def test_N13_prompt_after_an_external_runs_agent_start_is_busy_with_zero_bytes() -> None:
    h = Harness()
    h.controller()
    h.engine(*run_start("an extension's follow-up"))  # an external run: no ack of ours before it
    refused(h.prompt("c1", "mine"), "busy")
    assert h.engine_bytes == b""
    h.engine(*run_end("Hello from the fake model."))
    admitted(h.prompt("c1", "mine"))


def test_mutant15_the_slot_is_held_until_reconciliation_not_released_at_agent_start() -> None:
    h = Harness()
    h.controller()
    admitted(h.prompt("c1", "first"))
    h.respond("prompt")
    h.engine({"type": "agent_start"})
    # The run started; the slot is still held until it settles (brief mutant 15 releases it here) ...
    assert h.core.slot is not None and h.core.binding_record()["engineState"] == "streaming"
    h.engine(*run_start("first")[1:], *run_end("Hello from the fake model."))
    # ... and reconciliation settles the item's receipt as it frees the slot.
    assert h.core.slot is None and h.receipt()["state"] == "finished"
    admitted(h.prompt("c1", "second"))


def test_busy_while_a_prompt_holds_the_slot_even_after_the_run_started() -> None:
    h = Harness()
    h.controller()
    admitted(h.prompt("c1", "first"))
    h.respond("prompt")
    h.engine({"type": "agent_start"})
    refused(h.prompt("c1", "second"), "busy")
    assert h.written_types() == ["prompt", "get_state"]


# -------------------------------------------------------------------- dedup and incarnation (§1)

def test_H12_exact_retry_after_reconnecting_returns_the_same_receipt_no_second_dispatch() -> None:
    h = Harness()
    h.controller("a")
    first = admitted(h.prompt("a", "hello", crid="req-1"))
    h.disconnect("a")
    h.observe("a2")  # the same client, reconnected: a new connection, an observer
    again = h.call("a2", "prompt", text="hello", clientRequestId="req-1", generation=h.core.generation)
    assert isinstance(again, dict) and again["outcome"] == "duplicate"
    assert again["request"]["request"] == first["request"]["request"]
    assert h.written_types() == ["prompt"]


def test_H13_retry_with_the_same_request_id_and_other_text_is_refused() -> None:
    h = Harness()
    h.controller()
    admitted(h.prompt("c1", "hello", crid="req-1"))
    refused(h.prompt("c1", "hello!", crid="req-1"), "conflicting-request")
    assert h.written_types() == ["prompt"]


def test_H21_a_retry_with_the_old_incarnation_token_is_refused_with_no_second_write() -> None:
    # The first controller dispatched and crashed; the restarted one has a new token and an empty index.
    old = Harness()
    old.controller()
    admitted(old.prompt("c1", "hello", crid="req-1"))
    new = Harness(incarnation="inc-" + "b" * 32)
    new.observe("c1")
    new.call("c1", "takeover", expectedGeneration=new.core.generation, incarnation="inc-" + "b" * 32)
    retry = new.call("c1", "prompt", incarnation=INCARNATION, text="hello", clientRequestId="req-1",
                     generation=new.core.generation)
    refused(retry, "stale-incarnation")
    assert new.engine_bytes == b""  # mutant 20 (no token check) writes it here


def test_H22_after_H21_a_new_request_under_the_new_token_is_admitted() -> None:
    new = Harness(incarnation="inc-" + "b" * 32)
    new.observe("c1")
    token = new.observe("c1")["incarnation"]
    assert token == "inc-" + "b" * 32
    new.call("c1", "takeover", expectedGeneration=new.core.generation, incarnation=token)
    result = new.call("c1", "prompt", incarnation=token, text="hello again", clientRequestId="req-2",
                      generation=new.core.generation)
    admitted(result)
    assert new.written_types() == ["prompt"]


def test_every_command_but_observe_needs_the_current_token() -> None:
    h = Harness()
    h.observe("c1")
    for method, params in (("takeover", {"expectedGeneration": 1}), ("interrupt", {"generation": 1}),
                           ("issue-confirmation", {"operation": "force-stop"}),
                           ("acquire-recovery-control", {}),
                           ("prompt", {"text": "x", "clientRequestId": "r", "generation": 1})):
        refused(h.call("c1", method, incarnation="inc-old", **params), "stale-incarnation")
    assert h.engine_bytes == b""


def test_malformed_client_request_id_is_refused() -> None:
    h = Harness()
    h.controller()
    refused(h.prompt("c1", "hello", crid="not an id!"), "malformed")
    assert h.engine_bytes == b""


def test_prompt_record_on_the_engine_is_exactly_the_pi_prompt_command() -> None:
    h = Harness()
    h.controller()
    admitted(h.prompt("c1", "Say hello"))
    line = bytes(h.engine_bytes)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == {"id": json.loads(line)["id"], "type": "prompt", "message": "Say hello"}


def test_H12_H13_over_many_prompts_requests_leave_memory_and_an_exact_retry_still_gets_its_receipt() -> None:
    """Only the unsettled request and the last 32 settled stay in memory (observe repeats those); an older
    one leaves but for its digest and final records, so an exact retry still gets the same receipt and no
    second write (H12), and other text under its id is still refused (H13)."""
    h = Harness()
    h.controller()
    first = None
    for n in range(100):
        result = admitted(h.prompt("c1", f"prompt {n}", crid=f"req-{n}"))
        first = first or result
        h.turn(f"prompt {n}")
    assert len(h.core.requests) == 32
    receipts = h.observe("c2")["receipts"]
    assert [r["clientRequest"] for r in receipts] == [f"req-{n}" for n in range(68, 100)]
    written = bytes(h.engine_bytes)
    again = h.prompt("c1", "prompt 0", crid="req-0")
    assert again["outcome"] == "duplicate" and again["receipt"]["state"] == "finished"
    assert again["request"] == first["request"] and again["receipt"]["request"] == first["request"]["request"]
    refused(h.prompt("c1", "other text", crid="req-0"), "conflicting-request")
    assert bytes(h.engine_bytes) == written  # no second dispatch
