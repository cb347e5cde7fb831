"""`Parsed.render_json`: an entry's item as the JSON of its values, cut from its line's bytes (issue 34).

The contract: wherever `render_json(ref)` is not None, it is value for value the JSON a compact encoder
writes for `render(ref).to_json()` (`_json_of` below: Python's json, ensure_ascii=False, compact); where the
line's bytes are not those bytes (a non-canonical escape, whitespace or a repeated key in the arguments, a
float or integer written otherwise, a notice) it is None and the caller renders. Held on every fixture, on
generated sessions, on hostile shapes and under Hypothesis; and it is not vacuous: what Pi writes (every
entry item of the pinned Pi's fixtures, well-typed entries written as JSON.stringify writes them) takes it.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from helpers import HEADER, PROJECT, entry, msg, ok, session
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fixtures import EXPECTED_REFUSALS, fixture_files, project_of

from mosaic.pi_format import Parsed, parse
from mosaic.pi_format.model import ItemJson

SETTINGS = settings(deadline=None, database=None, print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _enc(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def _json_of(parsed: Parsed, ref: int) -> tuple[Any, ...]:
    """What `render_json(ref)` must hold: the JSON of each value of the rendered item's to_json()."""
    d = parsed.render(ref).to_json()
    assert d["entry"] == d["id"] and d["notice"] is None
    attrs: dict[str, Any] = d["attrs"]  # type: ignore[assignment]
    blocks: list[dict[str, Any]] = d["blocks"]  # type: ignore[assignment]
    return (d["id"], d["kind"], d["line"], _enc(d["timestamp"]), tuple((k, _enc(v)) for k, v in attrs.items()),
            tuple(tuple((k, _enc(v)) for k, v in b.items()) for b in blocks))


def _pieces(ij: ItemJson) -> tuple[Any, ...]:
    return (ij.id, ij.kind, ij.line, bytes(ij.timestamp), tuple((k, bytes(v)) for k, v in ij.attrs),
            tuple(tuple((k, bytes(v)) for k, v in b) for b in ij.blocks))


def check_all(parsed: Parsed) -> tuple[int, int]:
    """Every ref of every branch: render_json is None or the rendered item's JSON. (refs, refs it took)."""
    seen: set[int] = set()
    took = 0
    for branch in parsed.branches.values():
        for ref in branch.refs_from(0, 1 << 30):
            if ref in seen:
                continue
            seen.add(ref)
            ij = parsed.render_json(ref)
            if ij is not None:
                assert _pieces(ij) == _json_of(parsed, ref), ref
                took += 1
    return len(seen), took


def _one(value: Any) -> tuple[Parsed, int]:
    """A session of the header and one entry line (`value`: a dict, or a raw line as bytes); its item's ref."""
    parsed = ok(parse(session(value), project=PROJECT))
    refs = parsed.branches["main"].refs_from(0, 10)
    assert len(refs) == 1, refs
    return parsed, refs[0]


def test_render_json_is_the_rendered_item_for_every_fixture_entry() -> None:
    """Every entry of every fixture (the pinned Pi's sessions and the adversarial files); every entry item
    of the Pi sessions takes the fast path (Pi writes JSON.stringify's canonical JSON)."""
    total = took = 0
    for path in fixture_files():
        if path.name in EXPECTED_REFUSALS and "adversarial" in path.parts:
            continue
        parsed = ok(parse(path.read_bytes(), project=project_of(path)))
        n, t = check_all(parsed)
        total, took = total + n, took + t
        if "pi-0.85.1" in path.parts:
            for branch in parsed.branches.values():
                for ref in branch.refs_from(0, 1 << 30):
                    if ref >= 0 and not ref & 1 and parsed.render(ref).kind != "notice":
                        assert parsed.render_json(ref) is not None, (path, ref)
    assert total >= 500 and took >= 0.9 * total


