"""F10 on the file's bytes (issue 34, one 20 MB line): a long string cut into fragments from its JSON token,
never decoded (`raw_fragments`), exactly as `fragments` cuts its text; and which tokens may be spliced into a
page verbatim (`canonical`: msgspec writes their text back as the same bytes).

The limits at their edges: 262,144 UTF-16 units (an astral character just before, at and after it), 1 MiB
of JSON (runs of 6-byte `\\u00xx` escapes around it), 65,536 +- 1 characters, the empty string, and
canonical's 1 MiB windows (an escape, and a run of backslashes, across a window's edge).
"""

from __future__ import annotations

import json
import os
import tracemalloc
from pathlib import Path
from typing import Any

import msgspec
from helpers import entry, header, write_session
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mosaic.chat_pages import RepositorySpec, conversation_id, create_reader, roots_from_specs
from mosaic.chat_pages.parts import MAX_FRAGMENT_JSON, MAX_PAGE_BYTES, MAX_STRING_UNITS, dump_bytes
from mosaic.chat_pages.testing import canonical, encoded_parts, fragments, raw_fragments, raw_item_parts
from mosaic.pi_format import Parsed, parse

# No example database: the tests write nothing into the repository. print_blob lets a failure be replayed.
SETTINGS = settings(deadline=None, database=None, print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

ENCODE = msgspec.json.encode
DECODE = msgspec.json.decode
L = MAX_STRING_UNITS
#: How many 6-byte escapes (`\u0001`) fit in 1 MiB of JSON with the two quotes: 174,762 (1,048,574 bytes).
ESCAPES_IN_1MIB = (MAX_FRAGMENT_JSON - 2) // 6
ASTRAL = "\U0001f600"

#: One character of each kind the counting tells apart: ASCII, 2-, 3- and 4-byte UTF-8, the short escapes,
#: a 6-byte `\u00xx` escape, a quote, a backslash, DEL and U+2028 (written raw by msgspec).
ATOMS = ["a", " ", "é", "中", ASTRAL, "\U0010fffd", "\n", "\t", "\x01", "\x1f", '"', "\\", "\x7f", "\u2028", "/"]
#: Run lengths at the edges: the unit limit, half of it (astral characters), 1 MiB of escapes, 65,536.
EDGES = [L - 2, L - 1, L, L + 1, L // 2 - 1, L // 2, L // 2 + 1, ESCAPES_IN_1MIB - 1, ESCAPES_IN_1MIB,
         ESCAPES_IN_1MIB + 1, 65_535, 65_536, 65_537]

SMALL_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)  # msgspec writes no lone surrogate
RUN = st.tuples(st.one_of(st.sampled_from(ATOMS), SMALL_TEXT),
                st.one_of(st.integers(0, 40), st.sampled_from(EDGES), st.integers(0, 300_000)))


def _text(runs: list[tuple[str, int]]) -> str:
    return "".join(atom * count for atom, count in runs)[: 3 * L]  # at most a few MB an example


def _text_of(piece: bytes) -> str | None:
    """A fragment's text from its bytes, or None when they are not JSON string content (a cut inside an
    escape)."""
    try:
        text: str = DECODE(b'"' + piece + b'"')
    except msgspec.DecodeError:
        return None
    return text


def check_same_cuts(text: str) -> list[tuple[int, int, int]]:
    """raw_fragments over the text's JSON gives `fragments(text)` exactly, sized and contiguous; and the same
    cuts over a memoryview of the token inside a larger buffer (what a raw render passes)."""
    raw = ENCODE(text)
    cuts = raw_fragments(raw)
    want = fragments(text)
    got = [_text_of(raw[start:end]) for start, end, _ in cuts]
    assert got == want
    assert [size for _, _, size in cuts] == [len(ENCODE(f)) for f in want]
    assert all(size == end - start + 2 for start, end, size in cuts)
    assert cuts[0][0] == 1 and cuts[-1][1] == len(raw) - 1
    assert all(a[1] == b[0] for a, b in zip(cuts, cuts[1:], strict=False))
    framed = memoryview(b"{x:" + raw + b"}")[3:3 + len(raw)]
    assert raw_fragments(framed) == cuts
    return cuts


# --- raw_fragments --------------------------------------------------------------------------------------------


@settings(SETTINGS, max_examples=120)
@given(st.lists(RUN, max_size=6))
def test_F10_raw_fragments_cut_the_token_exactly_as_fragments_cuts_its_text(runs: list[tuple[str, int]]) -> None:
    check_same_cuts(_text(runs))


