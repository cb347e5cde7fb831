"""This process's identity as an owner, and the default owner-liveness check.

§2 "Fields" records "the owning controller: pid, process start time"; §2 "Owner check" proves an owner
gone by "a different boot on the same host, or no process with the recorded pid and start time". The
host and boot identity and the /proc/<pid>/stat parser are safe-open's (`current_host`, `read_stat`), the
one reading every layer shares, so the claim and the cohort record the same values; what is added here is
the pid namespace.
"""

from __future__ import annotations

import os

from mosaic.safe_open import read_stat

from ._model import Owner, ProcessIdentity

# What the public modules show of this module; the rest is the package's own.
__all__ = ["ProcLiveness"]


def pid_namespace() -> str:
    """This process's pid namespace, as /proc/self/ns/pid names it (`pid:[inode]`). Raises OSError when
    /proc cannot tell."""
    return os.readlink("/proc/self/ns/pid")


def current_process() -> ProcessIdentity:
    """This process: pid, start time (/proc/self/stat field 22) and pid namespace. Raises OSError when
    /proc cannot tell, ValueError when /proc/self/stat does not parse."""
    st = read_stat("self")
    if st is None:
        raise OSError("/proc/self/stat is missing")
    return ProcessIdentity(os.getpid(), st.start_time, pid_namespace())


class ProcLiveness:
    """The default owner check: is there a process with the recorded pid and start time?

    - True: /proc/<pid>/stat exists with the same start time and the process is not a zombie. A stopped
      (SIGSTOP) or sleeping process is alive (W12).
    - False: no such pid, another start time (the pid was reused), or a zombie or dead task, which can
      never publish again.
    - None (cannot tell, counted as alive): the owner was recorded in another pid namespace, where its pid
      names a different process or none; or /proc cannot be read or does not parse.

    It answers for this host and boot only; the classifier never asks it about another boot or machine.
    Construction raises OSError when this process's own pid namespace cannot be read.
    """

    def __init__(self) -> None:
        self._ns = pid_namespace()

    def owner_alive(self, owner: Owner) -> bool | None:
        p = owner.process
        if p.pid_namespace != self._ns:
            return None
        try:
            st = read_stat(p.pid)
        except (OSError, ValueError):
            return None  # unknown is not absent
        if st is None:
            return False
        if st.start_time != p.start_time:
            return False
        return not st.dead
