"""The committed stream-json recordings of the pinned binary (brief §8 B1 part 3), read as evidence.

Each test states a fact of Claude Code 2.1.283 as the recording shows it (docs/claude-2.1.283.md
"stream-json"): initialize's answer and whether `pending_permission_requests` exists, the capabilities
(whether `interrupt_cancel_queued_v1` exists), a text and an image prompt, a can_use_tool allow and deny,
interrupts mid-stream and while a permission is pending. The smoke suite makes them again from the binary
and compares their shapes (tests_smoke/test_recordings_real.py). Also here: the generator's helpers
(redaction, shapes, the slug, the PNG).
"""

from __future__ import annotations

import base64
import json
import re
import struct
import zlib
from typing import Any

import pytest
from helpers import RECORDINGS, manifest_rows

from mosaic.claude_rpc.testing.recordings import QUEUED_UUID, png_square, redact, shape, slug
from mosaic.claude_rpc.testing.recordings import RECORDINGS as MADE

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def load(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (RECORDINGS / f"{name}.jsonl").read_text().splitlines()]


def outs(records: list[dict[str, Any]], kind: str, subtype: str | None = None) -> list[dict[str, Any]]:
    return [r["msg"] for r in records if r["dir"] == "out" and r["msg"].get("type") == kind
            and (subtype is None or r["msg"].get("subtype") == subtype)]


def facts(name: str) -> dict[str, Any]:
    return dict(manifest_rows()[f"claude-2.1.283/recordings/{name}.jsonl"])


def test_every_recording_is_committed_redacted_and_one_direction_and_message_per_line() -> None:
    assert sorted(p.stem for p in RECORDINGS.glob("*.jsonl")) == sorted(r.name for r in MADE)
    for rec in MADE:
        text = (RECORDINGS / f"{rec.name}.jsonl").read_text()
        assert "/tmp/mosaic-claude-fixtures" not in text and "sk-ant-fake" not in text, rec.name
        for record in load(rec.name):
            assert set(record) == {"dir", "msg"} and record["dir"] in ("in", "out")
            assert isinstance(record["msg"], dict) and record["msg"].get("type") != "__unparsed__"
        assert facts(rec.name)["scenario"] == rec.scenario


def test_initialize_answers_success_with_no_pending_permission_requests_at_idle() -> None:
    records = load("initialize")
    assert shape(records) == [("in", "control_request", "initialize"), ("out", "control_response", "success")]
    answer = records[1]["msg"]["response"]
    assert answer["request_id"] == "req_1"
    body = answer["response"]
    assert "pending_permission_requests" not in body and body["session_state"] == "idle"
    assert body["current_permission_mode"] == "default" and body["analytics_disabled"] is True
    assert facts("initialize")["exit_code"] == 0 and facts("initialize")["facts"]["model_requests"] == []


def test_the_init_message_lists_the_capabilities_including_interrupt_cancel_queued_v1() -> None:
    records = load("text")
    init = outs(records, "system", "init")
    assert len(init) == 1
    caps = init[0]["capabilities"]
    assert caps == ["interrupt_receipt_v1", "interrupt_cancel_queued_v1", "msg_lifecycle_v1", "mcp_read_resource_v1",
                    "mcp_tool_ui_meta_v1"]
    assert init[0]["claude_code_version"] == "2.1.283" and init[0]["cwd"] == "<scratch>/proj"
    assert init[0]["analytics_disabled"] is True and init[0]["product_feedback_disabled"] is True
    assert init[0]["apiKeySource"] == "ANTHROPIC_API_KEY"


def test_a_text_prompt_gets_init_assistant_and_a_success_result() -> None:
    records = load("text")
    assert [k for d, *k in shape(records) if d == "out"][1:] == [["system", "init"], ["assistant", ""],
                                                                  ["result", "success"]]
    result = outs(records, "result")[0]
    assert result["result"] == "Reply to: hello text" and result["is_error"] is False
    sent = [r["msg"] for r in records if r["dir"] == "in" and r["msg"]["type"] == "user"]
    assert sent[0]["message"] == {"role": "user", "content": "hello text"} and sent[0]["session_id"] == "default"
    assert UUID.fullmatch(result["session_id"])  # the binary's own id, not the "default" the client sent


def test_an_image_prompt_reaches_the_model_as_an_image_block() -> None:
    records = load("image")
    sent = [r["msg"] for r in records if r["dir"] == "in" and r["msg"]["type"] == "user"][0]
    image = sent["message"]["content"][1]
    assert image["type"] == "image" and image["source"]["media_type"] == "image/png"
    assert base64.b64decode(image["source"]["data"]) == png_square()
    result = outs(records, "result")[0]
    assert result["result"] == f"IMAGE seen: base64 image/png {len(image['source']['data'])} b64 chars"


