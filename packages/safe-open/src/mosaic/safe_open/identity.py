"""The identities every Mosaic layer shares, in full: a host and its boot, a process, and the one digest.

The names a consumer usually needs (`HostIdentity`, `ProcessRef`, `current_host`, `read_stat`,
`process_ref`, `canonical_json`, `sha256_digest`, `DIGEST_RE`) are also at `mosaic.safe_open`; this module
adds the parts behind them: `ProcStat` and `parse_stat` (the one `/proc/<pid>/stat` parser: the command
name ends at the last ")"), and `machine_id` and `boot_id` (their readers, 32 lowercase hex, never a
made-up value). Pure parsing plus three tiny readers of kernel files; nothing is opened below a root.
"""

from __future__ import annotations

from . import _identity
from ._identity import *  # noqa: F403

__all__: list[str] = []
__all__ += _identity.__all__


def __dir__() -> list[str]:
    return sorted(__all__)
