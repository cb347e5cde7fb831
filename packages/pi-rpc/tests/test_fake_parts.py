"""The fake's pure parts: V8's JSON.parse messages and the session manager's tree and ids."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

# Two mechanisms of the fake engine that no caller uses directly (V8's JSON.parse messages, the session
# manager's tree and id shapes), made public in its module so these tests can pin them.
from mosaic.pi_rpc.internals import JsonParseError, SessionFile, iso_now, js_json_parse, uuidv7

V8 = json.loads((Path(__file__).parent / "data" / "v8_json_parse.json").read_text())


@pytest.mark.parametrize(("text", "message"), V8["cases"], ids=[f"case{i}" for i in range(len(V8["cases"]))])
def test_json_parse_messages_match_node_22(text: str, message: str | None) -> None:
    if message is None:
        assert js_json_parse(text) == json.loads(text)
    else:
        with pytest.raises(JsonParseError) as info:
            js_json_parse(text)
        assert info.value.message == message


def test_json_parse_refuses_what_python_would_accept() -> None:
    for text in ("NaN", "Infinity", "-Infinity", "[1,]", "{'a':1}"):
        with pytest.raises(JsonParseError):
            js_json_parse(text)


def _entry(eid: str, parent: str | None, ts: str) -> dict[str, object]:
    return {"type": "custom", "id": eid, "parentId": parent, "timestamp": ts}


def test_tree_orphans_are_roots_children_sorted_by_time_duplicates_listed_twice(tmp_path: Path) -> None:
    sm = SessionFile(str(tmp_path / "s.jsonl"), str(tmp_path))
    sm.file_entries = [
        {"type": "session", "version": 3, "id": "x", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/"},
        _entry("a", None, "2026-01-01T00:00:01.000Z"),
        _entry("c", "a", "2026-01-01T00:00:05.000Z"),
        _entry("b", "a", "2026-01-01T00:00:02.000Z"),
        _entry("o", "missing", "2026-01-01T00:00:03.000Z"),
        _entry("b", "a", "2026-01-01T00:00:04.000Z"),
    ]
    sm._build_index()
    tree = sm.tree()
    assert [n["entry"]["id"] for n in tree] == ["a", "o"]
    kids = tree[0]["children"]
    # byId keeps the later "b" (04s); the node is pushed once per occurrence, sorted by timestamp.
    assert [(n["entry"]["id"], n["entry"]["timestamp"][17:19]) for n in kids] == [("b", "04"), ("b", "04"),
                                                                                   ("c", "05")]
    assert sm.leaf_id == "b"


def test_ids_and_timestamps_have_pi_shapes() -> None:
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", uuidv7())
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", iso_now())
