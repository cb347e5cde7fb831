"""Every branch is Pi's getBranch of its leaf, and the compact id table reads every file as the sparse one does.

Pi 0.85.1's loader (session-manager.js): `_buildIndex` (686-707) sets `byId` for every entry in file order,
so where an id repeats the later entry wins, and the leaf is the last entry; `getBranch(fromId)` (958-970)
walks `byId.get(parentId)` up from the leaf while the parentId is truthy and names an entry, then reverses.
`pi_get_branch` below is that walk over the lines the parser takes as entries (README rule 2). The parser's own
rules (README rules 2-8) must give, for every leaf, a branch whose entries are exactly that path: the columnar
index stores the tree in arrays, and must not change what it is. Pi never returns from a loop (FACTS.md
quirk 6), so a leaf whose walk loops is left out (README rule 8 cuts it; `test_rules.py` covers that).

The compact form of the id table (`_idtable`, used for files of tiny entries) is forced here on the same
generated files and fixtures, and must give the same result as the sparse form, `parse_appended` included.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import ok, repo, session
from hypothesis import given, settings
from hypothesis import strategies as st
from test_lazy import canon, growing_lines
from test_properties import SETTINGS, line_ends, pi_like_lines

# The compact id table is a mechanism no public value shows: mosaic.pi_format.testing switches a parse
# into either form and says which form a result's table is in.
from mosaic.pi_format import parse, parse_appended, safe_id
from mosaic.pi_format.testing import (
    EXACT_DECODER,
    colliding_hashes,
    compact_form,
    head_decodes,
    id_table_form,
    id_table_held,
    id_table_widths,
    narrow_id_table,
    sparse_form,
)


def pi_get_branch(data: bytes) -> tuple[str | None, dict[str, list[str] | None]]:
    """(Pi's leaf, {raw id of each entry: getBranch(id) as raw ids, None when the walk loops})."""
    by_id: dict[str, dict[str, Any]] = {}
    leaf: str | None = None
    # Complete lines only: the parser reads a snapshot up to its last LF (a torn last line waits).
    for raw in data[:data.rfind(b"\n") + 1].split(b"\n")[1:-1]:
        try:
            value = EXACT_DECODER.decode(raw.removesuffix(b"\r").decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            continue
        if isinstance(value, dict) and isinstance(value.get("id"), str) and value.get("type") != "session":
            by_id[value["id"]] = value
            leaf = value["id"]
    paths: dict[str, list[str] | None] = {}
    for start in by_id:
        path: list[str] = []
        seen: set[str] = set()
        current: dict[str, Any] | None = by_id[start]
        while current is not None:
            if current["id"] in seen:
                path = []
                break
            seen.add(current["id"])
            path.append(current["id"])
            pid = current.get("parentId")
            current = by_id.get(pid) if pid and isinstance(pid, str) else None
        paths[start] = list(reversed(path)) if path else None
    return leaf, paths


def check_against_pi(data: bytes) -> int:
    """Every branch of the parse is getBranch of its leaf; returns how many leaves were compared."""
    parsed = ok(parse(data))
    leaf, paths = pi_get_branch(data)
    assert parsed.default_leaf == (None if leaf is None else "n." + safe_id(leaf))
    compared = 0
    for branch in parsed.branches.values():
        if branch.leaf is None:
            continue
        raw_leaf = parsed.entries[branch.leaf].raw_id
        walk = paths[raw_leaf]
        if walk is None:
            continue  # Pi's walk never ends here (a loop)
        assert branch.entry_ids == tuple("n." + safe_id(x) for x in walk), branch.name
        compared += 1
    return compared


def fixture_files() -> list[Path]:
    files = sorted((repo() / "fixtures").rglob("*.jsonl"))
    assert len(files) >= 40, "the fixture tree is missing: regenerate it with fixtures/make/regenerate.py"
    return files


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: p.name)
def test_every_fixture_branch_is_pis_get_branch_of_its_leaf_in_both_id_table_forms(path: Path) -> None:
    data = path.read_bytes()
    parsed = parse(data)
    if not hasattr(parsed, "branches"):
        return  # refused at line 1 (the header's own fixtures): no entries to compare
    check_against_pi(data)
    with compact_form():
        check_against_pi(data)
        assert canon(ok(parse(data))) == canon(ok(parsed))  # type: ignore[arg-type]


@settings(SETTINGS, max_examples=200)
@given(pi_like_lines(max_lines=40))
def test_pi_like_files_every_branch_is_pis_get_branch_of_its_leaf(lines: list[Any]) -> None:
    data = session(*lines)
    check_against_pi(data)
    with compact_form():
        check_against_pi(data)


@settings(SETTINGS, max_examples=200)
@given(growing_lines(), st.data())
def test_duplicates_late_parents_and_loops_still_give_pis_paths_in_both_forms(lines: list[Any],
                                                                             data: st.DataObject) -> None:
    blob = session(*lines)
    check_against_pi(blob)
    sparse = canon(ok(parse(blob)))
    cut = data.draw(st.sampled_from(line_ends(blob)), label="cut")
    with compact_form():
        check_against_pi(blob)
        assert canon(ok(parse(blob))) == sparse
        assert canon(parse_appended(ok(parse(blob[:cut])), blob[cut:])) == sparse
    # A continuation across the switch: the first part sparse, the rest read after it.
    first = ok(parse(blob[:cut]))
    with compact_form():
        assert canon(parse_appended(first, blob[cut:])) == sparse


def test_a_dense_file_switches_to_the_compact_form_and_reads_the_same() -> None:
    # 5,000 tiny labels in a chain, a fork and a duplicate near the end: dense enough to switch by itself.
    lines = [{"type": "label", "id": f"t{i}", "parentId": f"t{i - 1}" if i else None} for i in range(5000)]
    lines += [{"type": "label", "id": "fork", "parentId": "t10"}, {"type": "label", "id": "t4999", "parentId": "t10"}]
    data = session(*lines)
    parsed = ok(parse(data))
    assert id_table_form(parsed) == "compact"
    with compact_form():
        assert canon(ok(parse(data))) == canon(parsed)
    with sparse_form():
        sparse = ok(parse(data))
        assert id_table_form(sparse) == "sparse"
        assert canon(sparse) == canon(parsed)
    assert check_against_pi(data) == len(parsed.branches) == 3
    assert list(parsed.branches) == ["main", "b.fork", "b.t4999"]
    assert parsed.branches["b.fork"].entry_ids[-2:] == ("n.t10", "n.fork")
    assert parsed.superseded_lines == (5001,)


def test_the_compact_table_widens_its_items_past_their_limits_and_reads_the_same() -> None:
    # Issue 34: the compact table holds 4-byte items (the hashes' low 32 bits, slots) and widens the slots
    # to 8 bytes past 2**31 positions. That limit is lowered here so the widening runs, in the middle of a
    # parse and across a continuation: the result is the one the narrow table gives, and the slots did widen.
    lines = [{"type": "label", "id": f"t{i}", "parentId": f"t{i - 1}" if i else None} for i in range(3000)]
    lines += [{"type": "label", "id": "fork", "parentId": "t10"}, {"type": "label", "id": "t2999", "parentId": "t10"}]
    data = session(*lines)
    cut = line_ends(data)[1500]
    narrow = canon(ok(parse(data)))
    assert id_table_widths(ok(parse(data))) == ("I", "i")
    with compact_form(), narrow_id_table(1024):
        wide = ok(parse(data))
        assert id_table_widths(wide) == ("I", "q")
        assert canon(wide) == narrow
        first = ok(parse(data[:cut]))
        assert canon(parse_appended(first, data[cut:])) == narrow
    assert check_against_pi(data) == len(wide.branches) == 3


def test_hash_collisions_in_the_compact_table_never_merge_two_ids() -> None:
    # Issue 34: the compact table keeps no copy of an id, only the low 32 bits of its hash; where those match
    # it reads the id again from its line and compares the strings. Here every id hashes alike (each lookup
    # meets every id before it): a chain, a fork, a parent written after its child, a duplicate and a
    # missing parent read exactly as the sparse table reads them, in a parse and across a continuation.
    lines: list[Any] = [{"type": "label", "id": f"t{i}", "parentId": f"t{i - 1}" if i else None} for i in range(300)]
    lines += [{"type": "label", "id": "fork", "parentId": "t10"},
              {"type": "label", "id": "early", "parentId": "late"},
              {"type": "label", "id": "late", "parentId": "t20"},
              {"type": "label", "id": "t299", "parentId": "t10"},
              {"type": "label", "id": "orphan", "parentId": "nowhere"}]
    data = session(*lines)
    with sparse_form():
        sparse = ok(parse(data))
    cut = line_ends(data)[150]
    with compact_form(), colliding_hashes():
        collided = ok(parse(data))
        assert id_table_form(collided) == "compact"
        assert canon(collided) == canon(sparse)
        assert canon(parse_appended(ok(parse(data[:cut])), data[cut:])) == canon(sparse)
        assert check_against_pi(data) == len(collided.branches) == 5
        assert collided.branches["b.fork"].entry_ids[-2:] == ("n.t10", "n.fork")
        assert collided.entries["n.early"].parent == "n.late"
        assert collided.superseded_lines == (301,)


@settings(SETTINGS, max_examples=100)
@given(growing_lines(), st.data())
def test_generated_files_read_the_same_when_every_id_collides(lines: list[Any], data: st.DataObject) -> None:
    blob = session(*lines)
    sparse = canon(ok(parse(blob)))
    cut = data.draw(st.sampled_from(line_ends(blob)), label="cut")
    with compact_form(), colliding_hashes():
        assert canon(ok(parse(blob))) == sparse
        assert canon(parse_appended(ok(parse(blob[:cut])), blob[cut:])) == sparse


def test_a_long_lines_id_is_read_again_once_however_many_lookups_meet_it() -> None:
    # Issue 34: the compact table reads an id again from its line where a lookup meets its hash. An id read
    # from a long line is kept from then on, so 2,000 forks off two long entries in turn read each of them
    # twice in all (the parse's own read, then one more), not once a fork; short lines are not kept (reading
    # one again costs no more than the line that asks).
    roots = [{"type": "message", "id": rid, "parentId": None, "message": {"role": "user", "content": "x" * 4000}}
             for rid in ("left", "right")]
    lines = roots + [{"type": "label", "id": f"f{i}", "parentId": ("left", "right")[i % 2]} for i in range(2000)]
    data = session(*lines)
    with compact_form(), head_decodes() as reads:
        parsed = ok(parse(data))
    assert id_table_form(parsed) == "compact"
    assert sum(1 for r in reads if len(r) > 4000) == 4
    assert id_table_held(parsed) == 2
    assert parsed.branches["b.f1999"].entry_ids == ("n.right", "n.f1999")
    assert canon(parsed) == canon(ok(parse(data)))
