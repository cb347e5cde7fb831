"""Inert text (the seed's terminal rules): `inert(text)` shows C0 and C1 controls, DEL, U+2028/U+2029, the
bidi controls, invisible characters and the tag block in the seed's notation (``^[``, ``<U+202E>``), so a
string from the engine or a session cannot drive or spoof the terminal; ZWJ and ZWNJ pass (`PASSING`).
`inert_spans(text)` marks each escape (an escape is drawn in reverse video; the spans decode back to the
original exactly); `is_hazard(char)` says whether a character is escaped. Pure, linear in the text.
"""

from __future__ import annotations

from . import _inert
from ._inert import *  # noqa: F403

__all__: list[str] = []
__all__ += _inert.__all__


def __dir__() -> list[str]:
    return sorted(__all__)