def _generated(rng: random.Random, turns: int) -> bytes:
    """A session of the benchmark's shapes: user, assistant (thinking, text, a tool call), tool result,
    reply; 2- and 4-byte characters and escapes in every text; a fork every 20 turns."""
    vocab = ["the", "über", "naïve", "日本語", "emoji 😀", "line\nbreak", "tab\tstop", "\"quoted\"", "a\\b",
             "path/to/x.py", "\x01\x1f", "\u2028"]

    def words(n: int) -> str:
        return " ".join(rng.choice(vocab) for _ in range(n))

    lines: list[Any] = []
    parent = None
    for t in range(turns):
        u, a, r, f = (f"u{t}", f"a{t}", f"r{t}", f"f{t}")
        lines.append(msg(u, parent, text=words(20)))
        lines.append({**msg(a, u, role="assistant"), "message": {
            "role": "assistant", "content": [
                {"type": "thinking", "thinking": words(40), "thinkingSignature": "rc"},
                {"type": "text", "text": words(10)},
                {"type": "toolCall", "id": f"call_{t}|fc_{t}", "name": "bash",
                 "arguments": {"command": "printf " + words(5), "n": t, "opts": [True, None, {"x": "é"}]}}],
            "api": "openai-completions", "provider": "fakeprov", "model": "fake-model-1",
            "usage": {"input": 1, "cost": {"total": 0.5}}, "stopReason": "toolUse", "timestamp": 17}})
        lines.append({**msg(r, a, role="toolResult", text=words(30)),
                      "message": {"role": "toolResult", "toolCallId": f"call_{t}|fc_{t}", "toolName": "bash",
                                  "content": [{"type": "text", "text": words(30)}], "isError": t % 3 == 0}})
        lines.append(msg(f, r, role="assistant", text=words(15), stopReason="stop"))
        if t % 20 == 10:
            lines.append(msg(f"g{t}", r, role="assistant", text=words(5)))
        parent = f
    return session(*lines)


def test_render_json_is_the_rendered_item_for_a_generated_session() -> None:
    parsed = ok(parse(_generated(random.Random(7), 120), project=PROJECT))
    total, took = check_all(parsed)
    assert total >= 480 and took == total  # written as JSON.stringify writes: every item takes it


# Lines whose bytes are not what an encoder writes for their values: rendered, never spliced.
NOT_SPLICED = {
    "an escaped solidus": rb'"text":"a\/b"',
    "a non-ASCII character escaped": rb'"text":"caf\u00e9"',
    "uppercase hex": rb'"text":"a\u001Fb"',
    "a control character's short form spelled long": rb'"text":"a\u000ab"',
    "a surrogate pair escaped": rb'"text":"\ud83d\ude00"',
    "a lone surrogate": rb'"text":"\ud800"',
    "an escaped letter in the block type": rb'"text":"x","type":"t\u0065xt"',
}


@pytest.mark.parametrize("name", sorted(NOT_SPLICED))
def test_render_json_refuses_non_canonical_escapes(name: str) -> None:
    raw = (b'{"type":"message","id":"e1","parentId":null,"timestamp":"t","message":{"role":"user","content":'
           b'[{"type":"text",' + NOT_SPLICED[name] + b"}]}}")
    parsed, ref = _one(raw)
    assert parsed.render_json(ref) is None
    parsed.render(ref)  # the caller's path still renders it


def test_render_json_escaped_solidus_in_an_unused_field_still_refuses_the_line() -> None:
    """The line is judged whole: a `\\/` anywhere (here in `usage`) sends the entry to the caller's path."""
    raw = (b'{"type":"message","id":"e1","parentId":null,"timestamp":"t","message":{"role":"user","content":'
           b'[{"type":"text","text":"x"}],"usage":{"u":"a\\/b"}}}')
    parsed, ref = _one(raw)
    assert parsed.render_json(ref) is None
    plain, pref = _one(raw.replace(b"a\\/b", b"a/b"))
    assert plain.render_json(pref) is not None


def test_render_json_escaped_backslash_before_a_letter_is_canonical() -> None:
    """`\\\\u00e9` is an escaped backslash then the letters u00e9: canonical, spliced as written."""
    parsed, ref = _one(msg("e1", None, text="C:\\users\\u00e9 \\/ \\\\n"))
    ij = parsed.render_json(ref)
    assert ij is not None and _pieces(ij) == _json_of(parsed, ref)


