"""The load check's transcript half (K8 for Claude, README "Resume and the load check"): after ``--resume`` the
claimed session's file only grew, and the first prompt's user entry (the link's uuid) hangs on the leaf the
written rule picks, directly, or through the one synthetic entry the binary adds when the last turn was
interrupted. The transcripts are the two reads the sealed resume recordings made of the binary's file
(cut to the fields the check reads, ids renamed consistently: ``fixtures/MANIFEST.json``); the refusals
below change one thing each in those real transcripts."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from helpers import manifest_rows

from mosaic.claude_rpc.resume import SYNTHETIC_MODEL, check_resumed, leaf_by_rule
from mosaic.claude_rpc.testing.recordings import SESSION_UUID, U2


def reads(name: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    transcript = manifest_rows()[f"claude-2.1.283/recordings/{name}.jsonl"]["facts"]["transcript"]
    return transcript["before"], transcript["before"] + transcript["added"]


def test_K8_a_clean_resume_hangs_the_first_prompt_directly_on_the_leaf() -> None:
    before, after = reads("sealed-resume")
    check = check_resumed(before, after, session_id=SESSION_UUID, message_uuid=U2)
    assert check.ok and check.synthetic == () and check.leaf == leaf_by_rule(before)[1]
    assert leaf_by_rule(before)[0] == "last-prompt"


def test_K8_after_an_interrupted_turn_the_binary_closes_it_with_one_synthetic_entry_and_the_check_accepts_it() -> None:
    before, after = reads("sealed-resume-after-interrupt")
    _rule, leaf = leaf_by_rule(before)
    assert next(e for e in before if e.get("uuid") == leaf)["type"] == "user"  # the interruption note
    check = check_resumed(before, after, session_id=SESSION_UUID, message_uuid=U2)
    assert check.ok and check.leaf == leaf and len(check.synthetic) == 1
    closing = next(e for e in after if e.get("uuid") == check.synthetic[0])
    assert closing["message"] == {"model": SYNTHETIC_MODEL, "content": [{"type": "text", "text": "No response requested."}]}


def _entry(lines: list[dict[str, Any]], uid: str) -> dict[str, Any]:
    return next(e for e in lines if e.get("uuid") == uid)


@pytest.mark.parametrize("name", ["sealed-resume", "sealed-resume-after-interrupt"])
def test_K8_the_check_refuses_a_prompt_on_another_entry_a_rewritten_file_another_session_or_no_prompt(name: str) -> None:
    before, after = reads(name)
    other = next(e["uuid"] for e in before if isinstance(e.get("uuid"), str) and e["uuid"] != leaf_by_rule(before)[1])
    moved = copy.deepcopy(after)
    _entry(moved, U2)["parentUuid"] = other
    assert not check_resumed(before, moved, session_id=SESSION_UUID, message_uuid=U2).ok
    rewritten = copy.deepcopy(after)
    rewritten[0] = {**rewritten[0], "sessionId": "x"}
    assert not check_resumed(before, rewritten, session_id=SESSION_UUID, message_uuid=U2).ok
    assert not check_resumed(before, after, session_id="00000000-0000-4000-8000-0000000000ff", message_uuid=U2).ok
    assert not check_resumed(before, after, session_id=SESSION_UUID, message_uuid="00000000-0000-4000-8000-0000000000aa").ok
    assert not check_resumed([], after, session_id=SESSION_UUID, message_uuid=U2).ok


def test_K8_only_a_synthetic_entry_may_stand_between_the_leaf_and_the_prompt() -> None:
    before, after = reads("sealed-resume-after-interrupt")
    check = check_resumed(before, after, session_id=SESSION_UUID, message_uuid=U2)
    real_model = copy.deepcopy(after)
    _entry(real_model, check.synthetic[0])["message"]["model"] = "claude-opus-5-5"
    refused = check_resumed(before, real_model, session_id=SESSION_UUID, message_uuid=U2)
    assert not refused.ok and "not on the leaf" in refused.reason
