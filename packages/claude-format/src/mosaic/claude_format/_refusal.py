"""`TranscriptRefusal`: why bytes are not a transcript this reader shows. Its own module, so that importing
the package loads only this and the ids (the parser and msgspec load on first use; README, "API")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from mosaic.safe_open import Refusal

__all__ = ["TranscriptRefusal"]


class TranscriptRefusal(Refusal):
    """Why bytes are not a Claude Code transcript this reader shows: a `code` from `CODES`, its
    `reconcile` flag and a `message`.

    A subclass of the shared `mosaic.safe_open.Refusal` (docs/design.md principle 2: one refusal family),
    so it compares by value and has `to_dict()`. `parse` and `parse_appended` RETURN it, never raise it.
    A code outside `CODES` raises ValueError (a programming error, never a refusal). Both codes are rows of
    the reader's refusal table too (chat-pages passes them through unchanged).
    """

    #: code -> reconcile. Reading again cannot change either answer: the bytes already written stay.
    CODES: ClassVar[Mapping[str, bool]] = {
        "unsupported-harness": False,
        "foreign-project": False,
    }