@pytest.mark.parametrize("verdict", ["allow", "deny"])
def test_can_use_tool_asks_with_widening_suggestions_and_the_answer_decides(verdict: str) -> None:
    records = load(f"permission-{verdict}")
    request = outs(records, "control_request")[0]
    assert UUID.fullmatch(request["request_id"])  # made by the binary
    body = request["request"]
    assert (body["subtype"], body["tool_name"], body["input"]["command"]) == ("can_use_tool", "Bash",
                                                                             f"touch made-by-{verdict}")
    assert [s["type"] for s in body["permission_suggestions"]] == ["addRules", "addDirectories", "setMode"]
    answer = [r["msg"] for r in records if r["dir"] == "in" and r["msg"]["type"] == "control_response"][0]
    assert answer["response"]["request_id"] == request["request_id"]
    results = [b for m in outs(records, "user") for b in m["message"]["content"] if b.get("type") == "tool_result"]
    assert len(results) == 1 and results[0]["is_error"] is (verdict == "deny")
    if verdict == "deny":
        assert results[0]["content"] == "denied by the test client"
    assert outs(records, "result")[-1]["subtype"] == "success" and facts(f"permission-{verdict}")["exit_code"] == 0


def test_an_interrupt_mid_stream_ends_the_turn_and_the_queued_message_then_runs() -> None:
    records = load("interrupt-mid-stream")
    answer = [m for m in outs(records, "control_response") if m["response"]["request_id"] == "req_int"][0]
    assert answer["response"]["response"] == {"still_queued": []}
    results = outs(records, "result")
    assert [r["subtype"] for r in results] == ["error_during_execution", "success"]
    assert results[0]["stop_reason"] is None and results[1]["result"] == "Reply to: queued while busy"
    texts = [b.get("text") for m in outs(records, "user") for b in m["message"]["content"] if isinstance(b, dict)]
    assert "[Request interrupted by user]" in texts
    assert facts("interrupt-mid-stream")["exit_code"] == 0


def test_an_interrupt_with_cancel_queued_cancels_the_uuid_stamped_message() -> None:
    records = load("interrupt-cancel-queued")
    answer = [m for m in outs(records, "control_response") if m["response"]["request_id"] == "req_int"][0]
    assert answer["response"]["response"] == {"still_queued": [], "cancelled": [QUEUED_UUID]}
    assert [r["subtype"] for r in outs(records, "result")] == ["error_during_execution"]
    assert outs(records, "command_lifecycle"), "the cancel is announced as command lifecycle messages"
    made = facts("interrupt-cancel-queued")
    assert made["facts"]["queued_message_reached_model"] is False and made["exit_code"] == 1


def test_an_interrupt_while_a_permission_is_pending_cancels_it_and_a_late_answer_does_nothing() -> None:
    records = load("interrupt-pending-permission")
    request = outs(records, "control_request")[0]
    again = [m for m in outs(records, "control_response") if m["response"]["request_id"] == "req_2"][0]
    assert again["response"]["response"]["session_state"] == "requires_action"
    assert "pending_permission_requests" not in again["response"]["response"]
    cancel = outs(records, "control_cancel_request")
    assert cancel == [{"type": "control_cancel_request", "request_id": request["request_id"]}]
    result = outs(records, "result")[0]
    assert (result["subtype"], result["stop_reason"]) == ("error_during_execution", "tool_use")
    assert records[-1]["dir"] == "in" and records[-1]["msg"]["response"]["request_id"] == request["request_id"]
    made = facts("interrupt-pending-permission")
    assert made["facts"]["late_allow_output"] == [] and made["facts"]["pending_file_created"] is False
    assert made["exit_code"] == 1


def test_redaction_replaces_the_scratch_path_and_its_slug_everywhere() -> None:
    scratch = "/tmp/mosaic-claude-fixtures/recordings/text"
    value = {"cwd": f"{scratch}/proj", "k": [f"x {slug(scratch)}-proj y"], f"{scratch}/key": 1, "n": 2}
    assert redact(value, scratch) == {"cwd": "<scratch>/proj", "k": ["x <scratch-slug>-proj y"],
                                      "<scratch>/key": 1, "n": 2}


def test_the_slug_replaces_every_utf16_unit_outside_ascii_letters_and_digits() -> None:
    assert slug("/tmp/a.b/.hidden dir") == "-tmp-a-b--hidden-dir"
    assert slug("/x/unicode é") == "-x-unicode--" and slug("/x/emoji\U0001F600x") == "-x-emoji--x"
    with pytest.raises(ValueError):
        slug("/" + "a" * 250)


def test_the_png_is_a_valid_image_of_the_size_asked() -> None:
    data = png_square(16)
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (16, 16)
    length = struct.unpack(">I", data[33:37])[0]
    assert data[37:41] == b"IDAT" and len(zlib.decompress(data[41:41 + length])) == 16 * (1 + 3 * 16)