@settings(SETTINGS, max_examples=60)
@given(st.sampled_from(["a", "é", "中", "\n", "\x01", '"', "\\"]), st.integers(-3, 3), st.sampled_from(ATOMS),
       st.integers(0, 5))
def test_F10_raw_an_astral_character_at_the_262144_unit_edge_moves_on_whole(
        filler: str, delta: int, after: str, tail: int) -> None:
    # One-unit characters up to just before, at and after unit 262,144, then an astral one (or any atom).
    text = filler * (L + delta) + ASTRAL + after * tail
    cuts = check_same_cuts(text)
    raw = ENCODE(text)
    first = _text_of(raw[cuts[0][0]:cuts[0][1]])
    assert first == fragments(text)[0]
    if delta == -1 and len(ENCODE(filler)) <= 5:  # the pair straddles unit 262,144 (and 1 MiB of JSON is not reached)
        assert first == filler * (L - 1)


@settings(SETTINGS, max_examples=60)
@given(st.sampled_from(["\x01", "\x1f", "\x00"]), st.integers(-3, 3), st.integers(0, 8),
       st.sampled_from([ASTRAL, "a", "é", "\n", "\x02"]), st.integers(0, 3))
def test_F10_raw_escapes_at_the_1_MiB_json_edge(escape: str, delta: int, pad: int, after: str, tail: int) -> None:
    # 6-byte escapes up to just before, at and past 1 MiB of JSON: the proportional shrink, on bytes.
    text = escape * (ESCAPES_IN_1MIB + delta) + "b" * pad + after * tail
    cuts = check_same_cuts(text)
    assert all(size <= MAX_FRAGMENT_JSON for *_, size in cuts)


def test_F10_raw_the_limits_at_their_edge() -> None:
    assert raw_fragments(b'""') == [(1, 1, 2)]  # an empty string is one empty fragment
    assert raw_fragments(ENCODE("a" * L)) == [(1, 1 + L, L + 2)]
    assert raw_fragments(ENCODE("a" * (L + 1))) == [(1, 1 + L, L + 2), (1 + L, 2 + L, 3)]
    # An astral character that would straddle unit 262,144 moves on whole; one that ends on it stays.
    assert raw_fragments(ENCODE("a" * (L - 1) + ASTRAL)) == [(1, L, L + 1), (L, L + 4, 6)]
    assert raw_fragments(ENCODE("a" * (L - 2) + ASTRAL)) == [(1, L + 3, L + 4)]
    # Exactly 1 MiB of JSON stays one fragment; one byte more is cut.
    exact = "\x01" * ESCAPES_IN_1MIB + "ab"
    assert len(ENCODE(exact)) == MAX_FRAGMENT_JSON
    assert raw_fragments(ENCODE(exact)) == [(1, MAX_FRAGMENT_JSON - 1, MAX_FRAGMENT_JSON)]
    over = check_same_cuts(exact + "c")
    assert len(over) == 2 and over[0][2] <= MAX_FRAGMENT_JSON
    for n in (65_535, 65_536, 65_537):
        for atom in ("a", "\n", ASTRAL, "中"):
            check_same_cuts(atom * n)


def test_F10_raw_an_escape_is_one_unit_whatever_its_bytes() -> None:
    # `\n` (2 bytes) and `\u0001` (6 bytes) are one code point and one unit each: cut at 262,144 of them.
    for escape, width in (("\n", 2), ('"', 2), ("\\", 2), ("\x01", 6)):
        text = "x" + escape * (L + 7) if width == 2 else escape * (ESCAPES_IN_1MIB - 1) + "y" * 5
        cuts = check_same_cuts(text)
        if width == 2:
            assert cuts[0] == (1, 2 + 2 * (L - 1), 2 * L + 1)


