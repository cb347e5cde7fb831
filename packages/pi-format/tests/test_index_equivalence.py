"""The line index is equivalent to the exact decoder, for every fixture and generated lines.

The reference is the parse with every line read by the exact decoder (Python's json on the line's UTF-8
text, NaN/Infinity refused): what every line went through before the index, and what the index still uses
for a line msgspec could judge differently. The two parses must agree on everything a caller can see:
header, refusals, entries (every field and rendered item), branches (every field, every item, every entry
id), notices, unreadable and superseded lines, flags; and `parse_appended` from any line boundary must
equal both.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import DATA, HEADER, PROJECT, repo
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mosaic.pi_format import FormatRefusal, Parsed, parse, parse_appended
from mosaic.pi_format.testing import UTF8_BLOCK, exact_decodes, exact_only, head_decodes, long_digit_runs

SETTINGS = settings(deadline=None, database=None, print_blob=True, max_examples=300,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def reference(data: bytes, project: str | None = None) -> Parsed | FormatRefusal:
    with exact_only():
        return parse(data, project=project)


def observe(result: Parsed | FormatRefusal) -> str:
    """Everything a caller can see of a result, as a repr (so 1, 1.0 and True stay different)."""
    if isinstance(result, FormatRefusal):
        return repr(("refusal", result.code, result.message))
    entries = [(e.id, e.raw_id, e.type, e.line, e.timestamp, e.parent, e.raw_parent_id, e.branch,
                None if e.item is None else e.item.to_json()) for e in result.entries.values()]
    branches = [(b.name, b.leaf, b.start, b.parent_branch, b.fork_point, b.item_count,
                 [i.to_json() for i in b.items], b.entry_ids) for b in result.branches.values()]
    slices = [[i.to_json() for i in b.items_from(k, 3)] for b in result.branches.values()
              for k in range(0, b.item_count + 1, 2)]
    return repr((result.header, result.default_branch, result.default_leaf,
                 [n.to_json() for n in result.notices], list(result.unreadable_runs()), result.superseded_lines,
                 result.forked_from_earlier_session, result.incomplete, result.line_count, entries, branches,
                 slices))


def check(data: bytes, project: str | None = None) -> None:
    want = observe(reference(data, project))
    got = parse(data, project=project)
    assert observe(got) == want
    if isinstance(got, FormatRefusal) or got.incomplete:
        return
    # parse_appended from every line boundary (a few of them for long files) equals the full parse.
    ends = [i + 1 for i, b in enumerate(data) if b == 10]
    step = max(1, len(ends) // 6)
    for cut in ends[:-1:step]:
        first = parse(data[:cut], project=project)
        if isinstance(first, FormatRefusal) or first.incomplete:
            continue
        assert observe(parse_appended(first, data[cut:])) == want


def fixture_files() -> list[Path]:
    files = sorted((repo() / "fixtures").rglob("*.jsonl")) + sorted(DATA.glob("*.jsonl"))
    assert len(files) >= 40, "the fixture tree is missing: regenerate it with fixtures/make/regenerate.py"
    return files


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: p.name)
def test_every_fixture_and_the_adversarial_corpus_parse_the_same_through_the_index(path: Path) -> None:
    check(path.read_bytes())


# --- generated lines ---------------------------------------------------------------------------------------

HEAD = json.dumps(HEADER, separators=(",", ":")).encode() + b"\n"
IDS = ["a", "b", "c", "d"]

# Values of a field as JSON text: what the index must read exactly as Python's json does, or give up on.
TRICKY_VALUES = [
    b'"a"', b'"b"', b'"c"', b'null', b'1', b'1.0', b'-0', b'true', b'false', b'[]', b'{}', b'"\\u0061"',
    b'"\\ud800"', b'"\\udc00x"', b'"\\ud83d\\ude00"', b'NaN', b'Infinity', b'-Infinity', b'1e400', b'-1e400',
    b'9' * 4301, b'9' * 4300, b'9' * 30, b'"\xff"', b'"\xc0\x80"', b'"\xed\xa0\x80"', b'"\xf0\x9f\x98\x80"',
    b'"\x01"', b'"\\u0000"', b'"\xe2\x80\xa8"', b'"x\\"y"', b'01', b'+1', b'1.', b'"' + b'\\n' * 3 + b'"',
    b'[' * 127 + b']' * 127, b'[' * 200 + b']' * 200, b'[' * 990 + b']' * 990, b'[' * 1200 + b']' * 1200,
    b'{"a":' * 300 + b'1' + b'}' * 300,
]
KEYS = [b'"type"', b'"id"', b'"parentId"', b'"display"', b'"message"', b'"content"', b'"\\u0069d"',
        b'"summary"', b'"customType"', b'"timestamp"']
TYPES = [b'"message"', b'"custom_message"', b'"compaction"', b'"branch_summary"', b'"label"', b'"session"',
         b'"model_change"', b'"nope"', b'5', b'null']
MESSAGES = [b'{"role":"user","content":"hi"}', b'{"role":"assistant","content":[{"type":"text","text":"t"}]}',
            b'{"role":"toolResult","content":[{"type":"image","mimeType":"image/png"}],"isError":false}',
            b'{"role":"odd"}', b'"not an object"', b'{"role":"user","content":[' + b'{"type":"text","text":"x"},' * 3
            + b'{"type":"thinking","thinking":"r","redacted":1}]}']


@st.composite
def tricky_line(draw: st.DrawFn) -> bytes:
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(st.sampled_from([b"", b"   ", b"\r", b"\t", b"{", b"[]", b"42", b'"s"', b"\xef\xbb\xbf{}",
                                     b"\x0c{}", b"{} x", HEAD[:-1], b"{\"id\":\"a\"}\x00"]))
    fields: list[bytes] = []
    if draw(st.booleans()):
        fields.append(b'"type":' + draw(st.sampled_from(TYPES)))
    if draw(st.integers(0, 7)):
        fields.append(b'"id":' + draw(st.sampled_from([b'"a"', b'"b"', b'"c"', b'"d"', b'"\\u0061"', b'"a\\ud800"',
                                                        b'5', b'null'])))
    if draw(st.booleans()):
        fields.append(b'"parentId":' + draw(st.sampled_from([b'"a"', b'"b"', b'"c"', b'"z"', b'null', b'7',
                                                              b'"\\ud800"', b'1e400'])))
    if draw(st.booleans()):
        fields.append(b'"message":' + draw(st.sampled_from(MESSAGES)))
    for _ in range(draw(st.integers(0, 3))):
        fields.append(draw(st.sampled_from(KEYS)) + b":" + draw(st.sampled_from(TRICKY_VALUES)))
    fields = draw(st.permutations(fields))
    body = b"{" + b",".join(fields) + b"}"
    if draw(st.integers(0, 4)) == 0:
        body = b" " + body + b"\t"
    if draw(st.integers(0, 5)) == 0:
        body += b"\r"
    return body


@SETTINGS
@given(st.lists(tricky_line(), max_size=14), st.booleans())
def test_generated_lines_parse_the_same_through_the_index(lines: list[bytes], partial: bool) -> None:
    data = HEAD + b"".join(x + b"\n" for x in lines)
    if partial:
        data += b'{"type":"message","id":"p"'
    check(data, PROJECT)


@SETTINGS
@given(st.lists(st.sampled_from(TRICKY_VALUES), min_size=1, max_size=4), st.integers(0, 3))
def test_a_tricky_value_anywhere_in_an_entry_is_judged_as_the_exact_decoder_judges_it(values: list[bytes],
                                                                                       at: int) -> None:
    extra = b"".join(b',"k%d":' % i + v for i, v in enumerate(values))
    entries = [b'{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"hi"}}',
               b'{"type":"message","id":"b","parentId":"a","message":{"role":"user","content":"yo"}}']
    entries[at % 2] = entries[at % 2][:-1] + extra + b"}"
    check(HEAD + b"\n".join(entries) + b"\n", PROJECT)


def _number_text(draw: st.DrawFn) -> bytes:
    kind = draw(st.integers(0, 3))
    if kind == 0:
        return repr(draw(st.floats(allow_nan=False, allow_infinity=False))).encode()
    if kind == 1:
        return str(draw(st.integers(-(10**30), 10**30))).encode()
    mantissa = draw(st.integers(0, 10**20))
    frac = draw(st.integers(0, 10**12))
    exp = draw(st.integers(-330, 330))
    sign = draw(st.sampled_from([b"", b"-"]))
    e = draw(st.sampled_from([b"e", b"E", b"e+", b"E-"]))
    return sign + b"%d.%d" % (mantissa, frac) + e + str(abs(exp)).encode()


@SETTINGS
@given(st.lists(st.composite(_number_text)(), min_size=1, max_size=12))
@example([b"1e400", b"-1.5E+309", b"0.1", b"12345678901234567890123"])  # msgspec refuses the first two
def test_numbers_in_a_rendered_entry_read_the_same_through_msgspec_and_the_exact_decoder(numbers: list[bytes]) -> None:
    # Rendering decodes a line with msgspec and falls back to the exact decoder only where msgspec refuses it:
    # every number msgspec accepts must be the value Python's json reads (arguments are carried as values).
    args = b"[" + b",".join(numbers) + b"]"
    entry = (b'{"type":"message","id":"a","parentId":null,"message":{"role":"assistant","content":[{"type":'
             b'"toolCall","id":"c1","name":"bash","arguments":{"n":' + args + b'}}]}}')
    check(HEAD + entry + b"\n", PROJECT)


def test_blocks_of_lines_with_one_bad_byte_fall_back_and_the_rest_agree() -> None:
    # More than one UTF-8 block of lines, one bad byte in the middle one: every line still judged exactly.
    good = b'{"type":"message","id":"e%d","parentId":%s,"message":{"role":"user","content":"%s"}}\n'
    lines = [good % (i, b"null" if i == 0 else b'"e%d"' % (i - 1), b"\xc3\xa9" * 300) for i in range(5000)]
    lines[2500] = lines[2500].replace(b"\xc3\xa9", b"\xff", 1)
    data = HEAD + b"".join(lines)
    assert len(data) > 2 * UTF8_BLOCK
    check(data, PROJECT)
    result = parse(data, project=PROJECT)
    assert isinstance(result, Parsed) and list(result.unreadable_runs()) == [(2502, 1)]


def _with_budget(frames_left: int, fn: Any) -> Any:
    """Call `fn` with about `frames_left` frames of the interpreter's recursion budget left."""
    import inspect
    import sys

    depth = len(inspect.stack(0))

    def down(n: int) -> Any:
        return fn() if n <= 0 else down(n - 1)

    return down(sys.getrecursionlimit() - depth - frames_left)


