"""stream-json framing, strict (README "Framing"): a line ends at an LF byte and nowhere else, and the first line
the decoder cannot take poisons it with the reason named in its table; nothing raises, nothing waits. The
core turns that into a protocol violation and stops reading (test_link_core.py has the link's side)."""

from __future__ import annotations

import json

import pytest

from mosaic.claude_rpc.framing import (
    DEFAULT_MAX_DEPTH,
    LineDecoder,
    Undecodable,
    decode_line,
    encode_line,
)
from mosaic.claude_rpc.link import ClaudeLinkCore, Outcome, Poisoned, ProtocolViolation

SEPARATORS = ["\u2028", "\u2029", "\u0085", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e"]


def test_E2_a_line_splits_at_lf_only_and_every_other_separator_stays_inside_it() -> None:
    decoder = LineDecoder()
    text = "".join(SEPARATORS)
    line = json.dumps({"type": "assistant", "text": text}, ensure_ascii=False).encode()
    # the separators inside a JSON string are escaped by JSON.stringify except U+2028/U+2029/U+0085: raw
    assert b"\xe2\x80\xa8" in line and b"\xc2\x85" in line
    out = decoder.feed(line[:7]) + decoder.feed(line[7:] + b"\n" + line + b"\r\n")
    assert out == [{"type": "assistant", "text": text}] * 2  # a CR before the LF is JSON whitespace


@pytest.mark.parametrize(("line", "reason"), [
    (b"\xff\xfe{}", "not-utf8"),
    (b'{"type":"a","t":"\xed\xa0\x80"}', "not-utf8"),  # a surrogate encoded raw is not UTF-8
    (b"", "not-json"),
    (b"not json", "not-json"),
    (b'{"type":"a"} trailing', "not-json"),
    (b'{"type":"a","x":NaN}', "not-json"),
    (b'{"type":"a","x":-Infinity}', "not-json"),
    (b'{"type":"a","x":1e400}', "number-out-of-range"),
    (b'{"type":"a","x":-1e309}', "number-out-of-range"),
    (b'{"type":"a","x":' + b"9" * 400 + b"}", "number-out-of-range"),
    (b'{"type":"a","x":' + b"9" * 5000 + b"}", "number-out-of-range"),
    (b'{"type":"a","type":"b"}', "duplicate-key"),
    (b'{"type":"a","x":{"k":1,"k":2}}', "duplicate-key"),
    (b"[1,2]", "not-an-object"),
    (b'"type"', "not-an-object"),
    (b'{"kind":"a"}', "not-an-object"),
    (b'{"type":7}', "not-an-object"),
    (b'{"type":"a","x":' + b"[" * 5000 + b"]" * 5000 + b"}", "too-deep"),
])
def test_each_line_the_decoder_cannot_take_is_named_and_poisons_it(line: bytes, reason: str) -> None:
    decoder = LineDecoder()
    good = b'{"type":"system"}\n'
    out = decoder.feed(good + line + b"\n" + good)
    assert out[0] == {"type": "system"} and len(out) == 2
    bad = out[1]
    assert isinstance(bad, Undecodable) and bad.reason == reason, bad
    assert decoder.failed == bad and decoder.feed(good) == [] and decoder.close() is None


def test_numbers_at_the_edge_of_a_double_are_taken() -> None:
    value = decode_line(b'{"type":"a","big":1.7976931348623157e308,"int":' + str(2 ** 1023).encode()
                        + b',"small":5e-324,"neg":-0}')
    assert isinstance(value, dict) and value["int"] == 2 ** 1023 and value["big"] == 1.7976931348623157e308


def test_the_depth_limit_is_exact() -> None:
    def nested(depth: int) -> bytes:  # the object itself is depth 1
        return b'{"type":"a","x":' + b"[" * (depth - 1) + b"]" * (depth - 1) + b"}"

    assert isinstance(decode_line(nested(DEFAULT_MAX_DEPTH)), dict)
    too = decode_line(nested(DEFAULT_MAX_DEPTH + 1))
    assert isinstance(too, Undecodable) and too.reason == "too-deep"


def test_a_line_over_the_cap_is_refused_as_soon_as_the_cap_passes_without_waiting_for_its_lf() -> None:
    cap = 64
    exact = b'{"type":"a","p":"' + b"x" * (cap - 19) + b'"}'
    assert len(exact) == cap
    decoder = LineDecoder(max_line_bytes=cap)
    assert decoder.feed(exact + b"\n") == [{"type": "a", "p": "x" * (cap - 19)}]
    assert decoder.feed(b"y" * cap) == []  # exactly the cap held, no LF yet: still waiting is right
    out = decoder.feed(b"y")  # one byte more and no LF: refused now
    assert len(out) == 1 and isinstance(out[0], Undecodable) and out[0].reason == "line-too-long"
    decoder = LineDecoder(max_line_bytes=cap)
    out = decoder.feed(exact[:-1] + b' }\n')  # cap + 1 with its LF in the same chunk
    assert isinstance(out[0], Undecodable) and out[0].reason == "line-too-long"


def test_a_long_line_fed_a_byte_at_a_time_decodes_and_the_scan_resumes_where_it_stopped() -> None:
    decoder = LineDecoder()
    line = json.dumps({"type": "user", "p": "z" * 20000}).encode() + b"\n"
    out: list[object] = []
    for i in range(len(line)):
        out += decoder.feed(line[i:i + 1])
    assert out == [json.loads(line)] and decoder.pending == 0


def test_the_output_ending_inside_a_line_is_truncated_and_an_empty_tail_is_not() -> None:
    decoder = LineDecoder()
    assert decoder.feed(b'{"type":"a"}\n{"ty') == [{"type": "a"}]
    tail = decoder.close()
    assert tail is not None and tail.reason == "truncated" and tail.size == 4
    clean = LineDecoder()
    clean.feed(b'{"type":"a"}\n')
    assert clean.close() is None


def test_encode_line_is_one_compact_ascii_line_that_json_reads_back_lone_surrogates_included() -> None:
    obj = {"type": "user", "text": "é 日本 \U0001F600 \u2028 \ud800 \n"}
    line = encode_line(obj)
    assert line.endswith(b"\n") and line.count(b"\n") == 1 and line.isascii() and b" " not in line.split(b'"text"')[0]
    assert json.loads(line) == obj
    with pytest.raises(ValueError):
        encode_line({"type": "user", "x": float("nan")})


def test_the_core_turns_an_undecodable_line_into_a_named_violation_and_stops_reading() -> None:
    core = ClaudeLinkCore()
    init = core.send_initialize(now=0.0)
    out = core.next_write()
    assert out is init
    core.write_done(init, accepted=len(init.data), error=None, now=0.0)
    events = core.feed(b'{"type":"system","subtype":"status"}\n{"type":"a","x":1e999}\n{"type":"system"}\n', now=1.0)
    kinds = [type(e).__name__ for e in events]
    assert kinds == ["StatusChanged", "ProtocolViolation", "OutcomeUnknown", "Poisoned"]
    violation = events[1]
    assert isinstance(violation, ProtocolViolation) and violation.reason == "number-out-of-range"
    assert init.outcome is Outcome.UNKNOWN and init.unknown_reason == "output-unreadable"
    assert core.output_closed and isinstance(events[-1], Poisoned)
