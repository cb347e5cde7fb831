"""Test support: the misbehaving process tree that stands in for the engine in the cohort suites.

Not used by the package at run time. ``stage_tree(directory)`` copies the tree script into a directory
that an unprivileged engine uid can read (facts §7.7: /root is 0700), and returns its path.
"""

from __future__ import annotations

import os
import shutil
import signal
from importlib import resources

from .._model import MemberRef
from .._proc import read_stat

__all__ = ["TREE_SCRIPT", "alive", "kill_member", "stage_tree"]

TREE_SCRIPT = "misbehaving_tree.py"


def stage_tree(directory: str) -> str:
    """Copy the tree script into ``directory`` (made world-readable) and return the copy's path."""
    os.chmod(directory, 0o755)
    dest = os.path.join(directory, TREE_SCRIPT)
    with resources.as_file(resources.files(__package__).joinpath(TREE_SCRIPT)) as src:
        shutil.copyfile(src, dest)
    os.chmod(dest, 0o644)
    return dest


def alive(member: MemberRef) -> bool:
    """Whether exactly this (pid, start time) is alive: running, sleeping or stopped (a zombie is dead)."""
    st = read_stat(member.pid)
    return st is not None and st.start_time == member.start_time and st.state not in ("Z", "X")


def kill_member(member: MemberRef) -> bool:
    """SIGKILL exactly this (pid, start time) through a pidfd. Returns whether a signal was sent."""
    try:
        fd = os.pidfd_open(member.pid)
    except ProcessLookupError:
        return False
    try:
        st = read_stat(member.pid)
        if st is None or st.start_time != member.start_time:
            return False
        signal.pidfd_send_signal(fd, signal.SIGKILL)
        return True
    except ProcessLookupError:
        return False
    finally:
        os.close(fd)
