"""F10 (pages and their limits) and F12 (branches: the default leaf, other branches by name)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from helpers import (
    FIXTURE_DIRS,
    World,
    assemble,
    entry,
    expected_items,
    header,
    materialise,
    utf16_units,
    write_session,
)

# The F10 tests that call `fragments` test the cutting itself, at the exact 262,144-unit boundary and for
# any text, which no page shows as directly (callers only concatenate fragment values).
from mosaic.chat_pages.parts import (
    MAX_FRAGMENT_JSON,
    MAX_STRING_UNITS,
    dump_bytes,
    dumps,
)
from mosaic.chat_pages.testing import (
    encoded_parts,
    fragments,
    general_parts_path,
    json_encodes,
    part_encodes,
    part_from_json,
    sized_parts,
)

REFUSED_HEADERS = {
    "cwd-dotdot.jsonl", "cwd-missing.jsonl", "cwd-outside.jsonl", "cwd-relative.jsonl", "empty.jsonl",
    "header-bom.jsonl", "header-no-id.jsonl", "header-v1.jsonl", "not-header-first.jsonl",
    "truncated-header-lf.jsonl", "truncated-header.jsonl",
}


def test_F10_F12_every_fixture_branch_reads_back_exactly_as_pi_format_renders_it(world: World) -> None:
    """Every branch of every readable fixture, page by page: reassembled parts equal pi-format's items."""
    checked = 0
    for proj in ("proj-rpc", "proj-sm", "proj-adv"):
        root = materialise(world.top, proj)
        world.approve(root)
        sessions = root / ".pi/state/alpha/sessions"
        for name in sorted(os.listdir(sessions)):
            if name in REFUSED_HEADERS:
                continue
            data = (sessions / name).read_bytes()
            cid = world.cid(root, name)
            first = world.open(cid)
            assert first["ok"], (name, first)
            for b in first["view"]["branches"]:
                parts, last = world.read_all(cid, b["name"])
                assert last["page"]["branch"] == b["name"]
                assert assemble(parts) == expected_items(data, os.path.realpath(root), b["name"]), (name, b)
                checked += 1
    assert checked >= 50


def test_F12_open_shows_the_default_branch_and_other_branches_open_by_name(world: World) -> None:
    root = materialise(world.top, "proj-sm", ["forks.jsonl"])
    world.approve(root)
    cid = world.cid(root, "forks.jsonl")
    res = world.open(cid)
    view = res["view"]
    names = [b["name"] for b in view["branches"]]
    assert len(names) >= 4 and names[0] == "main"
    # FACTS (c): the default leaf is the last valid entry in file order; forks.jsonl ends on the summary branch.
    assert view["defaultBranch"] != "main"
    assert res["page"]["branch"] == view["defaultBranch"]
    for name in names:
        other = world.open(cid, name)
        assert other["ok"] and other["page"]["branch"] == name
    bad = world.open(cid, "b.nope")
    assert bad == {"ok": False, "refusal": {"code": "unknown-branch", "reconcile": True,
                                             "message": bad["refusal"]["message"]}}
    assert world.open(cid, 42)["refusal"]["code"] == "unknown-branch"  # type: ignore[arg-type]


def test_F10_at_most_100_parts_per_page(world: World) -> None:
    root = materialise(world.top, "proj-sm", ["long.jsonl"])
    world.approve(root)
    cid = world.cid(root, "long.jsonl")
    res = world.open(cid)
    assert len(res["page"]["parts"]) == 100 and res["cursor"] is not None
    parts, last = world.read_all(cid)
    assert len(parts) > 1000 and last["follow"] is not None and last["cursor"] is None


def test_F10_strings_fragment_at_262144_units_and_1_MiB_of_json_never_clipped(world: World) -> None:
    root = materialise(world.top, "proj-adv", ["huge-string.jsonl", "huge-astral.jsonl"])
    world.approve(root)
    for name in ("huge-string.jsonl", "huge-astral.jsonl"):
        data = (root / ".pi/state/alpha/sessions" / name).read_bytes()
        parts, _ = world.read_all(world.cid(root, name))
        frags = [b for p in parts for b in p["blocks"] if b["kind"] == "fragment"]
        assert frags, "the huge strings must be carried as fragments"
        for f in frags:
            assert utf16_units(f["value"]) <= MAX_STRING_UNITS
            assert len(dump_bytes(f["value"])) <= MAX_FRAGMENT_JSON
        assert assemble(parts) == expected_items(data, os.path.realpath(root))
    # The 600,000-character text is cut at exactly 262,144 characters; the U+0001 text at 1 MiB of JSON.
    parts, _ = world.read_all(world.cid(root, "huge-string.jsonl"))
    sizes = [len(b["value"]) for p in parts for b in p["blocks"] if b["kind"] == "fragment"]
    assert MAX_STRING_UNITS in sizes
    ctrl = [b["value"] for p in parts for b in p["blocks"] if b["kind"] == "fragment" and b["value"][:1] == "\x01"]
    assert ctrl and all(len(dump_bytes(v)) <= MAX_FRAGMENT_JSON for v in ctrl)
    assert max(len(dump_bytes(v)) for v in ctrl) > MAX_FRAGMENT_JSON - 16


