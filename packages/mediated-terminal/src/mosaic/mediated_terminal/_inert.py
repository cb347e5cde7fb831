"""Inert text: every string from the engine or the session shown, never interpreted by the terminal.

The seed README ("The terminal") lists what is made visible, in its notation (``^[``, ``<U+202E>``):

- C0 controls U+0000-U+001F in caret notation (ESC is ``^[``, so no CSI/OSC/DCS sequence survives; LF is
  ``^J``, CR ``^M``, TAB ``^I``, BEL ``^G``), DEL as ``^?``, the C1 controls U+0080-U+009F (8-bit CSI
  U+009B, OSC U+009D) as ``<U+009B>``;
- U+2028 and U+2029, the bidi controls (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069) and the
  invisible characters (U+200B, U+2060-U+2064, U+FEFF, the tags U+E0000-U+E007F) as ``<U+202E>``.

This module escapes every Unicode format character (category Cf, which holds all of the above but the
separators) and lone surrogates (which a Python str can hold, and a terminal cannot print) too, with one
exception the seed makes: ZWJ (U+200D) and ZWNJ (U+200C) pass, because emoji sequences and joining
scripts (Persian, the Indic scripts) need them and neither can move the cursor or reorder text.
Everything else is kept as it is.

The escaped text alone is ambiguous (the four characters ``^[`` typed by someone look like an ESC): the
screen tells them apart by style, since `inert_spans` marks every escape and the terminal draws escapes in
their own style (``class:escape``); the spans decode back to the original exactly. The cost is linear in
the length of the text. The transcript splits text at LF before this (a newline ends a line there); one-line
fields (the header, the status, notes, dialogs) show LF as ``^J`` so each stays one line.
"""

from __future__ import annotations

import unicodedata

__all__ = ["PASSING", "inert", "inert_spans", "is_hazard"]

PASSING = frozenset({"\u200c", "\u200d"})
"""Format characters that pass unescaped: ZWNJ and ZWJ (seed README, "The terminal")."""

_HAZARD_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_cache: dict[str, str] = {}


def is_hazard(ch: str) -> bool:
    """True for a character `inert` replaces by a visible escape."""
    code = ord(ch)
    if code < 0x20 or 0x7F <= code <= 0x9F:
        return True
    if code < 0xA0 or ch in PASSING:
        return False
    if 0xE0000 <= code <= 0xE007F:
        return True  # the whole tag block, its unassigned U+E0000 and U+E0002-U+E001F included (seed)
    return unicodedata.category(ch) in _HAZARD_CATEGORIES


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x20:
        return "^" + chr(code + 0x40)
    if code == 0x7F:
        return "^?"
    return f"<U+{code:04X}>"


def _one(ch: str) -> str:
    out = _cache.get(ch)
    if out is None:
        out = _escape(ch) if is_hazard(ch) else ch
        if len(_cache) < 65536:
            _cache[ch] = out
    return out


def inert(text: str) -> str:
    """`text` with every hazard shown as a visible escape (module docstring). Never raises."""
    if text.isascii() and text.isprintable():
        return text  # the common case: nothing to escape
    return "".join(_one(ch) for ch in text)


def inert_spans(text: str) -> list[tuple[bool, str]]:
    """`text` as ``(is_escape, text)`` spans, in order: plain runs kept as they are, each hazard its own
    escape span. Joining the plain runs with each escape span decoded gives `text` back exactly."""
    if text.isascii() and text.isprintable():
        return [(False, text)] if text else []
    spans: list[tuple[bool, str]] = []
    start = 0
    for i, ch in enumerate(text):
        if is_hazard(ch):
            if i > start:
                spans.append((False, text[start:i]))
            spans.append((True, _one(ch)))
            start = i + 1
    if start < len(text):
        spans.append((False, text[start:]))
    return spans
