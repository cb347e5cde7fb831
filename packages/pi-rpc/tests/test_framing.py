"""LF framing (brief §1, fixture E2, mutant 11): split on LF only, strip one CR, decode per record."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mosaic.pi_rpc.framing import (
    MAX_RECORD_DEPTH,
    UNREADABLE_OUTPUT,
    FramingError,
    RecordDecoder,
    decode_record,
    encode_record,
    js_json_dumps,
)

# Every code point str.splitlines() treats as a line end besides LF; none of them ends a record.
SPLITLINES_ENDS = ["\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


def _feed_bytewise(dec: RecordDecoder, data: bytes) -> list[str]:
    out: list[str] = []
    for i in range(len(data)):
        out += dec.feed(data[i : i + 1])
    return out


def test_E2_u2028_u2029_inside_json_strings_and_crlf_each_one_record() -> None:
    # The exact shape pinned Pi writes (FACTS.md Part 2 H): raw E2 80 A8 / E2 80 A9 inside a string.
    rec1 = '{"type":"message_start","message":{"content":[{"type":"text","text":"line\u2028sep and para\u2029sep"}]}}'
    rec2 = '{"id":"h1","type":"response","command":"prompt","success":true}'
    raw = rec1.encode() + b"\n" + rec2.encode() + b"\r\n"
    assert "\u2028".encode() in raw and "\u2029".encode() in raw
    for data_feeder in (lambda d: d.feed(raw), lambda d: _feed_bytewise(d, raw)):
        dec = RecordDecoder()
        records = data_feeder(dec)
        assert records == [rec1, rec2]
        assert json.loads(records[0])["message"]["content"][0]["text"] == "line\u2028sep and para\u2029sep"
        assert dec.buffered == 0


def test_E2_every_splitlines_separator_stays_inside_the_record() -> None:
    text = "a" + "b".join(SPLITLINES_ENDS) + "z"
    rec = js_json_dumps({"text": text})
    # JSON escapes \r, \x0b, \x0c, \x1c-\x1e; write them raw too, as a hostile engine could.
    raw_rec = '{"text":"' + text + '"}'
    dec = RecordDecoder()
    assert dec.feed(rec.encode() + b"\n" + raw_rec.encode() + b"\n") == [rec, raw_rec]
    assert json.loads(rec)["text"] == text


def test_E2_only_one_trailing_cr_is_stripped() -> None:
    dec = RecordDecoder()
    assert dec.feed(b"a\r\r\nb\rc\n") == ["a\r", "b\rc"]


def test_multibyte_sequence_split_across_feeds_is_reassembled() -> None:
    payload = "caf\u00e9 \U0001f600 \u2028".encode()
    dec = RecordDecoder()
    out: list[str] = []
    for i in range(len(payload)):
        out += dec.feed(payload[i : i + 1])
    out += dec.feed(b"\n")
    assert out == ["caf\u00e9 \U0001f600 \u2028"]


def test_partial_record_waits_for_lf_and_close_returns_the_tail() -> None:
    dec = RecordDecoder()
    assert dec.feed(b'{"a":1}\n{"b":') == ['{"a":1}']
    assert dec.buffered == len(b'{"b":')
    assert dec.close() == '{"b":'
    assert RecordDecoder().close() is None


def test_empty_records_are_records() -> None:
    # Pi answers an empty input line with a parse error (rpc-mode.js 604-613): it is a record, not nothing.
    assert RecordDecoder().feed(b"\n\r\n") == ["", ""]


def test_record_over_cap_poisons_without_waiting_for_lf() -> None:
    dec = RecordDecoder(max_record_bytes=8)
    assert dec.feed(b"12345678\n") == ["12345678"]
    assert dec.feed(b"12345678\r\n") == ["12345678"]
    with pytest.raises(FramingError, match="exceeds"):
        dec.feed(b"1234567890")  # no LF yet: refused at once, memory stays bounded
    assert dec.poisoned is not None
    with pytest.raises(FramingError):
        dec.feed(b"\n")  # poisoned: never resynchronises on the next LF


def test_complete_record_over_cap_is_an_error_not_a_split() -> None:
    dec = RecordDecoder(max_record_bytes=4)
    with pytest.raises(FramingError):
        dec.feed(b"ok\n12345\nok\n")


def test_strict_mode_refuses_non_utf8_and_poisons() -> None:
    dec = RecordDecoder()
    with pytest.raises(FramingError, match="UTF-8"):
        dec.feed(b'{"a":"\xff"}\n')
    with pytest.raises(FramingError):
        dec.feed(b"{}\n")


def test_replace_mode_substitutes_like_node_string_decoder() -> None:
    dec = RecordDecoder(errors="replace")
    assert dec.feed(b"a\xffb\n") == ["a\ufffdb"]


def test_encode_record_is_json_stringify_bytes_plus_one_lf() -> None:
    value = {"type": "prompt", "message": "x\ny\u2028z\r\u0000\ud800", "n": 2.0, "f": 0.5}
    data = encode_record(value)
    assert data.endswith(b"\n") and data.count(b"\n") == 1
    assert b"\r" not in data
    assert "\u2028".encode() in data  # left raw, as JSON.stringify does
    assert data == b'{"type":"prompt","message":"x\\ny\xe2\x80\xa8z\\r\\u0000\\ud800","n":2,"f":0.5}\n'
    assert RecordDecoder().feed(data) == [data[:-1].decode()]


def test_encode_refuses_non_objects() -> None:
    with pytest.raises(TypeError):
        encode_record([1, 2])  # type: ignore[arg-type]


_text = st.text(alphabet=st.sampled_from(["a", "\u00e9", "\U0001f600", '"', "\\", "\n", *SPLITLINES_ENDS]),
                max_size=12)


@settings(max_examples=150, deadline=None)
@given(st.lists(_text, max_size=6), st.lists(st.integers(min_value=1, max_value=7), min_size=1, max_size=20))
def test_any_chunking_yields_the_encoded_records(texts: list[str], cuts: list[int]) -> None:
    records = [{"i": i, "text": t} for i, t in enumerate(texts)]
    stream = b"".join(encode_record(r) for r in records)
    dec = RecordDecoder()
    out: list[str] = []
    pos = 0
    k = 0
    while pos < len(stream):
        step = cuts[k % len(cuts)]
        out += dec.feed(stream[pos : pos + step])
        pos += step
        k += 1
    assert [json.loads(r) for r in out] == records
    assert dec.close() is None


# ---------------------------------------------------------------------------------------------------------
# decode_record: one record, strictly (issue 27: a line the decoder cannot take is a named kind, never an
# exception of another type)
# ---------------------------------------------------------------------------------------------------------


def _nest(levels: int) -> str:
    return '{"a":' * (levels - 1) + "{}" + "}" * (levels - 1)


def test_decode_record_reads_a_record_at_the_depth_limit_and_refuses_one_level_more() -> None:
    assert decode_record(_nest(MAX_RECORD_DEPTH))["a"]
    with pytest.raises(FramingError) as deeper:
        decode_record(_nest(MAX_RECORD_DEPTH + 1))
    assert deeper.value.kind == "too-deep"
    arrays = '{"a":' + "[" * (MAX_RECORD_DEPTH - 1) + "]" * (MAX_RECORD_DEPTH - 1) + "}"
    assert decode_record(arrays)
    with pytest.raises(FramingError) as recursion:  # past the interpreter's own limit: RecursionError inside
        decode_record(_nest(5000))
    assert recursion.value.kind == "too-deep"
    # Brackets inside strings are text: a flat record full of them is not deep.
    assert decode_record(json.dumps({"text": "[" * 5000 + "{" * 5000}))["text"]


CANNOT_TAKE = [
    ('{"a":NaN}', "number-out-of-range"), ('{"a":Infinity}', "number-out-of-range"),
    ('{"a":-Infinity}', "number-out-of-range"), ('{"a":1e400}', "number-out-of-range"),
    ('{"a":-1.8e308}', "number-out-of-range"), ('{"a":2' + "0" * 308 + "}", "number-out-of-range"),
    ('{"a":' + "9" * 4301 + "}", "number-out-of-range"),
    ("", "not-json"), ("{", "not-json"), ('{"a":1} x', "not-json"), ("{'a':1}", "not-json"),
    ("[]", "not-an-object"), ("null", "not-an-object"), ('"text"', "not-an-object"), ("42", "not-an-object"),
]


@pytest.mark.parametrize(("text", "kind"), CANNOT_TAKE, ids=[f"{k}-{i}" for i, (_, k) in enumerate(CANNOT_TAKE)])
def test_decode_record_names_the_kind_of_every_line_it_cannot_take(text: str, kind: str) -> None:
    with pytest.raises(FramingError) as refused:
        decode_record(text)
    assert refused.value.kind == kind and kind in UNREADABLE_OUTPUT


def test_decode_record_takes_every_number_json_stringify_writes() -> None:
    # The largest finite double, the largest integer literal a double holds (a 309-digit 10**308), the
    # smallest subnormal, -0, and integers past 2**53 as Node prints them.
    text = ('{"max":1.7976931348623157e+308,"big":1' + "0" * 308 + ',"tiny":5e-324,"neg":-0,'
            '"wide":12345678901234567000,"id":"x\\ud800"}')
    value = decode_record(text)
    assert value["max"] == 1.7976931348623157e308 and value["big"] == 10**308 and value["tiny"] == 5e-324
    assert value["wide"] == 12345678901234567000


def test_every_unreadable_kind_is_a_row_of_the_table() -> None:
    import typing

    from mosaic.pi_rpc.framing import UnreadableKind

    assert set(typing.get_args(UnreadableKind)) == set(UNREADABLE_OUTPUT)


@settings(max_examples=60, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True)
                    | st.text(), lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(), kids, max_size=4),
                    max_leaves=20))
def test_js_json_dumps_writes_a_value_nested_past_the_recursion_limit_as_json_stringify_does(value: object) -> None:
    # 3,000 arrays around any value: past Python's recursion limit, so written without recursion; the bytes
    # are those of the shallow value inside the same brackets (the fake's get_tree of a long chain, issue 27).
    deep: object = value
    for _ in range(3000):
        deep = [deep]
    assert js_json_dumps(deep) == "[" * 3000 + js_json_dumps(value) + "]" * 3000
    keyed: object = value
    for _ in range(1500):
        keyed = {"children": [keyed]}
    assert js_json_dumps(keyed) == '{"children":[' * 1500 + js_json_dumps(value) + "]}" * 1500
