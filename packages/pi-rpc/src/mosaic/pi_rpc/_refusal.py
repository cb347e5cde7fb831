"""pi-rpc's refusal value and its one code table.

pi-rpc must not depend on safe-open (DESIGN.md layer table), so it defines its own small refusal type with
the same three fields as ``mosaic.safe_open.Refusal``: code, reconcile, message. The codes are the seed
README's (seeds/000 "Refusals": ``unsealed-engine, engine-pin-mismatch  the seal or the Pi pin (N24)``).
Neither is reconcilable: nothing ran, there is nothing to re-read; the configuration must change.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import ClassVar

__all__ = ["CODES", "PiRpcRefusal"]

# code -> reconcile.
CODES: Mapping[str, bool] = MappingProxyType(
    {
        # seed: the engine argv (or the pre-arguments before it) is outside the seal's allow-list.
        "unsealed-engine": False,
        # seed: the installed engine differs from the pin (integrity, bundle manifest, chord, node).
        "engine-pin-mismatch": False,
    }
)


class PiRpcRefusal(Exception):
    """A refusal with a code from ``CODES``, its reconcile flag and a human message.

    An unknown code is a programming error (``ValueError``), not a refusal.
    """

    CODES: ClassVar[Mapping[str, bool]] = CODES

    def __init__(self, code: str, message: str, *, reconcile: bool | None = None) -> None:
        if code not in self.CODES:
            raise ValueError(f"unknown pi-rpc refusal code {code!r}")
        super().__init__(f"{code}: {message}")
        self.code = code
        self.reconcile = self.CODES[code] if reconcile is None else reconcile
        self.message = message

    def to_dict(self) -> dict[str, object]:
        """The wire form: exactly {"code", "reconcile", "message"}."""
        return {"code": self.code, "reconcile": self.reconcile, "message": self.message}

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.code, self.message), {"reconcile": self.reconcile})
