"""What cgroup-cohort's own tests walk, and its reviewers read: no compatibility promise (any release may
change or drop a name here; a caller uses `mosaic.cgroup_cohort` and its promised modules).

- The syscalls the standard library lacks, through cffi in ABI mode (clone3, unshare, name_to_handle_at,
  prctl): ``spawn`` (clone3 into a cgroup with a pidfd, the credential drop, rlimits, execve with its errors
  reported as ``ExecFailed``) and ``clone_child`` refuse in a process with more than one thread
  (``thread_count``; README "Threads"). The declarations are ``CDEF``, parsed once into a committed module;
  ``render_abi()`` is that module's text as the installed cffi writes it.
- The cgroup2 and /proc readers the shim, the executors and the limits' writer call (``cgroupfs``'s):
  mountinfo, cgroup.events and its waits, the recursive enumeration, a process's cgroup and start time.
- The limits' mechanism: the pure decision table (``decide``, over ``LIMITS``), the shim's one writer
  (``apply_cgroup``, ``settle``), the rlimits an engine's child sets (``rlimits_of``), the per-process
  memory default sized from the host (``default_data``, ``host_memory``, ``hard_limits``).
- The host check of a proof (``classify_host``, ``HostRelation``) and a proof's digest (``proof_digest``).
- How the launchers start their two programs: the shim's boot line and options (``SHIM_CODE``,
  ``SHIM_ROOTS``, ``shim_boot``, ``shim_args``, ``parse_args``) and the state its direct route carries
  across the exec (``Startup``); the spawn helper (``spawn_in_helper``, ``HELPER_CODE``, ``HELPER_ROOT``,
  and ``EXPIRED``, a helper's exit status when it read nothing); the direct launcher's presence lookup on
  any directory (``dir_presence``).
"""

from __future__ import annotations

from ._boot import HELPER_CODE, HELPER_ROOT, SHIM_CODE, SHIM_ROOTS, shim_args, shim_boot
from ._direct import dir_presence
from ._ffi import (
    CLONE_INTO_CGROUP,
    CLONE_NEWCGROUP,
    CLONE_NEWUSER,
    CLONE_PARENT,
    CLONE_PIDFD,
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
from ._limits import (
    CGROUP_FORM,
    CPU_PERIOD,
    LIMITS,
    RLIMIT_FORM,
    apply_cgroup,
    decide,
    default_data,
    hard_limits,
    host_memory,
    rlimits_of,
    settle,
)
from ._proc import cgroup_of, clock_ticks, parse_proc_cgroup, start_time
from ._proof import HostRelation, classify_host, proof_digest
from ._shim import parse_args
from ._shim_state import Startup
from ._spawn_helper import spawn_in_helper
from ._spawner import EXPIRED
from .cgroupfs import (
    O_DIR,
    CgroupEvents,
    MountEntry,
    cgroup_id,
    enumerate_members,
    has_feature,
    parse_events,
    parse_mountinfo,
    read_events,
    remove_tree,
    wait_events,
    wait_tree,
    write_value,
)

__all__ = [
    "CDEF",
    "CGROUP_FORM",
    "CLONE_INTO_CGROUP",
    "CLONE_NEWCGROUP",
    "CLONE_NEWUSER",
    "CLONE_PARENT",
    "CLONE_PIDFD",
    "CPU_PERIOD",
    "EXPIRED",
    "HELPER_CODE",
    "HELPER_ROOT",
    "LIMITS",
    "O_DIR",
    "RLIMIT_FORM",
    "SHIM_CODE",
    "SHIM_ROOTS",
    "CgroupEvents",
    "ExecFailed",
    "HostRelation",
    "MountEntry",
    "Spawned",
    "Startup",
    "apply_cgroup",
    "cgroup_id",
    "cgroup_of",
    "classify_host",
    "clock_ticks",
    "clone_child",
    "decide",
    "default_data",
    "dir_presence",
    "enumerate_members",
    "file_handle_id",
    "get_child_subreaper",
    "get_no_new_privs",
    "hard_limits",
    "has_feature",
    "host_memory",
    "parse_args",
    "parse_events",
    "parse_mountinfo",
    "parse_proc_cgroup",
    "pidfd_open",
    "pidfd_send_signal",
    "place_fds",
    "proof_digest",
    "read_events",
    "remove_tree",
    "render_abi",
    "reset_signals",
    "rlimits_of",
    "set_child_subreaper",
    "set_no_new_privs",
    "settle",
    "shim_args",
    "shim_boot",
    "spawn",
    "spawn_in_helper",
    "start_time",
    "thread_count",
    "unshare",
    "wait_events",
    "wait_tree",
    "write_value",
]


def __dir__() -> list[str]:
    return sorted(__all__)
