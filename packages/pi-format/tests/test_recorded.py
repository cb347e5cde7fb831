"""The files recorded from the real Pi 0.85.1 (tests/data: copies of the Pi study's recording, docs/pi-0.85.1.md)."""

from __future__ import annotations

import json

import pytest
from helpers import DATA, PROJECT, check_invariants, ok, repo, texts

from mosaic.pi_format import FormatRefusal, parse
from mosaic.pi_format.model import TextBlock, ToolCallBlock

RECORDED = ["session-main-final.jsonl", "empty.jsonl", "mid-eof.jsonl", "mid-sigterm.jsonl", "nothink.jsonl"]


def load(name: str) -> bytes:
    return (DATA / name).read_bytes()


def test_recorded_copies_match_the_shared_originals() -> None:
    shared = repo().parent / "shared" / "pi-0.85.1" / "recording"
    if not shared.is_dir():
        pytest.skip(f"LOUD SKIP: {shared} is missing, so the copies in tests/data cannot be compared with it")
    assert load("session-main-final.jsonl") == (shared / "session-main-final.jsonl").read_bytes()
    assert load("session-main-final.jsonl") == (shared / "sessions" / "x.jsonl").read_bytes()
    for name in RECORDED[1:]:
        assert load(name) == (shared / "sessions" / name).read_bytes(), name


@pytest.mark.parametrize("name", RECORDED)
def test_every_recorded_file_parses_inside_its_project(name: str) -> None:
    p = ok(parse(load(name), project=PROJECT))
    check_invariants(p)
    assert not p.incomplete and p.unreadable_lines == ()
    assert isinstance(parse(load(name), project="/other/proj"), FormatRefusal)


def test_main_recording_is_one_chain_with_every_role() -> None:
    p = ok(parse(load("session-main-final.jsonl"), project=PROJECT))
    assert list(p.branches) == ["main"] and p.default_branch == "main"
    main = p.branches["main"]
    assert (main.start, main.leaf, p.default_leaf) == ("n.31125ff3", "n.49f6c33c", "n.49f6c33c")
    assert len(p.entries) == 30 and p.line_count == 31
    # model_change and thinking_level_change (lines 2-3) are hidden; lines 4-31 show.
    assert main.entry_ids[:2] == ("n.31125ff3", "n.cc74895f")
    items = main.items
    assert len(items) == 28 and [i.line for i in items] == list(range(4, 32))
    assert [i.kind for i in items[:6]] == ["user", "assistant", "user", "assistant", "toolResult", "assistant"]
    assert items[3].blocks == (ToolCallBlock("call_fake_2", "bash", {"command": "printf tool-ran-ok"}),)
    assert items[4].attrs["toolCallId"] == "call_fake_2" and items[4].blocks == (TextBlock("tool-ran-ok"),)
    assert items[22].blocks == (TextBlock("line\u2028sep and para\u2029sep"),)  # line 26, raw separators
    assert items[24].kind == "bashExecution" and items[24].attrs["exitCode"] == 0  # line 28
    assert items[26].attrs["stopReason"] == "error" and items[26].blocks == ()  # line 30, HTTP 500
    assert items[27].attrs["stopReason"] == "stop" and p.entries["n.49f6c33c"].parent == "n.15e6ce9d"
    aborted = [i.line for i in items if i.attrs.get("stopReason") == "aborted"]
    assert aborted == [11, 13, 17]


def test_empty_recording_has_main_with_only_hidden_entries() -> None:
    p = ok(parse(load("empty.jsonl")))
    assert list(p.branches) == ["main"] and p.branches["main"].items == ()
    assert p.branches["main"].leaf == "n.66e86a11" and p.default_leaf == "n.66e86a11"
    assert len(p.branches["main"].entry_ids) == 4


@pytest.mark.parametrize(("name", "leaf", "text"), [("mid-eof.jsonl", "n.850bcdc0", "SLOW then eof"),
                                                     ("mid-sigterm.jsonl", "n.1f637c06", "SLOW then sigterm")])
def test_interrupted_recordings_end_with_the_user_entry(name: str, leaf: str, text: str) -> None:
    p = ok(parse(load(name)))
    assert p.default_leaf == leaf and list(p.branches) == ["main"]
    assert texts(p, "main") == ["n.2799c088:Say hello", "n.5628b76c:Hello from the fake model.", f"{leaf}:{text}"]


def test_facts_run_K3_duplicate_id_recording_later_entry_wins_as_in_pis_context() -> None:
    # FACTS.md (c): Pi's get_messages gave ["hi", "DUPLICATE-ID-LATER"] on this file.
    p = ok(parse(load("nothink.jsonl")))
    assert p.default_leaf == "n.d4f75227" and p.default_branch == "b.aaaa0002"
    assert texts(p, p.default_branch) == ["n.aaaa0001:hi", "n.aaaa0002:DUPLICATE-ID-LATER"]
    assert p.branches["b.aaaa0002"].entry_ids == ("n.aaaa0001", "n.aaaa0002", "n.d4f75227")
    assert texts(p, "main") == ["n.aaaa0001:hi", "n.aaaa0003:side branch"]
    assert p.superseded_lines == (3,) and p.notices[0].code == "duplicate-id"
    assert '"text": "yo"' not in json.dumps([i.to_json() for b in p.branches.values() for i in b.items])