ARGUMENTS_NOT_SPLICED = {
    "whitespace": rb'{"a": 1}',
    "a repeated key": rb'{"a":1,"a":2}',
    "a float msgspec writes otherwise": rb'{"a":1e21}',
    "a float Python writes otherwise": rb'{"a":1e-7}',
    "a float with a redundant zero": rb'{"a":1.50}',
    "minus zero": rb'{"a":-0}',
}


@pytest.mark.parametrize("name", sorted(ARGUMENTS_NOT_SPLICED))
def test_render_json_refuses_arguments_an_encoder_writes_otherwise(name: str) -> None:
    raw = (b'{"type":"message","id":"e1","parentId":null,"timestamp":"t","message":{"role":"assistant",'
           b'"content":[{"type":"toolCall","id":"c1","name":"bash","arguments":' + ARGUMENTS_NOT_SPLICED[name]
           + b"}]}}")
    parsed, ref = _one(raw)
    assert parsed.render_json(ref) is None
    parsed.render(ref)


@pytest.mark.parametrize("args", [{"a": 1.5, "b": [0.1, 100.0, 5e-324, 1234.5, -2.5]}, {"s": "é\n\"\\"}, [], "text", 3,
                                  None, {"deep": [[[{"x": []}]]]}, {"big": 123456789012345678901234567890}])
def test_render_json_arguments_an_encoder_writes_the_same_are_spliced(args: Any) -> None:
    parsed, ref = _one({**msg("e1", None), "message": {"role": "assistant", "content": [
        {"type": "toolCall", "id": "c1", "name": "bash", "arguments": args}]}})
    ij = parsed.render_json(ref)
    assert ij is not None and _pieces(ij) == _json_of(parsed, ref)


def test_render_json_integer_attributes_long_or_minus_zero_are_rendered() -> None:
    for raw, spliced in ((b"-0", False), (b"1234567890123456789", False), (b"123456789012345678", True),
                         (b"-5", True), (b"0", True), (b"5.0", True), (b"1e2", True)):
        line = (b'{"type":"message","id":"e1","parentId":null,"message":{"role":"bashExecution","command":"ls",'
                b'"output":"","exitCode":' + raw + b"}}")
        parsed, ref = _one(line)
        ij = parsed.render_json(ref)
        assert (ij is not None) == spliced, raw
        if ij is not None:
            assert _pieces(ij) == _json_of(parsed, ref), raw


# Wrong-typed fields: the fast path makes what render_entry makes (an unsupported block, an absent attribute).
WRONG_TYPED: list[Any] = [
    msg("e1", None, text=5),  # type: ignore[arg-type]
    {**msg("e1", None), "message": {"role": "user", "content": [{"type": "text"}]}},
    {**msg("e1", None), "message": {"role": "user", "content": [{"type": "text", "text": None}]}},
    {**msg("e1", None), "message": {"role": "assistant", "content": [{"type": "thinking", "thinking": 3}]}},
    {**msg("e1", None), "message": {"role": "assistant", "content": [{"type": "thinking"}]}},
    *({**msg("e1", None), "message": {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "visible", "redacted": r}]}}
      for r in (True, False, None, 0, 0.0, -0.0, 1, 0.5, "", "no", [], {}, [0])),
    {**msg("e1", None), "message": {"role": "assistant", "content": [
        {"type": "toolCall", "id": 5, "name": ["x"]}, {"type": "image"}, {"type": "image", "mimeType": 3},
        {"type": "image", "mimeType": "image/png", "data": "AAAA"}, {"type": 7}, {"text": "no type"},
        {"type": None}, {"type": "x" * 100}, {"type": "é" * 40}, {"type": "日" * 70}, {"type": ""},
        {"type": "toolCall", "id": "call_1|fc_1", "name": "bash"},
        {"type": "toolCall", "id": "ok-id", "name": "n", "arguments": {"a": [1, "b"]}}],
        "stopReason": 5, "errorMessage": None, "provider": "p", "model": ["m"], "api": "a"}},
    {**msg("e1", None), "message": {"role": "user", "content": "a plain string"}},
    {**msg("e1", None), "message": {"role": "user", "content": None}},
    {**msg("e1", None), "message": {"role": "user"}},
    {**msg("e1", None), "message": {"role": "user", "content": []}},
    {**msg("e1", None), "timestamp": 5},
    {**msg("e1", None), "timestamp": None},
    {"type": "message", "id": "e1", "parentId": None, "message": {"role": "user", "content": "x"}},
    {**msg("e1", None), "message": {"role": "toolResult", "toolCallId": "call_1|fc_1", "toolName": 3,
                                    "isError": "yes", "content": [{"type": "text", "text": "out"}]}},
    {**msg("e1", None), "message": {"role": "toolResult", "toolCallId": 4, "isError": False, "content": "out"}},
    {**msg("e1", None), "message": {"role": "bashExecution", "command": 5, "output": "o", "exitCode": True,
                                    "cancelled": 1, "truncated": False, "excludeFromContext": "no"}},
    {**msg("e1", None), "message": {"role": "bashExecution", "command": "ls", "exitCode": 5.0}},
    entry("custom_message", "e1", None, customType="note", display=True, content="shown"),
    entry("custom_message", "e1", None, customType=5, display=True, content=[{"type": "text", "text": "x"}]),
    entry("compaction", "e1", None, summary="s", tokensBefore=1200, firstKeptEntryId="k1"),
    entry("compaction", "e1", None, summary=5, tokensBefore="12", firstKeptEntryId=3),
    entry("compaction", "e1", None, summary="s", tokensBefore=True, firstKeptEntryId="call_1|fc_1"),
    entry("branch_summary", "e1", None, summary="s", fromId="f1"),
    entry("branch_summary", "e1", None, summary=None, fromId=["f1"]),
]


