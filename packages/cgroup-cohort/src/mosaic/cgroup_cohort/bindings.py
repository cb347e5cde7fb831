"""The syscalls the standard library lacks, through cffi in ABI mode: clone3, unshare, name_to_handle_at, prctl.

``spawn`` (clone3 into a cgroup with a pidfd, the credential drop, rlimits, execve with its errors
reported as ``ExecFailed``) and ``clone_child`` refuse in a process with more than one thread
(``thread_count``; README "Threads"). The declarations are ``CDEF``, parsed once into a committed module;
``render_abi()`` is that module's text as the installed cffi writes it (needs cffi and pycparser;
``python -m mosaic.cgroup_cohort._ffi_build`` rewrites it).
"""

from ._ffi import (
    CLONE_INTO_CGROUP,
    CLONE_NEWCGROUP,
    CLONE_NEWUSER,
    CLONE_PARENT,
    CLONE_PIDFD,
    Credentials,
    ExecFailed,
    Spawned,
    clone_child,
    file_handle_id,
    get_child_subreaper,
    get_no_new_privs,
    pidfd_open,
    pidfd_send_signal,
    place_fds,
    reset_signals,
    set_child_subreaper,
    set_no_new_privs,
    spawn,
    thread_count,
    unshare,
)
from ._ffi_build import CDEF
from ._ffi_build import render as render_abi

__all__ = [
    "CDEF",
    "CLONE_INTO_CGROUP",
    "CLONE_NEWCGROUP",
    "CLONE_NEWUSER",
    "CLONE_PARENT",
    "CLONE_PIDFD",
    "Credentials",
    "ExecFailed",
    "Spawned",
    "clone_child",
    "file_handle_id",
    "get_child_subreaper",
    "get_no_new_privs",
    "pidfd_open",
    "pidfd_send_signal",
    "place_fds",
    "render_abi",
    "reset_signals",
    "set_child_subreaper",
    "set_no_new_privs",
    "spawn",
    "thread_count",
    "unshare",
]


def __dir__() -> list[str]:
    return sorted(__all__)
