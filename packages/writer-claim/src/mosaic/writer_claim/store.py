"""The claim store and its claims: `ClaimStore` (acquire, observe, restart, adopt, take over) over one claim
root, the `Claim` handle of a claim this process owns, the questions a restart asks (`CohortProbe`,
`OwnerLiveness`, `ProcLiveness`), the barrier seam of every file-system step (`Barrier`, `BarrierHook`,
`BARRIER_POINTS`), the room a stop reserves (`RESERVE_REVISIONS`), and `ClaimWriteError` (an OSError of a
publication, naming the key, the step and the revision).
"""

from __future__ import annotations

from . import _claim, _disk, _host, _store
from ._claim import *  # noqa: F403
from ._disk import *  # noqa: F403
from ._host import *  # noqa: F403
from ._store import *  # noqa: F403

__all__: list[str] = []
__all__ += _claim.__all__
__all__ += _disk.__all__
__all__ += _host.__all__
__all__ += _store.__all__


def __dir__() -> list[str]:
    return sorted(__all__)
