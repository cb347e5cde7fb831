"""The identities every Mosaic layer shares, in full: a host and its boot, a process, and the one digest.

The names a consumer usually needs (`HostIdentity`, `ProcessRef`, `current_host`, `read_stat`,
`process_ref`, `canonical_json`, `sha256_digest`, `DIGEST_RE`) are also at `mosaic.safe_open`; this module
adds the parts behind them: `ProcStat` and `parse_stat` (the one `/proc/<pid>/stat` parser: the command
name ends at the last ")"), `machine_id` and `boot_id` (their readers, 32 lowercase hex, never a made-up
value), the paths they read (`MACHINE_ID_PATH`, `BOOT_ID_PATH`) and `PF_EXITING` (the stat flag of a task
in do_exit). Pure parsing plus three tiny readers of kernel files; nothing is opened below a root.
"""

from __future__ import annotations

from ._identity import (
    BOOT_ID_PATH,
    DIGEST_RE,
    MACHINE_ID_PATH,
    PF_EXITING,
    HostIdentity,
    ProcessRef,
    ProcStat,
    boot_id,
    canonical_json,
    current_host,
    machine_id,
    parse_stat,
    process_ref,
    read_stat,
    sha256_digest,
)

__all__ = [
    "BOOT_ID_PATH",
    "DIGEST_RE",
    "MACHINE_ID_PATH",
    "PF_EXITING",
    "HostIdentity",
    "ProcStat",
    "ProcessRef",
    "boot_id",
    "canonical_json",
    "current_host",
    "machine_id",
    "parse_stat",
    "process_ref",
    "read_stat",
    "sha256_digest",
]


def __dir__() -> list[str]:
    return sorted(__all__)
