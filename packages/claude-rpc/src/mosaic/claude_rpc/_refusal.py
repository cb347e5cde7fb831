"""claude-rpc's refusal class and its one code table.

:class:`ClaudeRpcRefusal` subclasses ``mosaic.safe_open.Refusal``, the base every Mosaic package shares
(docs/design.md principle 2, one refusal family), so ``except mosaic.safe_open.Refusal`` catches it and it
has the same three fields, wire form, equality and pickling as every other refusal.

The codes: the brief's L7 (§8: the binary's sha256 or version differs from the pin, so the engine is not
launched) and the seed's seal (``unsealed-engine``: the argv, the environment or the host is outside the
seal, issue 32); then the answers to a permission request the link refuses (brief §5 H5-H8, P7), each
named after the state the engine's own evidence put the request in. None is reconcilable: reading again
cannot make the launch sealed or the request answerable.
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
        # the seed's seal: the argv, the environment or the host (the managed policy) is outside the allow-list.
        "unsealed-engine": False,
        # P7/H5-H8: no can_use_tool with this exact request id was read from this engine (or it was forgotten).
        "permission-unknown": False,
        # H6/H7: the request was already answered once through this link; one native answer per request.
        "permission-answered": False,
        # H8: the engine cancelled the request (control_cancel_request); a later answer would be ignored.
        "permission-cancelled": False,
        # the engine settled the request without our answer (a tool_result for it: EOF, interrupt).
        "permission-resolved": False,
    }


CODES: Mapping[str, bool] = ClaudeRpcRefusal.CODES