def test_a_deeply_nested_entry_renders_the_same_whatever_the_stack_depth_of_the_render() -> None:
    # Both decoders stop at the interpreter's recursion budget, which is larger at parse time than where a
    # page may render. A line that nests deeply is read by the exact decoder at parse time and its value
    # kept, so rendering it later never depends on the caller's stack (as before the index).
    nested = b"[" * 900 + b"]" * 900
    data = HEAD + (b'{"type":"message","id":"a","parentId":null,"x":' + nested +
                   b',"message":{"role":"user","content":"deep"}}\n')
    want = reference(data, PROJECT)
    got = parse(data, project=PROJECT)
    assert isinstance(want, Parsed) and isinstance(got, Parsed)
    items = _with_budget(200, lambda: [i.to_json() for i in got.branches["main"].items])
    assert items == [i.to_json() for i in want.branches["main"].items]
    assert items[0]["blocks"] == [{"kind": "text", "text": "deep"}]


def test_an_integer_longer_than_pythons_digit_limit_makes_the_line_unreadable_as_before() -> None:
    # msgspec skips such a number where Python's json refuses it: the index must send the line to the exact
    # decoder, so it stays an unreadable line ("not JSON") wherever the number sits, as before the index.
    digits = b"7" * 4301
    lines = [b'{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"hi"}}',
             b'{"type":"message","id":"b","parentId":"a","x":' + digits + b',"message":{"role":"user"}}',
             b'{"type":"message","id":"c","parentId":"a","message":{"role":"user","content":"yo"},"n":[1,'
             + digits + b"]}"]
    data = HEAD + b"\n".join(lines) + b"\n"
    try:
        check(data, PROJECT)
        result = parse(data, project=PROJECT)
    except ValueError as exc:  # what int() says past the limit: the line must be unreadable, never a crash
        pytest.fail(f"the parse raised {exc!r} on a number longer than Python's digit limit")
    assert isinstance(result, Parsed)
    assert list(result.unreadable_runs()) == [(3, 2)] and list(result.entries) == ["n.a"]


