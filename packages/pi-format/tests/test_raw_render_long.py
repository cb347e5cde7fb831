"""`Parsed.render_json` on lines over 1 MiB (issue 34: the 20 MB line): the line's escapes are judged a window
at a time, with the same answer as for the whole line, whatever escape or run of backslashes sits at a
window's edge, and without a copy of the line."""

from __future__ import annotations

import json
import tracemalloc

from helpers import HEADER

from mosaic.pi_format import Parsed, parse
from mosaic.pi_format.testing import LONG_LINE, render_reads

WINDOW = 1 << 20
PREFIX = b'{"type":"message","id":"e1","parentId":null,"timestamp":"t","message":{"role":"user","content":[{"type":"text","text":"'
SUFFIX = b'"}]}}'


def _parsed_line(line: bytes) -> tuple[Parsed, int]:
    """A session of the header and the entry `line`; its item's ref."""
    parsed = parse(json.dumps(HEADER).encode() + b"\n" + line + b"\n", project=HEADER["cwd"])
    assert isinstance(parsed, Parsed)
    (ref,) = parsed.branches[parsed.default_branch].refs_from(0, 10)
    return parsed, ref


def _parsed(text_json: bytes) -> tuple[Parsed, int]:
    return _parsed_line(PREFIX + text_json + SUFFIX)


def _render_json(text_json: bytes) -> object:
    parsed, ref = _parsed(text_json)
    return parsed.render_json(ref)


def test_render_json_judges_a_long_line_across_its_windows() -> None:
    # The line's first byte is its first; a window is 1 MiB of the line. Each spelling put so that it ends,
    # straddles or starts at the first window's edge: canonical ones are spliced, the others refused.
    for shift in range(-8, 4):
        for spelling, canonical in ((rb"\u0001", True), (rb"\u0041", False), (rb"\n", True), (rb"\/", False),
                                    (rb"\\\\\\", True), (rb"\\\\\\\u00e9", False), (rb"\\\\\\\u001f", True),
                                    (rb"\\ ", True), (rb"\\\\\\ ", True)):
            pad = WINDOW + shift - len(PREFIX)
            got = _render_json(b"a" * pad + spelling + b"b" * 50 + rb"\\ x")  # an escaped backslash: the exact look
            assert (got is not None) is canonical, (shift, spelling)


def test_render_json_a_run_of_backslashes_across_windows() -> None:
    # Runs of escaped backslashes through several windows, odd and even: the pairs are read from the run's
    # start in every window, so an escape after the run is judged as itself.
    for run in (2 * WINDOW, 2 * WINDOW + 2, 3 * WINDOW // 2):
        for tail, canonical in ((rb"\n", True), (rb"\/", False), (b"u0041", True)):
            assert (_render_json(rb"\\" * run + tail) is not None) is canonical, (run, tail)


def test_render_json_of_a_long_line_copies_a_window_not_the_line() -> None:
    text = (rb"word \\ path\\to \n" * 700_000)  # 12.6 MB: every escaped backslash sends it to the exact look
    parsed, ref = _parsed(text)
    tracemalloc.start()
    try:
        got = parsed.render_json(ref)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert got is not None
    assert peak < 6 * WINDOW < len(text) // 2, peak  # two copies of one window, not of the line


def test_a_line_of_1_mib_is_read_once_for_the_index_and_its_render() -> None:
    """Issue 34 (one 20 MB line): a line of LONG_LINE bytes or more is read once, its head and its render's
    fields together; its render is what rendering it gives. One byte shorter, the render reads the line
    itself (short lines keep no decoded fields)."""
    for extra, reads in ((0, 0), (-1, 1)):
        pad = LONG_LINE - len(PREFIX) - len(SUFFIX) + extra
        text = b"a" * (pad - 11) + rb"\n\u0001ok!"  # canonical escapes in it (11 bytes)
        assert len(PREFIX) + len(text) + len(SUFFIX) == LONG_LINE + extra
        parsed, ref = _parsed(text)
        with render_reads() as calls:
            got = parsed.render_json(ref)
        assert len(calls) == reads, (extra, calls)
        assert got is not None
        rendered = parsed.render(ref).to_json()
        assert bytes(dict(got.blocks[0])["text"]) == json.dumps(rendered["blocks"][0]["text"]).encode()  # type: ignore[index]
        assert (got.id, got.kind, got.line) == (rendered["id"], rendered["kind"], rendered["line"])


def test_a_long_line_the_render_fields_refuse_is_indexed_by_its_head_and_rendered_as_before() -> None:
    """A long line whose shape the render's structs refuse (a content that is a string, a message that is not
    an object) is read by the head decoder as a short line is: the same record, the same parent; its render
    is then `render_json`'s own (a string content) or None (rendered by the caller)."""
    big = "x" * (1 << 20)
    for message, fast in (({"role": "user", "content": big}, True), (5, False)):
        parsed, ref = _parsed_line(json.dumps({"type": "message", "id": "e1", "parentId": None, "timestamp": "t",
                                               "message": message, "pad": big}).encode())
        rendered = parsed.render(ref).to_json()  # the caller's path: the record read by its head
        assert str(rendered["id"]).endswith("e1") and rendered["line"] == 2
        got = parsed.render_json(ref)
        assert (got is not None) is fast, message if not fast else "string content"
        if got is not None:
            assert (got.id, got.kind) == (rendered["id"], rendered["kind"])
