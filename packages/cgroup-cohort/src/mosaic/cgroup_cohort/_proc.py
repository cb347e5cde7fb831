"""Reading /proc and the host identity files. Pure parsers plus thin readers.

A process is named by (pid, start time) everywhere in this package, never by a bare pid: pids wrap within
tens of seconds under a fork loop on this kind of host (facts §7.2, pid_max 32768).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

PF_EXITING = 0x4  # include/linux/sched.h

__all__ = [
    "PF_EXITING",
    "ProcStat",
    "boot_id",
    "boot_time",
    "cgroup_of",
    "machine_id",
    "parse_proc_cgroup",
    "parse_stat",
    "read_stat",
    "start_time",
]


@dataclass(frozen=True)
class ProcStat:
    """The fields of /proc/<pid>/stat this package uses."""

    pid: int
    comm: str
    state: str
    ppid: int
    pgid: int
    sid: int
    flags: int  # PF_* (field 9)
    start_time: int  # clock ticks since boot (field 22)

    @property
    def exiting(self) -> bool:
        """PF_EXITING: the task is in do_exit (irreversible), though not yet a zombie."""
        return bool(self.flags & PF_EXITING)


def parse_stat(text: str) -> ProcStat:
    """Parse one /proc/<pid>/stat line.

    The command name is enclosed in the first '(' and the LAST ')' because it may itself contain spaces
    and parentheses. Raises ValueError on anything that is not a complete stat line.
    """
    open_ = text.find("(")
    close = text.rfind(")")
    if open_ < 1 or close < open_:
        raise ValueError("not a /proc/<pid>/stat line")
    pid = int(text[:open_].strip())
    comm = text[open_ + 1 : close]
    rest = text[close + 1 :].split()
    # rest[0] is field 3 (state); field n is rest[n - 3].
    if len(rest) < 20:
        raise ValueError("truncated /proc/<pid>/stat line")
    return ProcStat(
        pid=pid,
        comm=comm,
        state=rest[0],
        ppid=int(rest[1]),
        pgid=int(rest[2]),
        sid=int(rest[3]),
        flags=int(rest[6]),
        start_time=int(rest[19]),
    )


def read_stat(pid: int, *, proc: str = "/proc") -> ProcStat | None:
    """/proc/<pid>/stat parsed, or None when no such process exists (ENOENT/ESRCH).

    Other errors (EACCES on a hidepid /proc, ...) raise OSError: unknown is not absent.
    """
    try:
        with open(f"{proc}/{pid}/stat", encoding="utf-8", errors="replace") as f:
            text = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    if not text:
        return None  # the task was released between open and read
    return parse_stat(text)


def start_time(pid: int, *, proc: str = "/proc") -> int | None:
    """The start time (clock ticks since boot) of ``pid``, or None if it does not exist."""
    st = read_stat(pid, proc=proc)
    return None if st is None else st.start_time


def parse_proc_cgroup(text: str) -> str | None:
    """The cgroup2 path from the text of /proc/<pid>/cgroup (the ``0::<path>`` line), or None."""
    for line in text.splitlines():
        if line.startswith("0::"):
            return line[3:]
    return None


def cgroup_of(pid: int | str, *, proc: str = "/proc") -> str | None:
    """The cgroup2 path of a process as seen from the caller's cgroup namespace; None if it is gone."""
    try:
        with open(f"{proc}/{pid}/cgroup", encoding="utf-8") as f:
            return parse_proc_cgroup(f.read())
    except (FileNotFoundError, ProcessLookupError):
        return None


def _read_first_line(path: str) -> str:
    with open(path, encoding="ascii") as f:
        return f.readline().strip()


def machine_id(path: str = "/etc/machine-id") -> str:
    """The host identity (/etc/machine-id, 32 lowercase hex). Raises OSError/ValueError if absent or bad."""
    value = _read_first_line(path)
    if len(value) != 32 or any(c not in "0123456789abcdef" for c in value):
        raise ValueError(f"{path} is not a machine id")
    return value


def boot_id(path: str = "/proc/sys/kernel/random/boot_id") -> str:
    """The kernel's boot id, without dashes (32 lowercase hex)."""
    value = _read_first_line(path).replace("-", "").lower()
    if len(value) != 32:
        raise ValueError(f"{path} is not a boot id")
    return value


def boot_time(path: str = "/proc/stat") -> int:
    """The current boot's start as Unix seconds (the ``btime`` line of /proc/stat)."""
    with open(path, encoding="ascii") as f:
        for line in f:
            if line.startswith("btime "):
                return int(line.split()[1])
    raise ValueError(f"no btime in {path}")


def clock_ticks() -> int:
    """USER_HZ, the unit of ``start_time``."""
    return os.sysconf("SC_CLK_TCK")