def test_F10_a_surrogate_pair_is_never_cut_at_the_262144_unit_boundary() -> None:
    text = "a" * (MAX_STRING_UNITS - 1) + "\U0001f600" + "b" * 10
    frags = fragments(text)
    assert "".join(frags) == text
    assert frags[0] == "a" * (MAX_STRING_UNITS - 1)  # the pair would straddle unit 262,144: it moves on whole
    assert frags[1].startswith("\U0001f600")
    astral = "\U0001f600" * 300_000
    frags = fragments(astral)
    assert "".join(frags) == astral
    assert all(utf16_units(f) <= MAX_STRING_UNITS for f in frags)
    assert all(not ("\ud800" <= f[-1] <= "\udfff") for f in frags)


def test_F10_a_fragment_ends_exactly_at_262144_units_or_one_short_where_a_pair_straddles_it() -> None:
    # Each fragment but the last is as long as the limit allows: exactly 262,144 UTF-16 units,
    # or 262,143 when the next character is a surrogate pair that would straddle unit 262,144 (it moves on
    # whole). Mixed texts where a proportional shrink would land short of the limit.
    pair = "\U0001f600"
    texts = {
        "lands exactly on a pair": pair * (MAX_STRING_UNITS // 2) + "b" * 3,
        "pair straddles 262,144": pair * (MAX_STRING_UNITS // 2 - 1) + "a" + pair * 5,
        "one BMP, one pair": ("a" + pair) * 100_000,
        "two BMP, one pair": ("ab" + pair) * 80_000,
        "pairs then BMP": pair * 100_000 + "c" * 200_000 + pair * 70_000,
        "lone surrogates are one unit each": ("\ud800" + pair + "x") * 70_000,
    }
    for name, text in texts.items():
        frags = fragments(text)
        assert "".join(frags) == text, name
        assert len(frags) >= 2, name
        for f, following in zip(frags, frags[1:], strict=False):
            units = utf16_units(f)
            straddles = units == MAX_STRING_UNITS - 1 and utf16_units(following[0]) == 2
            assert units == MAX_STRING_UNITS or straddles, (name, units)
    frags = fragments(texts["pair straddles 262,144"])
    assert utf16_units(frags[0]) == MAX_STRING_UNITS - 1 and frags[1] == pair * 5


def test_F10_lone_surrogates_are_carried_and_the_page_is_valid_utf8(world: World) -> None:
    root = materialise(world.top, "proj-adv", ["lone-surrogates.jsonl"])
    world.approve(root)
    data = (root / ".pi/state/alpha/sessions/lone-surrogates.jsonl").read_bytes()
    parts, last = world.read_all(world.cid(root, "lone-surrogates.jsonl"))
    items = assemble(parts)
    assert items == expected_items(data, os.path.realpath(root))
    texts = "".join(b.get("text") or "" for i in items for b in i["blocks"])
    assert "\ud800" in texts and "\udfff" in texts
    raw = dump_bytes({"parts": parts})
    assert b"\\ud800" in raw and json.loads(raw) == {"parts": parts}


def test_F10_64_blocks_per_part_and_continuation_parts(world: World) -> None:
    root = world.top / "p"
    blocks = [{"type": "text", "text": f"block {i}"} for i in range(150)]
    obj = {"type": "message", "id": "m1", "parentId": None, "timestamp": "2026-11-30T09:00:01.000Z",
           "message": {"role": "user", "content": blocks}}
    write_session(root, "s.jsonl", [header(root), json.dumps(obj).encode() + b"\n"])
    world.approve(root)
    parts, _ = world.read_all(world.cid(root, "s.jsonl"))
    assert [len(p["blocks"]) for p in parts] == [64, 64, 22]
    assert [p["index"] for p in parts] == [0, 1, 2] and [p["last"] for p in parts] == [False, False, True]
    assert "attrs" in parts[0] and "attrs" not in parts[1]
    assert [b["text"] for b in assemble(parts)[0]["blocks"]] == [f"block {i}" for i in range(150)]


def test_F10_8_MiB_per_page_and_parts_of_at_most_4_MiB(world: World) -> None:
    root = world.top / "p"
    lines = [header(root), entry("big", None, "y" * 5_000_000)]  # 20 fragments: more than one 4 MiB part
    parent = "big"
    for i in range(8):
        lines.append(entry(f"e{i}", parent, "x" * 1_500_000 + str(i)))
        parent = f"e{i}"
    write_session(root, "s.jsonl", lines)
    world.approve(root)
    cid = world.cid(root, "s.jsonl")
    res = world.open(cid)
    sizes = [len(dump_bytes(res["page"]))]
    parts = list(res["page"]["parts"])
    while res["cursor"]:
        res = world.next(res["cursor"]["id"], cid, res["page"]["branch"])
        sizes.append(len(dump_bytes(res["page"])))
        parts += res["page"]["parts"]
    big = [p for p in parts if p["item"] == "n.big"]
    assert len(big) == 2 and len(dump_bytes(big[0])) > 3.5 * 1024 * 1024  # cut at 4 MiB, not before
    assert len(sizes) >= 3 and max(sizes) > 7 * 1024 * 1024  # pages fill up to 8 MiB (check_page: never over)
    data = (root / ".pi/state/alpha/sessions/s.jsonl").read_bytes()
    assert assemble(parts) == expected_items(data, os.path.realpath(root))


def test_F10_long_item_fields_continue_in_fragments_never_clipped(world: World) -> None:
    root = world.top / "p"
    long_error = "E" * 300_000
    obj = {"type": "message", "id": "a1", "parentId": None, "timestamp": "T" * 70_000,
           "message": {"role": "assistant", "errorMessage": long_error, "stopReason": "error",
                       "content": [{"type": "toolCall", "id": "call_x|fc_y", "name": "n" * 70_000,
                                    "arguments": {"cmd": "z" * 2_000_000}}]}}
    write_session(root, "s.jsonl", [header(root), json.dumps(obj).encode() + b"\n"])
    world.approve(root)
    parts, _ = world.read_all(world.cid(root, "s.jsonl"))
    assert parts[0]["timestamp"] is None and parts[0]["attrs"]["errorMessage"] is None
    assert set(parts[0]["continued"]) == {"timestamp", "attrs.errorMessage"}
    item = assemble(parts)[0]
    assert item["timestamp"] == "T" * 70_000 and item["attrs"]["errorMessage"] == long_error
    call = item["blocks"][0]
    assert call["name"] == "n" * 70_000 and json.loads(call["arguments"]) == {"cmd": "z" * 2_000_000}
    assert call["id"].startswith("h-")


def test_F10_fragments_are_exact_and_bounded_for_any_text() -> None:
    for text in ["", "a", "\x01" * 200_000, "\"\\" * 300_000, "é" * 400_000, "\ud800" * 200_000]:
        frags = fragments(text)
        assert "".join(frags) == text
        for f in frags:
            assert utf16_units(f) <= MAX_STRING_UNITS and len(dump_bytes(f)) <= MAX_FRAGMENT_JSON


def test_fixture_dirs_exist() -> None:
    for path in FIXTURE_DIRS.values():
        assert (path / ".pi/state/alpha/sessions").is_dir(), path
    assert Path(FIXTURE_DIRS["proj-sm"] / ".pi/state/alpha/sessions/long.jsonl").stat().st_size > 700_000


def test_F10_part_sizes_are_exact_and_the_fast_path_equals_the_general_one() -> None:
    """Every fixture item: the one-step path for short items gives the same parts as the general path, and
    every part's recorded size is its serialized size (the page limits are computed from those sizes)."""
    # The one-step path for short items and the general path are a mechanism no page can tell apart:
    # mosaic.chat_pages.testing turns the first off.
    from mosaic.pi_format import Parsed, parse

    items = []
    for proj in ("proj-rpc", "proj-sm", "proj-adv"):
        sessions = FIXTURE_DIRS[proj] / ".pi/state/alpha/sessions"
        for f in sorted(sessions.iterdir()):
            parsed = parse(f.read_bytes())
            if isinstance(parsed, Parsed):
                for b in parsed.branches.values():
                    items += b.items
    assert len(items) > 2000
    fast = [sized_parts(i) for i in items]
    with general_parts_path():
        slow = [sized_parts(i) for i in items]
        assert fast == slow
        for parts in fast:
            for part, size in parts:
                assert size == len(dump_bytes(part))
        # A cached part is kept as its bytes only and read back exactly (values, types, key order).
        for item in items:
            for part, raw in encoded_parts(item):
                assert raw == dump_bytes(part) and repr(part_from_json(raw)) == repr(part)


def test_F10_a_long_string_is_held_as_its_parts_bytes_not_also_as_fragment_text() -> None:
    """Issue 34 (one 20 MB line): an item whose text spans several parts is made part by part, each part's
    fragments made into text only while that part is encoded, and given back as the parts' bytes (each
    part read back when asked for), so making its parts holds about its JSON once beside the text, never
    every fragment's text as well. Counted by tracemalloc (exact for one build: what was allocated, no
    timing), with a margin of 0.25x the text either side of the bound; the parts still read back exactly."""
    import tracemalloc

    from mosaic.pi_format import Parsed, parse

    text = "word " * ((8 << 20) // 5)  # 8 MiB of ASCII: three parts of at most 4 MiB
    parsed = parse(header(Path("/p")) + entry("a", None, text))
    assert isinstance(parsed, Parsed)
    item = parsed.branches[parsed.default_branch].items_from(0, 1)[0]
    tracemalloc.start()
    try:
        parts = encoded_parts(item)
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(parts) == 3
    assert peak <= 1.8 * len(text), f"peak {peak / len(text):.2f}x the text"  # 1.55x; every fragment kept: 2.18x
    assert held <= 1.4 * len(text), f"held {held / len(text):.2f}x the text"  # 1.17x: the parts' bytes
    assert "".join(b["value"] for part, _ in parts for b in part["blocks"] if b["kind"] == "fragment") == text
    for part, raw in parts:
        assert raw == dump_bytes(part)


def test_F12_view_flags_forked_session_and_unreadable_lines(world: World) -> None:
    root = materialise(world.top, "proj-adv", ["parent-session.jsonl", "malformed-lines.jsonl"])
    world.approve(root)
    forked = world.open(world.cid(root, "parent-session.jsonl"))
    assert forked["view"]["forkedFromEarlierSession"] is True
    assert forked["page"]["parts"][0]["item"] == "x.forked"
    bad = world.open(world.cid(root, "malformed-lines.jsonl"))
    assert bad["view"]["forkedFromEarlierSession"] is False
    # Every unreadable line is covered: one [first, last] range per run, and one notice part per run.
    assert bad["view"]["unreadableLineCount"] >= 10
    ranges = bad["view"]["unreadableLines"]
    assert sum(last - first + 1 for first, last in ranges) == bad["view"]["unreadableLineCount"]
    assert len(ranges) == bad["view"]["unreadableRangeCount"]
    runs = [[p["notice"]["line"], p["notice"]["through"]] for p in bad["page"]["parts"]
            if p["item"].startswith("x.line-")]
    assert runs == ranges


def test_F10_each_part_is_serialized_once_and_its_bytes_are_the_page(world: World) -> None:
    """A part's JSON is made once, sizes the page and is the page's serialization: serializing a page never
    encodes a part again, and gives exactly the bytes of encoding the plain value."""
    # What is counted is where parts are serialized and the one encoder behind dumps/dump_bytes; no page
    # shows either, so mosaic.chat_pages.testing collects what each encodes.

    def is_part(value: Any) -> bool:
        return isinstance(value, dict) and "item" in value and "blocks" in value

    def holds_part(value: Any) -> bool:
        if is_part(value):
            return True
        if isinstance(value, dict):
            return any(holds_part(v) for v in value.values())
        return isinstance(value, list) and any(holds_part(v) for v in value)

    root = materialise(world.top, "proj-sm", ["long.jsonl"])
    world.approve(root)
    cid = world.cid(root, "long.jsonl")
    with part_encodes() as encoded:
        res = world.open(cid)
        results = [res]
        while res["cursor"] is not None:
            res = world.next(res["cursor"]["id"], cid, res["page"]["branch"])
            results.append(res)
    made = sum(1 for v in encoded if is_part(v))
    parts = sum(len(r["page"]["parts"]) for r in results)
    assert parts > 100 and made == parts  # each part encoded once, when it was made (a fresh reader)
    for r in results:
        plain = {**r, "page": {**r["page"], "parts": [dict(p) for p in r["page"]["parts"]]}}
        want, want_page = dump_bytes(plain), dump_bytes(plain["page"])
        with part_encodes() as again, json_encodes() as encoded:
            assert dump_bytes(r) == want and dumps(r) == want.decode("utf-8")
            assert dump_bytes(r["page"]) == want_page
        assert not again and not any(holds_part(v) for v in encoded)
    # A caller that edits a page's parts gets the edit serialized, never the stale bytes.
    edited = results[0]
    edited["page"]["parts"].pop()
    assert json.loads(dump_bytes(edited))["page"]["parts"] == [dict(p) for p in edited["page"]["parts"]]
