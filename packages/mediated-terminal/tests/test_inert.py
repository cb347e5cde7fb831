"""`inert`: no control character, escape sequence, bidi control, invisible character or lone surrogate survives,
in the seed's notation (``^[``, ``<U+202E>``); ZWJ and ZWNJ pass; the spans (escapes marked, as the screen
styles them) decode back to the original exactly. Property-tested with hypothesis."""

from __future__ import annotations

import re
import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from mosaic.mediated_terminal import inert
from mosaic.mediated_terminal.text import PASSING, inert_spans, is_hazard

BIDI = [chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C)]
HOSTILE = ["\x1b", "\x1b[2J", "\x1b]0;title\x07", "\x9b", "\x9d", "\x7f", "\x00", "\r", "\t", "\x08",
           "\ud800", "\udfff", "\u2028", "\u2029", "\ufeff", "\u200b", "\u2060", "\u2064", "\U000e0041",
           "\n", *BIDI]
JOINERS = ["\u200d", "\u200c"]

# Every code point, surrogates included, with the hazards weighted in.
ANY_TEXT = st.lists(st.one_of(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()),
                             st.sampled_from(HOSTILE), st.sampled_from(JOINERS),
                             st.sampled_from(["^", "[", "<", "U", "+", "2", "E", ">", "\\"])),
                   max_size=100).map("".join)

_ESCAPE = re.compile(r"\^([@-_?])|<U\+([0-9A-F]{4,6})>")


def decode(escape: str) -> str:
    m = _ESCAPE.fullmatch(escape)
    assert m is not None, escape
    if m.group(1) is not None:
        return "\x7f" if m.group(1) == "?" else chr(ord(m.group(1)) - 0x40)
    return chr(int(m.group(2), 16))


def forbidden(ch: str) -> bool:
    """The seed's list (C0, C1, DEL, U+2028/9, bidi, invisible, tags) and every other format character and
    lone surrogate, but ZWJ and ZWNJ."""
    code = ord(ch)
    if ch in JOINERS:
        return False
    return (code < 0x20 or 0x7F <= code <= 0x9F or 0xD800 <= code <= 0xDFFF or ch in BIDI
            or ch in ("\u2028", "\u2029", "\u200b", "\ufeff") or 0x2060 <= code <= 0x2064
            or 0xE0000 <= code <= 0xE007F or unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp"))


@settings(max_examples=2000)
@given(ANY_TEXT)
def test_nothing_that_can_drive_a_terminal_survives(text: str) -> None:
    out = inert(text)
    assert not any(forbidden(ch) for ch in out), out
    assert "\x1b" not in out and "\x9b" not in out and "\x9d" not in out  # no ESC, CSI or OSC introducer
    out.encode("utf-8")  # no lone surrogate: it encodes strictly


@settings(max_examples=2000)
@given(ANY_TEXT)
def test_the_spans_decode_back_exactly_and_join_to_inert(text: str) -> None:
    spans = inert_spans(text)
    assert "".join(decode(part) if escape else part for escape, part in spans) == text
    assert "".join(part for _, part in spans) == inert(text)
    assert all(escape or not any(forbidden(ch) for ch in part) for escape, part in spans)


@given(st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E)))
def test_plain_printable_ascii_is_unchanged(text: str) -> None:
    assert inert(text) == text


def test_each_hazard_is_shown_in_the_seeds_notation() -> None:
    assert inert("\x1b[2J") == "^[[2J"
    assert inert("\x1b]0;title\x07") == "^[]0;title^G"
    assert inert("a\u202eb") == "a<U+202E>b"
    assert inert("\u2066\u2069\u200e\u200f\u061c") == "<U+2066><U+2069><U+200E><U+200F><U+061C>"
    assert inert("\u200b\u2060\u2064\ufeff") == "<U+200B><U+2060><U+2064><U+FEFF>"
    assert inert("\U000e0041\U000e007f") == "<U+E0041><U+E007F>"  # tag characters
    assert inert("\u2028\u2029") == "<U+2028><U+2029>"
    assert inert("\ud800") == "<U+D800>"
    assert inert("\x9b\x9d") == "<U+009B><U+009D>"
    assert inert("\x00\x7f\t\r") == "^@^?^I^M"
    assert inert("line one\nline two") == "line one^Jline two"  # one-line fields show LF as ^J
    assert inert("C:\\dir ^x <U+41>") == "C:\\dir ^x <U+41>"  # as typed: the screen's style tells them apart
    assert inert("héllo wörld 日本 🙂") == "héllo wörld 日本 🙂"  # printable non-ASCII is kept


def test_zwj_and_zwnj_pass_for_emoji_sequences_and_joining_scripts() -> None:
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467"
    persian = "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"  # mi-khaham, with a ZWNJ
    assert inert(family) == family and inert(persian) == persian
    assert PASSING == frozenset(JOINERS)
    assert not is_hazard("\u200d") and not is_hazard("\u200c")
    assert inert(f"{family}\u200b") == f"{family}<U+200B>"


def test_is_hazard_agrees_with_the_seeds_list() -> None:
    for code in [*range(0, 0x3000), *range(0xFE00, 0x10000), *range(0xE0000, 0xE0080)]:
        ch = chr(code)
        assert is_hazard(ch) == forbidden(ch), hex(code)