def test_F10_raw_a_4_byte_character_is_two_units() -> None:
    for astral in (ASTRAL, "\U00010000", "\U0010fffd"):
        cuts = check_same_cuts(astral * (L // 2 + 3))
        assert cuts[0] == (1, 1 + 4 * (L // 2), 4 * (L // 2) + 2)  # 131,072 pairs: 262,144 units
        check_same_cuts(("ab" + astral) * 90_000)


def test_F10_raw_a_cut_never_falls_inside_an_escape() -> None:
    # Texts where a byte offset picked to count from lands inside an escape (6-byte, 2-byte, and runs of
    # escaped backslashes whose pairing depends on where the run starts), against the fragments of the text.
    texts = [
        "\x01" * (3 * ESCAPES_IN_1MIB),
        ("\x01" + "a" + "\n") * 200_000,
        "\\" * (L + 3) + "u0001" * 10,
        ("\\" * 5 + "u0041") * 70_000,
        ("é\\" + "\x1f") * 150_000,
        "a" * (L - 1) + "\x01" + "b",
    ]
    for text in texts:
        cuts = check_same_cuts(text)
        raw = ENCODE(text)
        for start, end, _ in cuts:
            piece = raw[start:end]
            assert not piece.endswith(b"\\") or (len(piece) - len(piece.rstrip(b"\\"))) % 2 == 0


def test_F10_raw_mixed_text_of_several_MB_cuts_as_its_text() -> None:
    # The bench's shape, smaller: words, 2-, 3- and 4-byte characters and escapes, a few MB.
    words = ["the ", "reader ", "é ", "中文 ", ASTRAL + " ", "line\n", 'q"', "\\path "]
    text = "".join(words[(i * 7 + i // 3) % len(words)] for i in range(600_000))
    assert len(check_same_cuts(text)) > 5


def test_F10_raw_a_long_token_is_looked_at_a_bounded_window_at_a_time() -> None:
    # What is held beside a 12-20 MB token while it is cut and checked: windows of about 1.5 MiB and what
    # is made from one (its weights, a copy without escaped backslashes), never a copy of the token. The
    # bound has a wide margin (the windows measure 1-3 MiB here); a copy of the token would be 12 MB or more.
    for text in ["a" * 12_000_000, "é中😀 \n\\\x01" * 1_000_000, "\\" * 6_000_000, "\x01" * 2_000_000]:
        raw = ENCODE(text)
        tracemalloc.start()
        try:
            raw_fragments(raw)
            canonical(raw)
            raw_fragments(memoryview(raw))
            canonical(memoryview(raw))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 8 * 2**20 < len(raw), (len(raw), peak)


# --- canonical ------------------------------------------------------------------------------------------------

#: For a character, other JSON spellings of it than the one msgspec writes (JSON.parse and msgspec read them all).
_ALTERNATIVES = {
    "/": [r"\/"], "é": [r"\u00e9", r"\u00E9"], "A": [r"\u0041"], "\x1f": [r"\u001F"], "\n": [r"\u000a"],
    "\x08": [r"\u0008"], '"': [r"\u0022"], "\\": [r"\u005c"], ASTRAL: [r"\ud83d\ude00", r"\uD83D\uDE00"],
    "\x7f": [r"\u007f"], "\x01": [r"\u0001"],
}


def definition(raw: bytes) -> bool:
    """canonical's definition: msgspec writes the token's text back as the same bytes."""
    try:
        return bool(ENCODE(DECODE(raw)) == raw)
    except (msgspec.DecodeError, UnicodeEncodeError):
        return False


@st.composite
def spelled(draw: Any) -> bytes:
    """A JSON string token of some text: each character as msgspec writes it, or now and then as another
    spelling of it (`\\/`, `\\u00e9`, `\\u0041`, uppercase hex, a surrogate-pair escape, a lone `\\ud800`)."""
    chars = draw(st.lists(st.one_of(st.sampled_from(sorted(_ALTERNATIVES) + ["u", "0", "a", "\\\\"]), SMALL_TEXT),
                          max_size=30))
    out = [b'"']
    for c in chars:
        alternatives = _ALTERNATIVES.get(c, [])
        if alternatives and draw(st.integers(0, 3)) == 0:
            out.append(draw(st.sampled_from(alternatives)).encode())
        else:
            out.append(ENCODE(c)[1:-1])
    if draw(st.integers(0, 9)) == 0:
        out.insert(draw(st.integers(1, len(out))), draw(st.sampled_from([rb"\ud800", rb"\udfff", rb"\ud83d\ude00"])))
    out.append(b'"')
    return b"".join(out)


@settings(SETTINGS, max_examples=400)
@given(spelled())
def test_F10_canonical_is_exactly_msgspec_writing_the_same_bytes(raw: bytes) -> None:
    if not _accepted(raw):
        return  # canonical's input is a token msgspec accepts (a `Raw` field's): nothing else is asked
    assert canonical(raw) == definition(raw)
    assert canonical(memoryview(b"[" + raw + b"]")[1:-1]) == definition(raw)
    # The same escapes among plenty of plain text (canonical searches sparse backslashes another way).
    padded = b'"' + b"plain text " * 500 + raw[1:]
    assert canonical(padded) == definition(padded)


def _accepted(raw: bytes) -> bool:
    class Holder(msgspec.Struct):
        a: msgspec.Raw

    try:
        msgspec.json.decode(b'{"a":' + raw + b"}", type=Holder)
    except msgspec.DecodeError:
        return False
    return True


@settings(SETTINGS, max_examples=200)
@given(st.text(st.characters(exclude_categories=("Cs",)), max_size=200))
def test_F10_canonical_every_token_msgspec_writes_is_canonical(text: str) -> None:
    assert canonical(ENCODE(text))


def test_F10_canonical_named_non_canonical_spellings() -> None:
    for raw in [rb'"\/"', rb'"\u00e9"', rb'"\u0041"', rb'"\u001F"', rb'"\u000a"', rb'"\u0008"', rb'"\u007f"',
                rb'"\ud83d\ude00"', rb'"a\u0022"', rb'"\u005c"', rb'"\\\/"', rb'"x\\\u0041"']:
        assert not canonical(raw), raw
        assert not definition(raw), raw
    assert not canonical(rb'"\ud800"')  # a lone surrogate's escape: msgspec refuses it (definition: False)
    for raw in [b'""', rb'"\u0001\u001f\b\f\n\r\t\"\\"', rb'"\\u0041"', rb'"\\\\u0041"', rb'"\\\u0001"',
                "é中😀\u2028\x7f".encode()]:
        raw = raw if raw.startswith(b'"') else b'"' + raw + b'"'
        assert canonical(raw), raw
        assert definition(raw), raw


def test_F10_canonical_across_its_1_MiB_windows() -> None:
    # A token of a few MiB with an escape (canonical or not) and a run of backslashes across each window edge.
    window = 1024 * 1024
    for at in range(window - 8, window + 3):
        for spelling, ok in ((rb"\u0001", True), (rb"\u0041", False), (rb"\n", True), (rb"\/", False),
                             (rb"\\\\\\", True), (rb"\\\\\\\u00e9", False), (rb"\\\\\\\u001f", True)):
            raw = b'"' + b"a" * (at - 1) + spelling + b"b" * 40 + b'"'
            assert canonical(raw) is ok, (at, spelling)
    big = ENCODE(("\\" * 3 + "u0041 é\x01") * 400_000)
    assert canonical(big) and definition(big)
    assert not canonical(big[:-1] + rb"\/" + b'"')


# --- raw_item_parts -------------------------------------------------------------------------------------------


class ValuesJson:
    """An item as the JSON of each of its values, as pi-format's `ItemJson` holds it (what a compact encoder
    writes for each), made here from the rendered item; long tokens as memoryviews, as the file's would be."""

    def __init__(self, item: Any) -> None:
        d = item.to_json()

        def enc(value: Any) -> Any:
            tok = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
            return memoryview(b"[" + tok + b"]")[1:-1] if len(tok) > 60_000 else tok

        self.id, self.kind, self.line = item.id, item.kind, item.line
        self.timestamp = enc(d["timestamp"])
        self.attrs = tuple((k, enc(v)) for k, v in d["attrs"].items())
        self.blocks = tuple(tuple((k, enc(v)) for k, v in b.items()) for b in d["blocks"])


def _session(entries: list[dict[str, Any]]) -> bytes:
    head = {"type": "session", "version": 3, "id": "01a22bb8-0000-7000-8000-000000000001",
            "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/p"}
    lines = [json.dumps(head)]
    for i, e in enumerate(entries):
        lines.append(json.dumps(dict(e, id=f"e{i}", parentId=f"e{i - 1}" if i else None,
                                     timestamp=e.get("timestamp", "2026-01-01T00:00:01.000Z")), ensure_ascii=False))
    return ("\n".join(lines) + "\n").encode()


def check_item_parts(entries: list[dict[str, Any]]) -> int:
    """Every item of the session: raw_item_parts over its values' JSON gives encoded_parts' bytes exactly."""
    parsed = parse(_session(entries), project="/p")
    assert isinstance(parsed, Parsed)
    count = 0
    for item in parsed.branches[parsed.default_branch].items:
        want = [raw for _, raw in encoded_parts(item)]
        got = raw_item_parts(ValuesJson(item))
        assert len(got) == len(want)
        assert [got[k] for k in range(len(got))] == want
        count += len(want)
    return count


def _message(role: str, content: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "message", "message": {"role": role, "content": content, **extra}}


def test_F10_raw_item_parts_are_the_parts_of_the_rendered_item() -> None:
    big = "x" * 600_000 + "é😀\n" * 200_000
    entries = [
        _message("user", [{"type": "text", "text": big}], timestamp=1),
        _message("assistant", [{"type": "thinking", "thinking": big}, {"type": "text", "text": "hi"},
                               {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"command": big[:300_000]}}]
                 + [{"type": "text", "text": f"t{i}"} for i in range(80)], stopReason="stop", errorMessage="e" * 70_000),
        _message("user", "short"),
        # Four 4 MiB parts of one text (the 20 MB line's shape, smaller), and a long timestamp.
        _message("user", [{"type": "text", "text": "ab\"c\\d" * 2_500_000}]),
        {**_message("user", [{"type": "text", "text": "t"}]), "timestamp": "9" * 70_000},
        # 64 blocks then more, each long: parts cut by blocks and by bytes.
        _message("user", [{"type": "text", "text": "中" * 300_000} for _ in range(3)] + [{"type": "text", "text": "s"}] * 70),
        _message("bashExecution", None, command="c" * 70_000, output="o" * 2_000_000, exitCode=0),
    ]
    assert check_item_parts(entries) > 12


@settings(SETTINGS, max_examples=25)
@given(st.lists(st.tuples(st.sampled_from(["a", "é", ASTRAL, "\n", "\x01", '"']),
                          st.sampled_from([0, 1, 65_535, 65_536, 65_537, L - 1, L, L + 1, ESCAPES_IN_1MIB + 1])),
                min_size=1, max_size=4),
       st.integers(0, 70))
def test_F10_raw_item_parts_at_the_limits(texts: list[tuple[str, int]], short_blocks: int) -> None:
    blocks = [{"type": "text", "text": atom * n} for atom, n in texts] + [{"type": "text", "text": "s"}] * short_blocks
    check_item_parts([_message("user", blocks), _message("assistant", [{"type": "thinking", "thinking": atom * n}
                                                                        for atom, n in texts], stopReason="stop")])


# --- the one long line, opened ------------------------------------------------------------------------------


def test_F10_a_long_line_is_paged_from_the_file_bytes_never_decoded_nor_held_twice(tmp_path: Path) -> None:
    # One 12 MB text (ASCII, and text with 2-, 3- and 4-byte characters and escapes): every page as bytes is the
    # dict page serialized, and while the first page is made what Python allocates stays within the file's
    # bytes, one page and a margin: the text is never decoded (1x, or 4x as a str of 4-byte characters) and
    # the page is not held both as its parts and as its bytes.
    for name, text in (("ascii", "word " * 2_400_000), ("mixed", "é中😀 \n\"q\\ " * 900_000)):
        root = tmp_path / name
        path = write_session(root, "s.jsonl", [header(root), entry("big", None, text)])
        specs = [RepositorySpec(str(root), "alpha", str(root))]
        cid = conversation_id(str(root), "alpha", "s.jsonl")
        reader = create_reader(lambda specs=specs: roots_from_specs(specs))
        reader.catalogue()  # the modules loaded, outside the measurement
        tracemalloc.start()
        try:
            page = reader.open(conversation=cid, as_json=True)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        size = os.path.getsize(path)
        assert page.startswith(b'{"ok":true,') and len(page) <= MAX_PAGE_BYTES
        assert peak < size + MAX_PAGE_BYTES + 3 * 2**20, (name, size, peak)
        # Every page (the cursors aside: each reader makes its own) is the dict page of another reader.
        fresh = create_reader(lambda specs=specs: roots_from_specs(specs))
        got, want = json.loads(page), json.loads(dump_bytes(fresh.open(conversation=cid)))
        pages = 1
        while True:
            # The cursor records and cursors aside (each reader makes its own), the same page.
            got.pop("cursor"), want.pop("cursor"), got.pop("follow"), want.pop("follow")
            cursor, dict_cursor = got["page"].pop("nextCursor"), want["page"].pop("nextCursor")
            assert got == want and got["page"]["parts"]
            if cursor is None:
                break
            got = json.loads(reader.next(cursor=cursor, conversation=cid, branch="main", as_json=True))
            want = json.loads(dump_bytes(fresh.next(cursor=dict_cursor, conversation=cid, branch="main")))
            pages += 1
        assert pages >= 2
