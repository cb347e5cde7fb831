"""Properties: no bytes make the parser raise, and parse_appended equals a full parse of the longer bytes
(every field, at every cut), with `extends_previous` only where every earlier branch is the start of the
same branch now. Hypothesis keeps no example database."""

from __future__ import annotations

import json
from typing import Any

from helpers import RECORDED, check_invariants, data, entry, summary, u
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mosaic.claude_format import Parsed, TranscriptRefusal, parse, parse_appended

SETTINGS = settings(max_examples=150, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
POOL = 6  # uuids drawn from a small pool, so duplicates, late parents and loops happen


def _line(spec: tuple[Any, ...]) -> bytes:
    kind = spec[0]
    if kind == "entry":
        _, who, n, parent, side = spec
        obj = entry(who, u(n), parent if parent is None or isinstance(parent, list) else u(parent), f"text {n}")
        if side:
            obj["isSidechain"] = True
        return json.dumps(obj, separators=(",", ":")).encode() + b"\n"
    if kind == "last-prompt":
        return json.dumps({"type": "last-prompt", "lastPrompt": "p", "leafUuid": u(spec[1])}).encode() + b"\n"
    if kind == "meta":
        return b'{"type":"mode","mode":"normal","sessionId":"s"}\n'
    if kind == "other":
        return b'{"type":"summary","summary":"s"}\n'
    return spec[1]


_entries = st.tuples(st.just("entry"), st.sampled_from(["user", "assistant", "attachment:date"]),
                     st.integers(0, POOL), st.one_of(st.none(), st.integers(0, POOL + 2), st.just(["bad"])),
                     st.booleans())
_lines = st.lists(st.one_of(
    _entries, _entries, _entries,
    st.tuples(st.just("last-prompt"), st.integers(0, POOL + 1)),
    st.tuples(st.just("meta")), st.tuples(st.just("other")),
    st.tuples(st.just("raw"), st.sampled_from([b"\n", b"\n\n", b"{bad\n", b"[1]\n", b"\xff\n", b"  \r\n"])),
), max_size=25)


def _appended_equals_parse(body: bytes, cuts: list[int]) -> None:
    whole = parse(body)
    bounds = sorted({c for c in cuts if 0 <= c <= len(body)})
    previous = parse(body[: bounds[0]]) if bounds else whole
    start = bounds[0] if bounds else len(body)
    for cut in [*bounds[1:], len(body)]:
        if isinstance(previous, TranscriptRefusal):
            return
        if previous.incomplete:
            previous, start = parse(body[:cut]), cut
            continue
        grown = parse_appended(previous, body[start:cut])
        full = parse(body[:cut])
        if isinstance(full, TranscriptRefusal):
            assert grown == full
            return
        assert isinstance(grown, Parsed)
        assert summary(grown) == summary(full)
        check_invariants(grown)
        if grown.extends_previous:
            for name, old in previous.branches.items():
                new = grown.branches[name]
                assert new.items[: old.item_count] == old.items
                assert new.refs_from(0, old.item_count) == old.refs_from(0, old.item_count)
        previous, start = grown, cut


@SETTINGS
@given(_lines, st.lists(st.integers(0, 4000), max_size=3))
def test_parse_appended_equals_the_full_parse_of_the_longer_bytes(specs: list[Any], cuts: list[int]) -> None:
    body = b"".join(_line(s) for s in specs)
    # Cuts at line boundaries (what the reader appends) and, for the last, anywhere.
    ends = [i + 1 for i, b in enumerate(body) if b == 10]
    line_cuts = [ends[c % len(ends)] for c in cuts] if ends else []
    _appended_equals_parse(body, line_cuts)
    result = parse(body)
    if isinstance(result, Parsed):
        check_invariants(result)


@SETTINGS
@given(st.binary(max_size=400))
def test_fuzz_random_bytes_never_raise(blob: bytes) -> None:
    result = parse(blob)
    if isinstance(result, Parsed):
        check_invariants(result)


@SETTINGS
@given(st.sampled_from(RECORDED), st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=8))
def test_fuzz_mutated_recordings_never_raise(name: str, edits: list[tuple[int, int]]) -> None:
    blob = bytearray(data(name))
    for at, value in edits:
        blob[at % len(blob)] = value
    result = parse(bytes(blob))
    if isinstance(result, Parsed):
        check_invariants(result)


def test_parse_appended_continues_a_recording_line_by_line_in_place() -> None:
    body = data("transcript-branch-resume-session-at.jsonl")
    lines = body.splitlines(keepends=True)
    previous = parse(b"")
    assert isinstance(previous, Parsed)
    in_place = 0
    for line in lines:
        grown = parse_appended(previous, line)
        assert isinstance(grown, Parsed)
        in_place += grown.extends_previous
        previous = grown
    assert summary(previous) == summary(parse(body))  # type: ignore[arg-type]
    assert in_place >= len(lines) - 3  # only the first entry (main appears) rebuilds


def test_parse_appended_refuses_appended_lines_of_another_version() -> None:
    body = data("transcript-fork-session.jsonl")
    previous = parse(body)
    assert isinstance(previous, Parsed)
    other = entry("user", u(1), None, "x", version="2.1.300")
    grown = parse_appended(previous, json.dumps(other).encode() + b"\n")
    assert isinstance(grown, TranscriptRefusal) and grown.code == "unsupported-harness"
