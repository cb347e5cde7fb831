"""Inert text: every string from the engine or the session shown, never interpreted by the terminal.

`inert(text)` returns a string a terminal can only print. Each character that could change the terminal's
state or hide what the text says is replaced by a visible escape, and a backslash by two, so the escaped
form is unambiguous (a real ESC and the four characters ``\\x1b`` look different):

- C0 controls U+0000-U+001F (ESC, so every CSI/OSC/DCS sequence; CR, LF, TAB, BEL, BS), DEL U+007F and
  the C1 controls U+0080-U+009F (8-bit CSI U+009B, OSC U+009D): ``\\x1b``;
- Unicode format characters (category Cf: the bidi controls U+202A-U+202E, U+2066-U+2069, U+200E,
  U+200F, U+061C, zero-width characters, U+FEFF, tag characters), line and paragraph separators
  (U+2028, U+2029) and lone surrogates (U+D800-U+DFFF, which a Python str can hold): ``\\u202e``,
  ``\\ud800``, or ``\\U000e0001`` above the BMP.

Everything else is kept as is. The cost is linear in the length of the text. Callers split text into
lines first (`inert_lines`) so a newline ends a line instead of being shown as ``\\n``.
"""

from __future__ import annotations

import unicodedata

__all__ = ["inert", "inert_lines", "is_hazard"]

_HAZARD_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_cache: dict[str, str] = {}


def is_hazard(ch: str) -> bool:
    """True for a character `inert` escapes (except the backslash, which it doubles)."""
    code = ord(ch)
    if code < 0x20 or 0x7F <= code <= 0x9F:
        return True
    if code < 0xA0:
        return False
    return unicodedata.category(ch) in _HAZARD_CATEGORIES


def _escape(ch: str) -> str:
    code = ord(ch)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _one(ch: str) -> str:
    out = _cache.get(ch)
    if out is None:
        out = "\\\\" if ch == "\\" else _escape(ch) if is_hazard(ch) else ch
        if len(_cache) < 65536:
            _cache[ch] = out
    return out


def inert(text: str) -> str:
    """`text` with every hazard shown as a visible escape and each backslash doubled (module docstring)."""
    if text.isascii() and text.isprintable() and "\\" not in text:
        return text  # the common case: nothing to escape
    return "".join(_one(ch) for ch in text)


def inert_lines(text: str) -> list[str]:
    """`text` split at LF (a CR before it is kept and shown as ``\\x0d``), each line made inert."""
    return [inert(line) for line in text.split("\n")]
