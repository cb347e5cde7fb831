"""`inert`: no control character, escape sequence, bidi control or lone surrogate survives, and the escaped
form is unambiguous (it decodes back to the original exactly). Property-tested with hypothesis."""

from __future__ import annotations

import re
import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from mosaic.mediated_terminal import inert, inert_lines, is_hazard

BIDI = [chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C)]
HOSTILE = ["\x1b", "\x1b[2J", "\x1b]0;title\x07", "\x9b", "\x9d", "\x7f", "\x00", "\r", "\t", "\x08",
           "\ud800", "\udfff", "\u2028", "\u2029", "\ufeff", "\u200b", *BIDI]

# Every code point, surrogates included, with the hazards weighted in.
ANY_TEXT = st.lists(st.one_of(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()),
                             st.sampled_from(HOSTILE), st.sampled_from(["\\", "x", "u", "1", "b"])),
                   max_size=100).map("".join)

_ESCAPE = re.compile(r"\\(\\|x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8})")


def unescape(text: str) -> str:
    def one(m: re.Match[str]) -> str:
        body = m.group(1)
        return "\\" if body == "\\" else chr(int(body[1:], 16))
    return _ESCAPE.sub(one, text)


def forbidden(ch: str) -> bool:
    code = ord(ch)
    return (code < 0x20 or 0x7F <= code <= 0x9F or 0xD800 <= code <= 0xDFFF or ch in BIDI
            or unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp"))


@settings(max_examples=2000)
@given(ANY_TEXT)
def test_nothing_that_can_drive_a_terminal_survives(text: str) -> None:
    out = inert(text)
    assert not any(forbidden(ch) for ch in out), out
    assert "\x1b" not in out and "\x9b" not in out and "\x9d" not in out  # no ESC, CSI or OSC introducer
    out.encode("utf-8")  # no lone surrogate: it encodes strictly


@settings(max_examples=2000)
@given(ANY_TEXT)
def test_the_escaped_form_is_unambiguous_it_decodes_back_exactly(text: str) -> None:
    assert unescape(inert(text)) == text


@given(st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E).filter(lambda c: c != "\\")))
def test_plain_printable_ascii_is_unchanged(text: str) -> None:
    assert inert(text) == text


def test_each_hazard_is_shown_as_a_visible_escape() -> None:
    assert inert("\x1b[2J") == "\\x1b[2J"
    assert inert("\x1b]0;title\x07") == "\\x1b]0;title\\x07"
    assert inert("a\u202eb") == "a\\u202eb"
    assert inert("\u2066\u2069\u200e\u200f\u061c") == "\\u2066\\u2069\\u200e\\u200f\\u061c"
    assert inert("\ud800") == "\\ud800"
    assert inert("\x9b") == "\\x9b"
    assert inert("\U000e0041") == "\\U000e0041"  # a tag character (Cf) above the BMP
    assert inert("C:\\dir") == "C:\\\\dir"
    assert inert("héllo wörld 日本 🙂") == "héllo wörld 日本 🙂"  # printable non-ASCII is kept


def test_lines_split_at_lf_and_a_cr_is_shown() -> None:
    assert inert_lines("one\r\ntwo\n\x1b") == ["one\\x0d", "two", "\\x1b"]


def test_is_hazard_agrees_with_the_categories() -> None:
    for code in range(0, 0x3000):
        ch = chr(code)
        assert is_hazard(ch) == forbidden(ch), hex(code)