def test_every_digit_run_over_the_limit_is_found_wherever_it_sits_against_the_sampling_step() -> None:
    # The search looks at one byte every 4,096 (a mechanism: no parse shows which lines it flagged, only that
    # they were judged exactly, above); a run of 4,301 digits must be found at every offset against it.
    for n in (4300, 4301, 4302, 8193, 9000):
        for pre in (0, 1, 4094, 4095, 4096, 4097, 5000):
            data = HEAD + b"x" * pre + b"9" * n + b"\n"
            got = long_digit_runs(data, len(HEAD), len(data))
            assert bool(got) == (n > 4300), (n, pre, got)
            assert all(len(HEAD) + pre <= at < len(HEAD) + pre + n for at in got)


def test_a_malformed_line_is_classified_without_the_exact_decoder() -> None:
    # A malformed line costs what a valid one does. A line msgspec refuses as malformed JSON with no
    # surrogate escape is malformed for Python's json too, so its reason is found without decoding it again;
    # the reasons (and so the notices) are the exact decoder's.
    lines = [b"{x}", b'{"type":"message","id":', b"garbage", b"   ", b"\xe3\x80\x80", b"[1,", b"{}}", b"\r",
             b'{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"hi"}}', b"nope"]
    data = HEAD + b"".join(x + b"\n" for x in lines)
    want = observe(reference(data, PROJECT))
    with exact_decodes() as calls:
        got = parse(data, project=PROJECT)
    assert calls == [HEAD.decode().rstrip("\n")]  # line 1, the header, is always read exactly; nothing else
    assert observe(got) == want
    assert isinstance(got, Parsed) and list(got.unreadable_runs()) == [(2, 8), (11, 1)]
    message = got.branches["main"].items[0].notice.message  # type: ignore[union-attr]
    assert message == "lines 2-9 (8 lines) are unreadable (not JSON; blank) and skipped"


