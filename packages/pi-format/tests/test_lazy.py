"""The lazy and incremental API: Branch.items_from renders only its slice; parse_appended equals a full parse."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers import HEADER, check_invariants, msg, ok, session
from hypothesis import given, settings
from hypothesis import strategies as st
from test_properties import GARBAGE, OTHER_ENTRIES, ROLE_MESSAGES, SETTINGS, line_ends

# The one private import: test_items_from_renders_only_the_items_it_returns counts calls of the renderer the
# shared tree uses, because "renders only its slice" (README, "Output model") is a private mechanism that no
# public value shows. Everything else here uses the public names.
from mosaic.pi_format import Parsed, parse, parse_appended
from mosaic.pi_format.cli import summary
from mosaic.pi_format.testing import rendered_lines


def _long_session(n: int) -> bytes:
    lines: list[object] = []
    prev: str | None = None
    for k in range(n):
        eid = f"e{k}"
        lines.append(msg(eid, prev, text=f"text {k}"))
        if k % 10 == 5:
            lines.append(b"{not json")  # a line notice on every branch
        prev = eid
    lines.append({"type": "label", "id": "hidden", "parentId": prev})  # hidden: on the path, not shown
    return session(*lines)


def test_items_from_equals_the_slice_of_items() -> None:
    data = _long_session(40)
    for start, count in [(0, 0), (0, 1), (0, 7), (3, 10), (5, 1), (40, 20), (43, 100), (44, 1), (1000, 5)]:
        fresh = ok(parse(data)).branches["main"]
        whole = ok(parse(data)).branches["main"].items
        assert fresh.items_from(start, count) == whole[start:start + count], (start, count)
    p = ok(parse(data))
    branch = p.branches["main"]
    assert branch.item_count == 44  # 40 messages + 4 malformed lines; the label is hidden
    assert branch.items_from(0, 3) == branch.items_from(0, 3)
    check_invariants(p)


def test_items_from_renders_only_the_items_it_returns() -> None:
    with rendered_lines() as rendered:
        branch = ok(parse(_long_session(200))).branches["main"]
        page = branch.items_from(100, 12)
        assert len(page) == 12 and any(item.kind == "notice" for item in page)  # a line notice among them
        assert sorted(rendered) == sorted(item.line for item in page if item.kind != "notice")
        rendered.clear()
        # Nothing rendered is kept (decoded text is never cached): the same slice renders the same
        # entries again, and still only those.
        assert branch.items_from(100, 12) == page
        assert sorted(rendered) == sorted(item.line for item in page if item.kind != "notice")


def test_items_from_after_items_is_materialised_is_the_same_slice() -> None:
    branch = ok(parse(_long_session(30))).branches["main"]
    items = branch.items
    assert branch.items_from(10, 8) == items[10:18]


def test_items_from_refuses_negative_arguments() -> None:
    branch = ok(parse(_long_session(3))).branches["main"]
    with pytest.raises(ValueError):
        branch.items_from(-1, 2)
    with pytest.raises(ValueError):
        branch.items_from(0, -2)


# --- parse_appended: the same result as a full parse of the longer prefix --------------------------------

def canon(p: Parsed) -> Any:
    """Everything a Parsed promises, as comparable values (Parsed and Entry compare by identity)."""
    entries = [(e.id, e.raw_id, e.type, e.line, e.timestamp, e.parent, json.dumps(e.raw_parent_id), e.branch,
                e.item) for e in p.entries.values()]
    branches = [(b.name, b.leaf, b.start, b.parent_branch, b.fork_point, b.item_count, b.items, b.item_ids,
                 b.entry_ids) for b in p.branches.values()]
    return (p.header, entries, branches, p.default_branch, p.default_leaf, p.notices, p.unreadable_lines,
            p.superseded_lines, p.forked_from_earlier_session, p.incomplete, p.line_count, summary(p))


@st.composite
def growing_lines(draw: st.DrawFn) -> list[Any]:
    """Entries whose ids and parents come from a pool: mostly Pi-like (fresh ids, earlier parents), with
    duplicate ids, parents that appear only later, self-parents, new roots, missing and non-string
    parents and malformed lines mixed in."""
    lines: list[Any] = []
    seen: list[str] = []
    for k in range(draw(st.integers(0, 16))):
        kind = draw(st.integers(0, 12))
        if kind == 0:
            lines.append(draw(GARBAGE))
            continue
        if kind == 1 and seen:
            eid = draw(st.sampled_from(seen))  # a duplicate id
        elif kind == 2:
            eid = f"late{draw(st.integers(0, 3))}"  # may be named as a parent before it appears
        else:
            eid = draw(st.sampled_from([f"{k:08x}", f"e{k}|x", "h-" + str(k)]))
        pick = draw(st.integers(0, 9))
        parent: Any
        if pick == 0 or not seen:
            parent = None
        elif pick == 1:
            parent = f"late{draw(st.integers(0, 3))}"
        elif pick == 2:
            parent = eid  # self-parent
        elif pick == 3:
            parent = draw(st.sampled_from([7, ["x"], "missing"]))
        elif pick <= 6:
            parent = draw(st.sampled_from(seen))
        else:
            parent = seen[-1]
        body = {"type": "message", "message": draw(st.sampled_from(ROLE_MESSAGES))} if draw(st.booleans()) \
            else dict(draw(st.sampled_from(OTHER_ENTRIES)))
        lines.append({**body, "id": eid, "parentId": parent, "timestamp": f"T{k}"})
        seen.append(eid)
    return lines


@settings(SETTINGS, max_examples=300)
@given(growing_lines(), st.data())
def test_parse_appended_equals_the_full_parse_of_the_longer_prefix(lines: list[Any], data: st.DataObject) -> None:
    forked = data.draw(st.booleans(), label="forked")
    blob = session(*lines, header={**HEADER, "parentSession": "/p/old.jsonl"} if forked else None)
    ends = line_ends(blob)
    cuts = sorted(set(data.draw(st.lists(st.sampled_from(ends), min_size=1, max_size=3), label="cuts")))
    end = data.draw(st.integers(cuts[-1], len(blob)), label="end")  # may stop inside a line
    previous = ok(parse(blob[: cuts[0]]))
    for a, b in zip(cuts, [*cuts[1:], end], strict=True):
        before = canon(previous)
        grown = parse_appended(previous, blob[a:b])
        assert isinstance(grown, Parsed)
        check_invariants(grown)  # items_from before items, on the continued result
        assert canon(grown) == canon(ok(parse(blob[:b])))
        assert canon(previous) == before  # the previous result is unchanged
        if grown.extends_previous:
            for name, branch in previous.branches.items():
                assert grown.branches[name].items[: branch.item_count] == branch.items
        if grown.incomplete:
            break
        previous = grown


def test_parse_appended_adds_in_place_only_when_nothing_earlier_can_change() -> None:
    base = ok(parse(session(msg("a", None), msg("b", "a"), {"type": "message", "id": "c", "parentId": "q",
                                                           "message": {"role": "user", "content": "x"}})))
    plain = parse_appended(base, session(msg("d", "b"), msg("e", "a"), b"{bad", msg("f", None))[len(session()):])
    assert plain.extends_previous
    assert list(plain.branches) == ["main", "b.c", "b.e", "b.f"]
    assert plain.branches["main"].item_ids == ("n.a", "n.b", "n.d", "x.line-7")
    for tail in [msg("b", "a"), msg("q", "a"), msg("g", "g")]:  # duplicate, late parent, self-parent
        grown = parse_appended(base, session(tail)[len(session()):])
        assert not grown.extends_previous
        assert canon(grown) == canon(ok(parse(session(msg("a", None), msg("b", "a"), {
            "type": "message", "id": "c", "parentId": "q", "message": {"role": "user", "content": "x"}}, tail))))


def test_parse_appended_programming_errors_raise() -> None:
    p = ok(parse(session(msg("a", None)) + b'{"partial'))
    with pytest.raises(ValueError):
        parse_appended(p, b"\n")
    with pytest.raises(TypeError):
        parse_appended(ok(parse(session())), "text")  # type: ignore[arg-type]
