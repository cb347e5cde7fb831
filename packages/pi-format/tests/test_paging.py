"""Paging a branch costs O(the page) at its end as at its start: `items_from` resumes where the
previous slice stopped instead of walking from the root, and still equals slicing `items` exactly.

The cost is shown by counting, never by timing: `mosaic.pi_format.testing.count_entry_reads` counts the
looks at the shared tree's per-entry flags (which say how many items each entry adds), one per entry a
walk passes.
"""

from __future__ import annotations

from typing import Any

from helpers import HEADER, ok, session
from hypothesis import given
from hypothesis import strategies as st
from test_lazy import _long_session
from test_properties import SETTINGS, line_ends, pi_like_lines

from mosaic.pi_format import parse, parse_appended
from mosaic.pi_format.testing import count_entry_reads


def test_each_page_of_a_long_branch_reads_about_its_own_entries_not_the_path_before_it() -> None:
    parsed = ok(parse(_long_session(3000)))
    branch = parsed.branches["main"]
    counter = count_entry_reads(branch)
    width = 128
    reads: list[int] = []
    pages = []
    for start in range(0, branch.item_count, width):
        counter.reads = 0
        pages.append(branch.items_from(start, width))
        reads.append(counter.reads)
    assert [i for page in pages for i in page] == list(ok(parse(_long_session(3000))).branches["main"].items)
    # A walk from the root would read ~start entries for the page at `start`; resuming reads ~one page's.
    assert max(reads) <= width + 2, reads
    assert reads[-1] <= reads[1] + 2, reads
    # A start no slice stopped at walks from the root once (the documented fallback), and is still exact.
    counter.reads = 0
    assert branch.items_from(1000, 5) == branch.items[1000:1005]


@SETTINGS
@given(pi_like_lines(max_lines=30), st.lists(st.tuples(st.booleans(), st.integers(0, 40), st.integers(0, 7)),
                                             max_size=12))
def test_resumed_and_fresh_slices_in_any_order_equal_slicing_items(lines: list[Any],
                                                                 steps: list[tuple[bool, int, int]]) -> None:
    data = session(*lines)
    parsed = ok(parse(data))
    whole = {name: ok(parse(data)).branches[name].items for name in parsed.branches}
    ends: dict[str, int] = {name: 0 for name in parsed.branches}
    names = list(parsed.branches)
    for k, (resume, start, width) in enumerate(steps):
        name = names[k % len(names)]
        at = ends[name] if resume else start
        got = parsed.branches[name].items_from(at, width)
        assert got == whole[name][at:at + width], (name, at, width)
        ends[name] = at + len(got)


@SETTINGS
@given(pi_like_lines(max_lines=20), st.data())
def test_a_continued_parse_resumes_the_old_slices_exactly(lines: list[Any], data: st.DataObject) -> None:
    blob = session(*lines)
    cuts = line_ends(blob)
    cut = data.draw(st.sampled_from(cuts), label="cut")
    first = ok(parse(blob[:cut]))
    width = data.draw(st.integers(1, 5), label="width")
    for branch in first.branches.values():
        for start in range(0, branch.item_count + 1, width):
            branch.items_from(start, width)  # leaves marks where each slice stopped
    grown = parse_appended(first, blob[cut:])
    full = ok(parse(blob))
    for name, branch in grown.branches.items():
        for start in range(0, branch.item_count + width, width):
            assert branch.items_from(start, width) == full.branches[name].items[start:start + width]
    assert HEADER["id"] == grown.header.id
