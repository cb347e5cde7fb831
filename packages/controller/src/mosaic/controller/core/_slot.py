"""The core's slot room: the one pending dispatch slot and the receipts of the requests it held (`_state.
FIELD_OWNERS`: `slot`, `requests`, `settled`, `retired`).

The rules it keeps (the core's rules 2 and 3; `_state` rule 5):

1. A settled request stays among the last RECENT_RECEIPTS settled (what observe repeats); older ones keep
   only what an exact retry needs (H12, H13), as a tuple of atoms (`retire`).
"""

from __future__ import annotations

from ._state import RECENT_RECEIPTS, CoreState
from ._values import Request

__all__ = ["retire"]


def retire(s: CoreState, request: Request) -> None:
    """`request` settled: it stays among the last RECENT_RECEIPTS settled (what observe repeats); the
    oldest beyond them moves to the exact-retry index, where nothing scans it (an exact retry gets its
    receipt for the rest of the incarnation, H12) as a tuple of its fields: a few hundred bytes, and
    atoms only, so the cyclic collector stops tracking it and a full collection never walks the index."""
    s.settled.append(request.client_request_id)
    while len(s.settled) > RECENT_RECEIPTS:
        crid = s.settled.popleft()
        old = s.requests.pop(crid, None)
        if old is not None:
            s.retired[crid] = old.fields()
