"""The cohort-only readers of /proc: a process's cgroup, the boot's start, USER_HZ, a start time.

What every layer shares (the /proc/<pid>/stat parser, machine id, boot id, the (pid, start time) process
reference) lives in ``mosaic.safe_open`` (its README "Shared identities"): the writer claim and this package
compare those values byte for byte, so there is one reading of each. This module keeps only what the
cohort alone needs.

A process is named by (pid, start time) everywhere in this package, never by a bare pid: pids wrap within
tens of seconds under a fork loop on this kind of host (facts §7.2, pid_max 32768).
"""

from __future__ import annotations

import os

__all__ = [
    "boot_time",
    "cgroup_of",
    "clock_ticks",
    "parse_proc_cgroup",
    "start_time",
]


def start_time(pid: int | str, *, proc: str = "/proc") -> int | None:
    """The start time (clock ticks after boot) of ``pid`` ("self" allowed), or None if it does not exist.

    Raises OSError for anything but "no such process" (unknown is not absent), as ``read_stat`` does.
    """
    # Imported at the first call: the shim imports this module before it starts the engine, and only
    # reads a start time after (importing mosaic.safe_open costs ~10 ms; README "Threads").
    from mosaic.safe_open import read_stat  # noqa: PLC0415

    st = read_stat(pid, proc=proc)
    return None if st is None else st.start_time


def parse_proc_cgroup(text: str) -> str | None:
    """The cgroup2 path from the text of /proc/<pid>/cgroup (the ``0::<path>`` line), or None."""
    for line in text.splitlines():
        if line.startswith("0::"):
            return line[3:]
    return None


def cgroup_of(pid: int | str, *, proc: str = "/proc") -> str | None:
    """The cgroup2 path of a process as seen from the caller's cgroup namespace; None if it is gone.

    Other errors (EACCES, ...) raise OSError.
    """
    try:
        with open(f"{proc}/{pid}/cgroup", encoding="utf-8") as f:
            return parse_proc_cgroup(f.read())
    except (FileNotFoundError, ProcessLookupError):
        return None


def boot_time(path: str = "/proc/stat") -> int:
    """The current boot's start as Unix seconds (the ``btime`` line of /proc/stat).

    Raises OSError when the file cannot be read and ValueError when it has no btime line.
    """
    with open(path, encoding="ascii") as f:
        for line in f:
            if line.startswith("btime "):
                return int(line.split()[1])
    raise ValueError(f"no btime in {path}")


def clock_ticks() -> int:
    """USER_HZ, the unit of a start time."""
    return os.sysconf("SC_CLK_TCK")
