"""pi-rpc's refusal class and its one code table.

:class:`PiRpcRefusal` subclasses ``mosaic.safe_open.Refusal``, the base every Mosaic package shares
(docs/design.md principle 2, one refusal family), so ``except mosaic.safe_open.Refusal`` catches it
and it has the same three fields, wire form, equality and pickling as every other refusal. Importing
``mosaic.safe_open`` for the base loads no cffi (its root-opening names load lazily).

The codes are the seed README's (seeds/000 "Refusals": ``unsealed-engine, engine-pin-mismatch  the seal or
the Pi pin (N24)``). Neither is reconcilable: nothing ran, there is nothing to re-read; the configuration
must change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from mosaic.safe_open import Refusal

__all__ = ["CODES", "PiRpcRefusal"]


class PiRpcRefusal(Refusal):
    """A refusal with a code from ``CODES``, its reconcile flag and a human message.

    An unknown code is a programming error (``ValueError``), not a refusal.
    """

    # code -> reconcile (the base freezes the table).
    CODES: ClassVar[Mapping[str, bool]] = {
        # seed: the engine argv (or the pre-arguments before it) is outside the seal's allow-list.
        "unsealed-engine": False,
        # seed: the installed engine differs from the pin (integrity, bundle manifest, chord, node).
        "engine-pin-mismatch": False,
    }


CODES: Mapping[str, bool] = PiRpcRefusal.CODES