def test_a_run_of_malformed_lines_is_judged_by_its_bytes_with_no_decode_per_line() -> None:
    # Issue 34: 3.8 MiB of short garbage lines cost a decode and an exception per line. A line that cannot
    # start a JSON value, an object whose first byte inside is no key, and a torn object are judged by their
    # bytes, a run of them in one step: the head decoder reads the first line of a run that opens with a
    # brace (the run starts there) and no other; the notices are the exact decoder's.
    shapes = {"x": b"x", "{x}": b"{x}", "torn": b'{"type":"message","id":"a"', "]": b" ]", "NaN": b"NaN"}
    for name, bad in shapes.items():
        data = HEAD + (bad + b"\n") * 20_000 + b'{"type":"message","id":"a","parentId":null}\n'
        with head_decodes() as calls:
            got = parse(data, project=PROJECT)
        assert isinstance(got, Parsed) and list(got.unreadable_runs()) == [(2, 20_000)], name
        assert len(calls) <= 2, (name, len(calls))  # the run's first line at most, and the entry
        assert observe(got) == observe(reference(data, PROJECT)), name


# Short lines of the bytes the quick verdict looks at (brackets, quotes, whitespace str.strip() strips and
# JSON does not, a non-ASCII space, a CR): whatever the index judges by bytes, the exact decoder judges alike.
_LINE_BYTES = st.sampled_from([b"{", b"}", b"[", b"]", b'"', b"x", b"1", b"-", b"t", b"n", b":", b",", b" ",
                               b"\t", b"\r", b"\x0c", b"\x1c", b"\x00", b"\xc2\xa0", b"\xff", b'"a":1',
                               b'"id":"a"', b'"type":"message"'])


@SETTINGS
@given(st.lists(st.lists(_LINE_BYTES, max_size=8).map(b"".join), min_size=1, max_size=12))
@example([b"{x}", b"{", b"{}", b"{ }", b"{x} ", b"x", b"\x0c", b"{\r", b'{"id":"a"}\r'])
@example([b"x", b"]", b"", b"x", b" x", b"x", b"1", b"x"])
def test_short_lines_judged_by_their_bytes_read_as_the_exact_decoder_reads_them(lines: list[bytes]) -> None:
    check(HEAD + b"".join(x + b"\n" for x in lines), PROJECT)


def test_a_line_msgspec_refuses_for_a_surrogate_escape_is_read_by_the_exact_decoder() -> None:
    # A lone surrogate escape is where msgspec and Python's json part: the line takes the exact decoder, which
    # carries it (a record) or refuses it for its own reason.
    lines = [b'{"type":"message","id":"a\\ud800","parentId":null,"message":{"role":"user","content":"\\udc00x"}}',
             b'{"type":"message","id":"b","parentId":"a\\ud800","message":{"role":"user","content":"yo"}}',
             b'{"type":"message","id":"c","x":"\\ud800"',
             b'"\\ud800"']
    data = HEAD + b"".join(x + b"\n" for x in lines)
    check(data, PROJECT)
    got = parse(data, project=PROJECT)
    assert isinstance(got, Parsed) and len(got.entries) == 2 and list(got.unreadable_runs()) == [(4, 2)]
    assert got.branches["main"].items[0].blocks[0].text == "\udc00x"  # type: ignore[union-attr]
    assert "not JSON; not a JSON object" in got.branches["main"].items[2].notice.message  # type: ignore[union-attr]
