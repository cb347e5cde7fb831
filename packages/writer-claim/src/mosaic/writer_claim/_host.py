"""Host, boot and process identity read from the running kernel, and the default owner-liveness check.

§2 "Fields" records "the host identity (/etc/machine-id) and boot ID" and "the owning controller: pid,
process start time"; §2 "Owner check" proves an owner gone by "a different boot on the same host, or no
process with the recorded pid and start time".
"""

from __future__ import annotations

import os

from ._model import HostIdentity, Owner, ProcessIdentity

MACHINE_ID_PATH = "/etc/machine-id"
BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"


def _read_line(path: str) -> str:
    with open(path, encoding="ascii") as f:
        value = f.read().strip()
    if not value:
        raise OSError(f"{path} is empty")
    return value


def current_host() -> HostIdentity:
    """This machine's ID and boot ID. Raises OSError when either cannot be read: a claim written without
    them could never be told apart from a copy or a previous boot."""
    return HostIdentity(_read_line(MACHINE_ID_PATH), _read_line(BOOT_ID_PATH))


def _stat_fields(pid: int | str) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name, or None when there is no such process.

    The command name (field 2) is in parentheses and may itself hold spaces and parentheses, so the split
    is after the last ')'. Index 0 of the result is field 3 (state).
    """
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            data = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    _, sep, rest = data.rpartition(")")
    if not sep:
        raise OSError(f"/proc/{pid}/stat has no command field")
    return rest.split()


def process_start_time(pid: int | str) -> int | None:
    """Field 22 of /proc/<pid>/stat (start time, clock ticks after boot), or None when no such process."""
    fields = _stat_fields(pid)
    if fields is None:
        return None
    return int(fields[22 - 3])


def process_state(pid: int) -> str | None:
    """Field 3 of /proc/<pid>/stat (R, S, D, T, t, Z, X, ...), or None when no such process."""
    fields = _stat_fields(pid)
    return None if fields is None else fields[0]


def pid_namespace() -> str:
    """This process's pid namespace, as /proc/self/ns/pid names it (`pid:[inode]`)."""
    return os.readlink("/proc/self/ns/pid")


def current_process() -> ProcessIdentity:
    """This process: pid, start time and pid namespace."""
    start = process_start_time("self")
    if start is None:
        raise OSError("/proc/self/stat is missing")
    return ProcessIdentity(os.getpid(), start, pid_namespace())


class ProcLiveness:
    """The default owner check: is there a process with the recorded pid and start time?

    - True: /proc/<pid>/stat exists with the same start time and the process is not a zombie. A stopped
      (SIGSTOP) or sleeping process is alive (W12).
    - False: no such pid, another start time (the pid was reused), or a zombie or dead task, which can
      never publish again.
    - None (cannot tell, counted as alive): the owner was recorded in another pid namespace, where its pid
      names a different process or none; or /proc cannot be read.

    It answers for this host and boot only; the classifier never asks it about another boot or machine.
    """

    def __init__(self) -> None:
        self._ns = pid_namespace()

    def owner_alive(self, owner: Owner) -> bool | None:
        p = owner.process
        if p.pid_namespace != self._ns:
            return None
        try:
            fields = _stat_fields(p.pid)
        except OSError:
            return None
        if fields is None:
            return False
        if int(fields[22 - 3]) != p.start_time:
            return False
        return fields[0] not in ("Z", "X", "x")
