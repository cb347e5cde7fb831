"""`FormatRefusal`: why bytes are not a session this reader shows. Its own module so that importing the
package loads only this and the ids (the parser and msgspec load on first use; README, "API")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from mosaic.safe_open import Refusal

__all__ = ["FormatRefusal"]


class FormatRefusal(Refusal):
    """Why bytes are not a session this reader shows: a `code` from `CODES`, its `reconcile` flag and a
    `message`.

    A subclass of the shared `mosaic.safe_open.Refusal` (DESIGN.md principle 2: one refusal family for
    every package), so it compares by value and has `to_dict()`. `parse` RETURNS it, never raises it: bad
    bytes are an answer, not an error. Build one with `FormatRefusal(code, message)`; a code outside
    `CODES` raises ValueError (a programming error, never a refusal).
    """

    #: code -> reconcile. The seed README's "Refusal codes" rows that the parser can produce. The seed's row
    #: for not-a-pi-session and incomplete-header reads "incomplete: yes": only incomplete-header reconciles.
    CODES: ClassVar[Mapping[str, bool]] = {
        "not-a-pi-session": False,
        "incomplete-header": True,
        "foreign-project": False,
    }