@pytest.mark.parametrize("n", range(len(WRONG_TYPED)))
def test_render_json_wrong_typed_fields_are_what_render_entry_makes(n: int) -> None:
    parsed, ref = _one(WRONG_TYPED[n])
    ij = parsed.render_json(ref)
    assert ij is not None, WRONG_TYPED[n]
    assert _pieces(ij) == _json_of(parsed, ref)


# The shapes the fast path leaves to render_entry: notices, and contents or blocks of a wrong type.
RENDERED: list[Any] = [
    {**msg("e1", None), "message": {"role": "wizard", "content": "x"}},
    {**msg("e1", None), "message": "not an object"},
    {**msg("e1", None), "message": None},
    entry("mystery", "e1", None),
    {**msg("e1", None), "message": {"role": "user", "content": 5}},
    {**msg("e1", None), "message": {"role": "user", "content": {"type": "text", "text": "x"}}},
    {**msg("e1", None), "message": {"role": "user", "content": ["a string block"]}},
]


@pytest.mark.parametrize("n", range(len(RENDERED)))
def test_render_json_leaves_notices_and_wrong_typed_contents_to_render(n: int) -> None:
    parsed, ref = _one(RENDERED[n])
    assert parsed.render_json(ref) is None
    parsed.render(ref)


def test_render_json_names_no_item_for_notices_and_refuses_bad_refs() -> None:
    parsed = ok(parse(session(msg("a", None), b"garbage", msg("b", "missing")), project=PROJECT))
    refs = parsed.branches[parsed.default_branch].refs_from(0, 10)
    kinds = [parsed.render(r).kind for r in refs]
    assert "notice" in kinds
    for r, kind in zip(refs, kinds, strict=True):
        assert (parsed.render_json(r) is None) == (kind == "notice")
    with pytest.raises(ValueError):
        parsed.render_json(10_000)


# Hypothesis: entries of every shown type with random strings (escapes, controls, non-ASCII, astral, lone
# surrogates, long) and random wrong-typed fields, written canonically or with non-canonical escapes.
TEXT = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=60) | st.sampled_from(
    ["", "\\", "\"", "/", "\\u00e9", "\ud800", "\udfff x", "😀", "\x00\x1f\x7f", "\u2028", "x" * 3000])
SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-(10**20), 10**20),
                   st.floats(allow_nan=False, allow_infinity=False), TEXT)
JSONV = st.recursive(SCALAR, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
                     max_leaves=8)
