"""The reader's refusal table: every row of the seed README's "Refusal codes" section.

safe-open's own codes (unsafe-path, too-large, unreadable, unavailable) and pi-format's (not-a-pi-session,
incomplete-header, foreign-project) are rows of this table too, so a refusal from either layer reaches the
caller as a `ReaderRefusal` with the same code and flag. The last four rows are not the seed's: they are
the routes' guard (`_guard.py`: a foreign Host, a cross-site request, a missing or wrong token), answered
in the same refusal shape before a request reaches the reader.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from mosaic.safe_open import Refusal

# What the public modules show of this module; the rest is the package's own.
__all__ = ["ReaderRefusal"]


class ReaderRefusal(Refusal):
    """Why the reader refused a call. `CODES` is the seed README's refusal table (code -> reconcile).

    Seed "Refusal codes": not-a-pi-session and incomplete-header share a row whose reconcile column reads
    "incomplete: yes", so only incomplete-header carries reconcile.
    """

    CODES: ClassVar[Mapping[str, bool]] = {
        "unknown-conversation": True,
        "unknown-branch": True,
        "unavailable": False,
        "unsupported-harness": False,
        "unsafe-path": False,
        "foreign-project": False,
        "unreadable": False,
        "not-a-pi-session": False,
        "incomplete-header": True,
        "too-large": False,
        "cursor-unknown": True,
        "cursor-expired": True,
        "cursor-foreign": True,
        "source-replaced": True,
        "unknown-actor": False,
        "unsupported-purpose": False,
        "host-refused": False,
        "cross-site": False,
        "token-required": False,
        "token-wrong": False,
    }


def refused(code: str, message: str) -> dict[str, object]:
    """The API's refusal value: {"ok": False, "refusal": {"code", "reconcile", "message"}}."""
    return {"ok": False, "refusal": ReaderRefusal(code, message).to_dict()}
