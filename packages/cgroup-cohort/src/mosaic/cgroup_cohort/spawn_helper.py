"""The spawn helper: how a launcher clone3s from any thread without a raw clone3 in its own process.

``spawn_in_helper(python, argv, ...)`` is ``bindings.spawn`` performed by a fresh single-threaded helper
process (``python -I -c HELPER_CODE HELPER_ROOT <idle> [shim]``), which clone3s the child as the caller's
own (CLONE_PARENT) and exits; a helper that read nothing exits with ``EXPIRED``. README "Threads".
"""

from ._boot import HELPER_CODE, HELPER_ROOT
from ._spawn_helper import spawn_in_helper
from ._spawner import EXPIRED

__all__ = ["EXPIRED", "HELPER_CODE", "HELPER_ROOT", "spawn_in_helper"]


def __dir__() -> list[str]:
    return sorted(__all__)