FIELD = st.one_of(TEXT, SCALAR, JSONV)
BLOCK = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": FIELD}),
    st.fixed_dictionaries({"type": st.just("thinking"), "thinking": FIELD},
                          optional={"redacted": SCALAR, "thinkingSignature": TEXT}),
    st.fixed_dictionaries({"type": st.just("toolCall")}, optional={"id": FIELD, "name": FIELD, "arguments": JSONV}),
    st.fixed_dictionaries({"type": st.just("image")}, optional={"mimeType": FIELD, "data": TEXT}),
    st.fixed_dictionaries({"type": FIELD}),
)
CONTENT = st.one_of(st.lists(BLOCK, max_size=4), TEXT, SCALAR)
MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "toolResult", "bashExecution", "other"]) | FIELD},
    optional={"content": CONTENT, "stopReason": FIELD, "errorMessage": FIELD, "provider": FIELD, "model": FIELD,
              "api": FIELD, "toolCallId": FIELD, "toolName": FIELD, "isError": FIELD, "command": FIELD,
              "output": FIELD, "exitCode": FIELD, "cancelled": FIELD, "truncated": FIELD,
              "excludeFromContext": FIELD, "usage": JSONV})
ENTRY = st.one_of(
    st.fixed_dictionaries({"type": st.just("message"), "message": MESSAGE}, optional={"timestamp": FIELD}),
    st.fixed_dictionaries({"type": st.just("custom_message"), "display": st.sampled_from([True, False, 1, None])},
                          optional={"customType": FIELD, "content": CONTENT, "timestamp": FIELD}),
    st.fixed_dictionaries({"type": st.sampled_from(["compaction", "branch_summary"])},
                          optional={"summary": FIELD, "tokensBefore": FIELD, "firstKeptEntryId": FIELD,
                                    "fromId": FIELD, "timestamp": FIELD}),
)


def _write(value: Any, how: str) -> bytes:
    """One entry line: as JSON.stringify writes it, or with non-ASCII escaped (`\\u00e9`: not canonical), or
    with every solidus escaped and whitespace after separators."""
    if how == "stringify":
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
    if how == "ascii":
        return json.dumps(value, ensure_ascii=True, separators=(",", ":")).encode()
    text = json.dumps(value, ensure_ascii=False, separators=(", ", ": ")).replace("/", "\\/")
    return text.encode("utf-8", "surrogatepass")


@settings(SETTINGS, max_examples=400)
@given(st.lists(ENTRY, min_size=1, max_size=5), st.sampled_from(["stringify", "ascii", "spaced"]))
def test_render_json_property_none_or_the_rendered_items_json(entries: list[Any], how: str) -> None:
    lines = []
    parent = None
    for i, e in enumerate(entries):
        lines.append(_write({**e, "id": f"e{i}", "parentId": parent}, how))
        parent = f"e{i}"
    parsed = parse(json.dumps(HEADER).encode() + b"\n" + b"\n".join(lines) + b"\n", project=PROJECT)
    assert isinstance(parsed, Parsed)
    check_all(parsed)


WELL_TYPED_TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=80)


@settings(SETTINGS, max_examples=200)
@given(st.lists(st.tuples(st.sampled_from(["user", "assistant", "toolResult"]), WELL_TYPED_TEXT, WELL_TYPED_TEXT),
                min_size=1, max_size=6))
def test_render_json_property_what_pi_writes_takes_the_fast_path(turns: list[tuple[str, str, str]]) -> None:
    """Well-typed entries with any text (no lone surrogate: JSON.stringify writes one as an escape the fast
    path leaves to render), written as JSON.stringify writes them: every item takes the fast path."""
    lines = []
    parent = None
    for i, (role, text, other) in enumerate(turns):
        e = msg(f"e{i}", parent, role=role, text=text)
        e["message"]["content"].append({"type": "thinking", "thinking": other})
        e["message"]["content"].append({"type": "toolCall", "id": other, "name": text,
                                        "arguments": {"path": other, "n": i, "flags": [True, None]}})
        lines.append(e)
        parent = f"e{i}"
    parsed = ok(parse(session(*lines), project=PROJECT))
    total, took = check_all(parsed)
    assert took == total == len(turns)
