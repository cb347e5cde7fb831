"""claude-rpc's refusal class and its one code table.

:class:`ClaudeRpcRefusal` subclasses ``mosaic.safe_open.Refusal``, the base every Mosaic package shares
(docs/design.md principle 2, one refusal family), so ``except mosaic.safe_open.Refusal`` catches it and it
has the same three fields, wire form, equality and pickling as every other refusal.

The code is the brief's (§8 B1 part 1 and L7): the binary's sha256 or version differs from the pin, so the
engine is not launched. It is not reconcilable: nothing ran, there is nothing to re-read; the install
must change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from mosaic.safe_open import Refusal

__all__ = ["CODES", "ClaudeRpcRefusal"]


class ClaudeRpcRefusal(Refusal):
    """A refusal with a code from ``CODES``, its reconcile flag and a human message.

    An unknown code is a programming error (``ValueError``), not a refusal.
    """

    # code -> reconcile (the base freezes the table).
    CODES: ClassVar[Mapping[str, bool]] = {
        # brief §8 L7: the binary's sha256 or version (or the install around it) differs from the pin.
        "engine-pin-mismatch": False,
    }


CODES: Mapping[str, bool] = ClaudeRpcRefusal.CODES
